"""Fetch: long poll, byte limits, sessions, topic ids, isolation, down-conversion.

A fetch reads each partition from its fetch offset up to the high watermark (or the last
stable offset for READ_COMMITTED, with the aborted transactions in range), honours
``partition_max_bytes`` per partition and ``max_bytes`` overall (the first batch of the first
partition with data is returned whole even if larger: KIP-74), and if fewer than ``min_bytes``
are ready it waits up to ``max_wait_ms`` for an append to wake it. Versions 0-3 predate
RecordBatch v2, so their data is down-converted to magic 0 (v0-v1) or magic 1 (v2-v3).
"""

from __future__ import annotations

import asyncio
import struct
import time
import uuid
from typing import Any

from gregor.broker.fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    CachedPartition,
    FetchSession,
)
from gregor.broker.handlers.registry import handles
from gregor.protocol.errors import ErrorCode
from gregor.protocol.messages.fetch import FetchRequest, FetchResponse
from gregor.protocol.records.convert import downconvert
from gregor.storage.errors import StorageError

ZERO_UUID = uuid.UUID(int=0)
_I32 = struct.Struct(">i")
#: A cut-off read whose first batch is smaller than 1/MANY_BATCHES of it is sent as it is.
MANY_BATCHES = 8
READ_COMMITTED = 1

TopicResp = FetchResponse.Responses
PartResp = FetchResponse.Responses.Partitions
Aborted = FetchResponse.Responses.Partitions.AbortedTransactions


def _error_part(index: int, code: int) -> PartResp:
    return PartResp(
        partition_index=index, error_code=code, high_watermark=-1, last_stable_offset=-1,
        log_start_offset=-1, aborted_transactions=None, preferred_read_replica=-1, records=None,
    )


def _drop_partial_tail(records: bytes) -> bytes | memoryview:
    """A read cut off by the byte limit usually ends inside a batch, which the client can only
    discard (Kafka sends it anyway). When the batches are big, leave that tail out: it can be
    nearly as large as the rest. Reads of many small batches are sent as they are (judged by
    the first batch: the tail is then small, and walking the batches would cost more than
    sending it), and so is a read that is all tail, so an old client can still see that a
    batch is larger than its limit."""
    n = len(records)
    if n < 12:
        return records
    unpack = _I32.unpack_from
    first = 12 + unpack(records, 8)[0]  # base offset (8), length (4), then the batch
    if first * MANY_BATCHES < n:
        return records
    pos = 0
    for _ in range(4 * MANY_BATCHES):
        if pos + 12 > n:
            break
        end = pos + 12 + unpack(records, pos + 8)[0]
        if end > n or end <= pos:
            break
        pos = end
    else:
        return records
    return memoryview(records)[:pos] if 0 < pos < n else records


class _Wanted:
    """One partition of this fetch: where to read and what came back."""

    __slots__ = ("cp", "error", "resp", "size")

    def __init__(self, cp: CachedPartition, error: int = 0) -> None:
        self.cp = cp
        self.error = error
        self.resp: PartResp | None = None
        self.size = 0


def _read_all(broker: Any, wanted: list[_Wanted], max_bytes: int, isolation: int, version: int, is_follower: bool) -> int:
    total = 0
    first_with_data = True
    for w in wanted:
        cp = w.cp
        if w.error:
            w.resp = _error_part(cp.partition, w.error)
            continue
        ts = broker.topic(cp.topic)
        plog = broker.get_log(cp.topic, cp.partition) if ts is not None else None
        if plog is None or ts is None or cp.partition >= len(ts.partitions):
            code = ErrorCode.UNKNOWN_TOPIC_ID if version >= 13 else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            w.resp = _error_part(cp.partition, code)
            continue
        epoch = ts.partitions[cp.partition].leader_epoch
        if cp.current_leader_epoch >= 0 and cp.current_leader_epoch != epoch:
            code = ErrorCode.FENCED_LEADER_EPOCH if cp.current_leader_epoch < epoch else ErrorCode.UNKNOWN_LEADER_EPOCH
            w.resp = _error_part(cp.partition, code)
            continue
        hw = plog.high_watermark
        lso = plog.last_stable_offset
        if is_follower:
            upper = plog.log_end_offset
        else:
            upper = lso if isolation == READ_COMMITTED else hw
        remaining = max_bytes - total
        limit = min(cp.partition_max_bytes, remaining)
        records: bytes | None = b""
        aborted = None
        try:
            if limit > 0 or first_with_data:
                info = plog.read(
                    cp.fetch_offset,
                    max(limit, 0),
                    max_offset=upper,
                    min_one_message=first_with_data,
                    include_aborted_txns=isolation == READ_COMMITTED and not is_follower,
                )
                if info.region is not None:
                    records = info.region.read()
                    if len(records) >= limit:
                        records = _drop_partial_tail(records)
                if info.aborted_transactions is not None:
                    aborted = [Aborted(producer_id=a.producer_id, first_offset=a.first_offset) for a in info.aborted_transactions]
            else:
                plog.read(cp.fetch_offset, 0, max_offset=upper, min_one_message=False)
        except StorageError as e:
            w.resp = _error_part(cp.partition, e.error_code)
            w.resp.high_watermark = hw
            w.resp.log_start_offset = plog.log_start_offset
            continue
        if records and version < 4:
            records = downconvert(records, 0 if version < 2 else 1, allow_partial_tail=True)
        n = len(records) if records else 0
        if n:
            first_with_data = False
            total += n
        w.size = n
        w.resp = PartResp(
            partition_index=cp.partition, error_code=0, high_watermark=hw,
            last_stable_offset=lso, log_start_offset=plog.log_start_offset,
            aborted_transactions=aborted if isolation == READ_COMMITTED else None,
            preferred_read_replica=-1, records=records,
        )
    return total


