"""Fetch: sessions, topic ids, isolation, down-conversion; the long poll is the replica
manager's.

The handler decides which partitions this fetch covers (KIP-227 fetch sessions: a full fetch
names them all and may open a session; an incremental one names the changes and forgotten
partitions), resolves topic ids, asks ``ReplicaManager.fetch`` to read them (up to the high
watermark, or the last stable offset for READ_COMMITTED with the aborted transactions in
range; ``partition_max_bytes`` per partition and ``max_bytes`` overall, the first batch
whole even if larger: KIP-74; waiting up to ``max_wait_ms`` for ``min_bytes``), and builds
the response, which for an incremental session lists only partitions with news. Versions 0-3
predate RecordBatch v2, so their data is down-converted to magic 0 (v0-v1) or magic 1 (v2-v3).
A consumer over its consumer_byte_rate quota gets, as from Kafka, an answer with no data and
the throttle time (``_throttled_response``); followers are never throttled.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from gregor.broker.handlers.authz import AclOperation, ResourceType, allowed_names, cluster_allowed
from gregor.broker.handlers.leader_hints import LeaderHints
from gregor.broker.handlers.registry import handles
from gregor.broker.replication.fetch_params import FetchParams, FetchPartition
from gregor.broker.replication.fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    CachedPartition,
    FetchSession,
)
from gregor.broker.state import RequestContext
from gregor.protocol.errors import ErrorCode
from gregor.protocol.messages.fetch import FetchRequest, FetchResponse
from gregor.protocol.records.convert import downconvert
from gregor.security.quotas import CONSUMER_BYTE_RATE

ZERO_UUID = uuid.UUID(int=0)
READ_COMMITTED = 1

TopicResp = FetchResponse.Responses
PartResp = FetchResponse.Responses.Partitions
Aborted = FetchResponse.Responses.Partitions.AbortedTransactions


def _error_part(index: int, code: int) -> PartResp:
    return PartResp(
        partition_index=index,
        error_code=code,
        high_watermark=-1,
        last_stable_offset=-1,
        log_start_offset=-1,
        aborted_transactions=None,
        preferred_read_replica=-1,
        records=b"",
    )


class FetchPlan:
    """The partitions one fetch covers, after KIP-227 session handling."""

    __slots__ = ("session", "incremental", "partitions", "unresolved", "error")

    def __init__(self) -> None:
        self.session: FetchSession | None = None
        self.incremental = False
        self.partitions: list[CachedPartition] = []
        self.unresolved: set[int] = set()  # id() of partitions whose topic id is unknown
        self.error = ErrorCode.NONE


def plan_fetch(ctx: RequestContext, req: FetchRequest) -> FetchPlan:
    """Decide this fetch's partitions: a full fetch names them all (and with epoch 0 opens a
    session), an incremental one applies its changes and forgotten partitions to the
    session's set."""
    version = ctx.version
    image = ctx.broker.image
    cache = ctx.broker.fetch_sessions
    plan = FetchPlan()

    def resolve(topic: str, topic_id: uuid.UUID) -> tuple[str | None, uuid.UUID]:
        if version >= 13:
            found = image.topic_by_id(topic_id)
            return (found.name if found else None), topic_id
        found = image.topic(topic)
        return topic, (found.topic_id if found else ZERO_UUID)

    def cached(
        name: str | None, tid: uuid.UUID, p: FetchRequest.Topics.Partitions
    ) -> CachedPartition:
        cp = CachedPartition(
            topic=name or "",
            partition=p.partition,
            topic_id=tid,
            fetch_offset=p.fetch_offset,
            partition_max_bytes=p.partition_max_bytes,
            current_leader_epoch=p.current_leader_epoch,
            log_start_offset=p.log_start_offset,
        )
        if name is None:
            plan.unresolved.add(id(cp))
        return cp

    sid, sepoch = (req.session_id, req.session_epoch) if version >= 7 else (0, FINAL_EPOCH)
    if sepoch in (INITIAL_EPOCH, FINAL_EPOCH):
        # A full fetch naming a session closes it (a client resets its session this way,
        # e.g. kafka-python after a seek); epoch 0 then opens a new one, -1 stays sessionless.
        if sid != 0:
            cache.remove(sid)
        for t in req.topics:
            name, tid = resolve(t.topic, t.topic_id)
            plan.partitions.extend(cached(name, tid, p) for p in t.partitions)
        if sepoch == INITIAL_EPOCH:
            plan.session = cache.create()
            if plan.session is not None:
                for cp in plan.partitions:
                    if cp.topic:
                        plan.session.partitions[(cp.topic, cp.partition)] = cp
        return plan
    session = cache.get(sid) if sid != 0 else None
    if session is None:
        plan.error = ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        return plan
    if session.epoch != sepoch:
        plan.error = ErrorCode.INVALID_FETCH_SESSION_EPOCH
        return plan
    plan.session, plan.incremental = session, True
    for f in req.forgotten_topics_data or []:
        name, _ = resolve(f.topic, f.topic_id)
        for index in f.partitions:
            session.partitions.pop((name or "", index), None)
    unresolved: list[CachedPartition] = []
    for t in req.topics:
        name, tid = resolve(t.topic, t.topic_id)
        for p in t.partitions:
            cp = cached(name, tid, p)
            old = session.partitions.get((cp.topic, cp.partition))
            if old is not None:
                cp.high_watermark, cp.last_stable_offset, cp.sent_log_start_offset = (
                    old.high_watermark,
                    old.last_stable_offset,
                    old.sent_log_start_offset,
                )
            if name is None:
                unresolved.append(cp)
            else:
                session.partitions[(cp.topic, cp.partition)] = cp
    plan.partitions = list(session.partitions.values()) + unresolved
    return plan


