"""Applies each metadata change to this broker.

Theory of operation. The metadata store calls ``publish`` with a ``MetadataDelta`` (the
image before and after) for every change, on the event loop, before the change's coroutine
returns; at start the broker publishes the delta from the empty image to the loaded one.
The publisher turns a delta into local actions, in an order that keeps the broker
consistent (Kafka's ``BrokerMetadataPublisher``):

1. deleted topics: stop their partitions (waiters released) and delete their logs;
2. changed dynamic broker configs (this broker's or the cluster default): the log defaults
   (``log.retention.*``, ``log.segment.bytes``, ``message.max.bytes``, ``log.cleanup.policy``,
   ...) of every log and of topic validation, and ``min.insync.replicas``; changed topic
   configs: the log configs and each partition's ``min.insync.replicas``;
3. new or changed partitions: this broker becomes leader (or follower) as the image says,
   creating the log if needed; a partition this broker no longer hosts is stopped;
4. the coordinators: partitions of ``__consumer_offsets`` / ``__transaction_state`` that
   this broker now leads are loaded (replayed), those it stopped leading are unloaded.

This is the only place that decides what "this broker" does from the image, so the
single-node shortcuts (leader is me, ISR is me) live nowhere else.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from gregor.broker.admin.topic_admin import TopicAdmin
from gregor.broker.common.events import log_event
from gregor.broker.common.topics import OFFSETS_TOPIC, SHARE_STATE_TOPIC, TXN_TOPIC
from gregor.broker.config.broker_config import BrokerConfig
from gregor.broker.config.dynamic_configs import broker_layers, effective_props
from gregor.broker.config.topic_configs import ConfigResourceType
from gregor.broker.coordination.coordinator_runtime import CoordinatorRuntime
from gregor.broker.coordination.group_service import GroupService
from gregor.broker.replication.replica_manager import ReplicaManager
from gregor.cluster.image import EMPTY, MetadataDelta, MetadataImage, PartitionImage, TopicImage
from gregor.storage.config import from_broker_props
from gregor.storage.manager import LogManager

log = logging.getLogger("gregor.broker.metadata")


class MetadataPublisher:
    def __init__(
        self,
        node_id: int,
        config: BrokerConfig,
        replicas: ReplicaManager,
        logs: LogManager,
        groups: GroupService,
        transactions: CoordinatorRuntime,
        topics: TopicAdmin | None = None,
        share_state: CoordinatorRuntime | None = None,
        on_broker_configs: Callable[[Mapping[str, str]], None] | None = None,
    ) -> None:
        self.node_id = node_id
        #: Told the effective broker configs when dynamic ones change (connection limits).
        self.on_broker_configs = on_broker_configs
        self.config = config
        self.topics = topics
        #: server.properties with the dynamic broker configs on top.
        self.broker_props: dict[str, str] = dict(config.raw)
        self.replicas = replicas
        self.logs = logs
        self.groups = groups
        self.coordinators: dict[str, CoordinatorRuntime] = {
            OFFSETS_TOPIC: groups,
            TXN_TOPIC: transactions,
        }
        if share_state is not None:
            self.coordinators[SHARE_STATE_TOPIC] = share_state

    def publish(self, delta: MetadataDelta) -> None:
        try:
            self._apply(delta)
        except Exception:  # noqa: BLE001 - a failed local action must not stop later deltas
            log.exception("could not apply metadata version %d", delta.image.version)

    def _min_insync(self, topic: TopicImage) -> int:
        value = topic.configs.get("min.insync.replicas")
        if value is None:
            value = self.broker_props.get("min.insync.replicas", self.config["min.insync.replicas"])
        return int(value)

    def _apply_broker_configs(self, image: MetadataImage) -> None:
        """New log defaults from the dynamic broker configs, for every log and topic."""
        self.broker_props = effective_props(broker_layers(image, self.node_id, self.config.raw))
        default = from_broker_props(self.broker_props)
        self.logs.default_config = default
        for (topic, _), plog in self.logs.logs.items():
            plog.config = default.with_overrides(self.logs.topic_overrides(topic))
        if self.topics is not None:
            self.topics.default_log_config = default
        for (topic, _), partition in self.replicas.partitions.items():
            t = image.topic(topic)
            if t is not None:
                partition.min_insync_replicas = self._min_insync(t)
        if self.on_broker_configs is not None:
            self.on_broker_configs(self.broker_props)
        log_event(log, "broker.dynamic_configs", version=image.version)

    def _apply(self, delta: MetadataDelta) -> None:
        image = delta.image
        for gone in delta.deleted_topics:
            self.replicas.stop_replicas(
                gone.name, range(len(gone.partitions)), delete=True, topic_deleted=True
            )
            self.logs.set_topic_config(gone.name, {})
            coordinator = self.coordinators.get(gone.name)
            if coordinator is not None:
                coordinator.unload([p.partition for p in gone.partitions])
        broker = int(ConfigResourceType.BROKER)
        if {(broker, ""), (broker, str(self.node_id))} & delta.changed_config_resources:
            self._apply_broker_configs(image)
        for name in delta.changed_configs:
            changed = image.topic(name)
            if changed is None:
                continue
            self.logs.set_topic_config(name, dict(changed.configs))
            for p in changed.partitions:
                hosted = self.replicas.get_partition(name, p.partition)
                if hosted is not None:
                    hosted.min_insync_replicas = self._min_insync(changed)
        created = {t.name for t in delta.created_topics}
        for name, partitions in delta.changed_partitions.items():
            topic = image.topic(name)
            if topic is None:
                continue
            if name in created and topic.configs:
                # Before the logs exist, so they are created with the topic's configs.
                self.logs.set_topic_config(name, dict(topic.configs))
            led: dict[int, int] = {}
            lost: list[int] = []
            for index, p in sorted(partitions.items()):
                if self._apply_partition(topic, p):
                    led[index] = p.leader_epoch
                else:
                    lost.append(index)
            coordinator = self.coordinators.get(name)
            if coordinator is not None:
                if coordinator is self.groups:
                    self.groups.set_partition_count(len(topic.partitions))
                coordinator.unload(
                    [i for i in lost if delta.previous.partition(name, i) is not None]
                )
                coordinator.load(led)

    def _apply_partition(self, topic: TopicImage, p: PartitionImage) -> bool:
        """Make this broker what the image says for ``p``; True if it now leads it."""
        if p.leader == self.node_id:
            self.replicas.become_leader(
                topic.name,
                p.partition,
                topic_id=topic.topic_id,
                leader_epoch=p.leader_epoch,
                partition_epoch=p.partition_epoch,
                replicas=p.replicas,
                isr=p.isr,
                min_insync_replicas=self._min_insync(topic),
            )
            return True
        if self.node_id in p.replicas:
            self.replicas.become_follower(
                topic.name,
                p.partition,
                topic_id=topic.topic_id,
                leader=p.leader,
                leader_epoch=p.leader_epoch,
                partition_epoch=p.partition_epoch,
                replicas=p.replicas,
            )
        else:
            self.replicas.stop_replicas(topic.name, [p.partition], delete=True)
        log_event(
            log, "partition.not_led", topic=topic.name, partition=p.partition, leader=p.leader
        )
        return False


def initial_delta(image: MetadataImage) -> MetadataDelta:
    """The delta that brings an empty broker to ``image`` (what start publishes)."""
    return MetadataDelta(EMPTY, image)
