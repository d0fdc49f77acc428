"""Transaction APIs: InitProducerId (transactional ids), AddPartitionsToTxn, AddOffsetsToTxn,
EndTxn, TxnOffsetCommit, WriteTxnMarkers, DescribeTransactions, ListTransactions and
DescribeProducers.

The handlers are thin: the transaction coordinator (``broker.transactions``, a
``TxnService``) returns results in its own terms and the handlers shape them into the response
of the request's version. Older versions do not know PRODUCER_FENCED (KIP-588): InitProducerId
below v4 and AddPartitionsToTxn, AddOffsetsToTxn and EndTxn below v2 get
INVALID_PRODUCER_EPOCH instead, which those clients treat the same way. AddPartitionsToTxn v4
and later (batched, verify-only: KIP-890) are for brokers: a principal without CLUSTER_ACTION
gets CLUSTER_AUTHORIZATION_FAILED for the whole request, as from Kafka.

TxnOffsetCommit is checked against the transaction first (the group's ``__consumer_offsets``
partition must have been added with AddOffsetsToTxn, KIP-890) and then written by the group
coordinator.

Transaction version 2 (KIP-890 part 2): EndTxn v5 is a version 2 client's (the coordinator
bumps the epoch and the answer carries the producer id and epoch to go on with); such a client
sends no AddPartitionsToTxn or AddOffsetsToTxn: TxnOffsetCommit v5 has the group's partition
added to the transaction here, and Produce v12 has the partition leader add its partition with
AddPartitionsToTxn v4+ (``verify_only`` false). Versions 4 and up of AddPartitionsToTxn are
broker-to-broker: they need CLUSTER_ACTION on the cluster (CLUSTER_AUTHORIZATION_FAILED for the
whole request otherwise, as Kafka answers), and no client ACL is checked on them.

WriteTxnMarkers answers once the high watermark covers each marker (Kafka appends markers with
``requiredAcks = -1``), so a stale leader cannot acknowledge a marker its successor never gets.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from gregor.broker.common.errors import code_of
from gregor.broker.common.topics import OFFSETS_TOPIC
from gregor.broker.handlers.authz import (
    AclOperation,
    ResourceType,
    allowed,
    allowed_names,
    cluster_allowed,
)
from gregor.broker.handlers.registry import handles
from gregor.broker.state import RequestContext
from gregor.coordinator.txn.types import TxnOperation
from gregor.protocol.errors import ErrorCode, KafkaError
from gregor.protocol.messages.add_offsets_to_txn import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
)
from gregor.protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
)
from gregor.protocol.messages.describe_producers import (
    DescribeProducersRequest,
    DescribeProducersResponse,
)
from gregor.protocol.messages.describe_transactions import (
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
)
from gregor.protocol.messages.end_txn import EndTxnRequest, EndTxnResponse
from gregor.protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from gregor.protocol.messages.list_transactions import (
    ListTransactionsRequest,
    ListTransactionsResponse,
)
from gregor.protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)
from gregor.protocol.messages.write_txn_markers import (
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)

AddResp = AddPartitionsToTxnResponse


def _fenced(code: int, version: int, first_version: int) -> int:
    """PRODUCER_FENCED for clients that know it, INVALID_PRODUCER_EPOCH for older ones."""
    if code == ErrorCode.PRODUCER_FENCED and version < first_version:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return code


# --- InitProducerId ---


async def init_producer_id(
    ctx: RequestContext, req: InitProducerIdRequest
) -> InitProducerIdResponse:
    """InitProducerId with a transactional id (``handlers.producer_ids`` delegates here)."""
    version = ctx.version
    assert req.transactional_id is not None
    pid, epoch = (req.producer_id, req.producer_epoch) if version >= 3 else (-1, -1)
    result = await ctx.broker.transactions.init_producer_id(
        req.transactional_id, req.transaction_timeout_ms, pid, epoch
    )
    code = _fenced(result.error_code, version, 4)
    return InitProducerIdResponse(
        throttle_time_ms=0,
        error_code=code,
        producer_id=result.producer_id if not code else -1,
        producer_epoch=result.producer_epoch if not code else -1,
    )


# --- AddPartitionsToTxn ---


async def _add_partitions(
    ctx: RequestContext,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    partitions: list[tuple[str, int]],
    verify_only: bool,
    from_broker: bool = False,
) -> dict[tuple[str, int], int]:
    """Per-partition results of adding (or, for ``verify_only``, checking) partitions.
    ``from_broker`` (v4+): a partition leader asks, on a client's behalf; no client ACLs, and
    an add is a transaction version 2 client's."""
    txns = ctx.broker.transactions
    if not from_broker and not allowed(
        ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id
    ):
        return dict.fromkeys(partitions, int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
    topics = {t for t, _ in partitions}
    writable = (
        topics
        if from_broker
        else allowed_names(ctx, AclOperation.WRITE, ResourceType.TOPIC, topics)
    )
    if len(writable) < len(topics):
        # Kafka adds nothing when a topic is refused: those say why, the rest were not attempted.
        return {
            tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED
            if tp[0] not in writable
            else ErrorCode.OPERATION_NOT_ATTEMPTED
            for tp in partitions
        }
    if verify_only:
        return dict(await txns.verify(transactional_id, producer_id, producer_epoch, partitions))
    image = ctx.broker.image
    unknown = {(topic, p) for topic, p in partitions if image.partition(topic, p) is None}
    if unknown:
        # Kafka adds nothing when any partition is unknown: those say why, the rest were
        # not attempted.
        return {
            tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            if tp in unknown
            else ErrorCode.OPERATION_NOT_ATTEMPTED
            for tp in partitions
        }
    code = await txns.add_partitions(
        transactional_id, producer_id, producer_epoch, partitions, 2 if from_broker else 0
    )
    return dict.fromkeys(partitions, int(code))


_T = TypeVar("_T")
_P = TypeVar("_P")


def _by_topic(
    results: dict[tuple[str, int], int], topic_cls: Callable[..., _T], part_cls: Callable[..., _P]
) -> list[_T]:
    topics: dict[str, list[_P]] = {}
    for (topic, p), code in results.items():
        topics.setdefault(topic, []).append(part_cls(partition_index=p, partition_error_code=code))
    return [topic_cls(name=t, results_by_partition=ps) for t, ps in topics.items()]


@handles(AddPartitionsToTxnRequest)
async def handle_add_partitions_to_txn(
    ctx: RequestContext, req: AddPartitionsToTxnRequest
) -> AddPartitionsToTxnResponse:
    version = ctx.version
    if version <= 3:
        partitions = [(t.name, p) for t in req.v3_and_below_topics for p in t.partitions]
        results = await _add_partitions(
            ctx,
            req.v3_and_below_transactional_id,
            req.v3_and_below_producer_id,
            req.v3_and_below_producer_epoch,
            partitions,
            False,
        )
        results = {tp: _fenced(code, version, 2) for tp, code in results.items()}
        v3 = AddResp.ResultsByTopicV3AndBelow
        return AddResp(
            throttle_time_ms=0,
            results_by_topic_v3_and_below=_by_topic(results, v3, v3.ResultsByPartition),
        )
    if not cluster_allowed(ctx, AclOperation.CLUSTER_ACTION):
        # v4+ is for brokers (KIP-890): Kafka answers anyone else with this, whole.
        return AddResp(
            throttle_time_ms=0,
            error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            results_by_transaction=[],
        )
    out = []
    by_txn = AddResp.ResultsByTransaction
    for txn in req.transactions:
        partitions = [(t.name, p) for t in txn.topics for p in t.partitions]
        results = await _add_partitions(
            ctx,
            txn.transactional_id,
            txn.producer_id,
            txn.producer_epoch,
            partitions,
            txn.verify_only,
            from_broker=True,
        )
        if txn.verify_only:
            # A partition not in the transaction: TRANSACTION_ABORTABLE at every version the
            # brokers speak (Kafka 4.1.1 answers v4 so too); the leader turns it back into
            # INVALID_TXN_STATE for a producer too old to know it.
            results = {
                tp: ErrorCode.TRANSACTION_ABORTABLE if code == ErrorCode.INVALID_TXN_STATE else code
                for tp, code in results.items()
            }
        out.append(
            by_txn(
                transactional_id=txn.transactional_id,
                topic_results=_by_topic(
                    results, by_txn.TopicResults, by_txn.TopicResults.ResultsByPartition
                ),
            )
        )
    return AddResp(throttle_time_ms=0, error_code=0, results_by_transaction=out)


# --- AddOffsetsToTxn ---


@handles(AddOffsetsToTxnRequest)
async def handle_add_offsets_to_txn(
    ctx: RequestContext, req: AddOffsetsToTxnRequest
) -> AddOffsetsToTxnResponse:
    if not allowed(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id):
        return AddOffsetsToTxnResponse(
            throttle_time_ms=0, error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        )
    if not allowed(ctx, AclOperation.READ, ResourceType.GROUP, req.group_id):
        return AddOffsetsToTxnResponse(
            throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED
        )
    groups = ctx.broker.groups
    await groups.ensure_topic()
    partition = groups.partition_for(req.group_id)
    code = await ctx.broker.transactions.add_partitions(
        req.transactional_id, req.producer_id, req.producer_epoch, [(OFFSETS_TOPIC, partition)]
    )
    return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=_fenced(code, ctx.version, 2))


