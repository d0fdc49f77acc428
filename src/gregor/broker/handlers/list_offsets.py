"""ListOffsets (earliest, latest, by timestamp, max timestamp) and OffsetForLeaderEpoch.

The lookup rules are the partition's (``Partition.fetch_offset_for_timestamp``); the handler
checks the leader epoch the client names and shapes the answer for the request's version
(v0 answers a list of "old style" offsets).
"""

from __future__ import annotations

from gregor.broker.common.errors import code_of
from gregor.broker.handlers.authz import AclOperation, ResourceType, allowed_names, cluster_allowed
from gregor.broker.handlers.registry import handles
from gregor.broker.replication.partition import Partition
from gregor.broker.state import RequestContext
from gregor.protocol.errors import ErrorCode, KafkaError
from gregor.protocol.messages.list_offsets import ListOffsetsRequest, ListOffsetsResponse
from gregor.protocol.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)

LOTopic = ListOffsetsResponse.Topics
LOPart = ListOffsetsResponse.Topics.Partitions


def _lo_error(index: int, code: int) -> LOPart:
    return LOPart(
        partition_index=index,
        error_code=code,
        timestamp=-1,
        offset=-1,
        leader_epoch=-1,
        old_style_offsets=[],
    )


def _leader(ctx: RequestContext, topic: str, index: int) -> Partition:
    """The partition this broker leads, or the error; a known topic's missing partition is
    UNKNOWN_TOPIC_OR_PARTITION as well."""
    return ctx.broker.replicas.leader_partition(topic, index)


def list_offset(
    ctx: RequestContext,
    topic: str,
    p: ListOffsetsRequest.Topics.Partitions,
    isolation: int,
    replica_id: int,
) -> LOPart:
    version = ctx.version
    index = p.partition_index
    try:
        partition = _leader(ctx, topic, index)
        if version >= 4:
            fenced = partition.check_epoch(p.current_leader_epoch)
            if fenced:
                return _lo_error(index, fenced)
        found = partition.fetch_offset_for_timestamp(p.timestamp, isolation, replica_id >= 0)
    except KafkaError as e:
        return _lo_error(index, code_of(e))
    if version == 0:
        olds = [found.offset] if found.offset >= 0 else []
        if p.max_num_offsets is not None and p.max_num_offsets < len(olds):
            olds = olds[: p.max_num_offsets]
        return LOPart(partition_index=index, error_code=0, old_style_offsets=olds)
    return LOPart(
        partition_index=index,
        error_code=0,
        timestamp=found.timestamp,
        offset=found.offset,
        leader_epoch=found.leader_epoch,
        old_style_offsets=[],
    )


@handles(ListOffsetsRequest)
async def handle_list_offsets(ctx: RequestContext, req: ListOffsetsRequest) -> ListOffsetsResponse:
    isolation = req.isolation_level if ctx.version >= 2 else 0
    topics = []
    described = allowed_names(
        ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, (t.name for t in req.topics)
    )
    for t in req.topics:
        if t.name in described:
            parts = [list_offset(ctx, t.name, p, isolation, req.replica_id) for p in t.partitions]
        else:
            parts = [
                _lo_error(p.partition_index, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                for p in t.partitions
            ]
        topics.append(LOTopic(name=t.name, partitions=parts))
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)


OETopic = OffsetForLeaderEpochResponse.Topics
OEPart = OffsetForLeaderEpochResponse.Topics.Partitions


def _end_offset(
    ctx: RequestContext, topic: str, p: OffsetForLeaderEpochRequest.Topics.Partitions
) -> OEPart:
    try:
        partition = _leader(ctx, topic, p.partition)
    except KafkaError as e:
        return OEPart(error_code=code_of(e), partition=p.partition, leader_epoch=-1, end_offset=-1)
    fenced = partition.check_epoch(p.current_leader_epoch)
    if fenced:
        return OEPart(error_code=fenced, partition=p.partition, leader_epoch=-1, end_offset=-1)
    epoch, end = partition.end_offset_for_epoch(p.leader_epoch)
    return OEPart(
        error_code=ErrorCode.NONE, partition=p.partition, leader_epoch=epoch, end_offset=end
    )


@handles(OffsetForLeaderEpochRequest)
async def handle_offset_for_leader_epoch(
    ctx: RequestContext, req: OffsetForLeaderEpochRequest
) -> OffsetForLeaderEpochResponse:
    # A follower (replica_id >= 0, v3+) needs CLUSTER_ACTION; a consumer DESCRIBE on the topic.
    if ctx.version >= 3 and req.replica_id >= 0:
        described = (
            {t.topic for t in req.topics}
            if cluster_allowed(ctx, AclOperation.CLUSTER_ACTION)
            else set()
        )
    else:
        described = allowed_names(
            ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, (t.topic for t in req.topics)
        )
    denied = ErrorCode.TOPIC_AUTHORIZATION_FAILED
    topics = [
        OETopic(
            topic=t.topic,
            partitions=[
                _end_offset(ctx, t.topic, p)
                if t.topic in described
                else OEPart(
                    error_code=denied, partition=p.partition, leader_epoch=-1, end_offset=-1
                )
                for p in t.partitions
            ],
        )
        for t in req.topics
    ]
    return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics)
