"""Batches in a segment file, read without copying more than needed (Kafka's FileRecords).

A segment file holds whole v2 batches back to back. These functions find batches by reading
their headers only: :func:`scan_batches` walks a file in chunks (optionally handing out each
batch's bytes), :func:`walk_to_offset` finds the first batch reaching an offset (and optionally a
timestamp) unpacking only the fields it needs, and :func:`first_record_at` finds a record by
timestamp inside one batch. The data was validated when it was appended, so a header that does
not parse ends a walk quietly (it can only be a torn tail, which recovery cuts).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from typing import NamedTuple

from gregor.protocol.exceptions import ProtocolError
from gregor.protocol.records.batch import decode_batch
from gregor.protocol.records.header import HEADER_SIZE, LOG_OVERHEAD, BatchHeader, read_header
from gregor.storage.errors import CorruptRecordError

READ_CHUNK = 64 * 1024
_WALK_CHUNK = 8 * 1024
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_OFFSET_LENGTH = struct.Struct(">qi")
_EMPTY = memoryview(b"")


class FileRegion(NamedTuple):
    """Bytes of a segment file for ``os.sendfile(sock, fd, position, length)``."""

    path: str
    fd: int
    position: int
    length: int

    def read(self) -> bytes:
        """The bytes themselves (one pread), for callers that cannot sendfile."""
        return pread_fully(self.fd, self.length, self.position)


class BatchPosition(NamedTuple):
    """Where a batch is: its file position and size, and its offsets."""

    position: int
    size: int
    base_offset: int
    last_offset: int
    max_timestamp: int


def pread_fully(fd: int, length: int, position: int) -> bytes:
    """``length`` bytes at ``position`` (fewer only at the end of the file)."""
    data = os.pread(fd, length, position)
    if len(data) == length or not data:
        return data
    parts = [data]
    got = len(data)
    while got < length:
        more = os.pread(fd, length - got, position + got)
        if not more:
            break
        parts.append(more)
        got += len(more)
    return b"".join(parts)


def read_header_at(fd: int, position: int) -> BatchHeader | None:
    """The header of the batch at ``position``, or None if there is none that parses."""
    data = os.pread(fd, HEADER_SIZE, position)
    if len(data) < HEADER_SIZE:
        return None
    try:
        return read_header(data)
    except ProtocolError:
        return None


def scan_batches(
    fd: int, start: int, end: int, *, with_data: bool, chunk: int
) -> Iterator[tuple[int, BatchHeader, memoryview]]:
    """(position, header, batch bytes or an empty view) of each whole batch in [start, end),
    reading ``chunk`` bytes at a time. The memoryview is valid until the next step. Stops at
    the first header that does not parse or batch that runs past ``end``."""
    buf = b""
    buf_start = start
    pos = start
    while end - pos >= HEADER_SIZE:
        rel = pos - buf_start
        if rel + HEADER_SIZE > len(buf):
            buf = pread_fully(fd, min(max(chunk, HEADER_SIZE), end - pos), pos)
            buf_start = pos
            rel = 0
            if len(buf) < HEADER_SIZE:
                return
        try:
            h = read_header(buf, rel)
        except ProtocolError:
            return
        size = h.size
        if pos + size > end:
            return
        if with_data:
            if rel + size > len(buf):
                buf = pread_fully(fd, max(min(chunk, end - pos), size), pos)
                buf_start = pos
                rel = 0
                if len(buf) < size:
                    return
            yield pos, h, memoryview(buf)[rel : rel + size]
        else:
            yield pos, h, _EMPTY
        pos += size


def walk_to_offset(
    fd: int, pos: int, end: int, offset: int, timestamp: int | None
) -> BatchPosition | None:
    """From the batch at ``pos``, the first batch with last offset >= ``offset`` (and, if
    ``timestamp`` is given, max timestamp >= it), reading headers a few KiB at a time."""
    unpack_ol = _OFFSET_LENGTH.unpack_from
    unpack_i32 = _I32.unpack_from
    unpack_i64 = _I64.unpack_from
    while end - pos >= HEADER_SIZE:
        buf = os.pread(fd, min(_WALK_CHUNK, end - pos), pos)
        n = len(buf)
        i = 0
        while n - i >= HEADER_SIZE:
            base, length = unpack_ol(buf, i)
            size = length + LOG_OVERHEAD
            if size < HEADER_SIZE or pos + i + size > end:
                return None
            last = base + unpack_i32(buf, i + 23)[0]
            if last >= offset:
                max_ts = unpack_i64(buf, i + 35)[0]
                if timestamp is None or max_ts >= timestamp:
                    return BatchPosition(pos + i, size, base, last, max_ts)
            i += size
        if i == 0:
            return None
        pos += i
    return None


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """A zigzag varint at ``pos``: (value, next position)."""
    u = 0
    shift = 0
    while True:
        b = data[pos]
        pos += 1
        u |= (b & 0x7F) << shift
        if b < 0x80:
            return (u >> 1) ^ -(u & 1), pos
        shift += 7


def first_record_at(batch: bytes, timestamp: int, min_offset: int) -> tuple[int, int] | None:
    """(timestamp, offset) of the batch's first record with a timestamp >= ``timestamp`` and
    an offset >= ``min_offset``. Uncompressed batches are scanned for the two fields only;
    compressed ones are decoded."""
    h = read_header(batch)
    if h.compression:
        for r in decode_batch(batch, 0, verify_crc=False).records:
            if r.timestamp >= timestamp and r.offset >= min_offset:
                return r.timestamp, r.offset
        return None
    log_append_time = h.max_timestamp if h.timestamp_type else None
    pos = HEADER_SIZE
    try:
        for _ in range(h.records_count):
            length, pos = _varint(batch, pos)
            end = pos + length
            ts_delta, p = _varint(batch, pos + 1)  # after the attributes byte
            offset_delta, _ = _varint(batch, p)
            ts = h.base_timestamp + ts_delta if log_append_time is None else log_append_time
            offset = h.base_offset + offset_delta
            if ts >= timestamp and offset >= min_offset:
                return ts, offset
            pos = end
    except IndexError:
        raise CorruptRecordError(f"batch at offset {h.base_offset} is truncated") from None
    return None


def offset_of_timestamp(batch: bytes, timestamp: int, default: int) -> int:
    """The offset of the batch's first record carrying exactly ``timestamp`` (``default``
    when none does or the batch does not decode)."""
    try:
        for r in decode_batch(batch, 0, verify_crc=False).records:
            if r.timestamp == timestamp:
                return r.offset
    except ProtocolError:
        pass
    return default
