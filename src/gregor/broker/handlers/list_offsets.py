"""ListOffsets (earliest, latest, by timestamp, max timestamp) and OffsetForLeaderEpoch."""

from __future__ import annotations

from typing import Any

from gregor.broker.handlers.registry import handles
from gregor.protocol.errors import ErrorCode
from gregor.protocol.messages.list_offsets import ListOffsetsRequest, ListOffsetsResponse
from gregor.protocol.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
READ_COMMITTED = 1

LOTopic = ListOffsetsResponse.Topics
LOPart = ListOffsetsResponse.Topics.Partitions


def _lo_error(index: int, code: int) -> LOPart:
    return LOPart(partition_index=index, error_code=code, timestamp=-1, offset=-1, leader_epoch=-1, old_style_offsets=[])


def list_offset(broker: Any, topic: str, p: Any, version: int, isolation: int, replica_id: int) -> LOPart:
    ts = broker.topic(topic)
    plog = broker.get_log(topic, p.partition_index) if ts else None
    if ts is None or plog is None:
        return _lo_error(p.partition_index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    epoch = ts.partitions[p.partition_index].leader_epoch
    cle = p.current_leader_epoch
    if version >= 4 and cle is not None and cle >= 0 and cle != epoch:
        return _lo_error(p.partition_index, ErrorCode.FENCED_LEADER_EPOCH if cle < epoch else ErrorCode.UNKNOWN_LEADER_EPOCH)
    t = p.timestamp
    cache = plog.leader_epoch_cache
    if t == LATEST or t == LATEST_TIERED:
        if replica_id >= 0:
            off = plog.log_end_offset
        else:
            off = plog.last_stable_offset if isolation == READ_COMMITTED else plog.high_watermark
        found = (-1, off, cache.latest_epoch if cache.latest_epoch is not None else epoch)
    elif t == EARLIEST or t == EARLIEST_LOCAL:
        off = plog.log_start_offset
        e = cache.epoch_for_offset(off)
        found = (-1, off, e if e is not None else epoch)
    elif t == MAX_TIMESTAMP:
        r = plog.latest_timestamp()
        found = (r.timestamp, r.offset, r.leader_epoch if r.leader_epoch is not None else -1) if r else (-1, -1, -1)
    elif t < 0:
        return _lo_error(p.partition_index, ErrorCode.INVALID_REQUEST)
    else:
        r = plog.offset_for_timestamp(t)
        if r is None or (isolation == READ_COMMITTED and r.offset >= plog.last_stable_offset) or r.offset >= plog.high_watermark:
            found = (-1, -1, -1)
        else:
            found = (r.timestamp, r.offset, r.leader_epoch if r.leader_epoch is not None else -1)
    timestamp, offset, leader_epoch = found
    if version == 0:
        olds = [offset] if offset >= 0 else []
        if p.max_num_offsets is not None and p.max_num_offsets < len(olds):
            olds = olds[: p.max_num_offsets]
        return LOPart(partition_index=p.partition_index, error_code=0, old_style_offsets=olds)
    return LOPart(
        partition_index=p.partition_index, error_code=0, timestamp=timestamp, offset=offset,
        leader_epoch=leader_epoch, old_style_offsets=[],
    )


@handles(ListOffsetsRequest)
async def handle_list_offsets(ctx: Any, req: ListOffsetsRequest) -> ListOffsetsResponse:
    version = ctx.version
    isolation = req.isolation_level if version >= 2 else 0
    topics = []
    for t in req.topics:
        parts = [list_offset(ctx.broker, t.name, p, version, isolation, req.replica_id) for p in t.partitions]
        topics.append(LOTopic(name=t.name, partitions=parts))
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)


OETopic = OffsetForLeaderEpochResponse.Topics
OEPart = OffsetForLeaderEpochResponse.Topics.Partitions


@handles(OffsetForLeaderEpochRequest)
async def handle_offset_for_leader_epoch(ctx: Any, req: OffsetForLeaderEpochRequest) -> OffsetForLeaderEpochResponse:
    broker = ctx.broker
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            ts = broker.topic(t.topic)
            plog = broker.get_log(t.topic, p.partition) if ts else None
            if ts is None or plog is None:
                parts.append(OEPart(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, partition=p.partition, leader_epoch=-1, end_offset=-1))
                continue
            epoch = ts.partitions[p.partition].leader_epoch
            cle = p.current_leader_epoch
            if cle is not None and cle >= 0 and cle != epoch:
                code = ErrorCode.FENCED_LEADER_EPOCH if cle < epoch else ErrorCode.UNKNOWN_LEADER_EPOCH
                parts.append(OEPart(error_code=code, partition=p.partition, leader_epoch=-1, end_offset=-1))
                continue
            e, end = plog.leader_epoch_cache.end_offset_for(p.leader_epoch, plog.log_end_offset)
            parts.append(OEPart(error_code=0, partition=p.partition, leader_epoch=e, end_offset=end))
        topics.append(OETopic(topic=t.topic, partitions=parts))
    return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics)
