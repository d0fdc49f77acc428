"""Produce: validate, append, answer per partition; acks 0, 1 and -1.

The records stay opaque: the log validates batch headers and CRCs and rewrites base offsets
in place. Legacy message sets (magic 0/1, from old clients) are up-converted to v2 batches
first, since the log stores v2 only. On a single node the ISR is this broker alone, so acks=-1
is satisfied as soon as the local append returns; the high watermark moves to the log end
offset at once and any waiting fetch is woken.
"""

from __future__ import annotations

import logging
from typing import Any

from gregor.broker.handlers.registry import handles
from gregor.broker.logging import log_event
from gregor.protocol.errors import ErrorCode
from gregor.protocol.exceptions import ProtocolError
from gregor.protocol.messages.produce import ProduceRequest, ProduceResponse
from gregor.protocol.records.convert import upconvert
from gregor.protocol.records.header import HEADER_SIZE, peek_magic, read_header
from gregor.storage.errors import StorageError

log = logging.getLogger("gregor.broker.produce")

TopicResp = ProduceResponse.Responses
PartResp = ProduceResponse.Responses.PartitionResponses


def _error(index: int, code: int, message: str | None = None) -> PartResp:
    return PartResp(
        index=index, error_code=code, base_offset=-1, log_append_time_ms=-1,
        log_start_offset=-1, record_errors=[], error_message=message,
    )


def _verify_transaction(broker: Any, plog: Any, topic: str, index: int, records: Any,
                        transactional_id: str | None) -> int:
    """KIP-890: a transactional batch that starts its producer's transaction on this partition
    must come after the partition was added to the transaction (AddPartitionsToTxn), or a late
    write from a finished transaction would open a transaction nobody ends."""
    txn = getattr(broker, "transactions", None)
    if txn is None or transactional_id is None or len(records) < HEADER_SIZE:
        return 0
    h = read_header(records)
    if h.magic != 2 or not h.is_transactional or h.producer_id < 0:
        return 0
    entry = plog.producer_state.last_entry(h.producer_id)
    if entry is not None and entry.current_txn_first_offset >= 0 and entry.producer_epoch == h.producer_epoch:
        return 0
    return txn.verify_produce(transactional_id, topic, index, h.producer_id, h.producer_epoch)


def append_partition(broker: Any, topic: str, index: int, records: Any, version: int,
                     transactional_id: str | None = None) -> PartResp:
    ts = broker.topic(topic)
    if ts is None or not 0 <= index < len(ts.partitions):
        return _error(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    plog = broker.get_log(topic, index)
    if plog is None:
        return _error(index, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    if records is None or len(records) == 0:
        return _error(index, ErrorCode.CORRUPT_MESSAGE, "empty record set")
    try:
        magic = peek_magic(records)
        if magic < 2:
            records = upconvert(records, max_decompressed_size=max(plog.config.max_message_bytes * 4, 1 << 26))
        elif transactional_id is not None:
            code = _verify_transaction(broker, plog, topic, index, records, transactional_id)
            if code:
                return _error(index, code)
        # No copy here: the log stamps offsets into a writable buffer in place and copies (or
        # writes in two pieces) a read-only one such as a slice of the request frame.
        info = plog.append(records, leader_epoch=ts.partitions[index].leader_epoch)
    except StorageError as e:
        return _error(index, e.error_code if e.error_code >= 0 else ErrorCode.UNKNOWN_SERVER_ERROR, str(e))
    except ProtocolError as e:
        code = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE if type(e).__name__ == "UnsupportedCompressionError" else ErrorCode.CORRUPT_MESSAGE
        return _error(index, code, str(e))
    plog.update_high_watermark(plog.log_end_offset)
    broker.watchers.notify((topic, index))
    return PartResp(
        index=index, error_code=0, base_offset=info.first_offset,
        log_append_time_ms=info.log_append_time, log_start_offset=info.log_start_offset,
        record_errors=[], error_message=None,
    )


@handles(ProduceRequest, 0, 11)
async def handle_produce(ctx: Any, req: ProduceRequest) -> ProduceResponse | None:
    broker = ctx.broker
    version = ctx.version
    responses = []
    if req.acks not in (-1, 0, 1):
        for t in req.topic_data:
            responses.append(TopicResp(name=t.name, partition_responses=[
                _error(p.index, ErrorCode.INVALID_REQUIRED_ACKS) for p in t.partition_data
            ]))
    else:
        for t in req.topic_data:
            txn_id = req.transactional_id if version >= 3 else None
            parts = [append_partition(broker, t.name, p.index, p.records, version, txn_id) for p in t.partition_data]
            responses.append(TopicResp(name=t.name, partition_responses=parts))
    if req.acks == 0:
        for r in responses:
            for p in r.partition_responses:
                if p.error_code:
                    log_event(log, "produce.error", logging.WARNING, topic=r.name, partition=p.index,
                              error=ErrorCode(p.error_code).name, acks=0)
        return None
    return ProduceResponse(responses=responses, throttle_time_ms=0)
