"""Share groups (KIP-932), the admin side of their offsets: DescribeShareGroupOffsets,
AlterShareGroupOffsets and DeleteShareGroupOffsets (v0), answered by the group coordinator
from the share coordinator's state (``coordination.share_service``).

Describe needs DESCRIBE on the group and on each topic; alter needs READ on the group, delete
DELETE on it, and both READ on each topic; only an empty share group (no members) may have its
start offsets changed (NON_EMPTY_GROUP otherwise). All of them answer UNSUPPORTED_VERSION while the finalized
``share.version`` is 0.
"""

from __future__ import annotations

import uuid

from gregor.broker.handlers.authz import (
    AclOperation,
    ResourceType,
    allowed,
    allowed_names,
)
from gregor.broker.handlers.registry import handles
from gregor.broker.handlers.share import share_groups_on
from gregor.broker.state import RequestContext
from gregor.protocol.errors import ErrorCode
from gregor.protocol.messages.alter_share_group_offsets import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsResponse,
)
from gregor.protocol.messages.delete_share_group_offsets import (
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse,
)
from gregor.protocol.messages.describe_share_group_offsets import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsResponse,
)

# --- the share groups' offsets (admin) ---


async def _empty_group_refusal(ctx: RequestContext, group: str) -> int:
    """0 when ``group`` may have its offsets changed here: coordinated here and with no members."""
    if not share_groups_on(ctx):
        return ErrorCode.UNSUPPORTED_VERSION
    error = await ctx.broker.groups.coordinator_error(group)
    if error:
        return error
    g = ctx.broker.shares.groups.groups.get(group)
    if g is not None and g.members:
        return ErrorCode.NON_EMPTY_GROUP
    return 0


@handles(DescribeShareGroupOffsetsRequest)
async def handle_describe_share_group_offsets(
    ctx: RequestContext, req: DescribeShareGroupOffsetsRequest
) -> DescribeShareGroupOffsetsResponse:
    G = DescribeShareGroupOffsetsResponse.Groups
    T = G.Topics
    image = ctx.broker.image
    shares = ctx.broker.shares
    out = []
    for g in req.groups:
        error = 0 if share_groups_on(ctx) else ErrorCode.UNSUPPORTED_VERSION
        if not error and not allowed(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, g.group_id):
            error = ErrorCode.GROUP_AUTHORIZATION_FAILED
        if not error:
            error = await ctx.broker.groups.coordinator_error(g.group_id)
        if error:
            out.append(G(group_id=g.group_id, error_code=error, topics=[]))
            continue
        every = g.topics is None
        wanted = [(t.topic_name, list(t.partitions)) for t in g.topics or []]
        if every:
            wanted = [
                (name, list(range(len(t.partitions))))
                for name, t in sorted(image.topics.items())
                if not t.internal
            ]
        visible = allowed_names(
            ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, {n for n, _ in wanted}
        )
        topics = []
        for name, indexes in wanted:
            t = image.topic(name)
            parts = []
            for i in indexes:
                if name not in visible:
                    parts.append(
                        T.Partitions(
                            partition_index=i,
                            start_offset=-1,
                            lag=-1,
                            leader_epoch=-1,
                            error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                        )
                    )
                    continue
                if t is None or not 0 <= i < len(t.partitions):
                    parts.append(
                        T.Partitions(
                            partition_index=i,
                            start_offset=-1,
                            lag=-1,
                            leader_epoch=-1,
                            error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        )
                    )
                    continue
                r = await shares.partitions.persister.read(
                    (g.group_id, t.topic_id, i), -1, summary=True
                )
                if every and (r.error or r.start_offset < 0):
                    continue  # "every partition": only those the group has state for
                parts.append(
                    T.Partitions(
                        partition_index=i,
                        start_offset=r.start_offset if not r.error else -1,
                        lag=shares.partitions.lag(g.group_id, name, i, r.start_offset)
                        if not r.error
                        else -1,
                        leader_epoch=r.leader_epoch,
                        error_code=r.error,
                    )
                )
            if parts:
                topics.append(
                    T(
                        topic_name=name,
                        topic_id=t.topic_id if t else uuid.UUID(int=0),
                        partitions=parts,
                    )
                )
        out.append(G(group_id=g.group_id, error_code=0, topics=topics))
    return DescribeShareGroupOffsetsResponse(groups=out)


@handles(AlterShareGroupOffsetsRequest)
async def handle_alter_share_group_offsets(
    ctx: RequestContext, req: AlterShareGroupOffsetsRequest
) -> AlterShareGroupOffsetsResponse:
    T = AlterShareGroupOffsetsResponse.Responses
    if not allowed(ctx, AclOperation.READ, ResourceType.GROUP, req.group_id):
        return AlterShareGroupOffsetsResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    refusal = await _empty_group_refusal(ctx, req.group_id)
    if refusal:
        return AlterShareGroupOffsetsResponse(error_code=refusal)
    image = ctx.broker.image
    persister = ctx.broker.shares.partitions.persister
    readable = allowed_names(
        ctx, AclOperation.READ, ResourceType.TOPIC, {t.topic_name for t in req.topics}
    )
    out = []
    for topic in req.topics:
        t = image.topic(topic.topic_name)
        parts = []
        for p in topic.partitions:
            code: int
            if topic.topic_name not in readable:
                code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif t is None or not 0 <= p.partition_index < len(t.partitions):
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif p.start_offset < 0:
                code = ErrorCode.INVALID_REQUEST
            else:
                key = (req.group_id, t.topic_id, p.partition_index)
                current = await persister.read(key, -1, summary=True)
                code = current.error or await persister.initialize(
                    key, current.state_epoch + 1, p.start_offset
                )
            parts.append(T.Partitions(partition_index=p.partition_index, error_code=code))
        out.append(
            T(
                topic_name=topic.topic_name,
                topic_id=t.topic_id if t else uuid.UUID(int=0),
                partitions=parts,
            )
        )
    ctx.broker.shares.partitions.forget(req.group_id, [t.topic_name for t in req.topics])
    return AlterShareGroupOffsetsResponse(error_code=0, responses=out)


@handles(DeleteShareGroupOffsetsRequest)
async def handle_delete_share_group_offsets(
    ctx: RequestContext, req: DeleteShareGroupOffsetsRequest
) -> DeleteShareGroupOffsetsResponse:
    T = DeleteShareGroupOffsetsResponse.Responses
    if not allowed(ctx, AclOperation.DELETE, ResourceType.GROUP, req.group_id):
        return DeleteShareGroupOffsetsResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    refusal = await _empty_group_refusal(ctx, req.group_id)
    if refusal:
        return DeleteShareGroupOffsetsResponse(error_code=refusal)
    image = ctx.broker.image
    persister = ctx.broker.shares.partitions.persister
    readable = allowed_names(
        ctx, AclOperation.READ, ResourceType.TOPIC, {t.topic_name for t in req.topics}
    )
    out = []
    for topic in req.topics:
        t = image.topic(topic.topic_name)
        code: int
        if topic.topic_name not in readable:
            code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif t is None:
            code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        else:
            code = 0
            for i in range(len(t.partitions)):
                code = code or await persister.delete((req.group_id, t.topic_id, i))
        out.append(
            T(
                topic_name=topic.topic_name,
                topic_id=t.topic_id if t else uuid.UUID(int=0),
                error_code=code,
            )
        )
    ctx.broker.shares.partitions.forget(req.group_id, [t.topic_name for t in req.topics])
    return DeleteShareGroupOffsetsResponse(error_code=0, responses=out)
