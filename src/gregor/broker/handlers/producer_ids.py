"""InitProducerId.

An idempotent producer (no transactional id) gets a fresh producer id with epoch 0 on every
call, as Kafka does (a KIP-360 epoch-bump request from such a producer also gets a fresh id,
which the client accepts). A transactional id goes to the transaction coordinator
(``handlers.transactions.init_producer_id``), which maps it to a producer and bumps its epoch.

Authorization as Kafka: a transactional id needs WRITE on it; an idempotent producer needs
IDEMPOTENT_WRITE on the cluster or WRITE on some topic.
"""

from __future__ import annotations

from gregor.broker.handlers.authz import AclOperation, ResourceType, allowed, cluster_allowed
from gregor.broker.handlers.registry import handles
from gregor.broker.handlers.transactions import init_producer_id
from gregor.broker.state import RequestContext
from gregor.protocol.errors import ErrorCode
from gregor.protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse


def _refused(code: ErrorCode) -> InitProducerIdResponse:
    return InitProducerIdResponse(
        throttle_time_ms=0, error_code=code, producer_id=-1, producer_epoch=-1
    )


def _writes_some_topic(ctx: RequestContext) -> bool:
    """Kafka's "WRITE on any topic" test: an ALLOW for WRITE on some topic resource (or on
    every topic) for this principal that no DENY cancels."""
    return any(
        allowed(ctx, AclOperation.WRITE, ResourceType.TOPIC, b.resource_name)
        for b in ctx.broker.image.acls
        if b.resource_type == ResourceType.TOPIC
        and b.operation in (AclOperation.WRITE, AclOperation.ALL)
    ) or any(
        allowed(ctx, AclOperation.WRITE, ResourceType.TOPIC, t) for t in ctx.broker.image.topics
    )


@handles(InitProducerIdRequest)
async def handle_init_producer_id(
    ctx: RequestContext, req: InitProducerIdRequest
) -> InitProducerIdResponse:
    if req.transactional_id is not None:
        if not allowed(
            ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id
        ):
            return _refused(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        return await init_producer_id(ctx, req)
    if not (cluster_allowed(ctx, AclOperation.IDEMPOTENT_WRITE) or _writes_some_topic(ctx)):
        return _refused(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    pid = await ctx.broker.producer_ids.next_id()
    return InitProducerIdResponse(
        throttle_time_ms=0, error_code=0, producer_id=pid, producer_epoch=0
    )
