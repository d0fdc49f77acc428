"""Share groups (KIP-932), the share coordinator's state APIs (v0): InitializeShareGroupState,
ReadShareGroupState, ReadShareGroupStateSummary, WriteShareGroupState and
DeleteShareGroupState, which the partition leaders' persister sends to the share coordinator
(``coordination.share_service``).

They are for brokers: each needs CLUSTER_ACTION on the cluster, and all of them answer
UNSUPPORTED_VERSION while the finalized ``share.version`` is 0. A refusal of the whole request
is answered as every partition's error code.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Protocol, TypeVar

from gregor.broker.handlers.authz import (
    AclOperation,
    cluster_allowed,
)
from gregor.broker.handlers.registry import handles
from gregor.broker.handlers.share import share_groups_on
from gregor.broker.state import RequestContext
from gregor.coordinator.share.state import ShareKey, StateBatch
from gregor.protocol.errors import ErrorCode
from gregor.protocol.messages.delete_share_group_state import (
    DeleteShareGroupStateRequest,
    DeleteShareGroupStateResponse,
)
from gregor.protocol.messages.initialize_share_group_state import (
    InitializeShareGroupStateRequest,
    InitializeShareGroupStateResponse,
)
from gregor.protocol.messages.read_share_group_state import (
    ReadShareGroupStateRequest,
    ReadShareGroupStateResponse,
)
from gregor.protocol.messages.read_share_group_state_summary import (
    ReadShareGroupStateSummaryRequest,
    ReadShareGroupStateSummaryResponse,
)
from gregor.protocol.messages.write_share_group_state import (
    WriteShareGroupStateRequest,
    WriteShareGroupStateResponse,
)


def _state_refusal(ctx: RequestContext) -> int:
    if not share_groups_on(ctx):
        return ErrorCode.UNSUPPORTED_VERSION
    if not cluster_allowed(ctx, AclOperation.CLUSTER_ACTION):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    return 0


class _StatePartition(Protocol):
    """A partition of Initialize, Write or DeleteShareGroupState."""

    @property
    def partition(self) -> int: ...


P = TypeVar("P", bound=_StatePartition)
#: (topic id, [(partition, error code)]) of each topic, in the request's order.
Codes = list[tuple[uuid.UUID, list[tuple[int, int]]]]


async def _codes_per_partition(
    ctx: RequestContext,
    group_id: str,
    topics: Iterable[tuple[uuid.UUID, Sequence[P]]],
    change: Callable[[ShareKey, P], Awaitable[int]],
) -> Codes:
    """Initialize, Write and Delete ShareGroupState: one error code per partition (the refusal
    of the whole request, or ``change``'s answer)."""
    refusal = _state_refusal(ctx)
    results: Codes = []
    for topic_id, partitions in topics:
        codes = []
        for p in partitions:
            code = refusal or await change((group_id, topic_id, p.partition), p)
            codes.append((p.partition, code))
        results.append((topic_id, codes))
    return results


@handles(InitializeShareGroupStateRequest)
async def handle_initialize_share_group_state(
    ctx: RequestContext, req: InitializeShareGroupStateRequest
) -> InitializeShareGroupStateResponse:
    service = ctx.broker.shares.state
    codes = await _codes_per_partition(
        ctx,
        req.group_id,
        [(t.topic_id, t.partitions) for t in req.topics],
        lambda key, p: service.initialize(key, p.state_epoch, p.start_offset),
    )
    R = InitializeShareGroupStateResponse.Results
    return InitializeShareGroupStateResponse(
        results=[
            R(topic_id=tid, partitions=[R.Partitions(partition=i, error_code=c) for i, c in parts])
            for tid, parts in codes
        ]
    )


@handles(ReadShareGroupStateRequest)
async def handle_read_share_group_state(
    ctx: RequestContext, req: ReadShareGroupStateRequest
) -> ReadShareGroupStateResponse:
    R = ReadShareGroupStateResponse.Results
    refusal = _state_refusal(ctx)
    service = ctx.broker.shares.state
    results = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            if refusal:
                parts.append(
                    R.Partitions(partition=p.partition, error_code=refusal, start_offset=-1)
                )
                continue
            r = await service.read((req.group_id, t.topic_id, p.partition), p.leader_epoch)
            parts.append(
                R.Partitions(
                    partition=p.partition,
                    error_code=r.error,
                    state_epoch=r.state_epoch,
                    start_offset=r.start_offset,
                    state_batches=[
                        R.Partitions.StateBatches(
                            first_offset=b.first_offset,
                            last_offset=b.last_offset,
                            delivery_state=b.delivery_state,
                            delivery_count=b.delivery_count,
                        )
                        for b in r.state_batches
                    ],
                )
            )
        results.append(R(topic_id=t.topic_id, partitions=parts))
    return ReadShareGroupStateResponse(results=results)


@handles(ReadShareGroupStateSummaryRequest)
async def handle_read_share_group_state_summary(
    ctx: RequestContext, req: ReadShareGroupStateSummaryRequest
) -> ReadShareGroupStateSummaryResponse:
    R = ReadShareGroupStateSummaryResponse.Results
    refusal = _state_refusal(ctx)
    service = ctx.broker.shares.state
    results = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            if refusal:
                parts.append(
                    R.Partitions(partition=p.partition, error_code=refusal, start_offset=-1)
                )
                continue
            r = await service.read(
                (req.group_id, t.topic_id, p.partition), p.leader_epoch, summary=True
            )
            parts.append(
                R.Partitions(
                    partition=p.partition,
                    error_code=r.error,
                    state_epoch=r.state_epoch,
                    start_offset=r.start_offset,
                )
            )
        results.append(R(topic_id=t.topic_id, partitions=parts))
    return ReadShareGroupStateSummaryResponse(results=results)


@handles(WriteShareGroupStateRequest)
async def handle_write_share_group_state(
    ctx: RequestContext, req: WriteShareGroupStateRequest
) -> WriteShareGroupStateResponse:
    service = ctx.broker.shares.state

    def write(key: ShareKey, p: WriteShareGroupStateRequest.Topics.Partitions) -> Awaitable[int]:
        batches = [
            StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
            for b in p.state_batches
        ]
        return service.write(key, p.state_epoch, p.leader_epoch, p.start_offset, batches)

    codes = await _codes_per_partition(
        ctx, req.group_id, [(t.topic_id, t.partitions) for t in req.topics], write
    )
    R = WriteShareGroupStateResponse.Results
    return WriteShareGroupStateResponse(
        results=[
            R(topic_id=tid, partitions=[R.Partitions(partition=i, error_code=c) for i, c in parts])
            for tid, parts in codes
        ]
    )


@handles(DeleteShareGroupStateRequest)
async def handle_delete_share_group_state(
    ctx: RequestContext, req: DeleteShareGroupStateRequest
) -> DeleteShareGroupStateResponse:
    service = ctx.broker.shares.state
    codes = await _codes_per_partition(
        ctx,
        req.group_id,
        [(t.topic_id, t.partitions) for t in req.topics],
        lambda key, _p: service.delete(key),
    )
    R = DeleteShareGroupStateResponse.Results
    return DeleteShareGroupStateResponse(
        results=[
            R(topic_id=tid, partitions=[R.Partitions(partition=i, error_code=c) for i, c in parts])
            for tid, parts in codes
        ]
    )