# --- EndTxn ---


@handles(EndTxnRequest)
async def handle_end_txn(ctx: RequestContext, req: EndTxnRequest) -> EndTxnResponse:
    if not allowed(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id):
        return EndTxnResponse(
            throttle_time_ms=0, error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        )
    result = await ctx.broker.transactions.end_txn(
        req.transactional_id,
        req.producer_id,
        req.producer_epoch,
        req.committed,
        2 if ctx.version >= 5 else 0,
    )
    code = _fenced(result.error_code, ctx.version, 2)
    return EndTxnResponse(
        throttle_time_ms=0,
        error_code=code,
        producer_id=-1 if code else result.producer_id,
        producer_epoch=-1 if code else result.producer_epoch,
    )


# --- TxnOffsetCommit ---


@handles(TxnOffsetCommitRequest)
async def handle_txn_offset_commit(
    ctx: RequestContext, req: TxnOffsetCommitRequest
) -> TxnOffsetCommitResponse:
    groups = ctx.broker.groups
    code: int = ErrorCode.NONE
    if not allowed(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id):
        code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not allowed(ctx, AclOperation.READ, ResourceType.GROUP, req.group_id):
        code = ErrorCode.GROUP_AUTHORIZATION_FAILED
    elif len(
        allowed_names(ctx, AclOperation.READ, ResourceType.TOPIC, (t.name for t in req.topics))
    ) < len({t.name for t in req.topics}):
        code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
    else:
        await groups.ensure_topic()
        # v5+ (transaction version 2): the group's partition is added here, not by
        # AddOffsetsToTxn; below, it must have been added.
        code = await ctx.broker.transactions.check_transactional_write(
            req.transactional_id,
            OFFSETS_TOPIC,
            groups.partition_for(req.group_id),
            req.producer_id,
            req.producer_epoch,
            TxnOperation.for_txn_offset_commit(ctx.version),
        )
    if code:
        topic, part = TxnOffsetCommitResponse.Topics, TxnOffsetCommitResponse.Topics.Partitions
        return TxnOffsetCommitResponse(
            throttle_time_ms=0,
            topics=[
                topic(
                    name=t.name,
                    partitions=[
                        part(partition_index=p.partition_index, error_code=code)
                        for p in t.partitions
                    ],
                )
                for t in req.topics
            ],
        )
    return await groups.txn_offset_commit(req, ctx.version)


