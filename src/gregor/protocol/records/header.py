"""Fast path over RecordBatch v2 headers: parse, validate, rewrite, never decode records.

The broker's produce and fetch paths treat batches as opaque bytes. This module reads the
61-byte v2 batch header, checks the CRC32C (which covers attributes through the end of the
batch), and rewrites the fields a broker owns: base offset and partition leader epoch (outside
the CRC), and for LogAppendTime the timestamp-type bit and max timestamp (inside it, so the CRC
is recomputed).

Layout (offsets in bytes):
    0 base_offset int64         8 batch_length int32     12 partition_leader_epoch int32
   16 magic int8               17 crc uint32            21 attributes int16
   23 last_offset_delta int32  27 base_timestamp int64  35 max_timestamp int64
   43 producer_id int64        51 producer_epoch int16  53 base_sequence int32
   57 records_count int32      61 records...
batch_length counts the bytes after itself, so a batch occupies batch_length + 12 bytes.

For the log: ``count_records`` sums record counts, ``assign_offsets`` numbers a produced record
set in place (base offsets, leader epoch, LogAppendTime), ``valid_prefix_size`` finds where a
torn segment tail starts.
Legacy messages (magic 0/1) share the first 17 bytes' layout up to the magic byte.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import NamedTuple

from crc32c import crc32c

from gregor.protocol.exceptions import ProtocolError

HEADER_SIZE = 61
LOG_OVERHEAD = 12  # base_offset + batch_length
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
MAX_TIMESTAMP_OFFSET = 35
PARTITION_LEADER_EPOCH_OFFSET = 12

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

NO_PRODUCER_ID = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_PREFIX = struct.Struct(">qib")  # base_offset, batch_length, partition_leader_epoch omitted
_OFFSET_LEN = struct.Struct(">qi")
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I16 = struct.Struct(">h")


class BatchHeader(NamedTuple):
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        """0 = CreateTime, 1 = LogAppendTime."""
        return (self.attributes & TIMESTAMP_TYPE_MASK) >> 3

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF


def read_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Parse the v2 header at ``pos``. Raises ProtocolError if it is short, not magic 2, or
    its length is impossible. Does not check the CRC or that the whole batch is present."""
    if len(buf) - pos < HEADER_SIZE:
        raise ProtocolError("record batch header truncated")
    h = BatchHeader._make(_HEADER.unpack_from(buf, pos))
    if h.magic != 2:
        raise ProtocolError(f"record batch magic {h.magic} is not 2")
    if h.batch_length < HEADER_SIZE - LOG_OVERHEAD:
        raise ProtocolError(f"record batch length {h.batch_length} is too small")
    if h.records_count < 0 or h.last_offset_delta < 0:
        raise ProtocolError("record batch has a negative record count or offset delta")
    return h


def peek_magic(buf: bytes | bytearray | memoryview, pos: int = 0) -> int:
    """The magic byte of the batch or legacy message at ``pos`` (0, 1 or 2)."""
    if len(buf) - pos <= MAGIC_OFFSET:
        raise ProtocolError("record data truncated before the magic byte")
    return buf[pos + MAGIC_OFFSET]


def compute_crc(buf: bytes | bytearray | memoryview, pos: int, size: int) -> int:
    mv = memoryview(buf)
    return crc32c(mv[pos + ATTRIBUTES_OFFSET : pos + size])


