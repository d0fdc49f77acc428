"""The consumer's fetch pipeline: positions, fetch sessions, prefetching and decoding.

Theory of operation. :class:`SubscriptionState` holds, per assigned partition, the position
(next offset to return), pause flag and whether the position must be reset. The
:class:`Fetcher`'s task keeps one Fetch request in flight per leader broker for the partitions
that are assigned, not paused, have a position, and have nothing buffered yet; responses are
kept as raw record bytes (:class:`CompletedFetch`) and decoded only when ``poll`` takes them, so
a paused or revoked partition's data is dropped without being decoded.

Fetch sessions (KIP-227): the first request to a broker is a full fetch that asks for a session
(id 0, epoch 0). Once the broker grants one, later requests name only partitions whose fetch
offset changed, list partitions to drop as forgotten, and carry the next epoch; the broker
answers with the partitions that have news. A session error resets to a full fetch.

Decoding is ``gregor.protocol.records.scan``'s (compiled when built): it walks the record set,
drops control batches (they only move the position past them) and, for read_committed, the
records of aborted transactions (the response's aborted list and the ABORT markers).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import re
import uuid
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple, cast

from gregor.client.core.client import STALE_METADATA, KafkaClient, spawn
from gregor.client.core.config import Config
from gregor.client.core.errors import KafkaConnectionError, error_for_code
from gregor.client.core.metadata import TopicPartition
from gregor.protocol.errors import ErrorCode, KafkaError, OffsetOutOfRangeError
from gregor.protocol.exceptions import ProtocolError
from gregor.protocol.messages import FetchRequest, FetchResponse
from gregor.protocol.records.scan import AbortFilter, Buffer, consumer_records_from, end_offset

log = logging.getLogger("gregor.client.consumer")

READ_UNCOMMITTED = 0
READ_COMMITTED = 1
_FINAL_EPOCH = -1
_INT32_MAX = (1 << 31) - 1


class ConsumerRecord(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int  # 0 CreateTime, 1 LogAppendTime, -1 none
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    leader_epoch: int


@dataclass
class PartitionState:
    position: int | None = None
    leader_epoch: int = -1
    paused: bool = False
    reset: str | None = None  # "earliest" / "latest" when the position must be looked up
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    needs_committed: bool = True  # look up the committed offset before resetting


@dataclass
class SubscriptionState:
    default_reset: str = "latest"
    topics: set[str] = field(default_factory=set)
    pattern: re.Pattern[str] | None = None
    user_assigned: bool = False
    assignment: dict[TopicPartition, PartitionState] = field(default_factory=dict)
    version: int = 0

    def assign(self, tps: Iterable[TopicPartition], from_group: bool = False) -> None:
        tps = list(tps)
        new: dict[TopicPartition, PartitionState] = {}
        for tp in tps:
            new[tp] = self.assignment.get(tp) or PartitionState(needs_committed=True)
        self.assignment = new
        self.version += 1

    def add(self, tps: Iterable[TopicPartition]) -> None:
        for tp in tps:
            self.assignment.setdefault(tp, PartitionState())
        self.version += 1

    def remove(self, tps: Iterable[TopicPartition]) -> None:
        for tp in tps:
            self.assignment.pop(tp, None)
        self.version += 1

    def fetchable(self) -> list[TopicPartition]:
        return [
            tp
            for tp, s in self.assignment.items()
            if not s.paused and s.position is not None and s.reset is None
        ]

    def missing_positions(self) -> list[TopicPartition]:
        return [
            tp for tp, s in self.assignment.items() if s.position is None or s.reset is not None
        ]


class CompletedFetch:
    __slots__ = (
        "tp",
        "data",
        "fetch_offset",
        "aborted",
        "records",
        "index",
        "next_offset",
        "leader_epoch",
    )

    def __init__(
        self,
        tp: TopicPartition,
        data: Buffer,
        fetch_offset: int,
        aborted: list[FetchResponse.Responses.Partitions.AbortedTransactions],
        leader_epoch: int,
    ) -> None:
        self.tp = tp
        self.data = data
        self.fetch_offset = fetch_offset
        self.aborted = aborted
        self.records: list[ConsumerRecord] | None = None
        self.index = 0
        self.next_offset = fetch_offset
        self.leader_epoch = leader_epoch


class _Session:
    __slots__ = ("session_id", "epoch", "partitions")

    def __init__(self) -> None:
        self.session_id = 0
        self.epoch = 0
        self.partitions: dict[TopicPartition, tuple[int, int]] = {}

    def reset(self) -> None:
        self.session_id = 0
        self.epoch = 0
        self.partitions = {}


class Fetcher:
    def __init__(self, client: KafkaClient, subs: SubscriptionState, config: Config) -> None:
        self.client = client
        self.subs = subs
        self.min_bytes = config["fetch.min.bytes"]
        self.max_bytes = config["fetch.max.bytes"]
        self.max_wait_ms = config["fetch.max.wait.ms"]
        self.partition_max_bytes = config["max.partition.fetch.bytes"]
        self.isolation = (
            READ_COMMITTED if config["isolation.level"] == "read_committed" else READ_UNCOMMITTED
        )
        self.check_crcs = config["check.crcs"]
        self.rack = config["client.rack"]
        self.completed: deque[CompletedFetch] = deque()
        self.errors: deque[BaseException] = deque()
        self.sessions: dict[int, _Session] = {}
        self.in_flight: set[int] = set()
        self.use_sessions = True
        #: Nodes that kept refusing our fetch sessions: fetched without one from then on.
        self.sessionless: set[int] = set()
        self._session_failures: dict[int, int] = {}
        #: Fetches the broker refused for a session id or epoch it did not expect.
        self.session_errors = 0
        #: Completed fetches kept per partition: >1 lets the next fetch overlap decoding.
        self.prefetch = 2
        self._wake: asyncio.Future[None] | None = None
        self._data_waiters: list[asyncio.Future[None]] = []
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    # --- task plumbing ---

    def start(self) -> None:
        if self.wakeup not in self.client.listeners:
            self.client.listeners.append(self.wakeup)
        if self._task is None:
            self._task = spawn(self._run())

    async def close(self) -> None:
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except BaseException:
                pass
            self._task = None

    def wakeup(self) -> None:
        w = self._wake
        if w is not None and not w.done():
            w.set_result(None)

    def _notify_data(self) -> None:
        for w in self._data_waiters:
            if not w.done():
                w.set_result(None)
        self._data_waiters.clear()

    async def wait_for_data(self, timeout: float) -> None:
        if self.completed or self.errors or timeout <= 0:
            return
        fut = asyncio.get_running_loop().create_future()
        self._data_waiters.append(fut)
        try:
            await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            pass

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while not self._closed:
            self._wake = loop.create_future()
            try:
                self._send_fetches()
            except Exception as e:  # keep fetching; surface the error to poll
                log.warning("fetch planning failed: %s", e)
            await self._wake

    # --- building requests ---

    def _buffered(self) -> dict[TopicPartition, tuple[int, int]]:
        """Per partition: (completed fetches waiting, offset after the last of them)."""
        out: dict[TopicPartition, tuple[int, int]] = {}
        for cf in self.completed:
            n, _ = out.get(cf.tp, (0, 0))
            out[cf.tp] = (n + 1, cf.next_offset)
        return out

    def fetch_offset(self, tp: TopicPartition, position: int) -> int:
        """Where the next fetch of ``tp`` starts: after what is buffered, else the position."""
        for cf in reversed(self.completed):
            if cf.tp == tp:
                return cf.next_offset
        return position

    def _send_fetches(self) -> None:
        cluster = self.client.cluster
        buffered = self._buffered()
        by_node: dict[int, list[TopicPartition]] = {}
        for tp in self.subs.fetchable():
            waiting = buffered.get(tp)
            if waiting is not None and waiting[0] >= self.prefetch:
                continue  # enough decoded-on-demand data queued for this partition
            node = cluster.leader_for(tp)
            if node < 0:
                self.client.request_update()
                continue
            by_node.setdefault(node, []).append(tp)
        for node, tps in by_node.items():
            if node in self.in_flight:
                continue
            self.in_flight.add(node)
            spawn(self._fetch(node, tps))
        # nodes with nothing to fetch but a session keep it; nothing to do

    async def _fetch(self, node: int, tps: list[TopicPartition]) -> None:
        try:
            conn = await self.client.connection(node)
            version = conn.version(FetchRequest.API_KEY, min_version=4)
            cluster = self.client.cluster
            use_ids = version >= 13 and all(
                getattr(cluster.topic_id(tp.topic), "int", 0) for tp in tps
            )
            if not use_ids:
                version = min(version, 12)
            session = self.sessions.setdefault(node, _Session())
            use_session = self.use_sessions and version >= 7 and node not in self.sessionless
            if not use_session:
                session.reset()
            wanted: dict[TopicPartition, tuple[int, int]] = {}
            for tp in tps:
                st = self.subs.assignment.get(tp)
                if st is None or st.position is None:
                    continue
                pm = cluster.partition(tp)
                wanted[tp] = (
                    self.fetch_offset(tp, st.position),
                    pm.leader_epoch if pm is not None else -1,
                )
            full = session.session_id == 0 or session.epoch == 0
            if full:
                send = dict(wanted)
                forgotten: list[TopicPartition] = []
            else:
                send = {tp: v for tp, v in wanted.items() if session.partitions.get(tp) != v}
                forgotten = [tp for tp in session.partitions if tp not in wanted]
            req = self._build(version, session, send, forgotten, use_ids, full, use_session)
            timeout = self.client.request_timeout + self.max_wait_ms / 1000
            resp: FetchResponse = await conn.send(req, version, timeout=timeout)
        except KafkaError as e:
            if isinstance(e, KafkaConnectionError):
                self.sessions.pop(node, None)
            self.client.request_update()
            await asyncio.sleep(self.client.retry_backoff)
            return
        finally:
            self.in_flight.discard(node)
            self.wakeup()
        try:
            self._handle_response(node, session, resp, wanted, send, forgotten, full, use_ids)
        except Exception as e:  # surface to poll rather than dying in a task
            session.reset()
            self.errors.append(e)
            self._notify_data()

    def _build(
        self,
        version: int,
        session: _Session,
        send: dict[TopicPartition, tuple[int, int]],
        forgotten: list[TopicPartition],
        use_ids: bool,
        full: bool,
        use_session: bool = True,
    ) -> FetchRequest:
        cluster = self.client.cluster
        topics: dict[str, list[FetchRequest.Topics.Partitions]] = {}
        for tp, (offset, epoch) in send.items():
            topics.setdefault(tp.topic, []).append(
                FetchRequest.Topics.Partitions(
                    partition=tp.partition,
                    current_leader_epoch=epoch,
                    fetch_offset=offset,
                    partition_max_bytes=self.partition_max_bytes,
                )
            )
        t_list = []
        for topic, parts in topics.items():
            if use_ids:  # only when every topic sent has an id (see the caller)
                tid = cast(uuid.UUID, cluster.topic_id(topic))
                t_list.append(FetchRequest.Topics(topic_id=tid, partitions=parts))
            else:
                t_list.append(FetchRequest.Topics(topic=topic, partitions=parts))
        f_topics: dict[str, list[int]] = {}
        for tp in forgotten:
            f_topics.setdefault(tp.topic, []).append(tp.partition)
        f_list = []
        for topic, f_parts in f_topics.items():
            f_tid = cluster.topic_id(topic) if use_ids else None
            if use_ids and f_tid is None:
                continue
            f_list.append(
                FetchRequest.ForgottenTopicsData(
                    topic_id=cast(uuid.UUID, f_tid), partitions=f_parts
                )
                if use_ids
                else FetchRequest.ForgottenTopicsData(topic=topic, partitions=f_parts)
            )
        return FetchRequest(
            replica_id=-1,
            max_wait_ms=self.max_wait_ms,
            min_bytes=self.min_bytes,
            max_bytes=self.max_bytes,
            isolation_level=self.isolation,
            session_id=session.session_id if not full else 0,
            session_epoch=session.epoch if not full else (0 if use_session else _FINAL_EPOCH),
            topics=t_list,
            forgotten_topics_data=f_list,
            rack_id=self.rack,
        )

    # --- responses ---

    def _handle_response(
        self,
        node: int,
        session: _Session,
        resp: FetchResponse,
        wanted: dict[TopicPartition, tuple[int, int]],
        send: dict[TopicPartition, tuple[int, int]],
        forgotten: list[TopicPartition],
        full: bool,
        use_ids: bool,
    ) -> None:
        if resp.error_code:
            if resp.error_code in (
                ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
                ErrorCode.INVALID_FETCH_SESSION_EPOCH,
            ):
                self.session_errors += 1
                session.reset()
                failures = self._session_failures[node] = self._session_failures.get(node, 0) + 1
                if failures >= 3:
                    # A broker that refuses the session it just granted, again and again,
                    # costs a wasted round trip per fetch: stop asking it for sessions.
                    log.warning("node %s keeps refusing fetch sessions: fetching without", node)
                    self.sessionless.add(node)
            else:
                log.debug("fetch from node %s failed: error %s", node, resp.error_code)
                session.reset()
                self.client.request_update()
            return
        # session bookkeeping
        if not full:
            self._session_failures.pop(node, None)
        if full:
            session.session_id = resp.session_id
            session.partitions = dict(wanted)
            session.epoch = 1 if resp.session_id else 0
        else:
            for tp in forgotten:
                session.partitions.pop(tp, None)
            session.partitions.update(send)
            session.epoch = 1 if session.epoch >= _INT32_MAX else session.epoch + 1
        cluster = self.client.cluster
        endpoints = resp.node_endpoints
        got_data = False
        for t in resp.responses:
            topic = cluster.topic_names.get(t.topic_id) if use_ids else t.topic
            if topic is None:
                continue
            for p in t.partitions:
                tp = TopicPartition(topic, p.partition_index)
                st = self.subs.assignment.get(tp)
                if st is None:
                    continue
                requested = wanted.get(tp)
                if (
                    requested is None
                    or st.position is None
                    or self.fetch_offset(tp, st.position) != requested[0]
                ):
                    session.partitions.pop(tp, None)  # stale: make the next request name it
                    continue
                code = p.error_code
                if code == 0:
                    st.high_watermark = p.high_watermark
                    st.last_stable_offset = p.last_stable_offset
                    st.log_start_offset = p.log_start_offset
                    data = p.records
                    if data is not None and len(data):
                        cf = CompletedFetch(
                            tp, data, requested[0], list(p.aborted_transactions or ()), requested[1]
                        )
                        cf.next_offset = max(end_offset(data), requested[0])
                        if cf.next_offset > requested[0]:
                            self.completed.append(cf)
                            got_data = True
                    continue
                session.partitions.pop(tp, None)
                if code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    if self.subs.default_reset == "none":
                        self.errors.append(
                            OffsetOutOfRangeError(f"{tp} offset {st.position} is out of range")
                        )
                        got_data = True
                    else:
                        st.reset = self.subs.default_reset
                elif code in STALE_METADATA or code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
                    cl = p.current_leader
                    if cl.leader_id < 0 or not cluster.update_leader(
                        topic, tp.partition, cl.leader_id, cl.leader_epoch, endpoints
                    ):
                        self.client.request_update()
                elif code in (ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.CORRUPT_MESSAGE):
                    self.errors.append(error_for_code(code)(f"{tp}"))
                    got_data = True
                else:
                    self.client.request_update()
        if got_data:
            self._notify_data()

    # --- taking records ---

    def take(self, max_records: int) -> list[ConsumerRecord]:
        """Up to ``max_records`` decoded records, advancing positions."""
        if self.errors:
            raise self.errors.popleft()
        out: list[ConsumerRecord] = []
        completed = self.completed
        while completed and len(out) < max_records:
            cf = completed[0]
            st = self.subs.assignment.get(cf.tp)
            if st is None or st.paused or st.reset is not None or st.position is None:
                completed.popleft()
                continue
            if cf.records is None:
                if (
                    st.position != cf.fetch_offset
                    and not cf.fetch_offset < st.position < cf.next_offset
                ):
                    completed.popleft()
                    continue
                cf.fetch_offset = st.position
                gc_was_enabled = gc.isenabled()
                try:
                    # Thousands of small tuples in one go: a collection pass every 700 of them
                    # would cost more than the decoding; nothing here can form a cycle.
                    gc.disable()
                    cf.records, cf.next_offset = self._decode(cf)
                except ProtocolError as e:
                    completed.popleft()
                    raise KafkaError(
                        f"{cf.tp}: corrupt record data at offset {cf.fetch_offset}: {e}"
                    ) from None
                finally:
                    if gc_was_enabled:
                        gc.enable()
                cf.data = b""  # decoded: let the response buffer go
            recs = cf.records
            n = max_records - len(out)
            chunk = recs[cf.index : cf.index + n]
            cf.index += len(chunk)
            out.extend(chunk)
            if chunk:
                st.position = chunk[-1].offset + 1
                st.leader_epoch = chunk[-1].leader_epoch
            if cf.index >= len(recs):
                completed.popleft()
                if cf.next_offset > st.position:
                    st.position = cf.next_offset
        if not completed or len(out) < max_records:
            self.wakeup()
        elif out:
            self.wakeup()
        return out

    def _decode(self, cf: CompletedFetch) -> tuple[list[ConsumerRecord], int]:
        abort_filter = None
        if self.isolation == READ_COMMITTED:
            abort_filter = AbortFilter()
            abort_filter.start(cf.data, ((a.producer_id, a.first_offset) for a in cf.aborted))
        return consumer_records_from(
            cf.data,
            start=cf.fetch_offset,
            topic=cf.tp.topic,
            partition=cf.tp.partition,
            record_type=ConsumerRecord,
            abort_filter=abort_filter,
            verify_crc=self.check_crcs,
        )

    def drop(self, tps: Iterable[TopicPartition]) -> None:
        s = set(tps)
        self.completed = deque(cf for cf in self.completed if cf.tp not in s)
        for session in self.sessions.values():
            for tp in s:
                session.partitions.pop(tp, None)
