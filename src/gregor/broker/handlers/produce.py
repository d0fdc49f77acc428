"""Produce: validate, append, answer per partition; acks 0, 1 and -1.

The handler reads the request into (topic, partition, records) entries and hands them to the
replica manager, which owns every rule of an append (up-conversion of legacy message sets,
KIP-890 verification, the partition's checks, the acks=-1 wait). A request refused whole
(invalid acks; a transactional batch without a transactional id, as Kafka refuses it) gets
the error on every partition. The version decides what KIP-890 does with a transactional batch
for a partition not yet in the producer's transaction (``TxnOperation.for_produce``): v12 is
the transaction version 2 Produce, for which the leader adds the partition itself. Per-record errors (KIP-467) go to ``record_errors``. acks=0
gets no response; its errors are logged.
"""

from __future__ import annotations

import asyncio
import logging

from gregor.broker.common.events import log_event
from gregor.broker.handlers.authz import AclOperation, ResourceType, allowed, allowed_names
from gregor.broker.handlers.leader_hints import LeaderHints
from gregor.broker.handlers.registry import handles
from gregor.broker.replication.replica_manager import ProduceResult
from gregor.broker.state import RequestContext
from gregor.coordinator.txn.types import TxnOperation
from gregor.protocol.errors import ErrorCode
from gregor.protocol.exceptions import ProtocolError
from gregor.protocol.messages.produce import ProduceRequest, ProduceResponse
from gregor.protocol.records.header import HEADER_SIZE, peek_magic, read_header
from gregor.security.quotas import PRODUCER_BYTE_RATE

log = logging.getLogger("gregor.broker.produce")

TopicResp = ProduceResponse.Responses
PartResp = ProduceResponse.Responses.PartitionResponses
RecordErr = ProduceResponse.Responses.PartitionResponses.RecordErrors


def _has_transactional_records(req: ProduceRequest) -> bool:
    """Kafka's test: does the first batch of any partition's records carry the
    transactional attribute?"""
    for t in req.topic_data:
        for p in t.partition_data:
            records = p.records
            if records is None or len(records) < HEADER_SIZE or peek_magic(records) < 2:
                continue
            try:
                if read_header(records).is_transactional:
                    return True
            except ProtocolError:
                continue
    return False


def _part(index: int, result: ProduceResult) -> PartResp:
    info = result.info
    if result.error or info is None:
        return PartResp(
            index=index,
            error_code=result.error,
            base_offset=-1,
            log_append_time_ms=-1,
            log_start_offset=-1,
            error_message=result.message,
            record_errors=[
                RecordErr(batch_index=i, batch_index_error_message=m)
                for i, m in result.record_errors
            ],
        )
    return PartResp(
        index=index,
        error_code=0,
        base_offset=info.first_offset,
        log_append_time_ms=info.log_append_time,
        log_start_offset=info.log_start_offset,
        record_errors=[],
        error_message=None,
    )


