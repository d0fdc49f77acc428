"""Validating record batches before they are appended (Kafka's LogValidator).

Theory of operation. A record set is checked batch by batch (:func:`validate_batches`): its
header and CRC always; as a leader (the log assigns offsets) also what it is about to rewrite
(record count against offset delta, a producer id with a sequence, no control batch from a
client) and every record, as Kafka's LogValidator walks them: :func:`scan_batch` decompresses
the batch (bounded) and runs the record walk's ``check_records``, which refuses a malformed
record or a count that does not match the records (INVALID_RECORD with Kafka's texts; a
payload that does not decompress is CORRUPT_MESSAGE, one that inflates past the bound
MESSAGE_TOO_LARGE) and returns what the log judges the batch by: offset deltas 0, 1, 2, ...;
keys on a compacted topic; record timestamps within ``message.timestamp.before/after.max.ms``
on a CreateTime topic; no LogAppendTime set by a producer on a LogAppendTime topic. Any of
those is refused as Kafka does (KIP-467): INVALID_RECORD or INVALID_TIMESTAMP with each record
at fault in ``record_errors`` (:func:`record_errors`, which walks the batch again with the
pure-Python walk: errors are rare and their texts need the records). A CreateTime batch whose
max timestamp differs from its records' (or that its producer marked LogAppendTime) gets its
records' max timestamp and CreateTime, as Kafka's ``setMaxTimestamp`` does.

A follower checks headers, CRCs and that offsets increase, never the records: it appends the
leader's bytes as they are. Nothing here runs when a log is loaded or recovered, so stored
batches are never refused afterwards.

The expensive part of a leader's check, decompressing, may be done before the append and off
the event loop: the broker calls :func:`scan_batches` for a compressed batch (in a worker
thread when it inflates past a MiB) and passes the result to ``Log.append`` (``scanned``),
which then checks the batch with it (the fast path too). A scan never raises: a batch's error
waits in its :class:`ScannedBatch` until the log reaches that check, so the refusal is the
same, in the same order, either way.

:func:`place_batches` then gives the segment what it indexes, a leader first stamping each
batch in place (base offset, partition leader epoch, LogAppendTime or the max timestamp).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from crc32c import crc32c

from gregor.protocol.exceptions import ProtocolError
from gregor.protocol.records import _scan_py
from gregor.protocol.records.batch import decode_batch
from gregor.protocol.records.compression import (
    DEFAULT_MAX_DECOMPRESSED_SIZE,
    DecompressedSizeError,
    decompress,
)
from gregor.protocol.records.control import ControlRecordType, parse_control_record
from gregor.protocol.records.header import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    HEADER_SIZE,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    read_header,
    set_base_offset,
    set_create_time,
    set_log_append_time,
    set_partition_leader_epoch,
)
from gregor.protocol.records.walk import check_records
from gregor.storage.config import LogConfig
from gregor.storage.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    RecordBatchTooLargeError,
    RecordError,
    RecordTooLargeError,
    StorageError,
)
from gregor.storage.file_records import BatchPosition
from gregor.storage.index import NO_TIMESTAMP
from gregor.storage.producer_state import AppendOrigin

Buffer = bytes | bytearray | memoryview

#: A batch's records may take at most this many bytes once decompressed (a decompression bomb
#: costs no more).
MAX_DECOMPRESSED_SIZE = DEFAULT_MAX_DECOMPRESSED_SIZE


class ScannedBatch(NamedTuple):
    """One batch's records as :func:`scan_batch` found them: the (decompressed) record bytes,
    ``walk.check_records``' facts, or the error that refuses the batch."""

    payload: Buffer
    min_timestamp: int
    max_timestamp: int
    keyless: int
    bad_delta: int
    error: StorageError | None


def scan_batch(
    mv: memoryview, pos: int, h: BatchHeader, max_size: int = MAX_DECOMPRESSED_SIZE
) -> ScannedBatch:
    """Decompress (at most ``max_size`` bytes) and walk the records of the batch at ``pos``;
    never raises (the error is returned in the result)."""
    payload: Buffer = mv[pos + HEADER_SIZE : pos + h.batch_length + LOG_OVERHEAD]
    codec = h.attributes & COMPRESSION_MASK
    if codec:
        try:
            payload = decompress(codec, payload, max_size=max_size)
        except DecompressedSizeError:
            return _failed(
                payload,
                RecordTooLargeError(f"The record batch decompresses to more than {max_size} bytes"),
            )
        except ProtocolError as e:
            return _failed(payload, CorruptRecordError(f"Failed to decompress record stream: {e}"))
    try:
        lo, hi, keyless, bad_delta = check_records(payload, h.records_count, h.base_timestamp)
    except ProtocolError as e:
        return _failed(payload, InvalidRecordError(str(e)))
    return ScannedBatch(payload, lo, hi, keyless, bad_delta, None)


