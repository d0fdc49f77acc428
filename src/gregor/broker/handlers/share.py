"""Share groups (KIP-932): ShareGroupHeartbeat and ShareGroupDescribe (v0-1) on the group
coordinator, ShareFetch and ShareAcknowledge (v0-1) on the partition leaders. The share
coordinator's state APIs (Initialize/Read/Write/Delete/ReadSummary ShareGroupState, v0) are
:mod:`gregor.broker.handlers.share_state`, the admin APIs of share groups' offsets
:mod:`gregor.broker.handlers.share_group_offsets`.

All of them answer UNSUPPORTED_VERSION while the finalized ``share.version`` is 0, as Kafka's
do. Authorization is Kafka's: the group APIs need READ (heartbeat, fetch, acknowledge) or
DESCRIBE (describe) on the group, and a subscription or fetch READ/DESCRIBE on each topic.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Protocol

from gregor.broker.access.authorized_ops import authorized_operations
from gregor.broker.controller import features
from gregor.broker.coordination.share_partitions import AckBatch, TopicPartition
from gregor.broker.handlers.authz import (
    AclOperation,
    ResourceType,
    allowed,
    allowed_names,
    ops_authorizer,
)
from gregor.broker.handlers.registry import handles
from gregor.broker.state import RequestContext
from gregor.protocol.errors import ErrorCode
from gregor.protocol.messages.share_acknowledge import (
    ShareAcknowledgeRequest,
    ShareAcknowledgeResponse,
)
from gregor.protocol.messages.share_fetch import ShareFetchRequest, ShareFetchResponse
from gregor.protocol.messages.share_group_describe import (
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponse,
)
from gregor.protocol.messages.share_group_heartbeat import (
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
)

_OFF = "share groups are off: the finalized share.version is 0"
DEFAULT_MAX_RECORDS = 500


def share_groups_on(ctx: RequestContext) -> bool:
    return features.level(ctx.broker.image.features, features.SHARE_VERSION) >= 1


# --- the group coordinator's side ---


@handles(ShareGroupHeartbeatRequest)
async def handle_share_group_heartbeat(
    ctx: RequestContext, req: ShareGroupHeartbeatRequest
) -> ShareGroupHeartbeatResponse:
    def answer(error: int, message: str | None = None) -> ShareGroupHeartbeatResponse:
        return ShareGroupHeartbeatResponse(
            error_code=error,
            error_message=message,
            member_id=req.member_id or None,
            member_epoch=-1,
            heartbeat_interval_ms=0,
        )

    if not share_groups_on(ctx):
        return answer(ErrorCode.UNSUPPORTED_VERSION, _OFF)
    if not allowed(ctx, AclOperation.READ, ResourceType.GROUP, req.group_id):
        return answer(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    names = req.subscribed_topic_names or []
    if len(allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names)) < len(set(names)):
        return answer(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    error = await ctx.broker.groups.coordinator_error(req.group_id)
    if error:
        return answer(error)
    if req.group_id in ctx.broker.groups.coordinator.groups:
        return answer(ErrorCode.GROUP_ID_NOT_FOUND, f"group {req.group_id} is not a share group")
    shares = ctx.broker.shares
    result = shares.heartbeat(
        req.group_id,
        req.member_id,
        req.member_epoch,
        req.rack_id,
        req.subscribed_topic_names,
        ctx.client_id or "",
        ctx.client_host,
        ctx.version,
    )
    assignment = None
    if result.assignment is not None:
        A = ShareGroupHeartbeatResponse.Assignment
        assignment = A(
            topic_partitions=[
                A.TopicPartitions(topic_id=tid, partitions=sorted(ps))
                for tid, ps in sorted(result.assignment.items(), key=lambda kv: str(kv[0]))
            ]
        )
    return ShareGroupHeartbeatResponse(
        error_code=result.error,
        error_message=result.message,
        member_id=result.member_id,
        member_epoch=result.member_epoch,
        heartbeat_interval_ms=shares.groups.heartbeat_interval_ms if not result.error else 0,
        assignment=assignment,
    )


@handles(ShareGroupDescribeRequest)
async def handle_share_group_describe(
    ctx: RequestContext, req: ShareGroupDescribeRequest
) -> ShareGroupDescribeResponse:
    G = ShareGroupDescribeResponse.Groups
    M = G.Members

    def failed(
        gid: str, error: int, message: str | None = None
    ) -> ShareGroupDescribeResponse.Groups:
        return G(
            error_code=error,
            error_message=message,
            group_id=gid,
            group_state="",
            group_epoch=0,
            assignment_epoch=0,
            assignor_name="",
            members=[],
        )

    out = []
    image = ctx.broker.image
    for gid in req.group_ids:
        if not share_groups_on(ctx):
            out.append(failed(gid, ErrorCode.UNSUPPORTED_VERSION, _OFF))
            continue
        if not allowed(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, gid):
            out.append(failed(gid, ErrorCode.GROUP_AUTHORIZATION_FAILED))
            continue
        error = await ctx.broker.groups.coordinator_error(gid)
        if error:
            out.append(failed(gid, error))
            continue
        group = ctx.broker.shares.groups.groups.get(gid)
        if group is None:
            out.append(failed(gid, ErrorCode.GROUP_ID_NOT_FOUND, f"share group {gid} not found"))
            continue
        members = []
        for m in sorted(group.members.values(), key=lambda m: m.member_id):
            tps = []
            for tid, ps in sorted(m.assignment.items(), key=lambda kv: str(kv[0])):
                t = image.topic_by_id(tid)
                tps.append(
                    M.Assignment.TopicPartitions(
                        topic_id=tid, topic_name=t.name if t else "", partitions=sorted(ps)
                    )
                )
            members.append(
                M(
                    member_id=m.member_id,
                    rack_id=m.rack_id,
                    member_epoch=m.member_epoch,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    subscribed_topic_names=list(m.subscribed),
                    assignment=M.Assignment(topic_partitions=tps),
                )
            )
        ops = -2147483648
        if req.include_authorized_operations:
            ops = authorized_operations(ResourceType.GROUP, gid, ops_authorizer(ctx))
        out.append(
            G(
                error_code=0,
                error_message=None,
                group_id=gid,
                group_state=group.state,
                group_epoch=group.group_epoch,
                assignment_epoch=group.assignment_epoch,
                assignor_name="simple",
                members=members,
                authorized_operations=ops,
            )
        )
    return ShareGroupDescribeResponse(groups=out)


# --- the partition leaders' side ---


def _resolve(ctx: RequestContext, topic_id: uuid.UUID) -> str | None:
    t = ctx.broker.image.topic_by_id(topic_id)
    return None if t is None else t.name


class _AckBatch(Protocol):
    """ShareFetch's and ShareAcknowledge's AcknowledgementBatches."""

    @property
    def first_offset(self) -> int: ...

    @property
    def last_offset(self) -> int: ...

    @property
    def acknowledge_types(self) -> list[int]: ...


def _acks(batches: Sequence[_AckBatch]) -> list[AckBatch]:
    return [(b.first_offset, b.last_offset, list(b.acknowledge_types)) for b in batches]


@handles(ShareFetchRequest)
async def handle_share_fetch(ctx: RequestContext, req: ShareFetchRequest) -> ShareFetchResponse:
    R = ShareFetchResponse.Responses
    P = R.Partitions
    lock_ms = ctx.broker.shares.partitions.group_settings(req.group_id or "")[0]

    def top(error: int, message: str | None = None) -> ShareFetchResponse:
        return ShareFetchResponse(
            error_code=error, error_message=message, acquisition_lock_timeout_ms=lock_ms
        )

    if not share_groups_on(ctx):
        return top(ErrorCode.UNSUPPORTED_VERSION, _OFF)
    group, member = req.group_id or "", req.member_id or ""
    if not group or not member:
        return top(ErrorCode.INVALID_REQUEST, "group id and member id must be set")
    if not allowed(ctx, AclOperation.READ, ResourceType.GROUP, group):
        return top(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    partitions = ctx.broker.shares.partitions
    ctx.broker.shares.touch()
    errors: dict[TopicPartition, int] = {}
    ids: dict[str, uuid.UUID] = {}
    asked: list[TopicPartition] = []
    acks: dict[TopicPartition, list[AckBatch]] = {}
    unknown: list[tuple[uuid.UUID, int]] = []
    for t in req.topics:
        name = _resolve(ctx, t.topic_id)
        if name is None:
            unknown.extend((t.topic_id, p.partition_index) for p in t.partitions)
            continue
        ids[name] = t.topic_id
        for p in t.partitions:
            asked.append((name, p.partition_index))
            if p.acknowledgement_batches:
                acks[(name, p.partition_index)] = _acks(p.acknowledgement_batches)
    denied = {n for n, _ in asked} - allowed_names(
        ctx, AclOperation.READ, ResourceType.TOPIC, {n for n, _ in asked}
    )
    for tp in asked:
        if tp[0] in denied:
            errors[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            acks.pop(tp, None)
    forget = [
        (n, i)
        for t in req.forgotten_topics_data
        if (n := _resolve(ctx, t.topic_id))
        for i in t.partitions
    ]
    error, session = partitions.session_update(
        group, member, req.share_session_epoch, asked, forget, ctx.conn.hung_up
    )
    if error:
        return top(error)
    assert session is not None
    if req.share_session_epoch == 0 and acks:
        return top(ErrorCode.INVALID_REQUEST, "a new share session carries no acknowledgements")
    if req.share_session_epoch == 0:
        await partitions.revalidate(group, session.partitions)
    ack_errors = await partitions.acknowledge(group, member, acks) if acks else {}
    fetched = {}
    if req.share_session_epoch == -1:
        partitions.close_session(group, member)
    elif req.max_bytes <= 0:
        pass  # max_bytes 0: acknowledgements only, no records (as Kafka answers it)
    else:
        session.partitions.difference_update(errors)  # a topic it may not read is not fetched
        max_records = (
            req.max_records if ctx.version >= 1 and req.max_records > 0 else DEFAULT_MAX_RECORDS
        )
        fetched = await partitions.fetch(
            group, member, session, max_records, req.max_bytes, req.max_wait_ms, ctx.conn.hung_up
        )
    by_topic: dict[str, list[ShareFetchResponse.Responses.Partitions]] = {}
    image = ctx.broker.image
    for tp in sorted(set(fetched) | set(errors) | set(ack_errors)):
        f = fetched.get(tp)
        error = errors.get(tp, f.error if f is not None else 0)
        acquired = f.acquired if f is not None else []
        if not (error or acquired or tp in ack_errors):
            continue
        pi = image.partition(*tp)
        leader = P.CurrentLeader(
            leader_id=pi.leader if pi else -1, leader_epoch=pi.leader_epoch if pi else -1
        )
        by_topic.setdefault(tp[0], []).append(
            P(
                partition_index=tp[1],
                error_code=error,
                acknowledge_error_code=ack_errors.get(tp, 0),
                current_leader=leader,
                records=f.records if f is not None and acquired and f.records else b"",
                acquired_records=[
                    P.AcquiredRecords(first_offset=a, last_offset=b, delivery_count=c)
                    for a, b, c in acquired
                ],
            )
        )
    responses = []
    for name, ps in by_topic.items():
        known = image.topic(name)
        topic_id = ids.get(name) or (known.topic_id if known is not None else None)
        if (
            topic_id is not None
        ):  # a session partition whose topic was deleted meanwhile is left out
            responses.append(R(topic_id=topic_id, partitions=ps))
    responses += [
        R(
            topic_id=tid,
            partitions=[
                P(
                    partition_index=i,
                    error_code=ErrorCode.UNKNOWN_TOPIC_ID,
                    records=b"",
                    current_leader=P.CurrentLeader(leader_id=-1, leader_epoch=-1),
                )
            ],
        )
        for tid, i in unknown
    ]
    return ShareFetchResponse(
        error_code=0, acquisition_lock_timeout_ms=lock_ms, responses=responses
    )


@handles(ShareAcknowledgeRequest)
async def handle_share_acknowledge(
    ctx: RequestContext, req: ShareAcknowledgeRequest
) -> ShareAcknowledgeResponse:
    R = ShareAcknowledgeResponse.Responses
    P = R.Partitions
    if not share_groups_on(ctx):
        return ShareAcknowledgeResponse(
            error_code=ErrorCode.UNSUPPORTED_VERSION, error_message=_OFF
        )
    group, member = req.group_id or "", req.member_id or ""
    if not group or not member:
        return ShareAcknowledgeResponse(
            error_code=ErrorCode.INVALID_REQUEST, error_message="group id and member id must be set"
        )
    if not allowed(ctx, AclOperation.READ, ResourceType.GROUP, group):
        return ShareAcknowledgeResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    partitions = ctx.broker.shares.partitions
    if req.share_session_epoch == 0:
        return ShareAcknowledgeResponse(error_code=ErrorCode.INVALID_SHARE_SESSION_EPOCH)
    error, _ = partitions.session_update(group, member, req.share_session_epoch, [], [])
    if error:
        return ShareAcknowledgeResponse(error_code=error)
    ids: dict[str, uuid.UUID] = {}
    acks: dict[TopicPartition, list[AckBatch]] = {}
    errors: dict[TopicPartition, int] = {}
    unknown: list[tuple[uuid.UUID, int]] = []
    for t in req.topics:
        name = _resolve(ctx, t.topic_id)
        if name is None:
            unknown.extend((t.topic_id, p.partition_index) for p in t.partitions)
            continue
        ids[name] = t.topic_id
        for p in t.partitions:
            acks[(name, p.partition_index)] = _acks(p.acknowledgement_batches)
    denied = {n for n, _ in acks} - allowed_names(
        ctx, AclOperation.READ, ResourceType.TOPIC, {n for n, _ in acks}
    )
    for tp in list(acks):
        if tp[0] in denied:
            errors[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            del acks[tp]
    errors.update(await partitions.acknowledge(group, member, acks))
    if req.share_session_epoch == -1:
        partitions.close_session(group, member)
    by_topic: dict[str, list[ShareAcknowledgeResponse.Responses.Partitions]] = {}
    image = ctx.broker.image
    for tp, code in sorted(errors.items()):
        pi = image.partition(*tp)
        by_topic.setdefault(tp[0], []).append(
            P(
                partition_index=tp[1],
                error_code=code,
                current_leader=P.CurrentLeader(
                    leader_id=pi.leader if pi else -1, leader_epoch=pi.leader_epoch if pi else -1
                ),
            )
        )
    responses = [R(topic_id=ids[n], partitions=ps) for n, ps in by_topic.items()]
    responses += [
        R(
            topic_id=tid,
            partitions=[
                P(
                    partition_index=i,
                    error_code=ErrorCode.UNKNOWN_TOPIC_ID,
                    current_leader=P.CurrentLeader(leader_id=-1, leader_epoch=-1),
                )
            ],
        )
        for tid, i in unknown
    ]
    return ShareAcknowledgeResponse(error_code=0, responses=responses)
