"""Record compression codecs: none, gzip, snappy, lz4, zstd (codec ids 0-4).

Theory of operation. ``compress`` (cramjam) produces what Kafka's own clients write:

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

``decompress`` runs for every compressed batch a leader validates, so a small batch's cost
counts: each codec is read with the library that sets up fastest for a 1 KB batch, reusing
its context where the library has one (zstandard's ZstdDecompressor, python-lz4's
LZ4FrameDecompressor: one per thread, see ``_Contexts``), zlib for gzip and cramjam's raw
snappy.

Decompression is bounded: output beyond ``max_size`` raises DecompressedSizeError (a
ProtocolError) before more than ``max_size`` + 1 bytes are produced (a decompression bomb costs
at most that). snappy blocks and zstd frames that declare their size are refused by it before
decompressing; gzip (zlib's ``max_length``), lz4 (the decompressor's ``max_length``) and zstd
frames without a size (a reader filling a buffer) stop at the bound. Every codec error becomes
ProtocolError.
"""

from __future__ import annotations

import struct
import threading
import zlib
from collections.abc import Callable
from enum import IntEnum

import cramjam
import lz4.frame
import zstandard

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

_I32 = struct.Struct(">i")


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


class _Contexts(threading.local):
    """The decompressors this thread reuses: setting one up is most of the cost of a small
    batch's decompression (a zstd context took about 11 us, an lz4 frame one about 30 us, for a
    1 KB batch that then decompresses in 2 to 5 us), and none may be used by two threads at
    once. One per thread: the event loop thread (the broker serves a loop with one thread) and
    each worker thread a large batch is scanned in. An lz4 decompressor left mid-frame (by an
    error or the bound) is replaced: python-lz4's ``reset`` leaves state behind (the next
    frame then fails with ERROR_frameSize_wrong)."""

    def __init__(self) -> None:
        self.zstd = zstandard.ZstdDecompressor()
        self.lz4 = lz4.frame.LZ4FrameDecompressor()


_contexts = _Contexts()


