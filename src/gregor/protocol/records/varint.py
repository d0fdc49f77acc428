"""Zigzag varints as record fields use them (protobuf's encoding, Kafka's ``varint``/``varlong``).

The one varint module of the record code. A value is zigzag-mapped (0, -1, 1, -2 ... -> 0, 1,
2, 3 ...) and written 7 bits at a time, least significant group first, with the high bit set on
every byte but the last.

Fast paths: the record walk (``_scan_py``) reads the one-byte case inline (``b < 0x80``) and
calls :func:`read_uvarint` for the rest; the builder looks the encodings of small values up in
``_CACHE`` (every zigzag value below 2**14, i.e. every one- and two-byte encoding). The
compiled walk (``_scan.pyx``) implements the same rules in C and must agree with these helpers
on every input, errors included.
"""

from __future__ import annotations

from gregor.protocol.exceptions import ProtocolError

MAX_VARINT_BYTES = 10  # a zigzagged int64 needs at most 10 groups of 7 bits

# zigzag value -> encoded bytes, for values that fit two bytes (the common case for lengths
# and deltas). Saves the encoding loop on the builder's hot path.
_CACHE_LIMIT = 1 << 14
_CACHE: list[bytes] = []


def _encode_unsigned(u: int) -> bytes:
    out = bytearray()
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


_CACHE.extend(_encode_unsigned(u) for u in range(_CACHE_LIMIT))


def zigzag(n: int) -> int:
    return (n << 1) ^ (n >> 63)


def unzigzag(u: int) -> int:
    return (u >> 1) ^ -(u & 1)


def encode_varint(n: int) -> bytes:
    """Zigzag varint encoding of a signed int64."""
    u = (n << 1) ^ (n >> 63)
    if 0 <= u < _CACHE_LIMIT:
        return _CACHE[u]
    if not -(1 << 63) <= n < (1 << 63):
        raise ValueError(f"{n} does not fit a varlong")
    return _encode_unsigned(u)


def varint_size(n: int) -> int:
    u = (n << 1) ^ (n >> 63)
    size = 1
    while u >= 0x80:
        u >>= 7
        size += 1
    return size


def read_uvarint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """The raw (still zigzagged) varint at ``pos``; return (value, position after it).

    Running off the end of ``buf`` raises IndexError, so a caller walking a bounded buffer
    reports truncation with its own message; a varint over 10 bytes or past 64 bits raises
    ProtocolError."""
    u = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        u |= (b & 0x7F) << shift
        if b < 0x80:
            if u >> 64:
                raise ProtocolError("varint does not fit 64 bits")
            return u, pos
        shift += 7
        if shift >= 7 * MAX_VARINT_BYTES:
            raise ProtocolError("varint longer than 10 bytes")


def read_varint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Decode a zigzag varint at ``pos``; return (value, position after it)."""
    u = 0
    shift = 0
    end = len(buf)
    while True:
        if pos >= end:
            raise ProtocolError("varint truncated")
        b = buf[pos]
        pos += 1
        u |= (b & 0x7F) << shift
        if b < 0x80:
            if u >> 64:
                raise ProtocolError("varint does not fit 64 bits")
            return (u >> 1) ^ -(u & 1), pos
        shift += 7
        if shift >= 7 * MAX_VARINT_BYTES:
            raise ProtocolError("varint longer than 10 bytes")
