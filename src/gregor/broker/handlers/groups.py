"""Group APIs: FindCoordinator and everything the group coordinator answers.

The handlers are thin: they pass the decoded request, its version and the client's identity
to ``broker.groups`` (a ``GroupService``), which runs the coordinator state machine and
returns its (possibly delayed) response. FindCoordinator is answered here with this broker's
endpoint on the listener the request came in on: a group's coordinator is "not yet
available" (COORDINATOR_LOAD_IN_PROGRESS) while its ``__consumer_offsets`` partition is being
loaded, and COORDINATOR_NOT_AVAILABLE while this broker leads it in its image but does not serve
it (not loaded yet, or its metadata session is not confirmed: ``etcd_store``).

Authorization (``gregor.broker.handlers.authz``) happens here, before the coordinator sees a request,
with Kafka's operations: READ on the group to join, sync, heartbeat, leave and commit (plus
READ on each committed topic), DESCRIBE to fetch offsets, describe and find the coordinator,
DELETE to delete a group or its offsets; ListGroups lists the groups the principal may
describe (all of them with DESCRIBE on the cluster). A refused group gets
GROUP_AUTHORIZATION_FAILED, a refused topic TOPIC_AUTHORIZATION_FAILED, and no data.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from gregor.broker.controller import features
from gregor.broker.handlers.authz import (
    AclOperation,
    ResourceType,
    allowed,
    allowed_names,
    cluster_allowed,
)
from gregor.broker.handlers.registry import handles
from gregor.broker.state import RequestContext
from gregor.protocol.errors import ErrorCode
from gregor.protocol.messages.consumer_group_describe import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
)
from gregor.protocol.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from gregor.protocol.messages.delete_groups import DeleteGroupsRequest, DeleteGroupsResponse
from gregor.protocol.messages.describe_groups import DescribeGroupsRequest, DescribeGroupsResponse
from gregor.protocol.messages.find_coordinator import (
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)
from gregor.protocol.messages.heartbeat import HeartbeatRequest, HeartbeatResponse
from gregor.protocol.messages.join_group import JoinGroupRequest, JoinGroupResponse
from gregor.protocol.messages.leave_group import LeaveGroupRequest, LeaveGroupResponse
from gregor.protocol.messages.list_groups import ListGroupsRequest, ListGroupsResponse
from gregor.protocol.messages.offset_commit import OffsetCommitRequest, OffsetCommitResponse
from gregor.protocol.messages.offset_delete import OffsetDeleteRequest, OffsetDeleteResponse
from gregor.protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchResponse
from gregor.protocol.messages.sync_group import SyncGroupRequest, SyncGroupResponse

if TYPE_CHECKING:
    from gregor.broker.coordination.group_service import GroupService
    from gregor.broker.coordination.txn_service import TxnService

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1


GROUP_DENIED = ErrorCode.GROUP_AUTHORIZATION_FAILED
TOPIC_DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED


def _group_allowed(ctx: RequestContext, operation: AclOperation, group_id: str | None) -> bool:
    return allowed(ctx, operation, ResourceType.GROUP, group_id or "")


async def _coordinator(ctx: RequestContext, key: str, key_type: int) -> tuple[int, str | None, int]:
    """(error, message, coordinator node) for one key: the leader of the key's partition of
    the internal topic, which is created on first use; this broker answers its own load
    state when it is that leader."""
    if key_type == GROUP_KEY_TYPE and not _group_allowed(ctx, AclOperation.DESCRIBE, key):
        return GROUP_DENIED, None, -1
    if key_type == TRANSACTION_KEY_TYPE and not allowed(
        ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key
    ):
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None, -1
    service: GroupService | TxnService
    if key_type == GROUP_KEY_TYPE:
        service = ctx.broker.groups
    elif key_type == TRANSACTION_KEY_TYPE:
        service = ctx.broker.transactions
    else:
        return ErrorCode.INVALID_REQUEST, f"unsupported coordinator key type {key_type}", -1
    code = await service.coordinator_error(key)  # creates the internal topic if needed
    node = service.coordinator_node(key, ctx.broker.image)
    if node == ctx.broker.node_id:
        if code == ErrorCode.NOT_COORDINATOR:
            # Led here in this broker's image but not served: not loaded yet, or the broker
            # cannot confirm its metadata session (its image may be stale). FindCoordinator's
            # retriable answer: the client asks again, perhaps another broker.
            code = ErrorCode.COORDINATOR_NOT_AVAILABLE
        return code, (None if not code else code.name), node
    if node < 0:
        code = ErrorCode.COORDINATOR_NOT_AVAILABLE
        return code, code.name, -1
    return ErrorCode.NONE, None, node


@handles(FindCoordinatorRequest)
async def handle_find_coordinator(
    ctx: RequestContext, req: FindCoordinatorRequest
) -> FindCoordinatorResponse:
    version = ctx.version
    key_type = req.key_type if version >= 1 else GROUP_KEY_TYPE
    addresses = {n: (e.host, e.port) for n, e, _ in ctx.broker.endpoints(ctx.conn.listener)}

    async def find(key: str) -> tuple[int, str | None, int, str, int]:
        code, message, node = await _coordinator(ctx, key, key_type)
        if not code and node not in addresses:
            code = ErrorCode.COORDINATOR_NOT_AVAILABLE
            message = f"broker {node} is not available on the {ctx.conn.listener} listener"
        if code:
            return code, message, -1, "", -1
        host, port = addresses[node]
        return code, message, node, host, port

    if version >= 4:
        out = []
        for key in req.coordinator_keys:
            code, message, node, host, port = await find(key)
            out.append(
                FindCoordinatorResponse.Coordinators(
                    key=key,
                    node_id=node,
                    host=host,
                    port=port,
                    error_code=code,
                    error_message=message,
                )
            )
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=out)
    code, message, node, host, port = await find(req.key)
    return FindCoordinatorResponse(
        throttle_time_ms=0,
        error_code=code,
        error_message=message,
        node_id=node,
        host=host,
        port=port,
    )


@handles(JoinGroupRequest)
async def handle_join_group(ctx: RequestContext, req: JoinGroupRequest) -> JoinGroupResponse:
    if not _group_allowed(ctx, AclOperation.READ, req.group_id):
        return JoinGroupResponse(
            error_code=GROUP_DENIED,
            generation_id=-1,
            protocol_type=None,
            protocol_name=None if ctx.version >= 7 else "",
            leader="",
            member_id=req.member_id or "",
            members=[],
        )
    return await ctx.broker.groups.join_group(req, ctx.version, ctx.client_id, ctx.client_host)


@handles(SyncGroupRequest)
async def handle_sync_group(ctx: RequestContext, req: SyncGroupRequest) -> SyncGroupResponse:
    if not _group_allowed(ctx, AclOperation.READ, req.group_id):
        return SyncGroupResponse(
            error_code=GROUP_DENIED, protocol_type=None, protocol_name=None, assignment=b""
        )
    return await ctx.broker.groups.sync_group(req, ctx.version)


@handles(HeartbeatRequest)
async def handle_heartbeat(ctx: RequestContext, req: HeartbeatRequest) -> HeartbeatResponse:
    if not _group_allowed(ctx, AclOperation.READ, req.group_id):
        return HeartbeatResponse(error_code=GROUP_DENIED)
    return await ctx.broker.groups.heartbeat(req, ctx.version)


@handles(LeaveGroupRequest)
async def handle_leave_group(ctx: RequestContext, req: LeaveGroupRequest) -> LeaveGroupResponse:
    if not _group_allowed(ctx, AclOperation.READ, req.group_id):
        return LeaveGroupResponse(error_code=GROUP_DENIED, members=[])
    return await ctx.broker.groups.leave_group(req, ctx.version)


def _commit_denied(
    topics: list[OffsetCommitRequest.Topics], code: int
) -> list[OffsetCommitResponse.Topics]:
    T = OffsetCommitResponse.Topics
    return [
        T(
            name=t.name,
            partitions=[
                T.Partitions(partition_index=p.partition_index, error_code=code)
                for p in t.partitions
            ],
        )
        for t in topics
    ]


@handles(OffsetCommitRequest)
async def handle_offset_commit(
    ctx: RequestContext, req: OffsetCommitRequest
) -> OffsetCommitResponse:
    if not _group_allowed(ctx, AclOperation.READ, req.group_id):
        return OffsetCommitResponse(topics=_commit_denied(req.topics, GROUP_DENIED))
    readable = allowed_names(
        ctx, AclOperation.READ, ResourceType.TOPIC, (t.name for t in req.topics)
    )
    refused = [t for t in req.topics if t.name not in readable]
    if not refused:
        return await ctx.broker.groups.offset_commit(req, ctx.version)
    req.topics = [t for t in req.topics if t.name in readable]
    response = (
        await ctx.broker.groups.offset_commit(req, ctx.version)
        if req.topics
        else OffsetCommitResponse(topics=[])
    )
    response.topics = response.topics + _commit_denied(refused, TOPIC_DENIED)
    return response


_Entry = TypeVar(
    "_Entry",
    DescribeGroupsResponse.Groups,
    DeleteGroupsResponse.Results,
    ConsumerGroupDescribeResponse.Groups,
)
_FetchedTopic = TypeVar(
    "_FetchedTopic", OffsetFetchResponse.Topics, OffsetFetchResponse.Groups.Topics
)


def _fetched_topics(
    ctx: RequestContext, topics: list[_FetchedTopic], asked: bool
) -> list[_FetchedTopic]:
    """Offsets of topics the principal may not describe: refused when asked for by name,
    left out when all were asked for."""
    described = allowed_names(
        ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, (t.name for t in topics)
    )
    out = []
    for t in topics:
        if t.name in described:
            out.append(t)
        elif asked:
            for p in t.partitions:
                p.committed_offset, p.committed_leader_epoch, p.metadata, p.error_code = (
                    -1,
                    -1,
                    "",
                    TOPIC_DENIED,
                )
            out.append(t)
    return out


@handles(OffsetFetchRequest)
async def handle_offset_fetch(ctx: RequestContext, req: OffsetFetchRequest) -> OffsetFetchResponse:
    if ctx.version >= 8:
        denied = [
            g.group_id
            for g in req.groups
            if not _group_allowed(ctx, AclOperation.DESCRIBE, g.group_id)
        ]
        asked = {g.group_id: g.topics is not None for g in req.groups}
        req.groups = [g for g in req.groups if g.group_id not in denied]
        response = (
            await ctx.broker.groups.offset_fetch(req, ctx.version)
            if req.groups
            else OffsetFetchResponse(groups=[])
        )
        for g in response.groups:
            g.topics = _fetched_topics(ctx, g.topics, asked.get(g.group_id, False))
        response.groups = response.groups + [
            OffsetFetchResponse.Groups(group_id=gid, topics=[], error_code=GROUP_DENIED)
            for gid in denied
        ]
        return response
    if not _group_allowed(ctx, AclOperation.DESCRIBE, req.group_id):
        T = OffsetFetchResponse.Topics
        topics = [
            T(
                name=t.name,
                partitions=[
                    T.Partitions(
                        partition_index=i,
                        committed_offset=-1,
                        committed_leader_epoch=-1,
                        metadata="",
                        error_code=GROUP_DENIED,
                    )
                    for i in t.partition_indexes
                ],
            )
            for t in (req.topics or [])
        ]
        return OffsetFetchResponse(
            topics=topics if ctx.version < 2 else [], error_code=GROUP_DENIED
        )
    response = await ctx.broker.groups.offset_fetch(req, ctx.version)
    response.topics = _fetched_topics(ctx, response.topics, req.topics is not None)
    return response


@handles(OffsetDeleteRequest)
async def handle_offset_delete(
    ctx: RequestContext, req: OffsetDeleteRequest
) -> OffsetDeleteResponse:
    if not _group_allowed(ctx, AclOperation.DELETE, req.group_id):
        return OffsetDeleteResponse(error_code=GROUP_DENIED, topics=[])
    readable = allowed_names(
        ctx, AclOperation.READ, ResourceType.TOPIC, (t.name for t in req.topics)
    )
    refused = [t for t in req.topics if t.name not in readable]
    req.topics = [t for t in req.topics if t.name in readable]
    response = await ctx.broker.groups.offset_delete(req, ctx.version)
    T = OffsetDeleteResponse.Topics
    response.topics = response.topics + [
        T(
            name=t.name,
            partitions=[
                T.Partitions(partition_index=p.partition_index, error_code=TOPIC_DENIED)
                for p in t.partitions
            ],
        )
        for t in refused
    ]
    return response


async def _per_group(
    ctx: RequestContext,
    operation: AclOperation,
    asked: list[str],
    served: Callable[[list[str]], Awaitable[list[_Entry]]],
    denied: Callable[[str], _Entry],
) -> list[_Entry]:
    """The entries of a per-group request, in the order asked: the coordinator answers for the
    groups the principal may ``operation``, the others are refused."""
    permitted = [g for g in asked if _group_allowed(ctx, operation, g)]
    found = {e.group_id: e for e in (await served(permitted) if permitted else [])}
    return [found.get(g) or denied(g) for g in asked]


@handles(DescribeGroupsRequest)
async def handle_describe_groups(
    ctx: RequestContext, req: DescribeGroupsRequest
) -> DescribeGroupsResponse:
    async def served(ids: list[str]) -> list[DescribeGroupsResponse.Groups]:
        req.groups = ids
        return (await ctx.broker.groups.describe_groups(req, ctx.version)).groups

    G = DescribeGroupsResponse.Groups
    return DescribeGroupsResponse(
        groups=await _per_group(
            ctx,
            AclOperation.DESCRIBE,
            list(req.groups),
            served,
            lambda g: G(
                error_code=GROUP_DENIED,
                group_id=g,
                group_state="",
                protocol_type="",
                protocol_data="",
                members=[],
            ),
        )
    )


@handles(ListGroupsRequest)
async def handle_list_groups(ctx: RequestContext, req: ListGroupsRequest) -> ListGroupsResponse:
    response = await ctx.broker.groups.list_groups(req, ctx.version)
    types = {t.lower() for t in req.types_filter} if ctx.version >= 5 else set()
    states = {s.lower() for s in req.states_filter} if ctx.version >= 4 else set()
    if not types or "share" in types:
        # Share groups (KIP-932) coordinated here, listed with type and protocol type "share".
        coordinator = ctx.broker.groups.coordinator
        for g in sorted(ctx.broker.shares.groups.listing(), key=lambda g: g.group_id):
            if coordinator.partition_error(g.group_id) or (
                states and g.state.lower() not in states
            ):
                continue  # a group this broker no longer coordinates is someone else's to list
            response.groups.append(
                ListGroupsResponse.Groups(
                    group_id=g.group_id,
                    protocol_type="share",
                    group_state=g.state,
                    group_type="share",
                )
            )
    if not cluster_allowed(ctx, AclOperation.DESCRIBE):
        response.groups = [
            g for g in response.groups if _group_allowed(ctx, AclOperation.DESCRIBE, g.group_id)
        ]
    return response


@handles(DeleteGroupsRequest)
async def handle_delete_groups(
    ctx: RequestContext, req: DeleteGroupsRequest
) -> DeleteGroupsResponse:
    async def served(ids: list[str]) -> list[DeleteGroupsResponse.Results]:
        req.groups_names = ids
        return (await ctx.broker.groups.delete_groups(req, ctx.version)).results

    R = DeleteGroupsResponse.Results
    return DeleteGroupsResponse(
        results=await _per_group(
            ctx,
            AclOperation.DELETE,
            list(req.groups_names),
            served,
            lambda g: R(group_id=g, error_code=GROUP_DENIED),
        )
    )


_PROTOCOL_OFF = "the consumer group protocol is off: the finalized group.version is 0"


def _consumer_protocol_on(ctx: RequestContext) -> bool:
    """KIP-848's protocol follows the finalized ``group.version`` (1 and up), as in Kafka."""
    return features.level(ctx.broker.image.features, features.GROUP_VERSION) >= 1