def _convert_for(
    version: int,
) -> Callable[[bytes | memoryview, int, int], bytes | memoryview] | None:
    """Fetch v0-v3 read message format v0 (v0, v1) or v1 (v2, v3): the records from the fetch
    offset, about ``limit`` bytes of them (the replica manager runs this in a worker thread)."""
    if version >= 4:
        return None
    magic = 0 if version < 2 else 1
    return lambda records, start, limit: downconvert(
        records, magic, allow_partial_tail=True, start_offset=start, max_bytes=limit
    )


@handles(FetchRequest, 0, 17)
async def handle_fetch(ctx: RequestContext, req: FetchRequest) -> FetchResponse:
    version = ctx.version
    replica_id = req.replica_id
    if version >= 15 and req.replica_state is not None:
        replica_id = req.replica_state.replica_id
    is_follower = replica_id is not None and replica_id >= 0
    plan = plan_fetch(ctx, req)
    if plan.error:
        return FetchResponse(throttle_time_ms=0, error_code=plan.error, session_id=0, responses=[])
    # A follower needs CLUSTER_ACTION; a consumer READ on each topic (Kafka's checks).
    if is_follower:
        readable = (
            {cp.topic for cp in plan.partitions}
            if cluster_allowed(ctx, AclOperation.CLUSTER_ACTION)
            else set()
        )
    else:
        readable = allowed_names(
            ctx, AclOperation.READ, ResourceType.TOPIC, (cp.topic for cp in plan.partitions)
        )

    def preset(cp: CachedPartition) -> ErrorCode:
        if id(cp) in plan.unresolved:
            return ErrorCode.UNKNOWN_TOPIC_ID
        return ErrorCode.NONE if cp.topic in readable else ErrorCode.TOPIC_AUTHORIZATION_FAILED

    parts = [
        FetchPartition(
            cp.topic,
            cp.partition,
            cp.fetch_offset,
            cp.partition_max_bytes,
            cp.current_leader_epoch,
            preset_error=preset(cp),
        )
        for cp in plan.partitions
    ]
    isolation = req.isolation_level if version >= 4 else 0
    params = FetchParams(
        max_bytes=req.max_bytes if version >= 3 else 2**31 - 1,
        min_bytes=req.min_bytes,
        max_wait_ms=req.max_wait_ms,
        isolation=isolation,
        replica_id=replica_id if is_follower else -1,
        # A topic id this broker does not know is UNKNOWN_TOPIC_ID (preset above); a known
        # topic's partition that does not exist is UNKNOWN_TOPIC_OR_PARTITION at every version,
        # as Kafka answers it.
        unknown_error=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        convert=_convert_for(version),
        hung_up=ctx.conn.hung_up,
        sendfile=ctx.conn.sendfile,
        follower_read=version >= 11 and not is_follower,
        client_rack=(
            req.rack_id
            if version >= 11
            and not is_follower
            and req.rack_id
            and ctx.broker.config["replica.selector.class"]
            else None
        ),
    )
    await ctx.broker.replicas.fetch(parts, params)
    if (
        not is_follower and ctx.broker.quotas.active
    ):  # replication is never throttled by client quotas
        throttle = ctx.broker.quotas.throttle_ms(
            CONSUMER_BYTE_RATE,
            ctx.conn.principal,
            ctx.client_id,
            sum(part.size for part in parts if not part.error),
            count_if_throttled=False,
        )
        if throttle:
            return _throttled_response(ctx, plan, throttle)
    if not is_follower:  # Kafka's BrokerTopicMetrics count consumers' fetches, not followers'
        metrics, known = ctx.broker.metrics, ctx.broker.image.topics
        for part in parts:
            if part.topic not in known:  # no series for names that are not topics
                continue
            traffic = metrics.topic(part.topic)
            traffic.fetch_requests += 1
            if part.error:
                traffic.failed_fetch_requests += 1
            else:
                traffic.bytes_out += part.size

    # --- the response; incremental sessions list only partitions with news ---
    by_topic: dict[tuple[str, uuid.UUID], list[PartResp]] = {}
    hints = LeaderHints(ctx) if ctx.version >= 16 else None
    for cp, part in zip(plan.partitions, parts, strict=True):
        if part.error:
            r = _error_part(cp.partition, part.error)
            r.high_watermark, r.log_start_offset = part.high_watermark, part.log_start_offset
            leader = hints.leader(cp.topic, cp.partition, part.error) if hints is not None else None
            if leader is not None:
                r.current_leader = PartResp.CurrentLeader(
                    leader_id=leader[0], leader_epoch=leader[1]
                )
        else:
            if (
                plan.incremental
                and not part.size
                and (part.high_watermark, part.last_stable_offset, part.log_start_offset)
                == (cp.high_watermark, cp.last_stable_offset, cp.sent_log_start_offset)
            ):
                continue
            cp.high_watermark, cp.last_stable_offset, cp.sent_log_start_offset = (
                part.high_watermark,
                part.last_stable_offset,
                part.log_start_offset,
            )
            aborted = None
            if isolation == READ_COMMITTED and part.aborted_transactions is not None:
                aborted = [
                    Aborted(producer_id=a.producer_id, first_offset=a.first_offset)
                    for a in part.aborted_transactions
                ]
            r = PartResp(
                partition_index=cp.partition,
                error_code=0,
                high_watermark=part.high_watermark,
                last_stable_offset=part.last_stable_offset,
                log_start_offset=part.log_start_offset,
                aborted_transactions=aborted,
                preferred_read_replica=part.preferred_read_replica,
                # A SendableRegion (sendfile) goes through encode_parts as it is: the encoder
                # only takes its len() (protocol.primitives.write_records).
                records=part.records,  # type: ignore[arg-type]
            )
        by_topic.setdefault((cp.topic, cp.topic_id), []).append(r)
    responses = [
        TopicResp(topic=name, topic_id=tid, partitions=rs) for (name, tid), rs in by_topic.items()
    ]
    if plan.incremental:
        assert plan.session is not None
        plan.session.next_epoch()  # a new session already expects epoch 1 from its first use
    session_id = plan.session.session_id if plan.session is not None else 0
    node_endpoints = [
        FetchResponse.NodeEndpoints(node_id=n, host=h, port=port, rack=rack)
        for n, h, port, rack in (hints.endpoints() if hints is not None else [])
    ]
    return FetchResponse(
        throttle_time_ms=0,
        error_code=0,
        session_id=session_id,
        responses=responses,
        node_endpoints=node_endpoints,
    )


def _throttled_response(ctx: RequestContext, plan: FetchPlan, throttle_ms: int) -> FetchResponse:
    """Kafka's answer to a consumer over its consumer_byte_rate: no data (what was read is not
    counted and is read again next time), the throttle time, and the session left as it was:
    an incremental session moves to its next epoch with its partitions' state untouched; a
    session this full fetch opened is closed again (the client's next fetch is full)."""
    if plan.incremental:
        assert plan.session is not None
        plan.session.next_epoch()
        session_id = plan.session.session_id
    else:
        if plan.session is not None:
            ctx.broker.fetch_sessions.remove(plan.session.session_id)
        session_id = 0
    return FetchResponse(
        throttle_time_ms=throttle_ms,
        error_code=0,
        session_id=session_id,
        responses=[],
        node_endpoints=[],
    )
