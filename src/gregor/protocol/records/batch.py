"""RecordBatch v2: build batches from records and decode them back.

Theory of operation. A :class:`RecordBatchBuilder` serializes each appended record straight
into a bytearray (``scan.encode_record``: compiled, or the reference in ``_scan_py``), tracking what the header
needs: the first record's timestamp (the batch's base timestamp, which later records' signed
deltas are relative to), the max timestamp, the last offset delta and the count. ``build()``
compresses the record bytes if asked, writes the 61-byte header (layout in ``header``) and the
CRC32C over attributes..end.

The reader works the other way: :func:`decode_batch` parses the header, checks the CRC,
decompresses (bounded) and walks the records with ``scan``'s record walk.
Records come back with absolute offsets (base_offset + offset_delta) and absolute timestamps
(base_timestamp + timestamp_delta, or the batch's max_timestamp for LogAppendTime batches, as
Kafka's consumers do). Any inconsistency raises ProtocolError.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import NamedTuple

from crc32c import crc32c

from gregor.protocol.exceptions import ProtocolError
from gregor.protocol.records import compression as _compression
from gregor.protocol.records import walk as _walk
from gregor.protocol.records.compression import DEFAULT_MAX_DECOMPRESSED_SIZE
from gregor.protocol.records.header import (
    _HEADER,
    COMPRESSION_MASK,
    CONTROL_MASK,
    HEADER_SIZE,
    LOG_OVERHEAD,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    BatchHeader,
    crc_ok,
    iter_batches,
    read_header,
)

NO_TIMESTAMP = -1
CREATE_TIME = 0
LOG_APPEND_TIME = 1

Header = tuple[str, bytes | None]
Buffer = bytes | bytearray | memoryview


class Record(NamedTuple):
    """One record. ``offset`` is absolute when decoded from a batch."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[Header]


class RecordBatch:
    """A decoded v2 batch: its header and its records."""

    __slots__ = ("header", "records")

    def __init__(self, header: BatchHeader, records: list[Record]) -> None:
        self.header = header
        self.records = records

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records)

    def __len__(self) -> int:
        return len(self.records)

    def __repr__(self) -> str:
        h = self.header
        return (
            f"RecordBatch(base_offset={h.base_offset}, last_offset={h.last_offset}, "
            f"records={len(self.records)}, compression={h.compression}, "
            f"transactional={h.is_transactional}, control={h.is_control})"
        )

    base_offset = property(lambda self: self.header.base_offset)
    last_offset = property(lambda self: self.header.last_offset)
    last_offset_delta = property(lambda self: self.header.last_offset_delta)
    partition_leader_epoch = property(lambda self: self.header.partition_leader_epoch)
    base_timestamp = property(lambda self: self.header.base_timestamp)
    max_timestamp = property(lambda self: self.header.max_timestamp)
    producer_id = property(lambda self: self.header.producer_id)
    producer_epoch = property(lambda self: self.header.producer_epoch)
    base_sequence = property(lambda self: self.header.base_sequence)
    compression = property(lambda self: self.header.compression)
    timestamp_type = property(lambda self: self.header.timestamp_type)
    is_transactional = property(lambda self: self.header.is_transactional)
    is_control = property(lambda self: self.header.is_control)
    size = property(lambda self: self.header.size)


class RecordBatchBuilder:
    """Accumulates records and builds one v2 batch.

    ``append`` takes the record's timestamp (ms), key, value and headers; offset deltas count
    up from 0 unless given (they must increase; gaps are allowed, as compaction leaves them)."""

    __slots__ = (
        "base_offset",
        "compression",
        "compression_level",
        "timestamp_type",
        "producer_id",
        "producer_epoch",
        "base_sequence",
        "is_transactional",
        "is_control",
        "partition_leader_epoch",
        "records",
    )

    def __init__(
        self,
        *,
        base_offset: int = 0,
        compression: int = 0,
        compression_level: int | None = None,
        timestamp_type: int = CREATE_TIME,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = -1,
        base_sequence: int = NO_SEQUENCE,
        is_transactional: bool = False,
        is_control: bool = False,
        partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    ) -> None:
        if compression not in (0, 1, 2, 3, 4):
            raise ValueError(f"unknown compression codec {compression}")
        self.base_offset = base_offset
        self.compression = compression
        self.compression_level = compression_level
        self.timestamp_type = timestamp_type
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.is_transactional = is_transactional
        self.is_control = is_control
        self.partition_leader_epoch = partition_leader_epoch
        #: The encoded records and their counters (compiled when the record walk is).
        self.records = _walk.record_appender()

    def __len__(self) -> int:
        return self.records.count

    @property
    def records_size(self) -> int:
        """Bytes of (uncompressed) record data so far."""
        return len(self.records.buf)

    @property
    def next_offset_delta(self) -> int:
        return self.records.next_delta

    def append(
        self,
        timestamp: int,
        key: Buffer | None,
        value: Buffer | None,
        headers: Sequence[tuple[str | bytes, Buffer | None]] = (),
        *,
        offset_delta: int | None = None,
    ) -> int:
        """Append a record; return its offset delta."""
        return self.records.append(timestamp, key, value, headers, offset_delta)

    def append_record(self, record: Record) -> int:
        """Append a decoded record, keeping its absolute offset (relative to base_offset)."""
        return self.append(
            record.timestamp,
            record.key,
            record.value,
            record.headers,
            offset_delta=record.offset - self.base_offset,
        )

    def build(
        self, *, last_offset_delta: int | None = None, max_timestamp: int | None = None
    ) -> bytes:
        """The finished batch. ``last_offset_delta`` may exceed the last record's delta (a
        compacted batch keeps its original one); ``max_timestamp`` overrides the computed one
        (LogAppendTime)."""
        recs = self.records
        if last_offset_delta is None:
            last_offset_delta = max(recs.next_delta - 1, 0)
        elif last_offset_delta < recs.next_delta - 1:
            raise ValueError("last offset delta is below the last record's offset delta")
        base_ts = recs.base_timestamp if recs.base_timestamp is not None else NO_TIMESTAMP
        if max_timestamp is None:
            max_timestamp = recs.max_timestamp
        attributes = self.compression
        if self.timestamp_type == LOG_APPEND_TIME:
            attributes |= TIMESTAMP_TYPE_MASK
        if self.is_transactional:
            attributes |= TRANSACTIONAL_MASK
        if self.is_control:
            attributes |= CONTROL_MASK
        records: Buffer = recs.buf
        if self.compression:
            records = _compression.compress(
                self.compression, records, magic=2, level=self.compression_level
            )
        return _assemble(
            self.base_offset,
            self.partition_leader_epoch,
            attributes,
            last_offset_delta,
            base_ts,
            max_timestamp,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            recs.count,
            records,
        )


