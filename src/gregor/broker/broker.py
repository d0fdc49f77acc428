"""The Broker: wires configuration, metadata, logs, handlers and listeners together.

Theory of operation. Everything runs on one asyncio event loop (uvloop), so the loop is the
single owner of the metadata image and of every partition's log: a handler that appends does
so without awaiting in between, which serializes appends per partition without locks. Slow,
blocking work (deleting segment files, periodic retention and cleaning) runs in the default
executor through ``maintenance``; it never overlaps a log call because the loop waits for it.

Long-poll fetches wait on ``PartitionWatchers``: every successful append wakes the futures
registered for that partition, so a waiting consumer is answered when data arrives, not when
a timer ticks.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import defaultdict
from typing import Any

from gregor.broker.config import BrokerConfig
from gregor.broker.fetch_session import FetchSessionCache
from gregor.broker.logging import log_event
from gregor.broker.producer_ids import ProducerIdManager
from gregor.broker.server import Dispatcher, start_listener
from gregor.broker.topic_configs import validate_overrides
from gregor.broker.topics import INTERNAL_TOPICS, assign_replicas, topic_name_error
from gregor.cluster.metadata import MetadataStore, TopicState
from gregor.protocol.errors import ErrorCode
from gregor.storage.config import LogConfig, from_broker_props
from gregor.storage.errors import InvalidConfigError
from gregor.storage.log import Log
from gregor.storage.manager import LogManager, delete_files

log = logging.getLogger("gregor.broker")

MAINTENANCE_INTERVAL_S = 1.0


class PartitionWatchers:
    """Futures waiting for new data on partitions (long-poll fetch)."""

    def __init__(self) -> None:
        self._waiters: dict[tuple[str, int], set[asyncio.Future[None]]] = defaultdict(set)

    def watch(self, keys: list[tuple[str, int]]) -> asyncio.Future[None]:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        for k in keys:
            self._waiters[k].add(fut)
        return fut

    def unwatch(self, keys: list[tuple[str, int]], fut: asyncio.Future[None]) -> None:
        for k in keys:
            s = self._waiters.get(k)
            if s is not None:
                s.discard(fut)
                if not s:
                    del self._waiters[k]

    def wake_all(self) -> None:
        """Wake every waiting fetch (shutdown: they answer with what they have)."""
        waiters, self._waiters = self._waiters, defaultdict(set)
        for s in waiters.values():
            for fut in s:
                if not fut.done():
                    fut.set_result(None)

    def notify(self, key: tuple[str, int]) -> None:
        s = self._waiters.pop(key, None)
        if s:
            for fut in s:
                if not fut.done():
                    fut.set_result(None)


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.node_id = config.node_id
        self.controller_id = config.node_id
        self.stopping = False
        self.connections: set[Any] = set()
        self.servers: list[asyncio.base_events.Server] = []
        self.bound_listeners: list[tuple[str, str, int]] = []
        log_dirs = [str(d) for d in config.log_dirs]
        for d in config.log_dirs:
            d.mkdir(parents=True, exist_ok=True)
        self.metadata = MetadataStore(config.log_dirs[0], config.get("cluster.id"))
        broker_props = {k: v for k, v in config.raw.items()}
        self.default_log_config: LogConfig = from_broker_props(broker_props)
        self.logs = LogManager(
            log_dirs,
            self.default_log_config,
            topic_configs={t.name: t.configs for t in self.metadata.topics.values()},
            producer_id_expiration_ms=int(config["producer.id.expiration.ms"]),
            retention_check_interval_ms=int(config["log.retention.check.interval.ms"]),
        )
        self.watchers = PartitionWatchers()
        self.fetch_sessions = FetchSessionCache(int(config["max.incremental.fetch.session.cache.slots"]))
        self.producer_ids = ProducerIdManager(self.metadata)
        from gregor.broker.handlers import HANDLERS

        self.dispatcher = Dispatcher(self, HANDLERS)
        from gregor.broker.group_runtime import GroupRuntime

        self.groups = GroupRuntime(self)
        from gregor.broker.txn_runtime import TxnRuntime

        self.transactions = TxnRuntime(self)
        self._maintenance_task: asyncio.Task[None] | None = None
        # Make sure every partition the metadata knows has a log (e.g. after a crash between
        # the metadata write and the first append).
        for ts in self.metadata.topics.values():
            for p in ts.partitions:
                plog = self.logs.get_or_create_log(ts.name, p.partition)
                # The checkpointed high watermark lags after a crash (SIGKILL). A leader whose
                # ISR is itself alone has every replica's copy, so it may expose its whole log,
                # as Kafka's leader does when it takes over a single-replica partition.
                if p.leader == self.node_id and list(p.isr) == [self.node_id]:
                    plog.maybe_increment_high_watermark(plog.log_end_offset)

    # --- lifecycle ---

    async def start(self) -> None:
        for listener in self.config.listeners:
            server, port = await start_listener(self, listener)
            self.servers.append(server)
            self.bound_listeners.append((listener.name, listener.host, port))
        # Advertise the bound port where the advertised listener asked for port 0.
        bound = {name: port for name, _, port in self.bound_listeners}
        self.advertised = [
            (a.name, a.host, a.port or bound.get(a.name, a.port)) for a in self.config.advertised_listeners
        ]
        self._maintenance_task = asyncio.create_task(self._maintenance())
        await self.groups.start()
        await self.transactions.start()
        log_event(
            log,
            "broker.started",
            node_id=self.node_id,
            cluster_id=self.metadata.cluster_id,
            listeners=",".join(f"{n}://{h}:{p}" for n, h, p in self.bound_listeners),
            log_dirs=",".join(str(d) for d in self.config.log_dirs),
            topics=len(self.metadata.topics),
        )

    async def stop(self, timeout: float = 10.0) -> None:
        self.stopping = True
        for s in self.servers:
            s.close()
        # Long-poll fetches would otherwise hold their connection busy until max_wait_ms.
        self.watchers.wake_all()
        # Held JoinGroup/SyncGroup responses would too: answer them NOT_COORDINATOR.
        self.groups.release_waiting()
        deadline = time.monotonic() + timeout
        # Let connections finish the request they are handling.
        while any(c.busy for c in self.connections) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        for c in list(self.connections):
            c.close()
        if self._maintenance_task is not None:
            self._maintenance_task.cancel()
            try:
                await self._maintenance_task
            except asyncio.CancelledError:
                pass
        await self.groups.stop()
        await self.transactions.stop()
        self.logs.close()
        log_event(log, "broker.stopped", node_id=self.node_id, clean=True)

    async def _maintenance(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(MAINTENANCE_INTERVAL_S)
            try:
                pending = self.logs.run_periodic()
                await loop.run_in_executor(None, delete_files, pending)
            except Exception:  # noqa: BLE001 - keep the broker up; say what failed
                log.exception("periodic log maintenance failed")

    # --- metadata helpers for handlers ---

    def metadata_brokers(self, cls: Any) -> list[Any]:
        name, host, port = self.advertised[0]
        return [cls(node_id=self.node_id, host=host, port=port, rack=self.config.get("broker.rack"))]

    def live_broker_ids(self) -> list[int]:
        return [self.node_id]

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self.logs.get_log(topic, partition)

    def topic(self, name: str) -> TopicState | None:
        return self.metadata.topics.get(name)

    def validate_topic_configs(self, configs: dict[str, str]) -> None:
        """Raise InvalidConfigError for an unknown topic config, a bad value, or a config the
        log would not accept."""
        validate_overrides(configs)
        LogConfig.from_props(configs, self.default_log_config).validate()

    def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        assignments: list[list[int]] | None = None,
        configs: dict[str, str] | None = None,
        validate_only: bool = False,
    ) -> tuple[int, str | None, TopicState | None]:
        """Create a topic; returns (error code, message, topic state)."""
        why = topic_name_error(name)
        if why is not None:
            return ErrorCode.INVALID_TOPIC_EXCEPTION, why, None
        if name in self.metadata.topics:
            return ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.", None
        brokers = self.live_broker_ids()
        if assignments:
            for reps in assignments:
                if not reps or len(set(reps)) != len(reps) or any(b not in brokers for b in reps):
                    return ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"invalid replica assignment {reps}", None
            if len({len(r) for r in assignments}) != 1:
                return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "partitions have different replica counts", None
        else:
            if num_partitions == -1:
                num_partitions = int(self.config["num.partitions"])
            if replication_factor == -1:
                replication_factor = int(self.config["default.replication.factor"])
            if num_partitions < 1:
                return ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.", None
            if replication_factor < 1 or replication_factor > len(brokers):
                return (
                    ErrorCode.INVALID_REPLICATION_FACTOR,
                    f"Replication factor: {replication_factor} larger than available brokers: {len(brokers)}.",
                    None,
                )
            assignments = assign_replicas(num_partitions, replication_factor, brokers)
        configs = dict(configs or {})
        try:
            self.validate_topic_configs(configs)
        except InvalidConfigError as e:
            return ErrorCode.INVALID_CONFIG, str(e), None
        if validate_only:
            return 0, None, TopicState(name, uuid.UUID(int=0), [], configs)
        ts = self.metadata.create_topic(name, assignments, configs, internal=name in INTERNAL_TOPICS)
        if configs:
            self.logs.set_topic_config(name, configs)
        for p in ts.partitions:
            self.logs.get_or_create_log(name, p.partition)
        log_event(
            log, "topic.created", topic=name, topic_id=ts.topic_id,
            partitions=len(ts.partitions), replication_factor=len(assignments[0]),
            configs=",".join(f"{k}={v}" for k, v in sorted(configs.items())),
        )
        return 0, None, ts

    async def auto_create_topic(self, name: str) -> int:
        code, _, _ = self.create_topic(name, -1, -1)
        if code == ErrorCode.TOPIC_ALREADY_EXISTS:
            return 0
        return code

    def delete_topic(self, name: str) -> int:
        ts = self.metadata.topics.get(name)
        if ts is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if not self.config["delete.topic.enable"]:
            return ErrorCode.TOPIC_DELETION_DISABLED
        self.metadata.delete_topic(name)
        for p in ts.partitions:
            self.logs.delete_log(name, p.partition)
            self.watchers.notify((name, p.partition))
        log_event(log, "topic.deleted", topic=name, topic_id=ts.topic_id)
        return 0

    def add_partitions(
        self, name: str, new_total: int, assignments: list[list[int]] | None, validate_only: bool = False
    ) -> tuple[int, str | None]:
        ts = self.metadata.topics.get(name)
        if ts is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist."
        current = len(ts.partitions)
        if new_total <= current:
            return ErrorCode.INVALID_PARTITIONS, (
                f"Topic currently has {current} partitions, which is higher than or equal to "
                f"the requested {new_total}."
            )
        rf = len(ts.partitions[0].replicas)
        if assignments:
            if len(assignments) != new_total - current:
                return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "assignment count does not match the increase"
            brokers = self.live_broker_ids()
            for reps in assignments:
                if len(reps) != rf or any(b not in brokers for b in reps) or len(set(reps)) != len(reps):
                    return ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"invalid replica assignment {reps}"
        else:
            assignments = assign_replicas(new_total - current, rf, self.live_broker_ids(), start=current)
        if validate_only:
            return 0, None
        self.metadata.add_partitions(name, assignments)
        for p in range(current, new_total):
            self.logs.get_or_create_log(name, p)
        log_event(log, "topic.partitions_added", topic=name, partitions=new_total)
        return 0, None

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        self.validate_topic_configs(configs)
        self.metadata.set_topic_configs(name, configs)
        self.logs.set_topic_config(name, configs)
        log_event(log, "topic.config_changed", topic=name, configs=",".join(f"{k}={v}" for k, v in sorted(configs.items())))
