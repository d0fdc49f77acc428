"""Record compression codecs: none, gzip, snappy, lz4, zstd (codec ids 0-4), all via cramjam.

Theory of operation. ``compress`` produces what Kafka's own clients write:

* gzip: one gzip member (``decompress`` reads any number, with the standard library's zlib).
* snappy: the xerial block framing Java clients use (``\\x82SNAPPY\\x00``, int32 version 1,
  int32 compatible 1, then int32 length + raw snappy block per 32 KiB of input). ``decompress``
  also accepts plain raw snappy, which librdkafka writes.
* lz4: an LZ4 frame with independent blocks and no content size. Kafka before 0.10 (message
  format v0) computed the frame descriptor's header checksum (HC) over the 4 magic bytes plus the
  descriptor instead of the descriptor alone (KAFKA-3160, fixed by KIP-57). ``compress`` writes
  that broken HC for magic 0, as Kafka does, and the correct one for magic 1 and 2;
  ``decompress`` accepts either.
* zstd: a standard zstd frame.

Decompression is bounded: output beyond ``max_size`` raises DecompressedSizeError (a
ProtocolError) before more than ``max_size`` bytes are produced (a decompression bomb costs at
most that). Each codec gives a size hint (snappy's preamble, gzip's ISIZE trailer, the lz4
block table, zstd's frame content size); we decompress into a buffer of that size and grow it
fourfold, up to ``max_size``, when the hint was too small. Every codec error becomes
ProtocolError.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from enum import IntEnum

import cramjam

from gregor.protocol.exceptions import ProtocolError

Buffer = bytes | bytearray | memoryview


class Compression(IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


DEFAULT_MAX_DECOMPRESSED_SIZE = 64 * 1024 * 1024


class DecompressedSizeError(ProtocolError):
    """The payload decompresses to more than the bound allows."""


class UnsupportedCompressionError(ProtocolError):
    """The codec cannot be used here (zstd in message format v0/v1: Kafka's
    UNSUPPORTED_COMPRESSION_TYPE)."""


XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
XERIAL_BLOCK_SIZE = 32 * 1024

LZ4_MAGIC = b"\x04\x22\x4d\x18"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"

_OVERFLOW = "failed to write whole buffer"  # cramjam's message when an *_into target is full
_I32 = struct.Struct(">i")
_LZ4_BLOCK_MAX = {4: 64 << 10, 5: 256 << 10, 6: 1 << 20, 7: 4 << 20}


# --- xxHash32, for the lz4 frame header checksum (a few bytes, so plain Python is enough) ---

_P1, _P2, _P3, _P4, _P5 = 0x9E3779B1, 0x85EBCA77, 0xC2B2AE3D, 0x27D4EB2F, 0x165667B1
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data: Buffer, seed: int = 0) -> int:
    """The xxHash32 digest of ``data``."""
    data = bytes(data)
    n = len(data)
    pos = 0
    if n >= 16:
        v1 = (seed + _P1 + _P2) & _M32
        v2 = (seed + _P2) & _M32
        v3 = seed & _M32
        v4 = (seed - _P1) & _M32
        while pos + 16 <= n:
            w1, w2, w3, w4 = struct.unpack_from("<4I", data, pos)
            v1 = (_rotl((v1 + w1 * _P2) & _M32, 13) * _P1) & _M32
            v2 = (_rotl((v2 + w2 * _P2) & _M32, 13) * _P1) & _M32
            v3 = (_rotl((v3 + w3 * _P2) & _M32, 13) * _P1) & _M32
            v4 = (_rotl((v4 + w4 * _P2) & _M32, 13) * _P1) & _M32
            pos += 16
        h = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while pos + 4 <= n:
        (w,) = struct.unpack_from("<I", data, pos)
        h = (_rotl((h + w * _P3) & _M32, 17) * _P4) & _M32
        pos += 4
    while pos < n:
        h = (_rotl((h + data[pos] * _P5) & _M32, 11) * _P1) & _M32
        pos += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h


# --- compress ---


def compress(codec: int, data: Buffer, *, magic: int = 2, level: int | None = None) -> bytes:
    """Compress a record payload the way Kafka clients do for ``codec`` and message ``magic``."""
    if codec == Compression.NONE:
        return bytes(data)
    if codec == Compression.GZIP:
        return bytes(cramjam.gzip.compress(data, level=level))
    if codec == Compression.SNAPPY:
        return snappy_xerial_encode(data)
    if codec == Compression.LZ4:
        return lz4_encode(data, broken_header_checksum=magic == 0, level=level)
    if codec == Compression.ZSTD:
        return bytes(cramjam.zstd.compress(data, level=level))
    raise ValueError(f"unknown compression codec {codec}")


def snappy_xerial_encode(data: Buffer, block_size: int = XERIAL_BLOCK_SIZE) -> bytes:
    mv = memoryview(data)
    parts = [XERIAL_HEADER]
    for start in range(0, len(mv), block_size):
        block = cramjam.snappy.compress_raw(mv[start : start + block_size])
        parts.append(_I32.pack(len(block)))
        parts.append(bytes(block))
    return b"".join(parts)


def lz4_encode(
    data: Buffer, *, broken_header_checksum: bool = False, level: int | None = None
) -> bytes:
    c = cramjam.lz4.Compressor(level=level, content_checksum=False, block_linked=False)
    c.compress(data if isinstance(data, bytes) else bytes(data))
    frame = bytearray(c.finish())
    if broken_header_checksum:
        hc_pos = _lz4_hc_position(frame)
        frame[hc_pos] = (xxh32(frame[:hc_pos]) >> 8) & 0xFF
    return bytes(frame)


# --- decompress ---


def decompress(codec: int, data: Buffer, *, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> bytes:
    """Decompress a record payload; ProtocolError if corrupt or larger than ``max_size``."""
    if codec == Compression.NONE:
        if len(data) > max_size:
            raise DecompressedSizeError(f"record payload exceeds {max_size} bytes")
        return bytes(data)
    if codec == Compression.GZIP:
        return _gzip_decode(data, max_size)
    if codec == Compression.SNAPPY:
        return snappy_decode(data, max_size)
    if codec == Compression.LZ4:
        return lz4_decode(data, max_size)
    if codec == Compression.ZSTD:
        return _zstd_decode(data, max_size)
    raise ProtocolError(f"unknown compression codec {codec}")


def _bounded(
    decompress_into: Callable[[Buffer, bytearray], int],
    data: Buffer,
    hint: int,
    max_size: int,
    what: str,
) -> bytes:
    size = max(min(hint, max_size), 0)
    while True:
        out = bytearray(size)
        try:
            n = decompress_into(data, out)
        except Exception as e:  # cramjam raises its own DecompressionError and others
            if _OVERFLOW in str(e):
                if size < max_size:
                    size = min(max(size * 4, 1024), max_size)
                    continue
                raise DecompressedSizeError(
                    f"{what} payload decompresses to over {max_size} bytes"
                ) from None
            raise ProtocolError(f"corrupt {what} payload: {e}") from None
        del out[n:]
        return bytes(out)


def _gzip_decode(data: Buffer, max_size: int) -> bytes:
    """Every gzip member of ``data``, with the standard library's zlib: its decompressor is
    set up in a fraction of cramjam's time, which is most of the work for a small batch, and
    stops at ``max_length``, which bounds the output."""
    if len(data) < 18:
        raise ProtocolError("gzip payload truncated")
    parts = []
    size = 0
    rest: Buffer = data
    while True:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            out = d.decompress(rest, max_size + 1 - size)
        except zlib.error as e:
            raise ProtocolError(f"corrupt gzip payload: {e}") from None
        size += len(out)
        if size > max_size:
            raise DecompressedSizeError(f"gzip payload decompresses to over {max_size} bytes")
        if not d.eof:
            raise ProtocolError("corrupt gzip payload: truncated")
        parts.append(out)
        rest = d.unused_data
        if not rest:  # another member may follow (a concatenation of gzip streams)
            return parts[0] if len(parts) == 1 else b"".join(parts)


def _zstd_decode(data: Buffer, max_size: int) -> bytes:
    hint = _zstd_content_size(data)
    if hint is None:
        hint = len(data) * 4 + 1024
    return _bounded(cramjam.zstd.decompress_into, data, hint, max_size, "zstd")


def _zstd_content_size(data: Buffer) -> int | None:
    """Frame_Content_Size from the first zstd frame header, if it carries one."""
    if len(data) < 6 or bytes(data[:4]) != ZSTD_MAGIC:
        return None
    fhd = data[4]
    fcs_flag = fhd >> 6
    single_segment = (fhd >> 5) & 1
    dict_id_size = (0, 1, 2, 4)[fhd & 3]
    fcs_size = (1 if single_segment else 0, 2, 4, 8)[fcs_flag]
    if fcs_size == 0:
        return None
    pos = 5 + (0 if single_segment else 1) + dict_id_size
    if len(data) < pos + fcs_size:
        return None
    fcs = int.from_bytes(bytes(data[pos : pos + fcs_size]), "little")
    return fcs + 256 if fcs_size == 2 else fcs


def snappy_decode(data: Buffer, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> bytes:
    """Decode xerial-framed snappy (Java clients) or raw snappy (librdkafka)."""
    mv = memoryview(data)
    try:
        if len(mv) >= 16 and mv[:8] == XERIAL_MAGIC:
            blocks = []
            total = 0
            pos = 16
            end = len(mv)
            while pos < end:
                if end - pos < 4:
                    raise ProtocolError("xerial snappy block length truncated")
                (n,) = _I32.unpack_from(mv, pos)
                pos += 4
                if n < 0 or n > end - pos:
                    raise ProtocolError("xerial snappy block overruns the payload")
                block = mv[pos : pos + n]
                pos += n
                size = cramjam.snappy.decompress_raw_len(block)
                total += size
                if total > max_size:
                    raise DecompressedSizeError(
                        f"snappy payload decompresses to over {max_size} bytes"
                    )
                blocks.append((block, size))
            out = bytearray(total)
            omv = memoryview(out)
            at = 0
            for block, size in blocks:
                written = cramjam.snappy.decompress_raw_into(block, omv[at : at + size])
                if written != size:
                    raise ProtocolError("snappy block shorter than its preamble says")
                at += size
            return bytes(out)
        size = cramjam.snappy.decompress_raw_len(mv)
        if size > max_size:
            raise DecompressedSizeError(f"snappy payload decompresses to over {max_size} bytes")
        out = bytearray(size)
        written = cramjam.snappy.decompress_raw_into(mv, out)
        if written != size:
            raise ProtocolError("snappy payload shorter than its preamble says")
        return bytes(out)
    except ProtocolError:
        raise
    except Exception as e:
        raise ProtocolError(f"corrupt snappy payload: {e}") from None


def _lz4_hc_position(frame: Buffer) -> int:
    """Index of the header checksum byte of the lz4 frame in ``frame``."""
    if len(frame) < 7 or bytes(frame[:4]) != LZ4_MAGIC:
        raise ProtocolError("not an lz4 frame")
    flg = frame[4]
    if flg >> 6 != 1:
        raise ProtocolError(f"unsupported lz4 frame version {flg >> 6}")
    pos = 6
    if flg & 0x08:
        pos += 8  # content size
    if flg & 0x01:
        pos += 4  # dictionary id
    if len(frame) <= pos:
        raise ProtocolError("lz4 frame header truncated")
    return pos


def lz4_decode(data: Buffer, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> bytes:
    """Decode an lz4 frame whose header checksum is either correct or Kafka's pre-KIP-57 one.
    The codec checks a correct one itself; only a frame it refuses has its checksum checked
    here (in Python), and fixed when it is the old one."""
    frame = bytes(data)
    hc_pos = _lz4_hc_position(frame)
    bound = _lz4_size_bound(frame, hc_pos)
    try:
        return _bounded(cramjam.lz4.decompress_into, frame, bound, max_size, "lz4")
    except DecompressedSizeError:
        raise
    except ProtocolError:
        pass  # the header checksum may be the old one; else the error comes again below
    hc = frame[hc_pos]
    if hc != (xxh32(frame[4:hc_pos]) >> 8) & 0xFF:
        if hc != (xxh32(frame[:hc_pos]) >> 8) & 0xFF:
            raise ProtocolError("lz4 frame header checksum mismatch")
        correct = (xxh32(frame[4:hc_pos]) >> 8) & 0xFF
        frame = frame[:hc_pos] + bytes((correct,)) + frame[hc_pos + 1 :]
    return _bounded(
        cramjam.lz4.decompress_into, frame, _lz4_size_bound(frame, hc_pos), max_size, "lz4"
    )


def _lz4_size_bound(frame: bytes, hc_pos: int) -> int:
    """The frame's declared content size, else an upper bound from its block table (a hint:
    ``_bounded`` grows the buffer when it is too small)."""
    flg = frame[4]
    if flg & 0x08:
        return int.from_bytes(frame[6:14], "little")
    block_max = _LZ4_BLOCK_MAX.get((frame[5] >> 4) & 7)
    if block_max is None:
        raise ProtocolError("lz4 frame has an invalid block maximum size")
    block_checksum = 4 if flg & 0x10 else 0
    pos = hc_pos + 1
    end = len(frame)
    bound = 0
    while pos + 4 <= end:
        word = int.from_bytes(frame[pos : pos + 4], "little")
        pos += 4
        if word == 0:
            break
        n = word & 0x7FFFFFFF
        # a compressed block inflates 255-fold at most (a literal length or match length
        # byte stands for 255 bytes), and never past the frame's block size
        bound += n if word & 0x80000000 else min(block_max, n * 255)
        pos += n + block_checksum
    return bound
