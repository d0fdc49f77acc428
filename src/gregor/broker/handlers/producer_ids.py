"""InitProducerId.

An idempotent producer (no transactional id) gets a fresh producer id with epoch 0 on every
call, as Kafka does (a KIP-360 epoch-bump request from such a producer also gets a fresh id,
which the client accepts). A transactional id goes to the transaction coordinator
(``handlers.transactions.init_producer_id``), which maps it to a producer and bumps its epoch.
"""

from __future__ import annotations

from gregor.broker.handlers.registry import handles
from gregor.broker.handlers.transactions import init_producer_id
from gregor.broker.state import RequestContext
from gregor.protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse


@handles(InitProducerIdRequest)
async def handle_init_producer_id(ctx: RequestContext, req: InitProducerIdRequest) -> InitProducerIdResponse:
    if req.transactional_id is not None:
        return await init_producer_id(ctx, req)
    pid = await ctx.broker.producer_ids.next_id()
    return InitProducerIdResponse(throttle_time_ms=0, error_code=0, producer_id=pid, producer_epoch=0)
