"""Produce: validate, append, answer per partition; acks 0, 1 and -1.

The handler reads the request into (topic, partition, records) entries and hands them to the
replica manager, which owns every rule of an append (up-conversion of legacy message sets,
KIP-890 verification, the partition's checks, the acks=-1 wait). acks=0 gets no response;
its errors are logged.
"""

from __future__ import annotations

import logging

from gregor.broker.events import log_event
from gregor.broker.handlers.registry import handles
from gregor.broker.replica_manager import ProduceResult
from gregor.broker.state import RequestContext
from gregor.protocol.errors import ErrorCode
from gregor.protocol.messages.produce import ProduceRequest, ProduceResponse

log = logging.getLogger("gregor.broker.produce")

TopicResp = ProduceResponse.Responses
PartResp = ProduceResponse.Responses.PartitionResponses


def _part(index: int, result: ProduceResult) -> PartResp:
    info = result.info
    if result.error or info is None:
        return PartResp(
            index=index, error_code=result.error, base_offset=-1, log_append_time_ms=-1,
            log_start_offset=-1, record_errors=[], error_message=result.message,
        )
    return PartResp(
        index=index, error_code=0, base_offset=info.first_offset,
        log_append_time_ms=info.log_append_time, log_start_offset=info.log_start_offset,
        record_errors=[], error_message=None,
    )


@handles(ProduceRequest, 0, 11)
async def handle_produce(ctx: RequestContext, req: ProduceRequest) -> ProduceResponse | None:
    responses = []
    if req.acks not in (-1, 0, 1):
        for t in req.topic_data:
            responses.append(TopicResp(name=t.name, partition_responses=[
                _part(p.index, ProduceResult(ErrorCode.INVALID_REQUIRED_ACKS)) for p in t.partition_data
            ]))
    else:
        entries = [(t.name, p.index, p.records) for t in req.topic_data for p in t.partition_data]
        results = await ctx.broker.replicas.append_records(
            entries, required_acks=req.acks, timeout_ms=req.timeout_ms,
            transactional_id=req.transactional_id if ctx.version >= 3 else None,
            zstd_allowed=ctx.version >= 7,
        )
        it = iter(results)
        for t in req.topic_data:
            parts = [_part(p.index, next(it)) for p in t.partition_data]
            responses.append(TopicResp(name=t.name, partition_responses=parts))
    if req.acks == 0:
        for r in responses:
            for p in r.partition_responses:
                if p.error_code:
                    log_event(log, "produce.error", logging.WARNING, topic=r.name, partition=p.index,
                              error=ErrorCode(p.error_code).name, acks=0)
        return None
    return ProduceResponse(responses=responses, throttle_time_ms=0)
