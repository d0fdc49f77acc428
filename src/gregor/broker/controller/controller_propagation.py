"""The controller's requests to the brokers after each change (the ZooKeeper-era controller's
channel manager): LeaderAndIsr v7, UpdateMetadata v8 and StopReplica v4.

Theory of operation. The broker the image names as controller (once its controller epoch is
known) looks at every delta its store publishes, after the change is durable in the store:

* each live broker among a changed partition's replicas gets a LeaderAndIsr with the
  partition's new state (leader, epochs, ISR, replicas, adding/removing replicas);
* every live broker gets an UpdateMetadata with the changed partitions and the live brokers;
* a broker that stopped being a replica of a partition (a reassignment completed) gets a
  StopReplica with delete; the replicas of a deleted topic too (leader epoch -2, Kafka's
  "epoch during delete");
* a broker that registered (or registered again) gets every partition in both, as does every
  broker when this broker has just become controller.

Requests to one broker go in order through one queue drained by one task, over the
inter-broker channel, with the target's broker epoch and this controller's epoch, so a broker
fences a deposed controller or a request meant for an earlier life of itself. A request that
fails (the broker went away, or answered an error) is logged and dropped: the broker's store
watch applies the same change anyway. The controller sends nothing to itself: its own image
already holds the change.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable, Iterable

from gregor.broker.channels.broker_channels import BrokerChannels
from gregor.client.errors import KafkaConnectionError
from gregor.cluster.image import (
    BrokerEndpoint,
    MetadataDelta,
    MetadataImage,
    PartitionImage,
    TopicImage,
)
from gregor.protocol.messages.leader_and_isr import LeaderAndIsrRequest
from gregor.protocol.messages.stop_replica import StopReplicaRequest
from gregor.protocol.messages.update_metadata import UpdateMetadataRequest

log = logging.getLogger("gregor.broker.controller")

LEADER_AND_ISR_VERSION = 7
UPDATE_METADATA_VERSION = 8
STOP_REPLICA_VERSION = 4
VERSIONS = {
    LeaderAndIsrRequest.API_KEY: LEADER_AND_ISR_VERSION,
    UpdateMetadataRequest.API_KEY: UPDATE_METADATA_VERSION,
    StopReplicaRequest.API_KEY: STOP_REPLICA_VERSION,
}
EPOCH_DURING_DELETE = -2
#: Requests queued for one broker beyond this are dropped, oldest first (its watch catches up).
MAX_QUEUED = 1000
#: What the controller sends each broker.
PropagationRequest = LeaderAndIsrRequest | UpdateMetadataRequest | StopReplicaRequest
_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}

Parts = list[tuple[TopicImage, PartitionImage]]


class ControllerPropagation:
    def __init__(
        self, node_id: int, channels: BrokerChannels, image: Callable[[], MetadataImage]
    ) -> None:
        self.node_id = node_id
        self.channels = channels
        self._image = image
        self._queues: dict[int, deque[PropagationRequest]] = {}
        self._tasks: dict[int, asyncio.Task[None]] = {}

    def on_delta(self, delta: MetadataDelta) -> None:
        image = delta.image
        if image.controller_id != self.node_id or image.controller_epoch <= 0:
            return
        became = (delta.previous.controller_id, delta.previous.controller_epoch) != (
            image.controller_id,
            image.controller_epoch,
        )
        live = [b for b in image.live_broker_ids() if b != self.node_id]
        joined = {
            b
            for b, reg in delta.changed_brokers.items()
            if reg is not None
            and (b not in delta.previous.brokers or delta.previous.brokers[b].epoch != reg.epoch)
        }
        everything: Parts = [(t, p) for t in image.topics.values() for p in t.partitions]
        changed: Parts = [
            (image.topics[name], p)
            for name, ps in delta.changed_partitions.items()
            for p in ps.values()
        ]
        for broker in live:
            parts = everything if became or broker in joined else changed
            if not parts:
                continue
            led = [(t, p) for t, p in parts if broker in p.replicas]
            if led:
                self._enqueue(
                    broker, self._leader_and_isr(image, broker, led, full=parts is everything)
                )
            self._enqueue(broker, self._update_metadata(image, broker, parts))
        stops: dict[int, list[tuple[str, int, int]]] = {}
        for t, p in changed:
            before = delta.previous.partition(t.name, p.partition)
            if before is not None:
                for b in before.replicas:
                    if b not in p.replicas:
                        stops.setdefault(b, []).append((t.name, p.partition, p.leader_epoch))
        for gone in delta.deleted_topics:
            for p in gone.partitions:
                for b in p.replicas:
                    stops.setdefault(b, []).append((gone.name, p.partition, EPOCH_DURING_DELETE))
        for broker, partitions in stops.items():
            if broker in live:
                self._enqueue(broker, self._stop_replica(image, broker, partitions))

    # --- building requests ---

    def _epochs(self, image: MetadataImage, broker: int) -> tuple[int, int]:
        reg = image.brokers.get(broker)
        return image.controller_epoch, reg.epoch if reg is not None else -1

    def _leader_and_isr(
        self, image: MetadataImage, broker: int, parts: Parts, full: bool
    ) -> LeaderAndIsrRequest:
        controller_epoch, broker_epoch = self._epochs(image, broker)
        state = LeaderAndIsrRequest.TopicStates.PartitionStates
        leaders = sorted({p.leader for _, p in parts if p.leader >= 0})
        return LeaderAndIsrRequest(
            controller_id=self.node_id,
            controller_epoch=controller_epoch,
            broker_epoch=broker_epoch,
            type=1 if full else 0,
            topic_states=[
                LeaderAndIsrRequest.TopicStates(
                    topic_name=t.name,
                    topic_id=t.topic_id,
                    partition_states=[
                        state(
                            partition_index=p.partition,
                            controller_epoch=controller_epoch,
                            leader=p.leader,
                            leader_epoch=p.leader_epoch,
                            isr=list(p.isr),
                            partition_epoch=p.partition_epoch,
                            replicas=list(p.replicas),
                            adding_replicas=list(p.adding_replicas),
                            removing_replicas=list(p.removing_replicas),
                            is_new=False,
                        )
                        for p in ps
                    ],
                )
                for t, ps in _by_topic(parts)
            ],
            live_leaders=[
                LeaderAndIsrRequest.LiveLeaders(broker_id=b, host_name=ep.host, port=ep.port)
                for b in leaders
                for ep in self._endpoint(image, b)
            ],
        )

    def _endpoint(self, image: MetadataImage, broker: int) -> Iterable[BrokerEndpoint]:
        reg = image.brokers.get(broker)
        ep = reg.endpoint(self.channels.listener) if reg is not None else None
        return [ep] if ep is not None else []

    def _update_metadata(
        self, image: MetadataImage, broker: int, parts: Parts
    ) -> UpdateMetadataRequest:
        controller_epoch, broker_epoch = self._epochs(image, broker)
        state = UpdateMetadataRequest.TopicStates.PartitionStates
        endpoint = UpdateMetadataRequest.LiveBrokers.Endpoints
        return UpdateMetadataRequest(
            controller_id=self.node_id,
            controller_epoch=controller_epoch,
            broker_epoch=broker_epoch,
            topic_states=[
                UpdateMetadataRequest.TopicStates(
                    topic_name=t.name,
                    topic_id=t.topic_id,
                    partition_states=[
                        state(
                            partition_index=p.partition,
                            controller_epoch=controller_epoch,
                            leader=p.leader,
                            leader_epoch=p.leader_epoch,
                            isr=list(p.isr),
                            zk_version=p.partition_epoch,
                            replicas=list(p.replicas),
                            offline_replicas=list(p.offline_replicas),
                        )
                        for p in ps
                    ],
                )
                for t, ps in _by_topic(parts)
            ],
            live_brokers=[
                UpdateMetadataRequest.LiveBrokers(
                    id=b,
                    rack=image.brokers[b].rack,
                    endpoints=[
                        endpoint(
                            port=ep.port,
                            host=ep.host,
                            listener=ep.listener,
                            security_protocol=_PROTOCOL_IDS.get(ep.security_protocol, 0),
                        )
                        for ep in image.brokers[b].endpoints
                    ],
                )
                for b in image.live_broker_ids()
            ],
        )

    def _stop_replica(
        self, image: MetadataImage, broker: int, partitions: list[tuple[str, int, int]]
    ) -> StopReplicaRequest:
        controller_epoch, broker_epoch = self._epochs(image, broker)
        by_topic: dict[str, list[StopReplicaRequest.TopicStates.PartitionStates]] = {}
        for topic, index, leader_epoch in partitions:
            by_topic.setdefault(topic, []).append(
                StopReplicaRequest.TopicStates.PartitionStates(
                    partition_index=index,
                    leader_epoch=leader_epoch,
                    delete_partition=True,
                )
            )
        return StopReplicaRequest(
            controller_id=self.node_id,
            controller_epoch=controller_epoch,
            broker_epoch=broker_epoch,
            topic_states=[
                StopReplicaRequest.TopicStates(topic_name=t, partition_states=ps)
                for t, ps in by_topic.items()
            ],
        )

    # --- sending ---

    def _enqueue(self, broker: int, request: PropagationRequest) -> None:
        queue = self._queues.setdefault(broker, deque())
        queue.append(request)
        while len(queue) > MAX_QUEUED:
            queue.popleft()
        task = self._tasks.get(broker)
        if task is None or task.done():
            self._tasks[broker] = asyncio.create_task(
                self._drain(broker), name=f"controller-to-{broker}"
            )

    async def _drain(self, broker: int) -> None:
        queue = self._queues[broker]
        while queue:
            request = queue.popleft()
            name = type(request).__name__.removesuffix("Request")
            if broker not in self._image().brokers:
                queue.clear()  # gone: nothing to tell it
                return
            try:
                resp = await self.channels.request(broker, request, VERSIONS[request.API_KEY])
            except KafkaConnectionError as e:
                log.info("%s to broker %d not delivered: %s", name, broker, e)
                continue
            if resp.error_code:
                log.info("broker %d answered %s with error %d", broker, name, resp.error_code)

    async def close(self) -> None:
        for task in self._tasks.values():
            task.cancel()
        for task in self._tasks.values():
            with contextlib.suppress(asyncio.CancelledError):
                await task


def _by_topic(parts: Parts) -> list[tuple[TopicImage, list[PartitionImage]]]:
    """``parts`` grouped by topic, in first-seen order (one TopicStates entry per topic)."""
    grouped: dict[str, tuple[TopicImage, list[PartitionImage]]] = {}
    for t, p in parts:
        grouped.setdefault(t.name, (t, []))[1].append(p)
    return list(grouped.values())