def _failed(payload: Buffer, error: StorageError) -> ScannedBatch:
    return ScannedBatch(payload, NO_TIMESTAMP, NO_TIMESTAMP, 0, -1, error)


def scan_batches(
    records: Buffer, max_size: int = MAX_DECOMPRESSED_SIZE
) -> list[ScannedBatch] | None:
    """:func:`scan_batch` for every batch of a record set (what ``Log.append`` takes as
    ``scanned``); None when the set is not whole v2 batches (the log then says why). Safe to
    run in another thread: it only reads ``records``."""
    mv = memoryview(records)
    out = []
    pos = 0
    total = len(mv)
    while pos < total:
        try:
            h = read_header(mv, pos)
        except ProtocolError:
            return None
        if pos + h.size > total:
            return None
        out.append(scan_batch(mv, pos, h, max_size))
        pos += h.size
    return out


def validate_batches(
    mv: memoryview,
    config: LogConfig,
    origin: AppendOrigin,
    assign: bool,
    now_ms: int,
    name: str = "",
    scanned: Sequence[ScannedBatch] | None = None,
) -> tuple[list[tuple[int, BatchHeader]], list[int]]:
    """(position, header) of every batch of the record set ``mv`` and the positions of the
    batches whose max timestamp (and CreateTime) must be written, or the StorageError that
    refuses it. ``assign``: the log is the leader and will assign offsets; ``name``: the
    partition's, for Kafka's messages; ``scanned``: :func:`scan_batches` of ``mv`` done
    beforehand (else each batch is scanned here)."""
    cfg = config
    total = len(mv)
    if total == 0:
        raise CorruptRecordError("the record set is empty")
    if total > cfg.segment_bytes:
        raise RecordBatchTooLargeError(
            f"record set of {total} bytes is larger than segment.bytes {cfg.segment_bytes}"
        )
    client = origin is AppendOrigin.CLIENT
    max_size = cfg.max_message_bytes
    headers: list[tuple[int, BatchHeader]] = []
    restamp: list[int] = []
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
                f"The record batch size in the append to {name} is {size} bytes which exceeds "
                f"the maximum configured value of {max_size}."
            )
        if crc32c(mv[pos + ATTRIBUTES_OFFSET : pos + size]) != h.crc:
            raise CorruptRecordError(
                f"Record is corrupt (stored crc = {h.crc}) in topic partition {name}."
            )
        if assign:
            _check_header(h, client, name)
            batch = scanned[len(headers)] if scanned is not None else scan_batch(mv, pos, h)
            h = _check_records(mv, pos, h, batch, cfg, client, now_ms, name)
            if h.max_timestamp != batch.max_timestamp or h.attributes & TIMESTAMP_TYPE_MASK:
                if not cfg.log_append_time and not h.is_control:
                    restamp.append(pos)
                    h = h._replace(
                        attributes=h.attributes & ~TIMESTAMP_TYPE_MASK,
                        max_timestamp=batch.max_timestamp,
                    )
        elif h.base_offset < prev_next:
            raise CorruptRecordError(
                f"batch offsets go backwards ({h.base_offset} after {prev_next - 1})"
            )
        prev_next = h.last_offset + 1
        headers.append((pos, h))
        pos += size
    return headers, restamp


def _check_header(h: BatchHeader, client: bool, name: str) -> None:
    """Kafka's ``validateBatch``: what a leader refuses from a batch's header."""
    if h.records_count <= 0:
        raise InvalidRecordError(
            f"Invalid reported count for record batch: {h.records_count} in topic partition {name}"
        )
    if h.records_count != h.last_offset_delta + 1:
        raise InvalidRecordError(
            f"Inconsistent batch offset range [{h.base_offset}, {h.last_offset}] and count of "
            f"records {h.records_count} in topic partition {name}"
        )
    if h.is_control and client:
        raise InvalidRecordError(
            f"Clients are not allowed to write control records in topic partition {name}"
        )
    if h.producer_id >= 0 and h.base_sequence < 0 and not h.is_control:
        raise InvalidRecordError(
            f"Invalid sequence number {h.base_sequence} in record batch with producerId "
            f"{h.producer_id} in topic partition {name}"
        )
    if h.is_transactional and h.producer_id < 0:
        raise InvalidRecordError("transactional batch without a producer id")


