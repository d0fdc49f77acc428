"""The group coordinator's shared state: groups, partitions, timers and the outbox.

Theory of operation. The group coordinator (``coordinator.group.coordinator``) is a state
machine without I/O, composed of managers (classic groups, KIP-848 consumer groups, offsets,
administration, transactional offsets) over this one ``GroupCore``. Its inputs are requests
(each with a typed ``Token``), completions of the writes it asked for, batches of
``__consumer_offsets`` read back at load, and the passing of time (``tick``). Its outputs wait
in the shared ``Outbox`` (``coordinator.common.outbox``) that the caller drains with
``take()``: writes to append to ``__consumer_offsets`` (their completion applies the state
that must be durable first and sends the replies that acknowledge it) and replies, possibly
long after their request (JoinGroup and SyncGroup wait for the rest of the group).

As in Kafka (``group.coordinator.append.linger.ms``), the records of the writes to one
partition within the linger are held and go out as one batch when it has passed (or the batch
is full); a transactional batch goes at once, after what is held.

Time comes from an injected ``clock()`` (milliseconds, wall clock: commit timestamps are
stored). Deadlines (session expiry, rebalance timeouts, the initial rebalance delay, offset
retention) live in ``Timers``; the caller asks ``next_deadline()`` and calls ``tick()`` when
it passes. Tests drive all of this with a fake clock and an in-memory list as the log.

Each ``__consumer_offsets`` partition is either loading (its groups answer
COORDINATOR_LOAD_IN_PROGRESS) or active; a group lives in ``partition_for(group_id)``.
While the broker cannot confirm its metadata session (``session_confirmed``) every group
answers NOT_COORDINATOR, reads included (``coordinator.common.timers``).
"""

from __future__ import annotations

import functools
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Never, TypeVar

from gregor.coordinator.common.outbox import Outbox, Token, WriteCallback
from gregor.coordinator.common.partitioning import partition_for
from gregor.coordinator.common.timers import PartitionStatus, Timers, session_always_confirmed
from gregor.coordinator.group.classic import ClassicGroup, ClassicState
from gregor.coordinator.group.config import (
    APPEND_MAX_BATCH_BYTES,
    CoordinatorConfig,
    TopicsView,
)
from gregor.coordinator.group.consumer_group import ConsumerGroup, ConsumerMember
from gregor.coordinator.group.records import Key, Value, encode_key, encode_value
from gregor.protocol.errors import ErrorCode
from gregor.protocol.records.batch import RecordBatchBuilder

T = TypeVar("T")

Group = ClassicGroup | ConsumerGroup


@dataclass
class _LingeringBatch:
    """Records of several writes to one partition, waiting to be appended as one batch."""

    builder: RecordBatchBuilder
    records: int = 0
    size: int = 0
    # (index of the write's first record in the batch, its callback)
    callbacks: list[tuple[int, WriteCallback | None]] = field(default_factory=list)