# --- WriteTxnMarkers ---


@handles(WriteTxnMarkersRequest)
async def handle_write_txn_markers(
    ctx: RequestContext, req: WriteTxnMarkersRequest
) -> WriteTxnMarkersResponse:
    replicas = ctx.broker.replicas
    markers = WriteTxnMarkersResponse.Markers
    topic, part = markers.Topics, markers.Topics.Partitions
    if not cluster_allowed(ctx, AclOperation.CLUSTER_ACTION):
        return WriteTxnMarkersResponse(
            markers=[
                markers(
                    producer_id=m.producer_id,
                    topics=[
                        topic(
                            name=t.name,
                            partitions=[
                                part(
                                    partition_index=p,
                                    error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                )
                                for p in t.partition_indexes
                            ],
                        )
                        for t in m.topics
                    ],
                )
                for m in req.markers
            ]
        )

    # Every marker is appended, then all wait together for their high watermarks (Kafka's
    # requiredAcks = -1): the answer says which ones the in-sync replicas have.
    async def answer(code: ErrorCode | Awaitable[ErrorCode]) -> ErrorCode:
        return code if isinstance(code, ErrorCode) else await code

    codes = iter(
        await asyncio.gather(
            *(
                answer(
                    replicas.write_txn_marker(
                        t.name,
                        p,
                        m.producer_id,
                        m.producer_epoch,
                        m.transaction_result,
                        m.coordinator_epoch,
                    )
                )
                for m in req.markers
                for t in m.topics
                for p in t.partition_indexes
            )
        )
    )
    out = [
        markers(
            producer_id=m.producer_id,
            topics=[
                topic(
                    name=t.name,
                    partitions=[
                        part(partition_index=p, error_code=next(codes)) for p in t.partition_indexes
                    ],
                )
                for t in m.topics
            ],
        )
        for m in req.markers
    ]
    return WriteTxnMarkersResponse(markers=out)