def _check_records(
    mv: memoryview,
    pos: int,
    h: BatchHeader,
    batch: ScannedBatch,
    cfg: LogConfig,
    client: bool,
    now_ms: int,
    name: str,
) -> BatchHeader:
    """Refuse the batch for its records (the scan's error, or KIP-467's record errors)."""
    if batch.error is not None:
        raise batch.error
    if h.is_control:
        return h
    wrong = batch.bad_delta >= 0 or (cfg.compact and batch.keyless > 0)
    if cfg.log_append_time:
        wrong = wrong or (client and bool(h.attributes & TIMESTAMP_TYPE_MASK))
    else:
        lo, hi = batch.min_timestamp, batch.max_timestamp
        before, after = cfg.message_timestamp_before_max_ms, cfg.message_timestamp_after_max_ms
        wrong = wrong or (lo != NO_TIMESTAMP and now_ms - lo > before)
        wrong = wrong or (hi != NO_TIMESTAMP and hi - now_ms > after)
    if wrong:
        errors, timestamps = record_errors(batch.payload, h, cfg, client, now_ms, name)
        if timestamps:
            raise InvalidTimestampError(
                "One or more records have been rejected due to invalid timestamp", errors
            )
        raise InvalidRecordError(_summary(errors), errors)
    return h


def record_errors(
    payload: Buffer, h: BatchHeader, cfg: LogConfig, client: bool, now_ms: int, name: str
) -> tuple[list[RecordError], bool]:
    """Every record of a refused batch at fault, as (index, Kafka's message), at most one each
    (an offset delta first, then a missing key, then its timestamp, as Kafka orders its
    checks); and whether any timestamp is at fault (the batch's error is then
    INVALID_TIMESTAMP)."""
    errors: list[RecordError] = []
    timestamps = False
    lat_from_client = cfg.log_append_time and client and h.attributes & TIMESTAMP_TYPE_MASK
    before, after = cfg.message_timestamp_before_max_ms, cfg.message_timestamp_after_max_ms
    records = _scan_py.walk(payload, h.records_count)
    for i, (offset_delta, ts_delta, key, value, _) in enumerate(records):
        if offset_delta != i:
            errors.append(
                (
                    i,
                    f"Record {i} has offset delta {offset_delta}: the records of a batch must have "
                    "offset deltas 0, 1, 2, ...",
                )
            )
        elif cfg.compact and key is None:
            errors.append(
                (i, f"Compacted topic cannot accept message without key in topic partition {name}")
            )
        elif lat_from_client:
            timestamps = True
            record = (
                f"DefaultRecord(offset={h.base_offset + offset_delta}, timestamp="
                f"{h.max_timestamp}, key={len(key or b'')} bytes, value={len(value or b'')} bytes)"
            )
            errors.append(
                (
                    i,
                    f"Invalid timestamp type in message {record}. Producer should not set timestamp "
                    "type to LogAppendTime.",
                )
            )
        elif not cfg.log_append_time:
            ts = h.base_timestamp + ts_delta
            if ts != NO_TIMESTAMP and (now_ms - ts > before or ts - now_ms > after):
                timestamps = True
                errors.append(
                    (
                        i,
                        f"Timestamp {ts} of message with offset {h.base_offset + offset_delta} is out "
                        f"of range. The timestamp should be within [{now_ms - before}, "
                        f"{now_ms + after}]",
                    )
                )
    return errors, timestamps


def _summary(errors: Sequence[RecordError]) -> str:
    """Kafka's INVALID_RECORD message for record errors (``LogValidator.processRecordErrors``,
    with Java's ``RecordError.toString``)."""
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in errors[:3])
    return (
        f"One or more records have been rejected due to {len(errors)} record errors in total, "
        f"and only showing the first three errors at most: [{shown}]"
    )


def read_control(mv: bytes | memoryview, pos: int, h: BatchHeader) -> tuple[bool, int, int] | None:
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
    restamp: Sequence[int] = (),
) -> tuple[memoryview, list[BatchPosition], int, int, int]:
    """Where each batch goes: (buffer to write, each batch's position, size, offsets and max
    timestamp (the LogAppendTime if set) for the segment's indexes, max timestamp, offset of
    the max timestamp, record count). As a leader (``leader_epoch`` given), first rewrite each
    batch's base offset and partition leader epoch (and, for LogAppendTime, its timestamps, or
    for the batches at ``restamp`` its max timestamp from its header in ``headers``, which
    changes the CRC) in place; a read-only buffer is copied first."""
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
            elif restamp and pos in restamp:
                set_create_time(buf, pos, h.max_timestamp)
        last = base + h.last_offset_delta
        ts = h.max_timestamp if log_append_time == NO_TIMESTAMP else log_append_time
        if ts > max_ts:
            max_ts, offset_of_max = ts, last
        batches.append(BatchPosition(pos, h.batch_length + LOG_OVERHEAD, base, last, ts))
        count += h.records_count
    return buf, batches, max_ts, offset_of_max, count
