"""Group APIs: FindCoordinator and everything the group coordinator answers.

The handlers are thin: they pass the decoded request, its version and the client's identity
to ``broker.groups`` (a ``GroupService``), which runs the coordinator state machine and
returns its (possibly delayed) response. FindCoordinator is answered here with this broker's
endpoint on the listener the request came in on: a group's coordinator is "not yet
available" (COORDINATOR_LOAD_IN_PROGRESS) while its ``__consumer_offsets`` partition is being
loaded.
"""

from __future__ import annotations

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

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1


async def _coordinator_error(ctx: RequestContext, key: str, key_type: int) -> tuple[int, str | None]:
    if key_type == GROUP_KEY_TYPE:
        code = await ctx.broker.groups.coordinator_error(key)
    elif key_type == TRANSACTION_KEY_TYPE:
        code = await ctx.broker.transactions.coordinator_error(key)
    else:
        return ErrorCode.INVALID_REQUEST, f"unsupported coordinator key type {key_type}"
    return code, (None if not code else code.name)


@handles(FindCoordinatorRequest)
async def handle_find_coordinator(ctx: RequestContext, req: FindCoordinatorRequest) -> FindCoordinatorResponse:
    version = ctx.version
    key_type = req.key_type if version >= 1 else GROUP_KEY_TYPE
    node = ctx.broker.node_id
    mine = [e for n, e, _ in ctx.broker.endpoints(ctx.conn.listener) if n == node]
    host, port = (mine[0].host, mine[0].port) if mine else ("", -1)
    if version >= 4:
        out = []
        for key in req.coordinator_keys:
            code, message = await _coordinator_error(ctx, key, key_type)
            out.append(FindCoordinatorResponse.Coordinators(
                key=key,
                node_id=-1 if code else node,
                host="" if code else host,
                port=-1 if code else port,
                error_code=code,
                error_message=message,
            ))
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=out)
    code, message = await _coordinator_error(ctx, req.key, key_type)
    return FindCoordinatorResponse(
        throttle_time_ms=0,
        error_code=code,
        error_message=message,
        node_id=-1 if code else node,
        host="" if code else host,
        port=-1 if code else port,
    )


@handles(JoinGroupRequest)
async def handle_join_group(ctx: RequestContext, req: JoinGroupRequest) -> JoinGroupResponse:
    return await ctx.broker.groups.join_group(req, ctx.version, ctx.client_id, ctx.client_host)


@handles(SyncGroupRequest)
async def handle_sync_group(ctx: RequestContext, req: SyncGroupRequest) -> SyncGroupResponse:
    return await ctx.broker.groups.sync_group(req, ctx.version)


@handles(HeartbeatRequest)
async def handle_heartbeat(ctx: RequestContext, req: HeartbeatRequest) -> HeartbeatResponse:
    return await ctx.broker.groups.heartbeat(req, ctx.version)


@handles(LeaveGroupRequest)
async def handle_leave_group(ctx: RequestContext, req: LeaveGroupRequest) -> LeaveGroupResponse:
    return await ctx.broker.groups.leave_group(req, ctx.version)


@handles(OffsetCommitRequest)
async def handle_offset_commit(ctx: RequestContext, req: OffsetCommitRequest) -> OffsetCommitResponse:
    return await ctx.broker.groups.offset_commit(req, ctx.version)


@handles(OffsetFetchRequest)
async def handle_offset_fetch(ctx: RequestContext, req: OffsetFetchRequest) -> OffsetFetchResponse:
    return await ctx.broker.groups.offset_fetch(req, ctx.version)


@handles(OffsetDeleteRequest)
async def handle_offset_delete(ctx: RequestContext, req: OffsetDeleteRequest) -> OffsetDeleteResponse:
    return await ctx.broker.groups.offset_delete(req, ctx.version)


@handles(DescribeGroupsRequest)
async def handle_describe_groups(ctx: RequestContext, req: DescribeGroupsRequest) -> DescribeGroupsResponse:
    return await ctx.broker.groups.describe_groups(req, ctx.version)


@handles(ListGroupsRequest)
async def handle_list_groups(ctx: RequestContext, req: ListGroupsRequest) -> ListGroupsResponse:
    return await ctx.broker.groups.list_groups(req, ctx.version)


@handles(DeleteGroupsRequest)
async def handle_delete_groups(ctx: RequestContext, req: DeleteGroupsRequest) -> DeleteGroupsResponse:
    return await ctx.broker.groups.delete_groups(req, ctx.version)


@handles(ConsumerGroupHeartbeatRequest)  # v0-1: v1 from tools/codegen/supplement.txt
async def handle_consumer_group_heartbeat(
    ctx: RequestContext, req: ConsumerGroupHeartbeatRequest
) -> ConsumerGroupHeartbeatResponse:
    return await ctx.broker.groups.consumer_group_heartbeat(req, ctx.version, ctx.client_id, ctx.client_host)


@handles(ConsumerGroupDescribeRequest)
async def handle_consumer_group_describe(
    ctx: RequestContext, req: ConsumerGroupDescribeRequest
) -> ConsumerGroupDescribeResponse:
    return await ctx.broker.groups.consumer_group_describe(req, ctx.version)
