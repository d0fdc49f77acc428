"""The asyncio shell around the group coordinator state machine.

Theory of operation. ``GroupCoordinator`` (``gregor.coordinator``) does no I/O: it takes
requests with an opaque token and leaves writes and replies in an outbox. This runtime owns
the rest, all on the broker's event loop (so the coordinator's state has one owner):

* ``call(method, request, ...)`` creates a future for the token, runs the coordinator method
  and *pumps*: every write in the outbox is appended to its ``__consumer_offsets`` partition
  at once (one node: appended = acknowledged by all replicas) and its completion is fed back,
  which may release replies and further writes; every reply completes its future. JoinGroup
  and SyncGroup futures may stay pending until other members arrive.
* One ``TimerHandle`` tracks the coordinator's earliest deadline; when it fires the runtime
  calls ``tick()`` and pumps again.
* ``__consumer_offsets`` is created on first use (``offsets.topic.num.partitions``
  partitions, compacted). At start, if it exists, a background task reads each partition
  from its log start into the coordinator; groups of a partition answer
  COORDINATOR_LOAD_IN_PROGRESS (FindCoordinator included) until it is loaded.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

from gregor.broker.internal_topics import cancel_task, replay_partitions
from gregor.broker.logging import log_event
from gregor.coordinator import CoordinatorConfig, GroupCoordinator, Write
from gregor.protocol.errors import ErrorCode
from gregor.storage.errors import StorageError
from gregor.storage.producer_state import AppendOrigin

log = logging.getLogger("gregor.broker.groups")

OFFSETS_TOPIC = "__consumer_offsets"
OFFSETS_TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    "segment.bytes": "104857600",
    "compression.type": "producer",
}


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


class BrokerTopics:
    """The coordinator's view of the broker's topics (``TopicsView``)."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker

    def partition_count(self, topic: str) -> int | None:
        ts = self.broker.topic(topic)
        return None if ts is None else len(ts.partitions)

    def topic_id(self, topic: str) -> uuid.UUID | None:
        ts = self.broker.topic(topic)
        return None if ts is None else ts.topic_id

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        ts = self.broker.metadata.topics_by_id.get(topic_id)
        return None if ts is None else ts.name

    def topic_names(self) -> list[str]:
        return [name for name, ts in self.broker.metadata.topics.items() if not ts.internal]


class GroupRuntime:
    def __init__(self, broker: Any, clock: Callable[[], int] = wall_clock_ms) -> None:
        self.broker = broker
        self.clock = clock
        self.config = CoordinatorConfig.from_props(broker.config.get)
        self.coordinator = GroupCoordinator(self.config, BrokerTopics(broker), clock)
        self._futures: dict[int, asyncio.Future[Any]] = {}
        self._tokens = itertools.count(1)
        self._timer: asyncio.TimerHandle | None = None
        self._timer_deadline: int | None = None
        self._load_task: asyncio.Task[None] | None = None

    # --- lifecycle ---

    async def start(self) -> None:
        ts = self.broker.topic(OFFSETS_TOPIC)
        if ts is None:
            return
        # Groups hash over the partitions the topic has, whatever the config says now.
        self.config.num_partitions = len(ts.partitions)
        for p in ts.partitions:
            self.coordinator.begin_load(p.partition)
        self._load_task = asyncio.create_task(self._load_all([p.partition for p in ts.partitions]))

    def release_waiting(self) -> None:
        """Answer held JoinGroup/SyncGroup requests so shutdown need not wait for them."""
        self.coordinator.release_waiting()
        self._pump()

    async def stop(self) -> None:
        await cancel_task(self._load_task)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    async def _load_all(self, partitions: list[int]) -> None:
        started = time.monotonic()

        def complete(p: int) -> None:
            self.coordinator.complete_load(p)
            self._pump()

        records = await replay_partitions(
            self.broker, OFFSETS_TOPIC, partitions, self.coordinator.load_batches, complete
        )
        log_event(
            log, "groups.loaded", partitions=len(partitions), batches=records,
            groups=len(self.coordinator.groups),
            ms=int((time.monotonic() - started) * 1000),
        )

    # --- the offsets topic ---

    def ensure_offsets_topic(self) -> None:
        """Create ``__consumer_offsets`` on first use; its new partitions are empty, so
        they are active at once."""
        if self.broker.topic(OFFSETS_TOPIC) is not None:
            return
        code, message, ts = self.broker.create_topic(
            OFFSETS_TOPIC,
            self.config.num_partitions,
            int(self.broker.config.get("offsets.topic.replication.factor", 1)),
            configs=dict(OFFSETS_TOPIC_CONFIGS),
        )
        if code or ts is None:
            log_event(log, "groups.offsets_topic_failed", logging.ERROR, error=code, message=message)
            return
        for p in ts.partitions:
            self.coordinator.begin_load(p.partition)
            self.coordinator.complete_load(p.partition)
        self._pump()

    # --- requests ---

    async def call(self, method: Callable[..., None], *args: Any, **kwargs: Any) -> Any:
        """Run a coordinator request method and wait for its reply."""
        self.ensure_offsets_topic()
        token = next(self._tokens)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._futures[token] = fut
        try:
            method(token, *args, **kwargs)
        finally:
            self._pump()
        try:
            return await fut
        finally:
            self._futures.pop(token, None)

    # --- the pump ---

    def _pump(self) -> None:
        coord = self.coordinator
        while coord.has_output:
            writes, replies = coord.take()
            for w in writes:
                self._append(w)
            for r in replies:
                fut = self._futures.pop(r.token, None)
                if fut is not None and not fut.done():
                    fut.set_result(r.response)
        self._reschedule()

    def _append(self, w: Write) -> None:
        ts = self.broker.topic(OFFSETS_TOPIC)
        plog = self.broker.get_log(OFFSETS_TOPIC, w.partition)
        if ts is None or plog is None or w.partition >= len(ts.partitions):
            self.coordinator.write_complete(w.id, ErrorCode.NOT_LEADER_OR_FOLLOWER)
            return
        try:
            # COORDINATOR origin: transactional offset commits (TxnOffsetCommit) carry the
            # producer's id and epoch but no sequence of their own; the epoch is still checked.
            info = plog.append(
                bytearray(w.batch), leader_epoch=ts.partitions[w.partition].leader_epoch,
                origin=AppendOrigin.COORDINATOR,
            )
        except StorageError as e:
            code = e.error_code if e.error_code > 0 else ErrorCode.UNKNOWN_SERVER_ERROR
            log_event(log, "groups.append_failed", logging.ERROR, partition=w.partition, error=str(e))
            self.coordinator.write_complete(w.id, code)
            return
        plog.update_high_watermark(plog.log_end_offset)
        self.broker.watchers.notify((OFFSETS_TOPIC, w.partition))
        self.coordinator.write_complete(w.id, 0, info.first_offset)

    def _reschedule(self) -> None:
        deadline = self.coordinator.next_deadline()
        if deadline == self._timer_deadline and self._timer is not None:
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._timer_deadline = deadline
        if deadline is None:
            return
        delay = max(deadline - self.clock(), 0) / 1000.0
        self._timer = asyncio.get_running_loop().call_later(delay, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_deadline = None
        try:
            self.coordinator.tick()
        except Exception:  # noqa: BLE001 - a timer bug must not stop the loop's timers
            log.exception("group coordinator timer failed")
        self._pump()