# --- DescribeTransactions / ListTransactions / DescribeProducers ---


@handles(DescribeTransactionsRequest)
async def handle_describe_transactions(
    ctx: RequestContext, req: DescribeTransactionsRequest
) -> DescribeTransactionsResponse:
    state_cls = DescribeTransactionsResponse.TransactionStates
    out = []
    described = allowed_names(
        ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, req.transactional_ids
    )
    for d in await ctx.broker.transactions.describe(req.transactional_ids):
        if d.transactional_id not in described:
            out.append(
                state_cls(
                    error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                    transactional_id=d.transactional_id,
                    transaction_state="",
                    transaction_timeout_ms=0,
                    transaction_start_time_ms=-1,
                    producer_id=-1,
                    producer_epoch=-1,
                    topics=[],
                )
            )
            continue
        topics: dict[str, list[int]] = {}
        for topic, p in d.partitions:
            topics.setdefault(topic, []).append(p)
        out.append(
            state_cls(
                error_code=d.error_code,
                transactional_id=d.transactional_id,
                transaction_state=d.state,
                transaction_timeout_ms=d.timeout_ms,
                transaction_start_time_ms=d.start_ms,
                producer_id=d.producer_id,
                producer_epoch=d.producer_epoch,
                topics=[state_cls.Topics(topic=t, partitions=ps) for t, ps in topics.items()],
            )
        )
    return DescribeTransactionsResponse(throttle_time_ms=0, transaction_states=out)


@handles(ListTransactionsRequest)
async def handle_list_transactions(
    ctx: RequestContext, req: ListTransactionsRequest
) -> ListTransactionsResponse:
    duration = req.duration_filter if ctx.version >= 1 else -1
    code, unknown, listing = await ctx.broker.transactions.list_transactions(
        req.state_filters, req.producer_id_filters, duration
    )
    state_cls = ListTransactionsResponse.TransactionStates
    return ListTransactionsResponse(
        throttle_time_ms=0,
        error_code=code,
        unknown_state_filters=unknown,
        transaction_states=[
            state_cls(
                transactional_id=t.transactional_id,
                producer_id=t.producer_id,
                transaction_state=t.state,
            )
            for t in listing
            if allowed(
                ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, t.transactional_id
            )
        ],
    )


@handles(DescribeProducersRequest)
async def handle_describe_producers(
    ctx: RequestContext, req: DescribeProducersRequest
) -> DescribeProducersResponse:
    replicas = ctx.broker.replicas
    topic_cls = DescribeProducersResponse.Topics
    part_cls, active_cls = topic_cls.Partitions, topic_cls.Partitions.ActiveProducers
    out = []
    readable = allowed_names(
        ctx, AclOperation.READ, ResourceType.TOPIC, (t.name for t in req.topics)
    )
    for t in req.topics:
        parts = []
        for p in t.partition_indexes:
            if t.name not in readable:
                parts.append(
                    part_cls(
                        partition_index=p,
                        error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                        error_message=None,
                        active_producers=[],
                    )
                )
                continue
            try:
                partition = replicas.leader_partition(t.name, p)
            except KafkaError as e:
                parts.append(
                    part_cls(
                        partition_index=p,
                        error_code=code_of(e),
                        error_message=None,
                        active_producers=[],
                    )
                )
                continue
            active = [
                active_cls(
                    producer_id=e.producer_id,
                    producer_epoch=e.producer_epoch,
                    last_sequence=e.last_seq,
                    last_timestamp=e.last_timestamp,
                    coordinator_epoch=e.coordinator_epoch,
                    current_txn_start_offset=e.current_txn_first_offset,
                )
                for e in partition.active_producers()
            ]
            parts.append(
                part_cls(
                    partition_index=p, error_code=0, error_message=None, active_producers=active
                )
            )
        out.append(topic_cls(name=t.name, partitions=parts))
    return DescribeProducersResponse(throttle_time_ms=0, topics=out)