class GroupCore:
    """The state every manager of the group coordinator shares: groups, partitions, timers,
    the outbox and the lingering batches."""

    def __init__(
        self,
        config: CoordinatorConfig,
        topics: TopicsView,
        clock: Callable[[], int],
        session_confirmed: Callable[[], bool] = session_always_confirmed,
    ) -> None:
        self.config = config
        self.topics = topics
        self.clock = clock
        #: False while the broker cannot confirm its metadata session (``common.timers``).
        self.session_confirmed = session_confirmed
        self.groups: dict[str, Group] = {}
        self.partitions: dict[int, PartitionStatus] = {}
        self.timers = Timers()
        self.outbox: Outbox[Never] = Outbox()
        self._lingering: dict[int, _LingeringBatch] = {}

    # --- outbox ---

    def reply(self, token: Token[T], response: T) -> None:
        self.outbox.reply(token, response)

    def write(
        self,
        group_id: str,
        records: list[tuple[Key, Value | None]],
        on_done: WriteCallback | None = None,
    ) -> None:
        """Ask for ``records`` to be appended to the group's partition.

        With ``append_linger_ms`` the records join the partition's lingering batch, appended
        when the linger has passed (or the batch is full): every write of that window lands
        in one batch, and each write's callback runs when that batch is appended, with the
        offset of its own first record. Without, they are one batch of their own at once.
        """
        now = self.clock()
        partition = self.partition_for(group_id)
        encoded = [(encode_key(k), None if v is None else encode_value(v)) for k, v in records]
        if self.config.append_linger_ms <= 0:
            b = RecordBatchBuilder()
            for key, value in encoded:
                b.append(now, key, value)
            self.append_batch(partition, b.build(), on_done)
            return
        size = sum(len(k) + (0 if v is None else len(v)) for k, v in encoded)
        batch = self._lingering.get(partition)
        if batch is not None and batch.records and batch.size + size > APPEND_MAX_BATCH_BYTES:
            self.flush_lingering(partition)
            batch = None
        if batch is None:
            batch = _LingeringBatch(RecordBatchBuilder())
            self._lingering[partition] = batch
            self.timers.schedule(
                ("append-linger", partition),
                now + self.config.append_linger_ms,
                lambda: self.flush_lingering(partition),
            )
        batch.callbacks.append((batch.records, on_done))
        for key, value in encoded:
            batch.builder.append(now, key, value)
        batch.records += len(encoded)
        batch.size += size
        if batch.size >= APPEND_MAX_BATCH_BYTES:
            self.flush_lingering(partition)

    def append_batch(
        self, partition: int, batch: bytes, on_done: WriteCallback | None = None
    ) -> None:
        """Append ``batch`` as it is, now (a transactional batch, or linger off), after the
        partition's lingering records so the log keeps the order of the writes."""
        self.flush_lingering(partition)
        self.outbox.write(partition, batch, on_done)

    def flush_lingering(self, partition: int | None = None) -> None:
        """Append the lingering batch of ``partition`` (every partition's if None) now."""
        parts = list(self._lingering) if partition is None else [partition]
        for p in parts:
            batch = self._lingering.pop(p, None)
            self.timers.cancel(("append-linger", p))
            if batch is None:
                continue
            callbacks = batch.callbacks
            if not batch.records:
                for _, cb in callbacks:
                    if cb is not None:
                        cb(0, -1)
                continue

            def done(
                code: int,
                base_offset: int,
                callbacks: list[tuple[int, WriteCallback | None]] = callbacks,
            ) -> None:
                for first, cb in callbacks:
                    if cb is not None:
                        cb(code, base_offset + first if not code and base_offset >= 0 else -1)

            self.outbox.write(p, batch.builder.build(), done)

    # --- time ---

    def next_deadline(self) -> int | None:
        return self.timers.next_deadline()

    def tick(self) -> None:
        """Run every timer whose deadline has passed."""
        self.timers.run_due(self.clock)

    # --- partitions and groups ---

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.config.num_partitions)

    def partition_error(self, group_id: str) -> int:
        """0 if this coordinator serves ``group_id`` now, else the error to answer."""
        status = self.partitions.get(self.partition_for(group_id))
        if status is None or not self.session_confirmed():
            return ErrorCode.NOT_COORDINATOR
        if status is PartitionStatus.LOADING:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return 0

    def is_loading(self, group_id: str) -> bool:
        return self.partitions.get(self.partition_for(group_id)) is PartitionStatus.LOADING

    def active_groups(self) -> list[Group]:
        return [
            g
            for gid, g in self.groups.items()
            if self.partitions.get(self.partition_for(gid)) is PartitionStatus.ACTIVE
        ]

    def remove_group(self, group_id: str) -> None:
        group = self.groups.pop(group_id, None)
        if isinstance(group, ClassicGroup):
            group.state = ClassicState.DEAD
            for mid in list(group.members):
                self.timers.cancel(("hb", group_id, mid))
            self.timers.cancel(("join", group_id))
            self.timers.cancel(("sync", group_id))
        elif isinstance(group, ConsumerGroup):
            for mid in list(group.members):
                self.timers.cancel(("cg-session", group_id, mid))
                self.timers.cancel(("cg-revoke", group_id, mid))

    # --- loading ---

    def complete_txn(self, partition: int, producer_id: int, commit: bool) -> None:
        """A COMMIT (or ABORT) marker of ``producer_id`` in ``partition``: its pending
        transactional offsets there become committed (or are dropped)."""
        for gid, group in self.groups.items():
            if self.partition_for(gid) == partition:
                group.offsets.complete_txn(producer_id, commit)

    # --- subscriptions ---

    def member_topics(self, member: ConsumerMember, group: ConsumerGroup | None = None) -> set[str]:
        """The topics a KIP-848 member subscribes to: its names plus its regex's matches
        (with ``group``: only once the group has resolved the regex, as in Kafka)."""
        topics = set(member.subscribed_topic_names)
        regex = member.subscribed_topic_regex
        if regex and (group is None or regex in group.resolved_regexes):
            pattern = compile_subscription_regex(regex)
            if pattern is not None:
                topics.update(n for n in self.topics.topic_names() if pattern.fullmatch(n))
        return topics

    def group_topics(self, group: ConsumerGroup) -> set[str]:
        out: set[str] = set()
        for m in group.members.values():
            out |= self.member_topics(m, group)
        return out

    def topic_fingerprint(self, group: ConsumerGroup) -> dict[str, tuple[uuid.UUID, int]]:
        """Subscribed topic -> (id, partition count): a change means a new assignment."""
        out = {}
        for name in sorted(self.group_topics(group)):
            tid = self.topics.topic_id(name)
            count = self.topics.partition_count(name)
            if tid is not None and count is not None:
                out[name] = (tid, count)
        return out


@functools.lru_cache(maxsize=256)
def compile_subscription_regex(pattern: str) -> re.Pattern[str] | None:
    """A KIP-848 subscription regex (Kafka uses RE2/J; Python's ``re`` agrees on the common
    syntax); None if it does not compile."""
    try:
        return re.compile(pattern)
    except re.error:
        return None


def subscription_regex_error(pattern: str) -> str | None:
    """Why ``pattern`` does not compile (``re``'s words; Kafka gives RE2/J's), None if it does."""
    try:
        re.compile(pattern)
    except re.error as e:
        return e.msg
    return None