@handles(FetchRequest, 0, 17)
async def handle_fetch(ctx: Any, req: FetchRequest) -> FetchResponse:
    broker = ctx.broker
    version = ctx.version
    store = broker.metadata
    cache = broker.fetch_sessions
    replica_id = req.replica_id
    if version >= 15 and req.replica_state is not None:
        replica_id = req.replica_state.replica_id
    is_follower = replica_id is not None and replica_id >= 0

    def resolve(t: Any) -> tuple[str | None, uuid.UUID]:
        if version >= 13:
            ts = store.topics_by_id.get(t.topic_id)
            return (ts.name if ts else None), t.topic_id
        ts = store.topics.get(t.topic)
        return t.topic, (ts.topic_id if ts else ZERO_UUID)

    # --- session handling: decide the partition set of this fetch ---
    session: FetchSession | None = None
    incremental = False
    unresolved: dict[tuple[str | None, uuid.UUID, int], CachedPartition] = {}
    wanted_cps: list[CachedPartition] = []
    top_error = 0
    sid, sepoch = req.session_id, req.session_epoch
    if version < 7:
        sid, sepoch = 0, FINAL_EPOCH
    full = sepoch == INITIAL_EPOCH or sepoch == FINAL_EPOCH
    if full:
        # A full fetch naming a session closes it (a client resets its session this way,
        # e.g. kafka-python after a seek); epoch 0 then opens a new one, -1 stays sessionless.
        if sid != 0:
            cache.remove(sid)
    else:
        session = cache.get(sid) if sid != 0 else None
        if session is None:
            top_error = ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        elif session.epoch != sepoch:
            top_error = ErrorCode.INVALID_FETCH_SESSION_EPOCH
        else:
            incremental = True
    if top_error:
        return FetchResponse(throttle_time_ms=0, error_code=top_error, session_id=0, responses=[])

    def cached(name: str | None, tid: uuid.UUID, p: Any) -> CachedPartition:
        return CachedPartition(
            topic=name or "", partition=p.partition, topic_id=tid, fetch_offset=p.fetch_offset,
            partition_max_bytes=p.partition_max_bytes, current_leader_epoch=p.current_leader_epoch,
            log_start_offset=p.log_start_offset,
        )

    if incremental:
        assert session is not None
        for f in req.forgotten_topics_data or []:
            name, _tid = resolve(f)
            for pidx in f.partitions:
                session.partitions.pop((name or "", pidx), None)
        for t in req.topics:
            name, tid = resolve(t)
            for p in t.partitions:
                key = (name or "", p.partition)
                old = session.partitions.get(key)
                cp = cached(name, tid, p)
                if old is not None:
                    cp.high_watermark, cp.last_stable_offset, cp.sent_log_start_offset = (
                        old.high_watermark, old.last_stable_offset, old.sent_log_start_offset)
                if name is None:
                    unresolved[(name, tid, p.partition)] = cp
                else:
                    session.partitions[key] = cp
        wanted_cps = list(session.partitions.values()) + list(unresolved.values())
    else:
        for t in req.topics:
            name, tid = resolve(t)
            for p in t.partitions:
                cp = cached(name, tid, p)
                if name is None:
                    unresolved[(name, tid, p.partition)] = cp
                wanted_cps.append(cp)
        if sepoch == INITIAL_EPOCH and not is_follower:
            session = cache.create()
            if session is not None:
                for cp in wanted_cps:
                    if cp.topic:
                        session.partitions[(cp.topic, cp.partition)] = cp

    unresolved_ids = {id(cp) for cp in unresolved.values()}
    wanted = [_Wanted(cp, ErrorCode.UNKNOWN_TOPIC_ID if id(cp) in unresolved_ids else 0) for cp in wanted_cps]
    isolation = req.isolation_level if version >= 4 else 0
    max_bytes = req.max_bytes if version >= 3 else 2**31 - 1
    keys = [(w.cp.topic, w.cp.partition) for w in wanted if not w.error]

    deadline = time.monotonic() + max(req.max_wait_ms, 0) / 1000.0
    while True:
        total = _read_all(broker, wanted, max_bytes, isolation, version, is_follower)
        remaining = deadline - time.monotonic()
        if total >= req.min_bytes or remaining <= 0 or not keys or broker.stopping or any(
            w.resp is not None and w.resp.error_code for w in wanted
        ):
            break
        fut = broker.watchers.watch(keys)
        try:
            await asyncio.wait_for(asyncio.shield(fut), remaining)
        except TimeoutError:
            pass
        finally:
            broker.watchers.unwatch(keys, fut)

    # --- build the response; incremental sessions list only partitions with news ---
    by_topic: dict[tuple[str, uuid.UUID], list[PartResp]] = {}
    for w in wanted:
        r = w.resp
        assert r is not None
        cp = w.cp
        if incremental and not r.error_code and not w.size:
            if (r.high_watermark, r.last_stable_offset, r.log_start_offset) == (
                cp.high_watermark, cp.last_stable_offset, cp.sent_log_start_offset
            ):
                continue
        if not r.error_code:
            cp.high_watermark, cp.last_stable_offset, cp.sent_log_start_offset = (
                r.high_watermark, r.last_stable_offset, r.log_start_offset)
        by_topic.setdefault((cp.topic, cp.topic_id), []).append(r)
    responses = [
        TopicResp(topic=name, topic_id=tid, partitions=parts) for (name, tid), parts in by_topic.items()
    ]
    if incremental:
        assert session is not None
        session.next_epoch()  # a new session already expects epoch 1 from its first use
    return FetchResponse(
        throttle_time_ms=0, error_code=0, session_id=session.session_id if session else 0,
        responses=responses,
    )