def _assemble(
    base_offset: int,
    partition_leader_epoch: int,
    attributes: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    count: int,
    records: Buffer,
) -> bytes:
    out = bytearray(HEADER_SIZE)
    out += records
    _HEADER.pack_into(
        out,
        0,
        base_offset,
        len(out) - LOG_OVERHEAD,
        partition_leader_epoch,
        2,
        0,
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    )
    crc = crc32c(memoryview(out)[21:])
    out[17:21] = crc.to_bytes(4, "big")
    return bytes(out)


def build_batch(
    records: Iterable[tuple[int, Buffer | None, Buffer | None] | Record], **builder_args: object
) -> bytes:
    """Build one batch from (timestamp, key, value) triples or Records (offsets kept)."""
    b = RecordBatchBuilder(**builder_args)  # type: ignore[arg-type]
    for r in records:
        if isinstance(r, Record):
            b.append_record(r)
        else:
            b.append(r[0], r[1], r[2])
    return b.build()


# --- reading ---


def decode_records(
    data: Buffer,
    count: int,
    base_offset: int = 0,
    base_timestamp: int = 0,
    log_append_time: int | None = None,
) -> list[Record]:
    """Decode ``count`` records that must fill ``data`` exactly (the record walk of ``scan``)."""
    return _walk.decode_records(data, count, base_offset, base_timestamp, log_append_time, Record)


def batch_payload(
    buf: Buffer,
    pos: int,
    header: BatchHeader,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> bytes:
    """The batch's record bytes, decompressed."""
    mv = memoryview(buf)[pos + HEADER_SIZE : pos + header.size]
    codec = header.attributes & COMPRESSION_MASK
    if codec:
        return _compression.decompress(codec, mv, max_size=max_decompressed_size)
    return bytes(mv)


def decode_batch(
    buf: Buffer,
    pos: int = 0,
    *,
    verify_crc: bool = True,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> RecordBatch:
    """Decode the whole v2 batch at ``pos``: header, CRC, decompression, records."""
    h = read_header(buf, pos)
    if pos + h.size > len(buf):
        raise ProtocolError("record batch truncated")
    if verify_crc and not crc_ok(buf, pos, h):
        raise ProtocolError(f"record batch at byte {pos} fails its CRC32C check")
    data = batch_payload(buf, pos, h, max_decompressed_size)
    records = decode_records(
        data,
        h.records_count,
        h.base_offset,
        h.base_timestamp,
        h.max_timestamp if h.attributes & TIMESTAMP_TYPE_MASK else None,
    )
    return RecordBatch(h, records)


def decode_batches(
    buf: Buffer,
    *,
    verify_crc: bool = True,
    allow_partial_tail: bool = False,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> list[RecordBatch]:
    """Decode every v2 batch in ``buf``."""
    return [
        decode_batch(buf, pos, verify_crc=verify_crc, max_decompressed_size=max_decompressed_size)
        for pos, _ in iter_batches(buf, allow_partial_tail=allow_partial_tail)
    ]


def iter_records(
    buf: Buffer,
    *,
    skip_control: bool = False,
    verify_crc: bool = True,
    allow_partial_tail: bool = False,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> Iterator[Record]:
    """Every record of every v2 batch in ``buf``, with absolute offsets and timestamps."""
    for pos, h in iter_batches(buf, allow_partial_tail=allow_partial_tail):
        if skip_control and h.is_control:
            continue
        yield from decode_batch(
            buf, pos, verify_crc=verify_crc, max_decompressed_size=max_decompressed_size
        ).records
