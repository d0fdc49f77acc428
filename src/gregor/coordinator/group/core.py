"""The coordinator's machinery: clock, timers, outbox of writes and replies, loading.

Theory of operation. The group coordinator is a state machine without I/O. Its inputs are
requests (each with an opaque ``token`` the caller uses to match the reply), completions of
the writes it asked for, batches of ``__consumer_offsets`` read back at load, and the passing
of time (``tick``). Its outputs wait in an outbox that the caller drains with ``take()``:

* ``Write(id, partition, batch)`` - a RecordBatch v2 to append to ``__consumer_offsets``;
  the caller appends it and reports ``write_complete(id, error_code, base_offset)``. State
  that must not be seen before it is durable (committed offsets, a stored assignment) is
  applied in that completion, and so are the replies that acknowledge it. As in Kafka
  (``group.coordinator.append.linger.ms``), the records of the writes to one partition
  within the linger are held and go out as one batch when it has passed (or the batch is
  full); a transactional batch goes at once, after what is held.
* ``Reply(token, response)`` - a response message, possibly long after its request
  (JoinGroup and SyncGroup wait for the rest of the group).

Time comes from an injected ``clock()`` (milliseconds, wall clock: commit timestamps are
stored). Deadlines (session expiry, rebalance timeouts, the initial rebalance delay, offset
retention) live in ``Timers``; the caller asks ``next_deadline()`` and calls ``tick()`` when
it passes. Tests drive all of this with a fake clock and an in-memory list as the log.

Each ``__consumer_offsets`` partition is either loading (its groups answer
COORDINATOR_LOAD_IN_PROGRESS) or active; a group lives in ``partition_for(group_id)``.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import logging
import re
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, NamedTuple, Protocol

from gregor.coordinator.common.partitioning import partition_for
from gregor.coordinator.group.classic import ClassicGroup, ClassicMember, ClassicState
from gregor.coordinator.group.consumer_group import ConsumerGroup, ConsumerMember, MemberState
from gregor.coordinator.group.offsets import OffsetAndMetadata
from gregor.coordinator.group.records import (
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
    CONSUMER_GROUP_MEMBER_METADATA,
    CONSUMER_GROUP_METADATA,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA,
    ConsumerGroupKey,
    ConsumerMemberKey,
    GroupMetadataKey,
    Key,
    OffsetCommitKey,
    OffsetCommitValue,
    Value,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from gregor.protocol.errors import ErrorCode
from gregor.protocol.exceptions import ProtocolError
from gregor.protocol.records.batch import RecordBatchBuilder, decode_batch
from gregor.protocol.records.control import ControlRecordType, parse_control_key
from gregor.protocol.records.header import iter_batches

log = logging.getLogger("gregor.coordinator")


Group = ClassicGroup | ConsumerGroup


class TopicsView(Protocol):
    """What the coordinator needs to know about topics (the broker's metadata image)."""

    def partition_count(self, topic: str) -> int | None: ...

    def topic_id(self, topic: str) -> uuid.UUID | None: ...

    def topic_name(self, topic_id: uuid.UUID) -> str | None: ...

    def topic_names(self) -> Iterable[str]:
        """Every non-internal topic (what a regex subscription can match)."""
        ...


#: Kafka 4.0's default for group.coordinator.append.linger.ms.
APPEND_LINGER_MS_DEFAULT = 5
#: A lingering batch is appended early once its records reach this many bytes (Kafka flushes
#: a full batch; __consumer_offsets takes batches up to message.max.bytes, about 1 MiB).
APPEND_MAX_BATCH_BYTES = 512 * 1024


@dataclass
class CoordinatorConfig:
    num_partitions: int = 50
    initial_rebalance_delay_ms: int = 3000
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    max_group_size: int = 2**31 - 1
    consumer_heartbeat_interval_ms: int = 5000
    consumer_session_timeout_ms: int = 45000
    consumer_assignors: tuple[str, ...] = ("uniform", "range")
    consumer_max_group_size: int = 2**31 - 1
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    offsets_retention_check_interval_ms: int = 600000
    offset_metadata_max_bytes: int = 4096
    new_member_join_timeout_ms: int = 300000
    # group.coordinator.append.linger.ms: how long writes wait to be appended together in one
    # batch. 0 here (a coordinator built directly, as in tests, writes at once); a broker
    # reads the key, whose default is Kafka 4.0's, 5 ms.
    append_linger_ms: int = 0

    @classmethod
    def from_props(cls, get: Callable[[str, Any], Any]) -> CoordinatorConfig:
        """Build from Kafka broker keys; ``get(key, default)`` reads the broker config."""

        def i(key: str, default: int) -> int:
            return int(get(key, default))

        assignors = get("group.consumer.assignors", "uniform,range")
        if isinstance(assignors, str):
            assignors = [a.strip() for a in assignors.split(",") if a.strip()]
        names = tuple(a.rsplit(".", 1)[-1].replace("Assignor", "").lower() for a in assignors)
        return cls(
            num_partitions=i("offsets.topic.num.partitions", 50),
            initial_rebalance_delay_ms=i("group.initial.rebalance.delay.ms", 3000),
            min_session_timeout_ms=i("group.min.session.timeout.ms", 6000),
            max_session_timeout_ms=i("group.max.session.timeout.ms", 1800000),
            max_group_size=i("group.max.size", 2**31 - 1),
            consumer_heartbeat_interval_ms=i("group.consumer.heartbeat.interval.ms", 5000),
            consumer_session_timeout_ms=i("group.consumer.session.timeout.ms", 45000),
            consumer_assignors=names or ("uniform", "range"),
            consumer_max_group_size=i("group.consumer.max.size", 2**31 - 1),
            offsets_retention_ms=i("offsets.retention.minutes", 10080) * 60000,
            offsets_retention_check_interval_ms=i("offsets.retention.check.interval.ms", 600000),
            offset_metadata_max_bytes=i("offset.metadata.max.bytes", 4096),
            append_linger_ms=i("group.coordinator.append.linger.ms", APPEND_LINGER_MS_DEFAULT),
        )


class Write(NamedTuple):
    id: int
    partition: int
    batch: bytes


@dataclass
class _LingeringBatch:
    """Records of several writes to one partition, waiting to be appended as one batch."""

    builder: RecordBatchBuilder
    records: int = 0
    size: int = 0
    # (index of the write's first record in the batch, its callback)
    callbacks: list[tuple[int, WriteCallback | None]] = field(default_factory=list)


class Reply(NamedTuple):
    token: Any
    response: Any


class PartitionStatus(Enum):
    LOADING = "loading"
    ACTIVE = "active"


class Timers:
    """Named deadlines; scheduling a name again replaces it. Lazy deletion in a heap."""

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, Any]] = []
        self._live: dict[Any, tuple[int, int, Callable[[], None]]] = {}
        self._seq = itertools.count()

    def schedule(self, key: Any, deadline: int, fn: Callable[[], None]) -> None:
        seq = next(self._seq)
        self._live[key] = (deadline, seq, fn)
        heapq.heappush(self._heap, (deadline, seq, key))

    def cancel(self, key: Any) -> None:
        self._live.pop(key, None)

    def deadline(self, key: Any) -> int | None:
        entry = self._live.get(key)
        return None if entry is None else entry[0]

    def _prune(self) -> None:
        heap = self._heap
        while heap:
            deadline, seq, key = heap[0]
            entry = self._live.get(key)
            if entry is not None and entry[1] == seq:
                return
            heapq.heappop(heap)

    def next_deadline(self) -> int | None:
        self._prune()
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now: int) -> Callable[[], None] | None:
        self._prune()
        if not self._heap or self._heap[0][0] > now:
            return None
        _, _, key = heapq.heappop(self._heap)
        _, _, fn = self._live.pop(key)
        return fn

    def __len__(self) -> int:
        return len(self._live)