@handles(ConsumerGroupHeartbeatRequest)  # v0-1: v1 from tools/codegen/supplement.txt
async def handle_consumer_group_heartbeat(
    ctx: RequestContext, req: ConsumerGroupHeartbeatRequest
) -> ConsumerGroupHeartbeatResponse:
    if not _consumer_protocol_on(ctx):
        return ConsumerGroupHeartbeatResponse(
            error_code=ErrorCode.UNSUPPORTED_VERSION,
            error_message=_PROTOCOL_OFF,
            member_epoch=-1,
            heartbeat_interval_ms=0,
        )
    if not _group_allowed(ctx, AclOperation.READ, req.group_id):
        return ConsumerGroupHeartbeatResponse(
            error_code=GROUP_DENIED, member_epoch=-1, heartbeat_interval_ms=0
        )
    names = req.subscribed_topic_names or []
    if len(allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names)) < len(set(names)):
        # Kafka refuses a subscription naming a topic the member may not describe.
        return ConsumerGroupHeartbeatResponse(
            error_code=TOPIC_DENIED, member_epoch=-1, heartbeat_interval_ms=0
        )
    return await ctx.broker.groups.consumer_group_heartbeat(
        req, ctx.version, ctx.client_id, ctx.client_host
    )


@handles(ConsumerGroupDescribeRequest)
async def handle_consumer_group_describe(
    ctx: RequestContext, req: ConsumerGroupDescribeRequest
) -> ConsumerGroupDescribeResponse:
    async def served(ids: list[str]) -> list[ConsumerGroupDescribeResponse.Groups]:
        req.group_ids = ids
        return (await ctx.broker.groups.consumer_group_describe(req, ctx.version)).groups

    G = ConsumerGroupDescribeResponse.Groups
    if not _consumer_protocol_on(ctx):
        return ConsumerGroupDescribeResponse(
            groups=[
                G(
                    error_code=ErrorCode.UNSUPPORTED_VERSION,
                    error_message=_PROTOCOL_OFF,
                    group_id=g,
                    group_state="",
                    group_epoch=0,
                    assignment_epoch=0,
                    assignor_name="",
                    members=[],
                )
                for g in req.group_ids
            ]
        )
    return ConsumerGroupDescribeResponse(
        groups=await _per_group(
            ctx,
            AclOperation.DESCRIBE,
            list(req.group_ids),
            served,
            lambda g: G(
                error_code=GROUP_DENIED,
                error_message=None,
                group_id=g,
                group_state="",
                group_epoch=0,
                assignment_epoch=0,
                assignor_name="",
                members=[],
            ),
        )
    )
