"""The controller-to-broker requests a broker answers: LeaderAndIsr (v0-7), UpdateMetadata
(v0-8) and StopReplica (v0-4), the ZooKeeper-era controller's way of driving brokers.

Theory of operation. The cluster state lives in the metadata store (etcd), where the
controller writes every decision before it sends these requests (``ControllerPropagation``).
A broker therefore applies a request by reading the store at once (``MetadataStore.refresh``:
one linearizable read, published like a watch event, so the same ``MetadataPublisher`` makes
it leader, follower or neither; skipped when its watch already brought every partition epoch
the request names) and then answers, per partition, what its state now is. The
store's watch stays as the backstop for a request lost on the way; both only ever move a
partition forward, by partition epoch.

Fencing, in Kafka's order: a controller epoch below the highest this broker has seen (a
deposed controller) is STALE_CONTROLLER_EPOCH for the whole request; a broker epoch other
than this broker's registration (meant for an earlier life of this broker) is
STALE_BROKER_EPOCH. Per partition, LeaderAndIsr answers STALE_CONTROLLER_EPOCH for a leader
epoch older than the one this broker knows, UNKNOWN_TOPIC_OR_PARTITION for a partition the
store does not have, REQUEST_TIMED_OUT if the store has not caught up with the request (the
watch applies it later) and NONE when this broker now hosts the partition as the request
says (KAFKA_STORAGE_ERROR if it should and does not); StopReplica answers FENCED_LEADER_EPOCH
while the store still lists this broker as a replica at the request's leader epoch or later,
and NONE once the replica is stopped (and, if asked, deleted).
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass

from gregor.broker.common.events import log_event
from gregor.broker.replication.replica_manager import ReplicaManager
from gregor.cluster.store import MetadataStore
from gregor.protocol.errors import ErrorCode
from gregor.protocol.messages.leader_and_isr import LeaderAndIsrRequest, LeaderAndIsrResponse
from gregor.protocol.messages.stop_replica import StopReplicaRequest, StopReplicaResponse
from gregor.protocol.messages.update_metadata import UpdateMetadataRequest, UpdateMetadataResponse

log = logging.getLogger("gregor.broker.controller")

#: Kafka's leader epoch in a StopReplica for a deleted topic ("epoch during delete").
EPOCH_DURING_DELETE = -2
#: No leader epoch given (StopReplica before v3): no epoch check.
NO_EPOCH = -1


@dataclass(frozen=True, slots=True)
class StateAsked:
    topic: str
    topic_id: uuid.UUID | None
    partition: int
    leader: int
    leader_epoch: int
    partition_epoch: int


class ControllerRequests:
    def __init__(self, node_id: int, store: MetadataStore, replicas: ReplicaManager) -> None:
        self.node_id = node_id
        self.store = store
        self.replicas = replicas
        self.controller_epoch = 0

    def _fence(self, controller_epoch: int, broker_epoch: int) -> ErrorCode:
        image = self.store.image
        if controller_epoch < max(self.controller_epoch, image.controller_epoch):
            return ErrorCode.STALE_CONTROLLER_EPOCH
        own = image.brokers.get(self.node_id)
        if broker_epoch != -1 and (own is None or broker_epoch != own.epoch):
            return ErrorCode.STALE_BROKER_EPOCH
        self.controller_epoch = max(self.controller_epoch, controller_epoch)
        return ErrorCode.NONE

    # --- LeaderAndIsr ---

    async def leader_and_isr(self, req: LeaderAndIsrRequest, version: int) -> LeaderAndIsrResponse:
        code = self._fence(req.controller_epoch, req.broker_epoch if version >= 2 else -1)
        if code:
            return LeaderAndIsrResponse(error_code=code)
        if version >= 2:
            asked = [
                StateAsked(
                    t.topic_name,
                    t.topic_id if version >= 5 else None,
                    s.partition_index,
                    s.leader,
                    s.leader_epoch,
                    s.partition_epoch,
                )
                for t in req.topic_states
                for s in t.partition_states
            ]
        else:
            asked = [
                StateAsked(
                    s.topic_name,
                    None,
                    s.partition_index,
                    s.leader,
                    s.leader_epoch,
                    s.partition_epoch,
                )
                for s in req.ungrouped_partition_states
            ]
        await self._catch_up([(a.topic, a.partition, a.partition_epoch) for a in asked])
        results = [(a, self._hosted_as_asked(a)) for a in asked]
        self._handled("LeaderAndIsr", req.controller_id, len(asked))
        if version >= 5:
            by_topic: dict[uuid.UUID, list[LeaderAndIsrResponse.Topics.PartitionErrors]] = {}
            for a, c in results:
                by_topic.setdefault(a.topic_id or uuid.UUID(int=0), []).append(
                    LeaderAndIsrResponse.Topics.PartitionErrors(
                        partition_index=a.partition, error_code=c
                    )
                )
            return LeaderAndIsrResponse(
                error_code=0,
                topics=[
                    LeaderAndIsrResponse.Topics(topic_id=tid, partition_errors=ps)
                    for tid, ps in by_topic.items()
                ],
            )
        return LeaderAndIsrResponse(
            error_code=0,
            partition_errors=[
                LeaderAndIsrResponse.PartitionErrors(
                    topic_name=a.topic, partition_index=a.partition, error_code=c
                )
                for a, c in results
            ],
        )

    async def _catch_up(self, asked: list[tuple[str, int, int]]) -> None:
        """Read the store unless the image already holds every (topic, partition, partition
        epoch) asked about: the watch has usually brought the change before the request."""
        image = self.store.image
        for topic, index, partition_epoch in asked:
            p = image.partition(topic, index)
            if p is None or p.partition_epoch < partition_epoch:
                await self.store.refresh()
                return

    def _hosted_as_asked(self, a: StateAsked) -> ErrorCode:
        image = self.store.image
        topic = image.topic(a.topic)
        p = topic.partition(a.partition) if topic is not None else None
        if topic is None or p is None or (a.topic_id is not None and a.topic_id != topic.topic_id):
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if a.leader_epoch < p.leader_epoch:
            return ErrorCode.STALE_CONTROLLER_EPOCH
        if p.partition_epoch < a.partition_epoch:
            return ErrorCode.REQUEST_TIMED_OUT
        hosted = self.replicas.get_partition(a.topic, a.partition)
        if self.node_id in p.replicas and hosted is None:
            return ErrorCode.KAFKA_STORAGE_ERROR
        return ErrorCode.NONE

    # --- UpdateMetadata ---

    async def update_metadata(
        self, req: UpdateMetadataRequest, version: int
    ) -> UpdateMetadataResponse:
        code = self._fence(req.controller_epoch, req.broker_epoch if version >= 5 else -1)
        if code:
            return UpdateMetadataResponse(error_code=code)
        if version >= 5:
            asked = [
                (t.topic_name, s.partition_index, s.zk_version)
                for t in req.topic_states
                for s in t.partition_states
            ]
        else:
            asked = [
                (s.topic_name, s.partition_index, s.zk_version)
                for s in req.ungrouped_partition_states
            ]
        await self._catch_up(asked)
        self._handled("UpdateMetadata", req.controller_id, len(asked))
        return UpdateMetadataResponse(error_code=0)

    # --- StopReplica ---

    async def stop_replica(self, req: StopReplicaRequest, version: int) -> StopReplicaResponse:
        code = self._fence(req.controller_epoch, req.broker_epoch if version >= 1 else -1)
        if code:
            return StopReplicaResponse(error_code=code)
        if version >= 3:
            asked = [
                (t.topic_name, s.partition_index, s.leader_epoch, s.delete_partition)
                for t in req.topic_states
                for s in t.partition_states
            ]
        elif version >= 1:
            asked = [
                (t.name, i, NO_EPOCH, req.delete_partitions)
                for t in req.topics
                for i in t.partition_indexes
            ]
        else:
            asked = [
                (p.topic_name, p.partition_index, NO_EPOCH, req.delete_partitions)
                for p in req.ungrouped_partitions
            ]
        if any(self._listed_as_replica(topic, index) for topic, index, _, _ in asked):
            await self.store.refresh()  # the store may already say it no longer is
        image = self.store.image
        errors = []
        for topic, index, leader_epoch, delete in asked:
            p = image.partition(topic, index)
            still_replica = p is not None and self.node_id in p.replicas
            if (
                still_replica
                and p is not None
                and leader_epoch != EPOCH_DURING_DELETE
                and leader_epoch <= p.leader_epoch
            ):
                c = ErrorCode.FENCED_LEADER_EPOCH
            else:
                self.replicas.stop_replicas(topic, [index], delete=delete, topic_deleted=p is None)
                c = ErrorCode.NONE
            errors.append(
                StopReplicaResponse.PartitionErrors(
                    topic_name=topic, partition_index=index, error_code=c
                )
            )
        self._handled("StopReplica", req.controller_id, len(asked))
        return StopReplicaResponse(error_code=0, partition_errors=errors)

    def _listed_as_replica(self, topic: str, index: int) -> bool:
        p = self.store.image.partition(topic, index)
        return p is not None and self.node_id in p.replicas

    def _handled(self, api: str, controller: int, partitions: int) -> None:
        log_event(
            log, "broker.controller_request", api=api, controller=controller, partitions=partitions
        )