WriteCallback = Callable[[int, int], None]  # (error code, base offset)


def storage_error_to_coordinator(code: int) -> int:
    """Kafka's mapping of an append error to what a group client understands."""
    if code in (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.REQUEST_TIMED_OUT,
    ):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if code in (
        ErrorCode.MESSAGE_TOO_LARGE,
        ErrorCode.RECORD_LIST_TOO_LARGE,
        ErrorCode.INVALID_FETCH_SIZE,
    ):
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return code if code else 0


class CoordinatorCore:
    """State, outbox, timers and loading shared by the protocol mixins."""

    def __init__(
        self,
        config: CoordinatorConfig,
        topics: TopicsView,
        clock: Callable[[], int],
    ) -> None:
        self.config = config
        self.topics = topics
        self.clock = clock
        self.groups: dict[str, Group] = {}
        self.partitions: dict[int, PartitionStatus] = {}
        self.timers = Timers()
        self._writes: list[Write] = []
        self._replies: list[Reply] = []
        self._callbacks: dict[int, WriteCallback] = {}
        self._write_ids = itertools.count(1)
        self._lingering: dict[int, _LingeringBatch] = {}

    # --- outbox ---

    def take(self) -> tuple[list[Write], list[Reply]]:
        writes, replies = self._writes, self._replies
        self._writes, self._replies = [], []
        return writes, replies

    @property
    def has_output(self) -> bool:
        return bool(self._writes or self._replies)

    def reply(self, token: Any, response: Any) -> None:
        self._replies.append(Reply(token, response))

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
        wid = next(self._write_ids)
        if on_done is not None:
            self._callbacks[wid] = on_done
        self._writes.append(Write(wid, partition, batch))

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

            wid = next(self._write_ids)
            self._callbacks[wid] = done
            self._writes.append(Write(wid, p, batch.builder.build()))

    def write_complete(self, write_id: int, error_code: int, base_offset: int = -1) -> None:
        """The caller appended write ``write_id`` (error_code 0) or failed to."""
        cb = self._callbacks.pop(write_id, None)
        if cb is not None:
            cb(error_code, base_offset)

    # --- time ---

    def next_deadline(self) -> int | None:
        return self.timers.next_deadline()

    def tick(self) -> None:
        """Run every timer whose deadline has passed."""
        while True:
            fn = self.timers.pop_due(self.clock())
            if fn is None:
                return
            fn()

    # --- partitions and groups ---

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.config.num_partitions)

    def partition_error(self, group_id: str) -> int:
        """0 if this coordinator serves ``group_id`` now, else the error to answer."""
        status = self.partitions.get(self.partition_for(group_id))
        if status is PartitionStatus.ACTIVE:
            return 0
        if status is PartitionStatus.LOADING:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return ErrorCode.NOT_COORDINATOR

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

    def begin_load(self, partition: int) -> None:
        self.partitions[partition] = PartitionStatus.LOADING

    def load_batches(self, partition: int, data: bytes | memoryview) -> None:
        """Replay whole v2 batches read from ``partition`` of ``__consumer_offsets``."""
        for pos, h in iter_batches(data):
            if h.is_control:
                batch = decode_batch(data, pos)
                for rec in batch.records:
                    try:
                        _, kind = parse_control_key(rec.key)
                    except ProtocolError:
                        continue
                    if kind in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
                        self._replay_marker(
                            partition, h.producer_id, kind == ControlRecordType.COMMIT
                        )
                continue
            batch = decode_batch(data, pos)
            txn_pid = h.producer_id if h.is_transactional else None
            for rec in batch.records:
                if rec.key is None:
                    continue
                try:
                    key = decode_key(rec.key)
                    if key is None:
                        continue
                    value = decode_value(key, rec.value)
                except ProtocolError as e:
                    log.warning(
                        "skipping unreadable __consumer_offsets record at %d: %s", rec.offset, e
                    )
                    continue
                self._replay(key, value, rec.offset, txn_pid)

    def complete_load(self, partition: int) -> None:
        """The partition is read to its end: start serving its groups."""
        self.partitions[partition] = PartitionStatus.ACTIVE
        now = self.clock()
        for gid, group in self.groups.items():
            if self.partition_for(gid) != partition:
                continue
            if isinstance(group, ClassicGroup):
                for m in group.members.values():
                    self.schedule_heartbeat_expiry(group, m, now + m.session_timeout_ms)
            else:
                group.owners.clear()
                group.resolved_regexes = {
                    m.subscribed_topic_regex
                    for m in group.members.values()
                    if m.subscribed_topic_regex
                }
                group.topic_fingerprint = self.topic_fingerprint(group)
                for cm in group.members.values():
                    group.claim(cm)
                    self.schedule_consumer_session(group, cm)
                    if cm.state == MemberState.UNREVOKED_PARTITIONS:
                        self.schedule_revocation(group, cm)
        self.ensure_retention_timer()

    def unload(self, partition: int) -> None:
        """Forget a partition's groups (e.g. the offsets topic was deleted)."""
        self.flush_lingering(partition)
        self.partitions.pop(partition, None)
        for gid in [g for g in self.groups if self.partition_for(g) == partition]:
            self.remove_group(gid)

    def _replay_marker(self, partition: int, producer_id: int, commit: bool) -> None:
        for gid, group in self.groups.items():
            if self.partition_for(gid) == partition:
                group.offsets.complete_txn(producer_id, commit)

    def _replay(self, key: Key, value: Value | None, offset: int, txn_pid: int | None) -> None:
        if isinstance(key, OffsetCommitKey):
            group = self.groups.get(key.group)
            if value is None:
                if group is not None:
                    group.offsets.delete((key.topic, key.partition))
                return
            if group is None:
                group = self.groups[key.group] = ClassicGroup(key.group)
            assert isinstance(value, OffsetCommitValue)  # records.decode_value: an offset key's
            oam = OffsetAndMetadata(
                value.offset,
                value.leader_epoch,
                value.metadata,
                value.commit_timestamp,
                value.expire_timestamp,
                offset,
            )
            tp = (key.topic, key.partition)
            if txn_pid is not None:
                group.offsets.prepare_txn(txn_pid, tp, oam)
            else:
                group.offsets.commit(tp, oam)
            return
        if isinstance(key, GroupMetadataKey):
            self._replay_group_metadata(key.group, value)
            return
        self._replay_consumer(key, value)

    def _replay_group_metadata(self, group_id: str, value: Any) -> None:
        existing = self.groups.get(group_id)
        offsets = existing.offsets if existing is not None else None
        if value is None:
            if existing is not None:
                if len(existing.offsets):
                    g = ClassicGroup(group_id)
                    g.offsets = existing.offsets
                    self.groups[group_id] = g
                else:
                    del self.groups[group_id]
            return
        g = ClassicGroup(group_id)
        if offsets is not None:
            g.offsets = offsets
        g.protocol_type = value.protocol_type or None
        g.generation_id = value.generation
        g.protocol_name = value.protocol
        g.state_timestamp = value.current_state_timestamp
        for mm in value.members:
            member = ClassicMember(
                member_id=mm.member_id,
                group_instance_id=mm.group_instance_id,
                client_id=mm.client_id,
                client_host=mm.client_host,
                rebalance_timeout_ms=mm.rebalance_timeout,
                session_timeout_ms=mm.session_timeout,
                protocol_type=value.protocol_type,
                protocols=[(value.protocol or "", mm.subscription)],
                assignment=mm.assignment,
            )
            g.add(member)
        g.leader_id = value.leader if value.leader in g.members else g.leader_id
        g.protocol_type = value.protocol_type or None
        g.state = ClassicState.STABLE if g.members else ClassicState.EMPTY
        self.groups[group_id] = g

    def _consumer_group_for_replay(self, group_id: str) -> ConsumerGroup:
        g = self.groups.get(group_id)
        if isinstance(g, ConsumerGroup):
            return g
        cg = ConsumerGroup(group_id)
        if g is not None:
            cg.offsets = g.offsets
        self.groups[group_id] = cg
        return cg

    def _replay_consumer(self, key: Key, value: Any) -> None:
        assert isinstance(key, ConsumerGroupKey | ConsumerMemberKey)
        if value is None and key.group_id not in self.groups:
            return
        if value is None and not isinstance(self.groups.get(key.group_id), ConsumerGroup):
            return
        g = self._consumer_group_for_replay(key.group_id)
        if isinstance(key, ConsumerGroupKey):
            if key.type == CONSUMER_GROUP_METADATA:
                if value is None:
                    # The group was deleted; offsets (if any) are tombstoned separately.
                    if len(g.offsets):
                        cg = ClassicGroup(key.group_id)
                        cg.offsets = g.offsets
                        self.groups[key.group_id] = cg
                    else:
                        del self.groups[key.group_id]
                else:
                    g.group_epoch = value.epoch
            elif key.type == CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA:
                g.assignment_epoch = 0 if value is None else value.assignment_epoch
            return
        mid = key.member_id
        if key.type == CONSUMER_GROUP_MEMBER_METADATA:
            if value is None:
                g.remove_member(mid)
                return
            m = g.members.get(mid)
            if m is None:
                m = ConsumerMember(mid)
                g.members[mid] = m
            m.instance_id = value.instance_id
            m.rack_id = value.rack_id
            m.client_id = value.client_id
            m.client_host = value.client_host
            m.subscribed_topic_names = list(value.subscribed_topic_names)
            m.subscribed_topic_regex = value.subscribed_topic_regex
            m.rebalance_timeout_ms = value.rebalance_timeout_ms
            m.server_assignor = value.server_assignor
            if m.instance_id is not None:
                g.static_members[m.instance_id] = mid
        elif key.type == CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER:
            if value is None:
                g.target.pop(mid, None)
            else:
                g.target[mid] = {t: set(ps) for t, ps in value.topic_partitions.items()}
        elif key.type == CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT:
            m = g.members.get(mid)
            if m is None:
                if value is None:
                    return
                m = ConsumerMember(mid)
                g.members[mid] = m
            if value is None:
                m.assigned, m.pending_revocation = {}, {}
                m.member_epoch, m.state = 0, MemberState.STABLE
                return
            m.member_epoch = value.member_epoch
            m.previous_member_epoch = value.previous_member_epoch
            try:
                m.state = MemberState(value.state)
            except ValueError:
                m.state = MemberState.UNKNOWN
            m.assigned = {t: set(ps) for t, ps in value.assigned_partitions.items()}
            m.pending_revocation = {
                t: set(ps) for t, ps in value.partitions_pending_revocation.items()
            }

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

    # --- hooks the mixins implement ---

    def schedule_heartbeat_expiry(
        self, group: ClassicGroup, member: ClassicMember, deadline: int
    ) -> None:
        raise NotImplementedError

    def schedule_consumer_session(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        raise NotImplementedError

    def schedule_revocation(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        raise NotImplementedError

    def ensure_retention_timer(self) -> None:
        raise NotImplementedError


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
