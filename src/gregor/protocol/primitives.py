"""The guide's primitive types: fixed ints, varints, UUID, FLOAT64, strings, bytes, arrays, tags.

Two layers live here:

* Small module-level functions and tables (``read_uvarint``, ``uvarint_bytes``, ``UVARINT1``,
  ``uuid_from_int``, ``write_records``, ...) used by the generated message codecs, which inline
  the common cases themselves and call these for the rare ones.
* :class:`Reader` and :class:`Writer`, a cursor over a buffer and a growing list of byte parts,
  for hand-written code (headers, framing, tests). Every ``Reader`` method raises
  :class:`ProtocolError` for truncated or malformed input, never anything else.

Semantics, from the guide:

* VARINT / VARLONG are zig-zag encoded (protobuf style); UNSIGNED_VARINT is plain base-128.
  A varint may be at most 5 bytes and a varlong at most 10; longer is malformed.
* STRING / BYTES carry an INT16 / INT32 length; NULLABLE_ variants use -1 for null; any other
  negative length is malformed.
* COMPACT_ variants carry length + 1 as an UNSIGNED_VARINT; 0 means null (only allowed for the
  nullable variants).
* ARRAY carries an INT32 count (-1 = null), COMPACT_ARRAY count + 1 (0 = null). The guide does
  not say which arrays are nullable, so null is accepted everywhere and decodes to ``None``.
* RECORDS is NULLABLE_BYTES (COMPACT_RECORDS is COMPACT_NULLABLE_BYTES). Decoded records are
  ``memoryview`` slices of the input buffer, not copies: keep the input alive and unmodified
  while you use them, or copy with ``bytes(view)``.
* A tagged-field buffer is an UNSIGNED_VARINT count followed by (tag, size, bytes) triples,
  tags as UNSIGNED_VARINT, sorted ascending on write.
"""

from __future__ import annotations

import builtins
import struct
import uuid
from collections.abc import Callable, Iterable
from functools import cache
from typing import Any

from gregor.protocol.exceptions import ProtocolError

__all__ = [
    "ProtocolError",
    "Reader",
    "Writer",
    "ZERO_UUID",
    "UVARINT1",
    "read_uvarint",
    "read_uvarlong",
    "read_varint",
    "read_varlong",
    "uvarint_bytes",
    "varint_bytes",
    "varlong_bytes",
    "zigzag_encode",
    "zigzag_decode",
    "uuid_from_int",
    "uuid_from_bytes",
    "fixed_array_unpackers",
    "fixed_array_packers",
    "read_tag_buffer",
    "write_tag_buffer",
    "write_records",
    "write_compact_records",
]

INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")
UINT16 = struct.Struct(">H")
UINT32 = struct.Struct(">I")
FLOAT64 = struct.Struct(">d")
BOOLEAN = struct.Struct(">?")
UUID_PAIR = struct.Struct(">QQ")

_MASK64 = (1 << 64) - 1

#: ``UVARINT1[n]`` is the one-byte UNSIGNED_VARINT encoding of ``n`` for 0 <= n < 128.
UVARINT1: tuple[bytes, ...] = tuple(bytes((i,)) for i in range(128))

ZERO_UUID = uuid.UUID(int=0)

_new = object.__new__
_setattr = object.__setattr__
_UUID = uuid.UUID
_SAFE_UNKNOWN = uuid.SafeUUID.unknown


def uuid_from_int(n: int) -> uuid.UUID:
    """A ``uuid.UUID`` from its 128-bit integer, without ``UUID.__init__``'s checks (fast)."""
    if not n:
        return ZERO_UUID
    u = _new(_UUID)
    _setattr(u, "int", n)
    _setattr(u, "is_safe", _SAFE_UNKNOWN)
    return u


def uuid_from_bytes(b: bytes | memoryview) -> uuid.UUID:
    hi, lo = UUID_PAIR.unpack(b)
    return uuid_from_int((hi << 64) | lo)


# --- varints ---------------------------------------------------------------------------------


def read_uvarint(buf: Any, pos: int) -> tuple[int, int]:
    """Decode an UNSIGNED_VARINT (at most 5 bytes, < 2**32) at ``pos``: (value, new_pos)."""
    try:
        b = buf[pos]
        if b < 0x80:
            return b, pos + 1
        r = b & 0x7F
        b = buf[pos + 1]
        if b < 0x80:
            return r | (b << 7), pos + 2
        r |= (b & 0x7F) << 7
        b = buf[pos + 2]
        if b < 0x80:
            return r | (b << 14), pos + 3
        r |= (b & 0x7F) << 14
        b = buf[pos + 3]
        if b < 0x80:
            return r | (b << 21), pos + 4
        r |= (b & 0x7F) << 21
        b = buf[pos + 4]
    except IndexError:
        raise ProtocolError("truncated varint") from None
    if b < 0x10:
        return r | (b << 28), pos + 5
    if b < 0x80:
        raise ProtocolError("unsigned varint out of range")
    raise ProtocolError("varint longer than 5 bytes")


