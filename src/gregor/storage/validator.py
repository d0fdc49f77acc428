"""Validating record batches before they are appended (Kafka's LogValidator).

Theory of operation. The broker never decodes records on the produce path: a record set is
checked batch by batch on its header and CRC (:func:`validate_batches`). As a leader, the log
also checks what it is about to rewrite (record count against offset delta, a producer id with
a sequence, no control batch from a client) and, for CreateTime topics, the timestamps against
``message.timestamp.before/after.max.ms``; as a follower it only checks that offsets increase.
Records are decoded in two cases only: a compacted topic refuses keyless records
(:func:`check_keys`), and a transaction marker's control record is read for its type and
coordinator epoch (:func:`read_control`).

:func:`place_batches` then gives the segment what it indexes, a leader first stamping each
batch in place (base offset, partition leader epoch, LogAppendTime).
"""

from __future__ import annotations

from crc32c import crc32c

from gregor.protocol.exceptions import ProtocolError
from gregor.protocol.records.batch import decode_batch
from gregor.protocol.records.control import ControlRecordType, parse_control_record
from gregor.protocol.records.header import (
    ATTRIBUTES_OFFSET,
    LOG_OVERHEAD,
    BatchHeader,
    read_header,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
)
from gregor.storage.config import LogConfig
from gregor.storage.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
)
from gregor.storage.file_records import BatchPosition
from gregor.storage.index import NO_TIMESTAMP
from gregor.storage.producer_state import AppendOrigin


def validate_batches(
    mv: memoryview,
    config: LogConfig,
    origin: AppendOrigin,
    assign: bool,
    now_ms: int,
) -> list[tuple[int, BatchHeader]]:
    """(position, header) of every batch of the record set ``mv``, or the StorageError that
    refuses it. ``assign``: the log is the leader and will assign offsets."""
    cfg = config
    total = len(mv)
    if total == 0:
        raise CorruptRecordError("the record set is empty")
    if total > cfg.segment_bytes:
        raise RecordBatchTooLargeError(
            f"record set of {total} bytes is larger than segment.bytes {cfg.segment_bytes}"
        )
    check_ts = assign and not cfg.log_append_time
    before = cfg.message_timestamp_before_max_ms
    after = cfg.message_timestamp_after_max_ms
    max_size = cfg.max_message_bytes
    headers = []
    pos = 0
    prev_next = -1
    while pos < total:
        try:
            h = read_header(mv, pos)
        except ProtocolError as e:
            raise CorruptRecordError(f"record batch at byte {pos}: {e}") from None
        size = h.batch_length + LOG_OVERHEAD
        if pos + size > total:
            raise CorruptRecordError(f"record batch at byte {pos} is truncated")
        if size > max_size:
            raise RecordTooLargeError(
                f"record batch of {size} bytes is larger than max.message.bytes {max_size}"
            )
        if crc32c(mv[pos + ATTRIBUTES_OFFSET : pos + size]) != h.crc:
            raise CorruptRecordError(f"record batch at byte {pos} fails its CRC32C check")
        if assign:
            if h.records_count <= 0 or h.records_count != h.last_offset_delta + 1:
                raise InvalidRecordError(
                    f"record batch at byte {pos} has {h.records_count} records but an "
                    f"offset delta of {h.last_offset_delta}"
                )
            if h.is_control and origin is AppendOrigin.CLIENT:
                raise InvalidRecordError("clients may not write control batches")
            if h.producer_id >= 0 and h.base_sequence < 0 and not h.is_control:
                raise InvalidRecordError(
                    f"batch from producer {h.producer_id} has no sequence number"
                )
            if h.is_transactional and h.producer_id < 0:
                raise InvalidRecordError("transactional batch without a producer id")
            if check_ts and not h.is_control:
                for ts in (h.base_timestamp, h.max_timestamp):
                    if ts != NO_TIMESTAMP and (now_ms - ts > before or ts - now_ms > after):
                        raise InvalidTimestampError(
                            f"timestamp {ts} of the batch at byte {pos} is out of range: it "
                            f"must be within [{now_ms - before}, {now_ms + after}]"
                        )
        elif h.base_offset < prev_next:
            raise CorruptRecordError(
                f"batch offsets go backwards ({h.base_offset} after {prev_next - 1})"
            )
        if cfg.compact and not h.is_control:
            check_keys(mv, pos)
        prev_next = h.last_offset + 1
        headers.append((pos, h))
        pos += size
    return headers


def check_keys(mv: memoryview, pos: int) -> None:
    """Refuse a batch of a compacted topic holding a record without a key."""
    try:
        batch = decode_batch(mv, pos, verify_crc=False)
    except ProtocolError as e:
        raise CorruptRecordError(f"record batch at byte {pos}: {e}") from None
    for r in batch.records:
        if r.key is None:
            # INVALID_RECORD, as Kafka answers since KIP-467: CORRUPT_MESSAGE is retriable
            # and makes clients retry a batch that can never succeed.
            raise InvalidRecordError("a compacted topic cannot accept a record without a key")


def read_control(
    mv: bytes | memoryview, pos: int, h: BatchHeader
) -> tuple[bool, int, int] | None:
    """(commit, coordinator_epoch, timestamp) of a control batch's transaction marker; None
    for an empty control batch or another control record type."""
    if h.records_count == 0:
        return None
    try:
        batch = decode_batch(mv, pos, verify_crc=False)
        if not batch.records:
            return None
        rec = batch.records[0]
        control = parse_control_record(rec)
    except ProtocolError as e:
        raise CorruptRecordError(f"control batch at byte {pos}: {e}") from None
    if control.type not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        return None
    return control.type == ControlRecordType.COMMIT, control.coordinator_epoch or 0, rec.timestamp


def place_batches(
    mv: memoryview,
    headers: list[tuple[int, BatchHeader]],
    bases: list[int],
    log_append_time: int,
    leader_epoch: int | None,
) -> tuple[memoryview, list[BatchPosition], int, int, int]:
    """Where each batch goes: (buffer to write, each batch's position, size, offsets and max
    timestamp (the LogAppendTime if set) for the segment's indexes, max timestamp, offset of
    the max timestamp, record count). As a leader (``leader_epoch`` given), first rewrite each
    batch's base offset and partition leader epoch (and, for LogAppendTime, its timestamps and
    so its CRC) in place; a read-only buffer is copied first."""
    buf = mv
    if leader_epoch is not None and mv.readonly:
        buf = memoryview(bytearray(mv))
    batches: list[BatchPosition] = []
    max_ts = NO_TIMESTAMP
    offset_of_max = bases[0]
    count = 0
    for i, (pos, h) in enumerate(headers):
        base = bases[i]
        if leader_epoch is not None:
            set_base_offset(buf, pos, base)
            set_partition_leader_epoch(buf, pos, leader_epoch)
            if log_append_time != NO_TIMESTAMP:
                set_log_append_time(buf, pos, log_append_time)
        last = base + h.last_offset_delta
        ts = h.max_timestamp if log_append_time == NO_TIMESTAMP else log_append_time
        if ts > max_ts:
            max_ts, offset_of_max = ts, last
        batches.append(BatchPosition(pos, h.batch_length + LOG_OVERHEAD, base, last, ts))
        count += h.records_count
    return buf, batches, max_ts, offset_of_max, count
