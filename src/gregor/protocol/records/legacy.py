"""Legacy message sets, message format v0 and v1 (magic 0 and 1), built and read.

Layout of one entry (offsets in bytes):
    0 offset int64   8 message_size int32   12 crc uint32 (zlib CRC32 of bytes 16..end)
   16 magic int8    17 attributes int8     [18 timestamp int64, magic 1 only]
   then key (int32 length, -1 = null, bytes) and value (same).
Attributes: bits 0-2 compression codec, bit 3 timestamp type (v1; 1 = LogAppendTime).

Compression wraps a whole inner message set in the value of one wrapper message carrying the
codec. For magic 1, inner offsets are relative (0, 1, ...) and the wrapper's offset is the
absolute offset of the last inner message, so inner absolute offset = wrapper offset -
last inner relative offset + inner relative offset (a produced wrapper whose offset is still
below that keeps relative offsets). For magic 0 inner offsets are absolute.
A LogAppendTime wrapper's timestamp applies to all its inner messages. Inner messages may not
be compressed themselves and share the wrapper's magic.

:func:`iter_shallow_messages` walks the outer entries; :func:`deep_messages` opens a wrapper;
:func:`iter_legacy_messages` does both, yielding every message with its absolute offset.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from typing import NamedTuple

from gregor.protocol.exceptions import ProtocolError
from gregor.protocol.records import compression as _compression
from gregor.protocol.records.compression import DEFAULT_MAX_DECOMPRESSED_SIZE

Buffer = bytes | bytearray | memoryview

NO_TIMESTAMP = -1
COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08

_PREFIX = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_TIMESTAMP = struct.Struct(">q")
_I32 = struct.Struct(">i")
_V0_MIN_SIZE = 14  # crc + magic + attributes + two lengths
_V1_MIN_SIZE = 22  # ... + timestamp


class LegacyMessage(NamedTuple):
    offset: int
    magic: int
    attributes: int
    timestamp: int  # NO_TIMESTAMP for magic 0
    key: bytes | None
    value: bytes | None

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        return (self.attributes & TIMESTAMP_TYPE_MASK) >> 3 if self.magic > 0 else 0


def encode_message(
    offset: int,
    magic: int,
    attributes: int,
    timestamp: int,
    key: Buffer | None,
    value: Buffer | None,
) -> bytes:
    """One message set entry (offset, size, crc, message)."""
    if magic not in (0, 1):
        raise ValueError(f"legacy message magic must be 0 or 1, not {magic}")
    parts = [bytes((magic, attributes & 0xFF))]
    if magic == 1:
        parts.append(_TIMESTAMP.pack(timestamp))
    for field in (key, value):
        if field is None:
            parts.append(b"\xff\xff\xff\xff")
        else:
            parts.append(_I32.pack(len(field)))
            parts.append(bytes(field))
    body = b"".join(parts)
    crc = zlib.crc32(body)
    return struct.pack(">qiI", offset, len(body) + 4, crc) + body


class MessageSetBuilder:
    """Builds a v0/v1 message set: plain messages, or one compressed wrapper."""

    __slots__ = (
        "magic",
        "compression",
        "compression_level",
        "base_offset",
        "timestamp_type",
        "_messages",
        "_next_delta",
    )

    def __init__(
        self,
        magic: int,
        compression: int = 0,
        *,
        base_offset: int = 0,
        timestamp_type: int = 0,
        compression_level: int | None = None,
    ) -> None:
        if magic not in (0, 1):
            raise ValueError(f"legacy message magic must be 0 or 1, not {magic}")
        if compression not in (0, 1, 2, 3):
            raise ValueError(f"codec {compression} is not available for message format v{magic}")
        self.magic = magic
        self.compression = compression
        self.compression_level = compression_level
        self.base_offset = base_offset
        self.timestamp_type = timestamp_type if magic == 1 else 0
        self._messages: list[tuple[int, int, Buffer | None, Buffer | None]] = []
        self._next_delta = 0

    def __len__(self) -> int:
        return len(self._messages)

    def append(
        self,
        timestamp: int,
        key: Buffer | None,
        value: Buffer | None,
        *,
        offset_delta: int | None = None,
    ) -> int:
        if offset_delta is None:
            offset_delta = self._next_delta
        elif offset_delta < self._next_delta:
            raise ValueError(f"offset delta {offset_delta} does not increase")
        self._messages.append((offset_delta, timestamp if self.magic else NO_TIMESTAMP, key, value))
        self._next_delta = offset_delta + 1
        return offset_delta

    def build(self, *, wrapper_timestamp: int | None = None) -> bytes:
        """The message set. For a compressed v1 set the wrapper's timestamp is the max inner
        timestamp unless ``wrapper_timestamp`` (LogAppendTime) is given."""
        magic = self.magic
        base = self.base_offset
        ts_attr = TIMESTAMP_TYPE_MASK if self.timestamp_type else 0
        if not self.compression:
            return b"".join(
                encode_message(base + d, magic, ts_attr, ts, k, v) for d, ts, k, v in self._messages
            )
        if not self._messages:
            return b""
        if magic == 1:
            inner = b"".join(encode_message(d, 1, 0, ts, k, v) for d, ts, k, v in self._messages)
        else:
            inner = b"".join(
                encode_message(base + d, 0, 0, ts, k, v) for d, ts, k, v in self._messages
            )
        payload = _compression.compress(
            self.compression, inner, magic=magic, level=self.compression_level
        )
        if wrapper_timestamp is None:
            wrapper_timestamp = max(m[1] for m in self._messages) if magic else NO_TIMESTAMP
        last = base + self._messages[-1][0]
        return encode_message(
            last, magic, self.compression | ts_attr, wrapper_timestamp, None, payload
        )


def read_message(
    buf: Buffer, pos: int = 0, *, verify_crc: bool = True
) -> tuple[LegacyMessage, int]:
    """Parse the entry at ``pos`` without opening a compressed value. Returns (message, end)."""
    if len(buf) - pos < 12 + _V0_MIN_SIZE:
        raise ProtocolError("legacy message truncated")
    offset, size, crc, magic, attributes = _PREFIX.unpack_from(buf, pos)
    if magic not in (0, 1):
        raise ProtocolError(f"legacy message magic {magic} is not 0 or 1")
    if size < (_V1_MIN_SIZE if magic else _V0_MIN_SIZE):
        raise ProtocolError(f"legacy message size {size} is too small")
    end = pos + 12 + size
    if end > len(buf):
        raise ProtocolError("legacy message truncated")
    mv = memoryview(buf)
    if verify_crc and zlib.crc32(mv[pos + 16 : end]) != crc:
        raise ProtocolError(f"legacy message at byte {pos} fails its CRC32 check")
    p = pos + 18
    if magic:
        (timestamp,) = _TIMESTAMP.unpack_from(buf, p)
        p += 8
    else:
        timestamp = NO_TIMESTAMP
    fields: list[bytes | None] = []
    for _ in range(2):
        if end - p < 4:
            raise ProtocolError("legacy message field truncated")
        (n,) = _I32.unpack_from(buf, p)
        p += 4
        if n == -1:
            fields.append(None)
        elif n < 0 or n > end - p:
            raise ProtocolError(f"legacy message field length {n} is invalid")
        else:
            fields.append(bytes(mv[p : p + n]))
            p += n
    if p != end:
        raise ProtocolError("legacy message fields do not add up to its size")
    return LegacyMessage(offset, magic, attributes, timestamp, fields[0], fields[1]), end


def iter_shallow_messages(
    buf: Buffer, *, verify_crc: bool = True, allow_partial_tail: bool = False
) -> Iterator[LegacyMessage]:
    """The outer entries of a message set (wrappers left compressed)."""
    pos = 0
    end = len(buf)
    while pos < end:
        if allow_partial_tail:
            if end - pos < 12:
                return
            (size,) = _I32.unpack_from(buf, pos + 8)
            if size >= 0 and pos + 12 + size > end:
                return
        msg, pos = read_message(buf, pos, verify_crc=verify_crc)
        yield msg


def deep_messages(
    wrapper: LegacyMessage,
    *,
    verify_crc: bool = True,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> list[LegacyMessage]:
    """The inner messages of a compressed wrapper, with absolute offsets."""
    codec = wrapper.compression
    if not codec:
        return [wrapper]
    if wrapper.value is None:
        raise ProtocolError("compressed legacy message has a null value")
    if codec == _compression.Compression.ZSTD:
        raise _compression.UnsupportedCompressionError(
            "zstd is not allowed in message format v0/v1"
        )
    data = _compression.decompress(codec, wrapper.value, max_size=max_decompressed_size)
    inner = list(iter_shallow_messages(data, verify_crc=verify_crc))
    if not inner:
        raise ProtocolError("compressed legacy message holds no messages")
    magic = wrapper.magic
    for m in inner:
        if m.magic != magic:
            raise ProtocolError("inner message magic differs from its wrapper's")
        if m.compression:
            raise ProtocolError("inner legacy message is itself compressed")
    if magic == 0:
        return inner
    # A producer does not know offsets and leaves the wrapper's at 0: then, as Kafka does, the
    # inner offsets stay relative.
    shift = max(wrapper.offset - inner[-1].offset, 0)
    log_append = wrapper.attributes & TIMESTAMP_TYPE_MASK
    return [
        LegacyMessage(
            m.offset + shift,
            m.magic,
            m.attributes | TIMESTAMP_TYPE_MASK if log_append else m.attributes,
            wrapper.timestamp if log_append else m.timestamp,
            m.key,
            m.value,
        )
        for m in inner
    ]


def iter_legacy_messages(
    buf: Buffer,
    *,
    verify_crc: bool = True,
    allow_partial_tail: bool = False,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> Iterator[LegacyMessage]:
    """Every message of a v0/v1 message set, wrappers opened, offsets absolute."""
    for msg in iter_shallow_messages(
        buf, verify_crc=verify_crc, allow_partial_tail=allow_partial_tail
    ):
        if msg.compression:
            yield from deep_messages(
                msg, verify_crc=verify_crc, max_decompressed_size=max_decompressed_size
            )
        else:
            yield msg
