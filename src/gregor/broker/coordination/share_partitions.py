"""Share partitions on their leader (KIP-932): acquiring records for ShareFetch, applying
acknowledgements, lock timeouts, share sessions, and persisting through the share coordinator.

Theory of operation. For each (share group, topic partition) this broker leads and a member
fetches from, a ``SharePartition`` (``gregor.coordinator.share.partition``) tracks the
in-flight records. It is built on first use: its state is read from the share coordinator
(``SharePersister``) with this broker's leader epoch, which fences the previous leader; a
partition the group never used starts at the log end or the log start
(``share.auto.offset.reset``, a group config; latest by default) and is written at once.
A leader epoch change (a new leadership) drops it, and the next fetch builds it again.

A fetch reads the log from the oldest available offset up to the high watermark, acquires
what it can for the member and answers with the batches that hold the acquired offsets and
their (first, last, delivery count) runs. Acknowledgements change the in-memory state and are
persisted (a whole snapshot per partition, one write at a time) before they are answered; the
state a crash can lose is the lock of acquired records and their latest delivery count, as in
Kafka. Expired locks and the records of a member that left are released by ``tick``.

Share sessions (ShareFetch ``share_session_epoch``): 0 opens one with the request's partitions,
each later request must carry the next epoch (INVALID_SHARE_SESSION_EPOCH;
SHARE_SESSION_NOT_FOUND without a session) and may add or forget partitions, -1 closes it and
releases what the member holds on those partitions.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from gregor.broker.common.events import log_event
from gregor.broker.coordination.share_service import SharePersister
from gregor.broker.replication.partition import READ_COMMITTED, READ_UNCOMMITTED
from gregor.broker.replication.replica_manager import ReplicaManager
from gregor.cluster.image import MetadataImage
from gregor.coordinator.share.partition import SharePartition
from gregor.coordinator.share.state import ACKNOWLEDGED, ARCHIVED
from gregor.protocol.errors import ErrorCode, KafkaError
from gregor.protocol.records.header import iter_batches

log = logging.getLogger("gregor.broker.share")

GROUP_CONFIG = 32
TopicPartition = tuple[str, int]
AckBatch = tuple[int, int, list[int]]  # first offset, last offset, acknowledge types


@dataclass(slots=True)
class _Entry:
    topic_id: uuid.UUID
    leader_epoch: int
    state_epoch: int = 0
    sp: SharePartition | None = None
    ready: asyncio.Future[int] | None = None  # the load: 0 or its error
    write_lock: asyncio.Lock = field(default_factory=asyncio.Lock)


@dataclass(slots=True)
class ShareSession:
    epoch: int  # the epoch the next request must carry
    partitions: set[TopicPartition] = field(default_factory=set)
    #: Where the next fetch starts looking: one partition's records per answer, in turn.
    cursor: int = 0


@dataclass(slots=True)
class FetchedPartition:
    error: int = 0
    records: bytes | None = None
    acquired: list[tuple[int, int, int]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ShareSettings:
    lock_duration_ms: int
    delivery_limit: int
    max_locks: int


class SharePartitions:
    def __init__(
        self,
        replicas: ReplicaManager,
        persister: SharePersister,
        image: Callable[[], MetadataImage],
        settings: ShareSettings,
        clock: Callable[[], int],
    ) -> None:
        self.replicas = replicas
        self.persister = persister
        self.image = image
        self.settings = settings
        self.clock = clock
        self.entries: dict[tuple[str, str, int], _Entry] = {}
        self.sessions: dict[tuple[str, str], ShareSession] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    # --- sessions ---

    def session_update(
        self,
        group: str,
        member: str,
        epoch: int,
        add: Iterable[TopicPartition],
        forget: Iterable[TopicPartition],
        connection_closed: asyncio.Future[None] | None = None,
    ) -> tuple[int, ShareSession | None]:
        """Open (epoch 0), check and advance, or (-1) find for closing a member's session. A
        session opened on a connection closes with it, releasing what the member holds."""
        key = (group, member)
        if epoch == 0:
            fresh = self.sessions[key] = ShareSession(1, set(add))
            if connection_closed is not None:

                def closed(_: asyncio.Future[None]) -> None:
                    if self.sessions.get(key) is fresh:
                        self.close_session(group, member)

                connection_closed.add_done_callback(closed)
            return 0, fresh
        session = self.sessions.get(key)
        if session is None:
            return ErrorCode.SHARE_SESSION_NOT_FOUND, None
        if epoch == -1:
            return 0, session
        if epoch != session.epoch:
            return ErrorCode.INVALID_SHARE_SESSION_EPOCH, None
        session.epoch = epoch + 1 if epoch < 2**31 - 1 else 1
        session.partitions.update(add)
        session.partitions.difference_update(forget)
        return 0, session

    def close_session(self, group: str, member: str) -> None:
        session = self.sessions.pop((group, member), None)
        if session is not None:
            self.release_member(group, member, session.partitions)

    def release_member(
        self, group: str, member: str, partitions: Iterable[TopicPartition] | None = None
    ) -> None:
        """A member left or closed its session: what it holds here goes back."""
        wanted = None if partitions is None else set(partitions)
        for (g, topic, index), e in list(self.entries.items()):
            if g != group or e.sp is None or (wanted is not None and (topic, index) not in wanted):
                continue
            if e.sp.release_member(member):
                self._persist_later(group, topic, index, e)
        if partitions is None:
            self.sessions.pop((group, member), None)

    # --- loading ---

    def _leader(self, topic: str, index: int) -> tuple[int, int]:
        """(0, leader epoch) when this broker leads the partition, else (error, -1)."""
        try:
            p = self.replicas.leader_partition(topic, index)
        except KafkaError as e:
            return int(getattr(e, "code", ErrorCode.NOT_LEADER_OR_FOLLOWER)), -1
        return 0, p.leader_epoch

    async def _entry(self, group: str, topic: str, index: int) -> tuple[int, _Entry | None]:
        error, leader_epoch = self._leader(topic, index)
        if error:
            return error, None
        t = self.image().topic(topic)
        if t is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
        key = (group, topic, index)
        e = self.entries.get(key)
        if e is None or e.leader_epoch != leader_epoch or e.topic_id != t.topic_id:
            e = self.entries[key] = _Entry(t.topic_id, leader_epoch)
        if e.ready is None:
            e.ready = asyncio.get_running_loop().create_future()
            task = asyncio.get_running_loop().create_task(self._load(group, topic, index, e))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        error = await asyncio.shield(e.ready)
        if error:
            if self.entries.get(key) is e:
                del self.entries[key]  # try again on the next request
            return error, None
        return 0, e

    async def _load(self, group: str, topic: str, index: int, e: _Entry) -> None:
        assert e.ready is not None
        try:
            result = await self.persister.read((group, e.topic_id, index), e.leader_epoch)
            if result.error:
                e.ready.set_result(
                    ErrorCode.NOT_LEADER_OR_FOLLOWER
                    if result.error in (ErrorCode.FENCED_LEADER_EPOCH,)
                    else ErrorCode.COORDINATOR_NOT_AVAILABLE
                )
                return
            partition = self.replicas.leader_partition(topic, index)
            start, batches = result.start_offset, result.state_batches
            e.state_epoch = result.state_epoch
            if start < 0:
                reset = (
                    self.image()
                    .config_resource(GROUP_CONFIG, group)
                    .get("share.auto.offset.reset", "latest")
                )
                log_ = partition.log
                start = log_.log_start_offset if reset == "earliest" else log_.high_watermark
                error = await self.persister.write(
                    (group, e.topic_id, index), e.state_epoch, e.leader_epoch, start, []
                )
                if error:
                    e.ready.set_result(ErrorCode.COORDINATOR_NOT_AVAILABLE)
                    return
                log_event(
                    log,
                    "share.partition_initialized",
                    group=group,
                    topic=topic,
                    partition=index,
                    start=start,
                )
            sp = SharePartition(start, self.settings.delivery_limit, self.settings.max_locks)
            sp.load(start, batches)
            e.sp = sp
            e.ready.set_result(0)
        except KafkaError as err:
            e.ready.set_result(int(getattr(err, "code", ErrorCode.UNKNOWN_SERVER_ERROR)))
        except Exception:  # noqa: BLE001 - a failed load answers an error, never hangs the fetch
            log.exception("could not load share partition %s %s-%d", group, topic, index)
            e.ready.set_result(ErrorCode.UNKNOWN_SERVER_ERROR)

    # --- persistence ---

    async def _persist(self, group: str, topic: str, index: int, e: _Entry) -> int:
        sp = e.sp
        if sp is None:
            return 0
        async with e.write_lock:
            error = await self.persister.write(
                (group, e.topic_id, index),
                e.state_epoch,
                e.leader_epoch,
                sp.start_offset,
                sp.state_batches(),
            )
        if error == ErrorCode.FENCED_STATE_EPOCH and self.entries.get((group, topic, index)) is e:
            del self.entries[(group, topic, index)]  # an admin reset the offsets: load them again
        return error

    async def revalidate(self, group: str, partitions: Iterable[TopicPartition]) -> None:
        """A member opens a share session: drop cached partitions whose state an admin has
        reset or deleted since (another state epoch), so they load again."""
        for topic, index in partitions:
            key = (group, topic, index)
            e = self.entries.get(key)
            if e is None or e.sp is None:
                continue
            r = await self.persister.read((group, e.topic_id, index), e.leader_epoch, summary=True)
            if (
                r.error == 0
                and (r.state_epoch != e.state_epoch or r.start_offset < 0)
                and self.entries.get(key) is e
            ):
                del self.entries[key]

    def forget(self, group: str, topics: Iterable[str] | None = None) -> None:
        """Drop this broker's cached share partitions of ``group`` (of ``topics`` only)."""
        wanted = None if topics is None else set(topics)
        for key in [
            k for k in self.entries if k[0] == group and (wanted is None or k[1] in wanted)
        ]:
            del self.entries[key]

    def lag(self, group: str, topic: str, index: int, start_offset: int) -> int:
        """Records from the start offset to the high watermark not yet acknowledged or archived,
        when this broker leads the partition; -1 otherwise."""
        if start_offset < 0 or self._leader(topic, index)[0]:
            return -1
        hw = self.replicas.leader_partition(topic, index).log.high_watermark
        e = self.entries.get((group, topic, index))
        done = 0
        if e is not None and e.sp is not None and e.sp.start_offset == start_offset:
            done = sum(1 for r in e.sp.records.values() if r.state in (ACKNOWLEDGED, ARCHIVED))
        return max(hw - start_offset - done, 0)

    def _persist_later(self, group: str, topic: str, index: int, e: _Entry) -> None:
        task = asyncio.get_running_loop().create_task(self._persist_quietly(group, topic, index, e))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _persist_quietly(self, group: str, topic: str, index: int, e: _Entry) -> None:
        error = await self._persist(group, topic, index, e)
        if error:
            log_event(
                log,
                "share.persist_failed",
                logging.WARNING,
                group=group,
                topic=topic,
                partition=index,
                error=error,
            )

    # --- requests ---

    async def acknowledge(
        self, group: str, member: str, acks: dict[TopicPartition, list[AckBatch]]
    ) -> dict[TopicPartition, int]:
        out: dict[TopicPartition, int] = {}
        for (topic, index), batches in acks.items():
            error, e = await self._entry(group, topic, index)
            if error or e is None or e.sp is None:
                out[(topic, index)] = error or ErrorCode.UNKNOWN_SERVER_ERROR
                continue
            codes = [e.sp.acknowledge(member, first, last, types) for first, last, types in batches]
            error = next((c for c in codes if c), 0)
            persisted = await self._persist(group, topic, index, e)
            out[(topic, index)] = error or persisted
        return out

    def group_settings(self, group: str) -> tuple[int, bool]:
        """(lock duration ms, read_committed) of ``group``: its group configs over the broker's."""
        overrides = self.image().config_resource(GROUP_CONFIG, group)
        lock_ms = int(
            overrides.get("share.record.lock.duration.ms", self.settings.lock_duration_ms)
        )
        return lock_ms, overrides.get(
            "share.isolation.level", "read_uncommitted"
        ) == "read_committed"

    async def fetch(
        self,
        group: str,
        member: str,
        session: ShareSession,
        max_records: int,
        max_bytes: int,
        max_wait_ms: int,
        hung_up: asyncio.Future[None] | None = None,
    ) -> dict[TopicPartition, FetchedPartition]:
        """Records for ``member`` from its session's partitions: those of the first partition
        (taking them in turn from one answer to the next) that has any, long-polling up to
        ``max_wait_ms`` when none has."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(max_wait_ms, 0) / 1000.0
        partitions = sorted(session.partitions)
        if partitions:
            start = session.cursor % len(partitions)
            partitions = partitions[start:] + partitions[:start]
        while True:
            out = await self._fetch_once(group, member, partitions, max_records, max_bytes)
            for i, tp in enumerate(partitions):
                if tp in out and out[tp].acquired:
                    session.cursor = (session.cursor + i + 1) % max(len(partitions), 1)
                    break
            remaining = deadline - loop.time()
            if any(f.acquired or f.error for f in out.values()) or remaining <= 0 or not partitions:
                return out
            if hung_up is not None and hung_up.done():
                return out
            fut: asyncio.Future[None] = loop.create_future()
            hosted = []
            for topic, index in partitions:
                p = self.replicas.get_partition(topic, index)
                if p is not None:
                    p.add_waiter(fut, False)
                    hosted.append(p)
            waits: set[asyncio.Future[None]] = {fut}
            if hung_up is not None:
                waits.add(hung_up)
            try:
                # Wake for new records, and at least every lock-check period for released ones.
                await asyncio.wait(
                    waits, timeout=min(remaining, 0.25), return_when=asyncio.FIRST_COMPLETED
                )
            finally:
                for p in hosted:
                    p.remove_waiter(fut)

    async def _fetch_once(
        self,
        group: str,
        member: str,
        partitions: Sequence[TopicPartition],
        max_records: int,
        max_bytes: int,
    ) -> dict[TopicPartition, FetchedPartition]:
        out: dict[TopicPartition, FetchedPartition] = {}
        lock_ms, committed = self.group_settings(group)
        for topic, index in partitions:
            error, e = await self._entry(group, topic, index)
            if error or e is None or e.sp is None:
                out[(topic, index)] = FetchedPartition(error or ErrorCode.UNKNOWN_SERVER_ERROR)
                continue
            out[(topic, index)] = got = self._acquire(
                member, topic, index, e.sp, max_records, max_bytes, lock_ms, committed
            )
            if got.acquired:
                break
        return out

    def _acquire(
        self,
        member: str,
        topic: str,
        index: int,
        sp: SharePartition,
        max_records: int,
        max_bytes: int,
        lock_ms: int,
        committed: bool,
    ) -> FetchedPartition:
        """Acquire from the log: up to the high watermark, or (``share.isolation.level``
        read_committed) up to the last stable offset and without aborted transactions' records,
        which are archived like control records."""
        partition = self.replicas.leader_partition(topic, index)
        sp.move_start(partition.log.log_start_offset)
        start = sp.first_available()
        hw = partition.log.last_stable_offset if committed else partition.log.high_watermark
        if start >= hw:
            return FetchedPartition()
        read = partition.read(
            start,
            max_bytes,
            isolation=READ_COMMITTED if committed else READ_UNCOMMITTED,
            from_follower=False,
            min_one=True,
        )
        data = read.records
        if not data:
            return FetchedPartition()
        aborted = read.aborted_transactions or []
        ranges: list[tuple[int, int]] = []
        spans: list[tuple[int, int, int, int]] = []  # (base, last, position, size)
        upper = hw
        for pos, h in iter_batches(data, allow_partial_tail=True):
            spans.append((h.base_offset, h.last_offset, pos, h.size))
            dropped = h.is_transactional and any(
                a.producer_id == h.producer_id and a.first_offset <= h.base_offset <= a.last_offset
                for a in aborted
            )
            if not h.is_control and not dropped:
                ranges.append((h.base_offset, h.last_offset))
            upper = min(hw, h.last_offset + 1)
        acquired = sp.acquire(member, ranges, upper, max_records, self.clock(), lock_ms)
        if not acquired:
            return FetchedPartition()
        view = memoryview(data)
        chunks = [
            bytes(view[pos : pos + size])
            for base, last, pos, size in spans
            if any(first <= last and base <= a_last for first, a_last, _ in acquired)
        ]
        return FetchedPartition(0, b"".join(chunks), acquired)

    # --- time ---

    def tick(self) -> None:
        now = self.clock()
        for (group, topic, index), e in list(self.entries.items()):
            if e.sp is not None and e.sp.expire(now):
                self._persist_later(group, topic, index, e)

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