def crc_ok(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> bool:
    return compute_crc(buf, pos, header.size) == header.crc


def iter_batches(
    buf: bytes | bytearray | memoryview, *, allow_partial_tail: bool = False
) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) for each v2 batch in ``buf`` without decoding records.

    A trailing partial batch (as a fetch response may carry) is skipped when
    ``allow_partial_tail`` is true and raises ProtocolError otherwise."""
    pos = 0
    end = len(buf)
    while pos < end:
        if end - pos < HEADER_SIZE:
            if allow_partial_tail:
                return
            raise ProtocolError("record batch truncated")
        h = read_header(buf, pos)
        if pos + h.size > end:
            if allow_partial_tail:
                return
            raise ProtocolError("record batch truncated")
        yield pos, h
        pos += h.size


def validate_batches(buf: bytes | bytearray | memoryview) -> list[tuple[int, BatchHeader]]:
    """Every batch whole, magic 2, CRC correct. Returns (position, header) pairs."""
    out = []
    for pos, h in iter_batches(buf):
        if not crc_ok(buf, pos, h):
            raise ProtocolError(f"record batch at byte {pos} fails its CRC32C check")
        out.append((pos, h))
    if not out:
        raise ProtocolError("record set is empty")
    return out


def set_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    """Rewrite base_offset in place (outside the CRC, so no recomputation)."""
    _I64.pack_into(buf, pos, base_offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    _I32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, epoch)


def set_log_append_time(buf: bytearray | memoryview, pos: int, timestamp_ms: int) -> None:
    """Mark the batch LogAppendTime with ``timestamp_ms`` as its max timestamp, fix the CRC."""
    (attributes,) = _I16.unpack_from(buf, pos + ATTRIBUTES_OFFSET)
    (batch_length,) = _I32.unpack_from(buf, pos + 8)
    _I16.pack_into(buf, pos + ATTRIBUTES_OFFSET, attributes | TIMESTAMP_TYPE_MASK)
    _I64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, timestamp_ms)
    _U32.pack_into(buf, pos + CRC_OFFSET, compute_crc(buf, pos, batch_length + LOG_OVERHEAD))


def set_create_time(buf: bytearray | memoryview, pos: int, max_timestamp: int) -> None:
    """Mark the batch CreateTime with ``max_timestamp`` as its max timestamp (its records'
    largest, as a leader sets it), fix the CRC."""
    (attributes,) = _I16.unpack_from(buf, pos + ATTRIBUTES_OFFSET)
    (batch_length,) = _I32.unpack_from(buf, pos + 8)
    _I16.pack_into(buf, pos + ATTRIBUTES_OFFSET, attributes & ~TIMESTAMP_TYPE_MASK)
    _I64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, max_timestamp)
    _U32.pack_into(buf, pos + CRC_OFFSET, compute_crc(buf, pos, batch_length + LOG_OVERHEAD))


def count_records(buf: bytes | bytearray | memoryview) -> int:
    """Total records_count over the v2 batches in ``buf`` (headers only)."""
    return sum(h.records_count for _, h in iter_batches(buf))


def assign_offsets(
    buf: bytearray | memoryview,
    base_offset: int,
    *,
    partition_leader_epoch: int | None = None,
    log_append_time: int | None = None,
) -> int:
    """Give the batches in ``buf`` consecutive offsets from ``base_offset`` in place, as a
    leader does on append; optionally stamp the leader epoch and LogAppendTime. Returns the
    next offset (last offset + 1). Validate the batches first: this trusts their headers."""
    next_offset = base_offset
    for pos, h in iter_batches(buf):
        _I64.pack_into(buf, pos, next_offset)
        if partition_leader_epoch is not None:
            _I32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, partition_leader_epoch)
        if log_append_time is not None:
            set_log_append_time(buf, pos, log_append_time)
        next_offset += h.last_offset_delta + 1
    return next_offset


def valid_prefix_size(buf: bytes | bytearray | memoryview, *, check_crc: bool = True) -> int:
    """Bytes of ``buf`` taken by leading whole, well-formed (and CRC-valid) v2 batches: where
    log recovery truncates a segment after a torn write."""
    pos = 0
    end = len(buf)
    while end - pos >= HEADER_SIZE:
        try:
            h = read_header(buf, pos)
        except ProtocolError:
            break
        if pos + h.size > end or (check_crc and not crc_ok(buf, pos, h)):
            break
        pos += h.size
    return pos
