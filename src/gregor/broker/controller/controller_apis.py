"""The controller's side of the broker-to-controller APIs: AlterPartition, AllocateProducerIds,
ControlledShutdown and UnregisterBroker.

Theory of operation. The controller is the broker the image names (elected through the
metadata store). Brokers do not change partition state, producer-id blocks or their own
shutdown in the store themselves: they ask the controller with these requests, over the
inter-broker listener (``ControllerChannel`` on the asking side), and the controller
validates them against the current image and writes the result to the store as one
compare-and-set each. Every answer starts with the same checks, in Kafka's order:

* this broker is not the controller: NOT_CONTROLLER (the asker finds the new one and asks
  again);
* the asking broker is not registered, or names a broker epoch other than its registration's
  (it was paused past its session, or restarted): STALE_BROKER_EPOCH. -1 skips the epoch
  check, as Kafka allows.

AlterPartition (a leader's ISR change) is then checked per partition: the partition exists
(UNKNOWN_TOPIC_OR_PARTITION; by id from v2, UNKNOWN_TOPIC_ID), the asker leads it
(INVALID_REQUEST), its leader epoch is the current one (FENCED_LEADER_EPOCH), its partition
epoch too (INVALID_UPDATE_VERSION: something else changed the partition first), and every
replica it adds to the ISR is a replica, registered, not shutting down, and (v3) of the
epoch the leader saw (INELIGIBLE_REPLICA). The answer carries the partition's new state.

ControlledShutdown marks the broker as shutting down (it is not let back into an ISR), moves
the leadership of each partition it leads to the first other live ISR member in replica order
(leader epoch bumped), takes it out of the ISR of the partitions it follows, and answers the
partitions it still leads (no other ISR member): the broker asks again until none are left or
it runs out of retries. The set lives in the controller's memory, as in Kafka's ZooKeeper
mode; a broker that registers again leaves it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from gregor.broker.common.errors import code_of
from gregor.broker.common.events import log_event
from gregor.broker.coordination.producer_ids import PRODUCER_ID_BLOCK_SIZE
from gregor.cluster.image import MetadataDelta, MetadataImage, PartitionImage
from gregor.cluster.store import MetadataStore
from gregor.protocol.errors import ErrorCode, KafkaError
from gregor.protocol.messages.allocate_producer_ids import (
    AllocateProducerIdsRequest,
    AllocateProducerIdsResponse,
)
from gregor.protocol.messages.alter_partition import AlterPartitionRequest, AlterPartitionResponse
from gregor.protocol.messages.controlled_shutdown import (
    ControlledShutdownRequest,
    ControlledShutdownResponse,
)
from gregor.protocol.messages.unregister_broker import (
    UnregisterBrokerRequest,
    UnregisterBrokerResponse,
)

log = logging.getLogger("gregor.broker.controller")

APTopic = AlterPartitionResponse.Topics
APPartition = AlterPartitionResponse.Topics.Partitions
Remaining = ControlledShutdownResponse.RemainingPartitions


@dataclass(frozen=True, slots=True)
class IsrMember:
    broker_id: int
    broker_epoch: int = -1


class ControllerService:
    def __init__(self, node_id: int, store: MetadataStore) -> None:
        self.node_id = node_id
        self.store = store
        #: Brokers in controlled shutdown, by the broker epoch they asked with.
        self.shutting_down: dict[int, int] = {}

    def on_delta(self, delta: MetadataDelta) -> None:
        """A broker that registered again (a new epoch) or went away is no longer shutting down."""
        for node, reg in delta.changed_brokers.items():
            if node in self.shutting_down and (
                reg is None or reg.epoch != self.shutting_down[node]
            ):
                del self.shutting_down[node]

    def _check_broker(self, image: MetadataImage, broker_id: int, broker_epoch: int) -> ErrorCode:
        if image.controller_id != self.node_id:
            return ErrorCode.NOT_CONTROLLER
        reg = image.brokers.get(broker_id)
        if reg is None or (broker_epoch != -1 and broker_epoch != reg.epoch):
            return ErrorCode.STALE_BROKER_EPOCH
        return ErrorCode.NONE

    # --- AlterPartition ---

    async def alter_partition(
        self, req: AlterPartitionRequest, version: int
    ) -> AlterPartitionResponse:
        image = self.store.image
        top = self._check_broker(image, req.broker_id, req.broker_epoch)
        if top:
            return AlterPartitionResponse(error_code=top)
        topics: list[APTopic] = []
        for t in req.topics:
            topic = (
                image.topics_by_id.get(t.topic_id)
                if version >= 2
                else image.topics.get(t.topic_name)
            )
            missing = (
                ErrorCode.UNKNOWN_TOPIC_ID if version >= 2 else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            )
            out: list[APPartition] = []
            for p in t.partitions:
                if version >= 3:
                    isr = [IsrMember(m.broker_id, m.broker_epoch) for m in p.new_isr_with_epochs]
                else:
                    isr = [IsrMember(b) for b in p.new_isr]
                current = topic.partition(p.partition_index) if topic is not None else None
                if current is None or topic is None:
                    out.append(APPartition(partition_index=p.partition_index, error_code=missing))
                    continue
                code = self._check_isr_change(
                    image, req.broker_id, current, p.leader_epoch, p.partition_epoch, isr
                )
                if not code:
                    try:
                        current = await self.store.alter_partition(
                            topic.name,
                            p.partition_index,
                            leader=current.leader,
                            leader_epoch=current.leader_epoch,
                            isr=[m.broker_id for m in isr],
                            expected_partition_epoch=p.partition_epoch,
                        )
                    except KafkaError as e:
                        code = code_of(e)
                out.append(_partition_state(p.partition_index, code, current))
            topics.append(APTopic(topic_id=t.topic_id, topic_name=t.topic_name, partitions=out))
        return AlterPartitionResponse(error_code=0, topics=topics)

    def _check_isr_change(
        self,
        image: MetadataImage,
        broker_id: int,
        p: PartitionImage,
        leader_epoch: int,
        partition_epoch: int,
        isr: list[IsrMember],
    ) -> ErrorCode:
        if p.leader != broker_id:
            return ErrorCode.INVALID_REQUEST
        if leader_epoch != p.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        if partition_epoch != p.partition_epoch:
            return ErrorCode.INVALID_UPDATE_VERSION
        ids = [m.broker_id for m in isr]
        if broker_id not in ids or len(set(ids)) != len(ids):
            return ErrorCode.INVALID_REQUEST
        for m in isr:
            if m.broker_id in p.isr:
                continue
            reg = image.brokers.get(m.broker_id)
            if (
                m.broker_id not in p.replicas
                or reg is None
                or reg.fenced
                or m.broker_id in self.shutting_down
                or (m.broker_epoch != -1 and m.broker_epoch != reg.epoch)
            ):
                return ErrorCode.INELIGIBLE_REPLICA
        return ErrorCode.NONE

    # --- AllocateProducerIds ---

    async def allocate_producer_ids(
        self, req: AllocateProducerIdsRequest
    ) -> AllocateProducerIdsResponse:
        top = self._check_broker(self.store.image, req.broker_id, req.broker_epoch)
        if top:
            return AllocateProducerIdsResponse(error_code=top)
        try:
            start = await self.store.allocate_producer_ids(PRODUCER_ID_BLOCK_SIZE)
        except KafkaError as e:
            return AllocateProducerIdsResponse(error_code=code_of(e))
        log_event(
            log,
            "controller.producer_ids",
            broker=req.broker_id,
            start=start,
            length=PRODUCER_ID_BLOCK_SIZE,
        )
        return AllocateProducerIdsResponse(
            error_code=0, producer_id_start=start, producer_id_len=PRODUCER_ID_BLOCK_SIZE
        )

    # --- ControlledShutdown ---

    async def controlled_shutdown(
        self, req: ControlledShutdownRequest, version: int
    ) -> ControlledShutdownResponse:
        image = self.store.image
        broker = req.broker_id
        top = self._check_broker(image, broker, req.broker_epoch if version >= 2 else -1)
        if top:
            return ControlledShutdownResponse(error_code=top)
        self.shutting_down[broker] = image.brokers[broker].epoch
        live = {n for n in image.live_broker_ids() if n not in self.shutting_down}
        remaining: list[Remaining] = []
        for topic in image.topics.values():
            for p in topic.partitions:
                if broker not in p.isr and p.leader != broker:
                    continue
                isr = tuple(r for r in p.isr if r != broker)
                if p.leader == broker:
                    candidates = [r for r in p.replicas if r in isr and r in live]
                    if not candidates:
                        remaining.append(
                            Remaining(topic_name=topic.name, partition_index=p.partition)
                        )
                        continue
                    leader, leader_epoch = candidates[0], p.leader_epoch + 1
                elif p.leader in live:
                    leader, leader_epoch = p.leader, p.leader_epoch
                else:
                    continue  # no live leader to carry on without it: leave the ISR alone
                try:
                    await self.store.alter_partition(
                        topic.name,
                        p.partition,
                        leader=leader,
                        leader_epoch=leader_epoch,
                        isr=isr,
                        expected_partition_epoch=p.partition_epoch,
                    )
                except KafkaError as e:  # changed meanwhile: the broker asks again
                    log.info(
                        "controlled shutdown of %d: %s-%d not moved: %s",
                        broker,
                        topic.name,
                        p.partition,
                        e,
                    )
                    if p.leader == broker:
                        remaining.append(
                            Remaining(topic_name=topic.name, partition_index=p.partition)
                        )
        log_event(log, "controller.controlled_shutdown", broker=broker, remaining=len(remaining))
        return ControlledShutdownResponse(error_code=0, remaining_partitions=remaining)

    # --- UnregisterBroker ---

    async def unregister_broker(self, req: UnregisterBrokerRequest) -> UnregisterBrokerResponse:
        try:
            await self.store.unregister_broker(req.broker_id)
        except KafkaError as e:
            return UnregisterBrokerResponse(error_code=code_of(e), error_message=str(e))
        log_event(log, "controller.unregistered_broker", broker=req.broker_id)
        return UnregisterBrokerResponse(error_code=0)


def _partition_state(index: int, code: ErrorCode, p: PartitionImage) -> APPartition:
    if code:
        return APPartition(partition_index=index, error_code=code)
    return APPartition(
        partition_index=index,
        error_code=0,
        leader_id=p.leader,
        leader_epoch=p.leader_epoch,
        isr=list(p.isr),
        partition_epoch=p.partition_epoch,
    )
