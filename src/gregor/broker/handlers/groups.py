"""Group APIs: FindCoordinator and everything the group coordinator answers.

The handlers are thin: they pass the decoded request, its version and the client's identity
to ``broker.groups`` (a ``GroupRuntime``), which runs the coordinator state machine and
returns its (possibly delayed) response. FindCoordinator is answered here: this single node
coordinates every group and transaction; a group's coordinator is "not yet available"
(COORDINATOR_LOAD_IN_PROGRESS) while its ``__consumer_offsets`` partition is being loaded.
"""

from __future__ import annotations

from typing import Any

from gregor.broker.handlers.registry import handles
from gregor.protocol.errors import ErrorCode
from gregor.protocol.messages.consumer_group_describe import ConsumerGroupDescribeRequest
from gregor.protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from gregor.protocol.messages.delete_groups import DeleteGroupsRequest
from gregor.protocol.messages.describe_groups import DescribeGroupsRequest
from gregor.protocol.messages.find_coordinator import (
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)
from gregor.protocol.messages.heartbeat import HeartbeatRequest
from gregor.protocol.messages.join_group import JoinGroupRequest
from gregor.protocol.messages.leave_group import LeaveGroupRequest
from gregor.protocol.messages.list_groups import ListGroupsRequest
from gregor.protocol.messages.offset_commit import OffsetCommitRequest
from gregor.protocol.messages.offset_delete import OffsetDeleteRequest
from gregor.protocol.messages.offset_fetch import OffsetFetchRequest
from gregor.protocol.messages.sync_group import SyncGroupRequest

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1


def client_host(ctx: Any) -> str:
    """Kafka reports a member's host as ``/address``."""
    peer = ctx.conn.peer
    host = peer.rsplit(":", 1)[0] if ":" in peer else peer
    return "/" + host


def _coordinator_error(ctx: Any, key: str, key_type: int) -> tuple[int, str | None]:
    if key_type == GROUP_KEY_TYPE:
        runtime = ctx.broker.groups
        runtime.ensure_offsets_topic()
        code = runtime.coordinator.partition_error(key)
        return code, (None if not code else ErrorCode(code).name)
    if key_type == TRANSACTION_KEY_TYPE:
        code = ctx.broker.transactions.coordinator_error(key)
        return code, (None if not code else ErrorCode(code).name)
    return ErrorCode.INVALID_REQUEST, f"unsupported coordinator key type {key_type}"


@handles(FindCoordinatorRequest)
async def handle_find_coordinator(ctx: Any, req: FindCoordinatorRequest) -> FindCoordinatorResponse:
    version = ctx.version
    key_type = req.key_type if version >= 1 else GROUP_KEY_TYPE
    _, host, port = ctx.broker.advertised[0]
    node = ctx.broker.node_id
    if version >= 4:
        out = []
        for key in req.coordinator_keys:
            code, message = _coordinator_error(ctx, key, key_type)
            out.append(FindCoordinatorResponse.Coordinators(
                key=key,
                node_id=-1 if code else node,
                host="" if code else host,
                port=-1 if code else port,
                error_code=code,
                error_message=message,
            ))
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=out)
    code, message = _coordinator_error(ctx, req.key, key_type)
    return FindCoordinatorResponse(
        throttle_time_ms=0,
        error_code=code,
        error_message=message,
        node_id=-1 if code else node,
        host="" if code else host,
        port=-1 if code else port,
    )


@handles(JoinGroupRequest)
async def handle_join_group(ctx: Any, req: JoinGroupRequest) -> Any:
    rt = ctx.broker.groups
    return await rt.call(rt.coordinator.join_group, req, ctx.version, ctx.client_id, client_host(ctx))


@handles(SyncGroupRequest)
async def handle_sync_group(ctx: Any, req: SyncGroupRequest) -> Any:
    rt = ctx.broker.groups
    return await rt.call(rt.coordinator.sync_group, req, ctx.version)


@handles(HeartbeatRequest)
async def handle_heartbeat(ctx: Any, req: HeartbeatRequest) -> Any:
    rt = ctx.broker.groups
    return await rt.call(rt.coordinator.heartbeat, req, ctx.version)


@handles(LeaveGroupRequest)
async def handle_leave_group(ctx: Any, req: LeaveGroupRequest) -> Any:
    rt = ctx.broker.groups
    return await rt.call(rt.coordinator.leave_group, req, ctx.version)


@handles(OffsetCommitRequest)
async def handle_offset_commit(ctx: Any, req: OffsetCommitRequest) -> Any:
    rt = ctx.broker.groups
    return await rt.call(rt.coordinator.offset_commit, req, ctx.version)


@handles(OffsetFetchRequest)
async def handle_offset_fetch(ctx: Any, req: OffsetFetchRequest) -> Any:
    rt = ctx.broker.groups
    return await rt.call(rt.coordinator.offset_fetch, req, ctx.version)


@handles(OffsetDeleteRequest)
async def handle_offset_delete(ctx: Any, req: OffsetDeleteRequest) -> Any:
    rt = ctx.broker.groups
    return await rt.call(rt.coordinator.offset_delete, req, ctx.version)


@handles(DescribeGroupsRequest)
async def handle_describe_groups(ctx: Any, req: DescribeGroupsRequest) -> Any:
    rt = ctx.broker.groups
    return await rt.call(rt.coordinator.describe_groups, req, ctx.version)


@handles(ListGroupsRequest)
async def handle_list_groups(ctx: Any, req: ListGroupsRequest) -> Any:
    rt = ctx.broker.groups
    return await rt.call(rt.coordinator.list_groups, req, ctx.version)


@handles(DeleteGroupsRequest)
async def handle_delete_groups(ctx: Any, req: DeleteGroupsRequest) -> Any:
    rt = ctx.broker.groups
    return await rt.call(rt.coordinator.delete_groups, req, ctx.version)


@handles(ConsumerGroupHeartbeatRequest)  # v0-1: v1 from tools/codegen/supplement.txt
async def handle_consumer_group_heartbeat(ctx: Any, req: ConsumerGroupHeartbeatRequest) -> Any:
    rt = ctx.broker.groups
    return await rt.call(
        rt.coordinator.consumer_group_heartbeat, req, ctx.version, ctx.client_id, client_host(ctx)
    )


@handles(ConsumerGroupDescribeRequest)
async def handle_consumer_group_describe(ctx: Any, req: ConsumerGroupDescribeRequest) -> Any:
    rt = ctx.broker.groups
    return await rt.call(rt.coordinator.consumer_group_describe, req, ctx.version)