@handles(ProduceRequest, 0, 12)
async def handle_produce(ctx: RequestContext, req: ProduceRequest) -> ProduceResponse | None:
    responses = []
    transactional_id = req.transactional_id if ctx.version >= 3 else None
    refused: ProduceResult | None = None
    if req.acks not in (-1, 0, 1):
        refused = ProduceResult(ErrorCode.INVALID_REQUIRED_ACKS)
    elif transactional_id is None and _has_transactional_records(req):
        # Kafka (KafkaApis.handleProduceRequest) answers a transactional batch sent without
        # a transactional id with TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition.
        refused = ProduceResult(
            ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            "A transactional batch needs the request's transactional_id.",
        )
    elif transactional_id is not None and not allowed(
        ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id
    ):
        refused = ProduceResult(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if refused is not None:
        for t in req.topic_data:
            responses.append(
                TopicResp(
                    name=t.name,
                    partition_responses=[_part(p.index, refused) for p in t.partition_data],
                )
            )
    else:
        # A topic the principal may not write to is refused before anything is appended.
        writable = allowed_names(
            ctx, AclOperation.WRITE, ResourceType.TOPIC, (t.name for t in req.topic_data)
        )
        entries = [
            (t.name, p.index, p.records)
            for t in req.topic_data
            if t.name in writable
            for p in t.partition_data
        ]
        results = await ctx.broker.replicas.append_records(
            entries,
            required_acks=req.acks,
            timeout_ms=req.timeout_ms,
            transactional_id=transactional_id,
            version=ctx.version,
            txn_operation=TxnOperation.for_produce(ctx.version),
        )
        _count_traffic(ctx, entries, results, [t for t in req.topic_data if t.name not in writable])
        it = iter(results)
        denied = ProduceResult(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        for t in req.topic_data:
            ok = t.name in writable
            parts = [_part(p.index, next(it) if ok else denied) for p in t.partition_data]
            responses.append(TopicResp(name=t.name, partition_responses=parts))
    node_endpoints: list[ProduceResponse.NodeEndpoints] = []
    if ctx.version >= 10:
        hints = LeaderHints(ctx)
        for r in responses:
            for part in r.partition_responses:
                leader = hints.leader(r.name, part.index, part.error_code)
                if leader is not None:
                    part.current_leader = PartResp.CurrentLeader(
                        leader_id=leader[0], leader_epoch=leader[1]
                    )
        node_endpoints = [
            ProduceResponse.NodeEndpoints(node_id=n, host=h, port=port, rack=rack)
            for n, h, port, rack in hints.endpoints()
        ]
    if req.acks == 0:
        for r in responses:
            for p in r.partition_responses:
                if p.error_code:
                    log_event(
                        log,
                        "produce.error",
                        logging.WARNING,
                        topic=r.name,
                        partition=p.index,
                        error=ErrorCode(p.error_code).name,
                        acks=0,
                    )
        return await _throttled(ctx, req, None)
    return await _throttled(
        ctx,
        req,
        ProduceResponse(responses=responses, throttle_time_ms=0, node_endpoints=node_endpoints),
    )


def _count_traffic(
    ctx: RequestContext,
    entries: list[tuple[str, int, bytes | bytearray | memoryview | None]],
    results: list[ProduceResult],
    denied: list[ProduceRequest.TopicData],
) -> None:
    """Kafka's BrokerTopicMetrics: per partition appended, a produce request, its bytes and
    records in (a retried duplicate adds no bytes); per partition refused, a failed request
    and its bytes rejected."""
    metrics, known = ctx.broker.metrics, ctx.broker.image.topics
    for (topic, _, records), result in zip(entries, results, strict=True):
        if topic not in known:  # no series for names that are not topics
            continue
        traffic = metrics.topic(topic)
        traffic.produce_requests += 1
        info = result.info
        if info is None:
            traffic.failed_produce_requests += 1
            traffic.bytes_rejected += len(records) if records is not None else 0
        elif not info.duplicate:
            traffic.bytes_in += len(records) if records is not None else 0
            traffic.messages_in += info.records_count
    for t in denied:
        if t.name not in known:
            continue
        traffic = metrics.topic(t.name)
        traffic.produce_requests += len(t.partition_data)
        traffic.failed_produce_requests += len(t.partition_data)


async def _throttled(
    ctx: RequestContext, req: ProduceRequest, resp: ProduceResponse | None
) -> ProduceResponse | None:
    """The producer byte-rate quota: the request's record bytes count against its client; the
    throttle time goes in the answer (the dispatcher holds the connection), or, for acks=0,
    which has no answer, the connection is held here."""
    if not ctx.broker.quotas.active:
        return resp
    size = sum(
        len(p.records) for t in req.topic_data for p in t.partition_data if p.records is not None
    )
    throttle = ctx.broker.quotas.throttle_ms(
        PRODUCER_BYTE_RATE, ctx.conn.principal, ctx.client_id, size
    )
    if resp is None:
        if throttle:
            await asyncio.wait([ctx.conn.hung_up], timeout=throttle / 1000)
        return None
    resp.throttle_time_ms = throttle
    return resp