def decompress(codec: int, data: Buffer, *, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> bytes:
    """Decompress a record payload; ProtocolError if corrupt or larger than ``max_size``."""
    decode = _DECODERS.get(codec)  # by int: comparing with Compression members cost ~1 us each
    if decode is not None:
        return decode(data, max_size)
    if codec == 0:
        if len(data) > max_size:
            raise DecompressedSizeError(f"record payload exceeds {max_size} bytes")
        return bytes(data)
    raise ProtocolError(f"unknown compression codec {codec}")


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
    """A frame that declares its content size (librdkafka's, cramjam's) in one call of the
    thread's zstandard context, into a buffer of that size (refused first when it is over
    ``max_size``); several frames, or frames without a content size (the Java client's
    streaming encoder), through a bounded reader (:func:`_zstd_stream`)."""
    buf = data if isinstance(data, bytes) else bytes(data)
    hint = _zstd_content_size(buf)
    if hint is not None:
        if hint > max_size:
            raise DecompressedSizeError(f"zstd payload decompresses to over {max_size} bytes")
        try:
            out: bytes = _contexts.zstd.decompress(buf, allow_extra_data=False)
        except zstandard.ZstdError as e:
            if "unused data" not in str(e):
                raise ProtocolError(f"corrupt zstd payload: {e}") from None
        else:
            return out
    return _zstd_stream(buf, max_size)


def _zstd_stream(data: bytes, max_size: int) -> bytes:
    """Every frame of ``data``, read into a buffer grown fourfold up to ``max_size`` + 1 bytes
    (so a bomb costs at most the bound). The reader stops silently where a truncated frame
    ends, so the frames are first walked (:func:`_zstd_frames_end`) to make sure they are
    whole."""
    if _zstd_frames_end(data) != len(data):
        raise ProtocolError("corrupt zstd payload: truncated frame or trailing bytes")
    reader = _contexts.zstd.stream_reader(data, read_across_frames=True)
    out = bytearray(min(len(data) * 4 + 1024, max_size + 1))
    n = 0
    try:
        while True:
            got = reader.readinto(memoryview(out)[n:])
            if not got:
                break
            n += got
            if n == len(out):
                if n > max_size:
                    raise DecompressedSizeError(
                        f"zstd payload decompresses to over {max_size} bytes"
                    )
                out.extend(bytes(min(n * 4, max_size + 1) - n))
    except zstandard.ZstdError as e:
        raise ProtocolError(f"corrupt zstd payload: {e}") from None
    del out[n:]
    return bytes(out)


def _zstd_frames_end(data: bytes) -> int:
    """Where the zstd frames (and skippable frames) at the start of ``data`` end, from their
    headers and block headers alone (RFC 8878 sections 3.1.1 and 3.1.2); -1 if one is
    truncated or not a zstd frame."""
    end = len(data)
    pos = 0
    while pos < end:
        if end - pos < 8:
            return -1
        magic = data[pos : pos + 4]
        if magic != ZSTD_MAGIC:
            if magic[1:] != b"\x2a\x4d\x18" or magic[0] & 0xF0 != 0x50:
                return -1
            pos += 8 + int.from_bytes(data[pos + 4 : pos + 8], "little")  # a skippable frame
            continue
        fhd = data[pos + 4]
        pos += (
            (5 if fhd & 0x20 else 6)  # magic, descriptor and, unless single segment, window
            + (0, 1, 2, 4)[fhd & 3]  # dictionary id
            + ((1 if fhd & 0x20 else 0), 2, 4, 8)[fhd >> 6]  # content size
        )
        last = 0
        while not last:
            if end - pos < 3:
                return -1
            bh = data[pos] | data[pos + 1] << 8 | data[pos + 2] << 16
            last = bh & 1
            pos += 3 + (1 if bh & 6 == 2 else bh >> 3)  # an RLE block holds one byte
        if fhd & 0x04:  # Content_Checksum_flag
            pos += 4
    return pos if pos == end else -1


def _zstd_content_size(data: Buffer) -> int | None:
    """Frame_Content_Size from the first zstd frame header, if it carries one."""
    if len(data) < 6 or data[:4] != ZSTD_MAGIC:
        return None
    fhd = data[4]
    if not fhd & 0xE0:  # no Frame_Content_Size_flag, not Single_Segment: no content size
        return None
    fcs_size = (1, 2, 4, 8)[fhd >> 6]
    pos = (5 if fhd & 0x20 else 6) + (0, 1, 2, 4)[fhd & 3]
    if len(data) < pos + fcs_size:
        return None
    fcs = int.from_bytes(data[pos : pos + fcs_size], "little")
    return fcs + 256 if fcs_size == 2 else fcs


def snappy_decode(data: Buffer, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> bytes:
    """Decode xerial-framed snappy (Java clients) or raw snappy (librdkafka). Each raw block
    says its decompressed size first (read without decompressing), so the output's size is
    known, and refused over ``max_size``, before anything is decompressed."""
    buf = data if isinstance(data, bytes) else bytes(data)
    raw_len = cramjam.snappy.decompress_raw_len
    try:
        if buf[:8] != XERIAL_MAGIC or len(buf) < 16:
            size = raw_len(buf)
            if size > max_size:
                raise DecompressedSizeError(f"snappy payload decompresses to over {max_size} bytes")
            return _snappy_block(buf, size)
        end = len(buf)
        if end > 20 and int.from_bytes(buf[16:20], "big") == end - 20:  # one block (< 32 KiB)
            size = raw_len(buf[20:])
            if size > max_size:
                raise DecompressedSizeError(f"snappy payload decompresses to over {max_size} bytes")
            return _snappy_block(buf[20:], size)
        blocks = []
        total = 0
        pos = 16
        while pos < end:
            if end - pos < 4:
                raise ProtocolError("xerial snappy block length truncated")
            n = int.from_bytes(buf[pos : pos + 4], "big", signed=True)
            pos += 4
            if n < 0 or n > end - pos:
                raise ProtocolError("xerial snappy block overruns the payload")
            block = buf[pos : pos + n]
            pos += n
            size = raw_len(block)
            total += size
            if total > max_size:
                raise DecompressedSizeError(f"snappy payload decompresses to over {max_size} bytes")
            blocks.append((block, size))
        if len(blocks) == 1:  # a batch under 32 KiB: one block
            return _snappy_block(*blocks[0])
        return b"".join([_snappy_block(block, size) for block, size in blocks])
    except ProtocolError:
        raise
    except Exception as e:
        raise ProtocolError(f"corrupt snappy payload: {e}") from None


def _snappy_block(block: bytes, size: int) -> bytes:
    """One raw snappy block of ``size`` decompressed bytes (its preamble's, checked against
    the bound by the caller): cramjam allocates the preamble's size and no more."""
    out = cramjam.snappy.decompress_raw(block)
    if len(out) != size:
        raise ProtocolError("snappy block shorter than its preamble says")
    return bytes(out)


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
    """Decode the lz4 frames of ``data``, the first one's header checksum either correct or
    Kafka's pre-KIP-57 one. The codec checks a correct one itself; only a frame it refuses has
    its checksum checked here (in Python), and fixed when it is the old one."""
    frame = data if isinstance(data, bytes) else bytes(data)
    try:
        return _lz4_frames(frame, max_size)
    except DecompressedSizeError:
        raise
    except ProtocolError:
        pass  # the header checksum may be the old one; else the error comes again below
    hc_pos = _lz4_hc_position(frame)
    hc = frame[hc_pos]
    if hc != (xxh32(frame[4:hc_pos]) >> 8) & 0xFF:
        if hc != (xxh32(frame[:hc_pos]) >> 8) & 0xFF:
            raise ProtocolError("lz4 frame header checksum mismatch")
        correct = (xxh32(frame[4:hc_pos]) >> 8) & 0xFF
        frame = frame[:hc_pos] + bytes((correct,)) + frame[hc_pos + 1 :]
    return _lz4_frames(frame, max_size)


def _lz4_frames(data: bytes, max_size: int) -> bytes:
    """Every lz4 frame of ``data`` with the thread's lz4 frame decompressor, asking it for at
    most the frame's declared content size (else four times the compressed size) at a time,
    then fourfold more, never past ``max_size`` + 1 bytes in all: a bomb costs at most the
    bound."""
    d = _contexts.lz4
    parts = []
    size = 0
    rest = data
    try:
        while True:
            d.reset()
            want = len(rest) * 4 + 1024
            if len(rest) >= 14 and rest[4] & 0x08:  # FLG's content size flag: its size
                want = int.from_bytes(rest[6:14], "little") + 1
            out = d.decompress(rest, max_length=min(want, max_size + 1 - size))
            while True:
                size += len(out)
                if size > max_size:
                    raise DecompressedSizeError(
                        f"lz4 payload decompresses to over {max_size} bytes"
                    )
                parts.append(out)
                if d.eof:
                    break
                if d.needs_input:
                    raise ProtocolError("corrupt lz4 payload: truncated frame")
                out = d.decompress(b"", max_length=min(max(size * 3, 1024), max_size + 1 - size))
            rest = d.unused_data
            if not rest:  # another frame may follow (a concatenation of frames)
                return parts[0] if len(parts) == 1 else b"".join(parts)
    except ProtocolError:
        _contexts.lz4 = lz4.frame.LZ4FrameDecompressor()  # its reset() does not undo all
        raise
    except Exception as e:  # python-lz4 raises RuntimeError with the codec's error name
        _contexts.lz4 = lz4.frame.LZ4FrameDecompressor()
        raise ProtocolError(f"corrupt lz4 payload: {e}") from None


_DECODERS: dict[int, Callable[[Buffer, int], bytes]] = {
    Compression.GZIP.value: _gzip_decode,
    Compression.SNAPPY.value: snappy_decode,
    Compression.LZ4.value: lz4_decode,
    Compression.ZSTD.value: _zstd_decode,
}