def _read_uvarint_n(buf: Any, pos: int, max_bytes: int) -> tuple[int, int]:
    result = 0
    shift = 0
    end = pos + max_bytes
    try:
        while pos < end:
            b = buf[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if b < 0x80:
                return result, pos
            shift += 7
    except IndexError:
        raise ProtocolError("truncated varint") from None
    raise ProtocolError(f"varint longer than {max_bytes} bytes")


def read_uvarlong(buf: Any, pos: int) -> tuple[int, int]:
    """Decode an unsigned varint of at most 10 bytes (< 2**64)."""
    n, pos = _read_uvarint_n(buf, pos, 10)
    if n > _MASK64:
        raise ProtocolError("varlong out of range")
    return n, pos


def zigzag_decode(n: int) -> int:
    return (n >> 1) ^ -(n & 1)


def zigzag_encode(n: int) -> int:
    """Zig-zag for any width: 0 -> 0, -1 -> 1, 1 -> 2, -2 -> 3, ..."""
    return (n << 1) if n >= 0 else ((-n) << 1) - 1


def read_varint(buf: Any, pos: int) -> tuple[int, int]:
    """Decode a zig-zag VARINT (int32 range)."""
    n, pos = read_uvarint(buf, pos)
    return (n >> 1) ^ -(n & 1), pos


def read_varlong(buf: Any, pos: int) -> tuple[int, int]:
    """Decode a zig-zag VARLONG (int64 range)."""
    n, pos = read_uvarlong(buf, pos)
    return (n >> 1) ^ -(n & 1), pos


def uvarint_bytes(n: int) -> bytes:
    """Encode an UNSIGNED_VARINT (0 <= n < 2**64)."""
    if 0 <= n < 0x80:
        return UVARINT1[n]
    if n < 0 or n > _MASK64:
        raise ProtocolError(f"unsigned varint out of range: {n}")
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def varint_bytes(n: int) -> bytes:
    if not -(1 << 31) <= n < (1 << 31):
        raise ProtocolError(f"varint out of range: {n}")
    return uvarint_bytes(zigzag_encode(n))


def varlong_bytes(n: int) -> bytes:
    if not -(1 << 63) <= n < (1 << 63):
        raise ProtocolError(f"varlong out of range: {n}")
    return uvarint_bytes(zigzag_encode(n))


# --- arrays of fixed-size values ------------------------------------------------------------

#: Arrays up to this many elements use a prebuilt struct.Struct per length.
FIXED_ARRAY_TABLE = 64


@cache
def fixed_array_unpackers(code: str) -> tuple[Callable[..., tuple[Any, ...]], ...]:
    """``t[n](buf, pos)`` unpacks n big-endian values of struct format ``code``."""
    return tuple(struct.Struct(f">{n}{code}").unpack_from for n in range(FIXED_ARRAY_TABLE))


@cache
def fixed_array_packers(code: str) -> tuple[Callable[..., bytes], ...]:
    """``t[n](*values)`` packs n big-endian values of struct format ``code``."""
    return tuple(struct.Struct(f">{n}{code}").pack for n in range(FIXED_ARRAY_TABLE))


# --- tagged fields ---------------------------------------------------------------------------


def read_tag_buffer(buf: Any, pos: int) -> tuple[dict[int, bytes], int]:
    """Read a whole tag buffer keeping every field as raw bytes: ({tag: bytes}, new_pos)."""
    count, pos = read_uvarint(buf, pos)
    tags: dict[int, bytes] = {}
    blen = len(buf)
    for _ in range(count):
        tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        end = pos + size
        if end > blen:
            raise ProtocolError("truncated tagged field")
        tags[tag] = bytes(buf[pos:end])
        pos = end
    return tags, pos


def write_tag_buffer(append: Callable[[Any], Any], fields: Iterable[tuple[int, bytes]]) -> None:
    """Write (tag, payload) pairs as a tag buffer, sorted by tag."""
    items = sorted(fields, key=lambda kv: kv[0])
    append(uvarint_bytes(len(items)))
    for tag, payload in items:
        append(uvarint_bytes(tag))
        append(uvarint_bytes(len(payload)))
        append(payload)


# --- records: the one place RECORDS are written ---------------------------------------------


def write_records(append: Callable[[Any], Any], value: Any) -> None:
    """Write a RECORDS field (INT32 length, -1 for null) through ``append``.

    Every generated encoder writes RECORDS through this function or
    :func:`write_compact_records`. ``value`` is appended as is (never copied): any object with
    ``len()`` works with ``encode_parts()``, so a broker can pass a file-region object and
    ``sendfile`` it when it writes the parts; ``encode()`` needs a bytes-like object.
    """
    if value is None:
        append(b"\xff\xff\xff\xff")
    else:
        append(INT32.pack(len(value)))
        append(value)


def write_compact_records(append: Callable[[Any], Any], value: Any) -> None:
    """Write a COMPACT_RECORDS field (length + 1 as UNSIGNED_VARINT, 0 for null)."""
    if value is None:
        append(b"\x00")
    else:
        n = len(value) + 1
        append(UVARINT1[n] if n < 128 else uvarint_bytes(n))
        append(value)


# --- Reader / Writer -------------------------------------------------------------------------


class Reader:
    """A cursor over a bytes-like buffer. All reads raise ProtocolError on malformed input."""

    __slots__ = ("buf", "pos", "end")

    def __init__(self, data: bytes | bytearray | memoryview, pos: int = 0) -> None:
        self.buf = data if isinstance(data, memoryview) else memoryview(data)
        self.pos = pos
        self.end = len(self.buf)

    @property
    def remaining(self) -> int:
        return self.end - self.pos

    def _take(self, n: int) -> int:
        pos = self.pos
        if n < 0 or pos + n > self.end:
            raise ProtocolError(f"truncated: need {n} bytes at {pos}, have {self.end - pos}")
        self.pos = pos + n
        return pos

    def _fixed(self, s: struct.Struct) -> Any:
        return s.unpack_from(self.buf, self._take(s.size))[0]

    def _int(self, s: struct.Struct) -> int:
        v: int = s.unpack_from(self.buf, self._take(s.size))[0]
        return v

    def boolean(self) -> bool:
        return self.buf[self._take(1)] != 0

    def int8(self) -> int:
        return self._int(INT8)

    def int16(self) -> int:
        return self._int(INT16)

    def int32(self) -> int:
        return self._int(INT32)

    def int64(self) -> int:
        return self._int(INT64)

    def uint16(self) -> int:
        return self._int(UINT16)

    def uint32(self) -> int:
        return self._int(UINT32)

    def float64(self) -> float:
        v: float = self._fixed(FLOAT64)
        return v

    def uuid(self) -> uuid.UUID:
        hi, lo = UUID_PAIR.unpack_from(self.buf, self._take(16))
        return uuid_from_int((hi << 64) | lo)

    def unsigned_varint(self) -> int:
        n, self.pos = read_uvarint(self.buf, self.pos)
        return n

    def varint(self) -> int:
        n, self.pos = read_varint(self.buf, self.pos)
        return n

    def varlong(self) -> int:
        n, self.pos = read_varlong(self.buf, self.pos)
        return n

    def raw(self, n: int) -> memoryview:
        start = self._take(n)
        return self.buf[start : start + n]

    def _length(self, compact: bool, nullable: bool, width: struct.Struct) -> int | None:
        if compact:
            n = self.unsigned_varint() - 1
        else:
            n = self._fixed(width)
        if n == -1 and nullable:
            return None
        if n < 0:
            raise ProtocolError(f"invalid length {n}")
        return n

    def _str(self, compact: bool, nullable: bool) -> str | None:
        n = self._length(compact, nullable, INT16)
        if n is None:
            return None
        try:
            return str(self.raw(n), "utf-8")
        except UnicodeDecodeError as e:
            raise ProtocolError(f"invalid UTF-8 in string: {e}") from None

    def string(self) -> str:
        return self._str(False, False)  # type: ignore[return-value]

    def nullable_string(self) -> str | None:
        return self._str(False, True)

    def compact_string(self) -> str:
        return self._str(True, False)  # type: ignore[return-value]

    def compact_nullable_string(self) -> str | None:
        return self._str(True, True)

    def _bytes(self, compact: bool, nullable: bool) -> bytes | None:
        n = self._length(compact, nullable, INT32)
        return None if n is None else bytes(self.raw(n))

    def bytes(self) -> bytes:
        return self._bytes(False, False)  # type: ignore[return-value]

    def nullable_bytes(self) -> builtins.bytes | None:
        return self._bytes(False, True)

    def compact_bytes(self) -> builtins.bytes:
        return self._bytes(True, False)  # type: ignore[return-value]

    def compact_nullable_bytes(self) -> builtins.bytes | None:
        return self._bytes(True, True)

    def records(self) -> memoryview | None:
        """RECORDS: a view into the buffer (no copy), or None."""
        n = self._length(False, True, INT32)
        return None if n is None else self.raw(n)

    def compact_records(self) -> memoryview | None:
        n = self._length(True, True, INT32)
        return None if n is None else self.raw(n)

    def array_length(self) -> int | None:
        """ARRAY count (None for null)."""
        return self._length(False, True, INT32)

    def compact_array_length(self) -> int | None:
        return self._length(True, True, INT32)

    def array(self, item: Callable[[], Any]) -> list[Any] | None:
        n = self.array_length()
        return None if n is None else self._items(n, item)

    def compact_array(self, item: Callable[[], Any]) -> list[Any] | None:
        n = self.compact_array_length()
        return None if n is None else self._items(n, item)

    def _items(self, n: int, item: Callable[[], Any]) -> list[Any]:
        if n > self.remaining:
            raise ProtocolError(f"array count {n} exceeds the remaining {self.remaining} bytes")
        return [item() for _ in range(n)]

    def tagged_fields(self) -> dict[int, builtins.bytes]:
        if self.pos >= self.end:
            raise ProtocolError("truncated tag buffer")
        tags, self.pos = read_tag_buffer(self.buf, self.pos)
        return tags


class Writer:
    """Collects encoded parts; ``getvalue()`` joins them once."""

    __slots__ = ("parts", "append")

    def __init__(self) -> None:
        self.parts: list[Any] = []
        self.append = self.parts.append

    def getvalue(self) -> bytes:
        return b"".join(self.parts)

    def __len__(self) -> int:
        return sum(len(p) for p in self.parts)

    def _fixed(self, s: struct.Struct, v: Any) -> None:
        try:
            self.append(s.pack(v))
        except struct.error as e:
            raise ProtocolError(f"cannot encode {v!r}: {e}") from None

    def boolean(self, v: bool) -> None:
        self.append(b"\x01" if v else b"\x00")

    def int8(self, v: int) -> None:
        self._fixed(INT8, v)

    def int16(self, v: int) -> None:
        self._fixed(INT16, v)

    def int32(self, v: int) -> None:
        self._fixed(INT32, v)

    def int64(self, v: int) -> None:
        self._fixed(INT64, v)

    def uint16(self, v: int) -> None:
        self._fixed(UINT16, v)

    def uint32(self, v: int) -> None:
        self._fixed(UINT32, v)

    def float64(self, v: float) -> None:
        self._fixed(FLOAT64, v)

    def uuid(self, v: uuid.UUID) -> None:
        self.append(v.bytes)

    def unsigned_varint(self, v: int) -> None:
        if not 0 <= v <= 0xFFFFFFFF:
            raise ProtocolError(f"unsigned varint out of range: {v}")
        self.append(uvarint_bytes(v))

    def varint(self, v: int) -> None:
        self.append(varint_bytes(v))

    def varlong(self, v: int) -> None:
        self.append(varlong_bytes(v))

    def raw(self, data: Any) -> None:
        self.append(data)

    def _length(self, n: int | None, compact: bool, width: struct.Struct) -> None:
        if compact:
            self.append(UVARINT1[0] if n is None else uvarint_bytes(n + 1))
        else:
            self._fixed(width, -1 if n is None else n)

    def _str(self, v: str | None, compact: bool, nullable: bool) -> None:
        if v is None:
            if not nullable:
                raise ProtocolError("null in a non-nullable string")
            self._length(None, compact, INT16)
            return
        data = v.encode()
        self._length(len(data), compact, INT16)
        self.append(data)

    def string(self, v: str) -> None:
        self._str(v, False, False)

    def nullable_string(self, v: str | None) -> None:
        self._str(v, False, True)

    def compact_string(self, v: str) -> None:
        self._str(v, True, False)

    def compact_nullable_string(self, v: str | None) -> None:
        self._str(v, True, True)

    def _bytes(self, v: Any, compact: bool, nullable: bool) -> None:
        if v is None:
            if not nullable:
                raise ProtocolError("null in non-nullable bytes")
            self._length(None, compact, INT32)
            return
        self._length(len(v), compact, INT32)
        self.append(v)

    def bytes(self, v: Any) -> None:
        self._bytes(v, False, False)

    def nullable_bytes(self, v: Any) -> None:
        self._bytes(v, False, True)

    def compact_bytes(self, v: Any) -> None:
        self._bytes(v, True, False)

    def compact_nullable_bytes(self, v: Any) -> None:
        self._bytes(v, True, True)

    def records(self, v: Any) -> None:
        write_records(self.append, v)

    def compact_records(self, v: Any) -> None:
        write_compact_records(self.append, v)

    def array(self, items: list[Any] | None, item: Callable[[Any], Any]) -> None:
        self._length(None if items is None else len(items), False, INT32)
        for x in items or ():
            item(x)

    def compact_array(self, items: list[Any] | None, item: Callable[[Any], Any]) -> None:
        self._length(None if items is None else len(items), True, INT32)
        for x in items or ():
            item(x)

    def tagged_fields(self, fields: dict[int, builtins.bytes] | None) -> None:
        if not fields:
            self.append(b"\x00")
        else:
            write_tag_buffer(self.append, fields.items())
