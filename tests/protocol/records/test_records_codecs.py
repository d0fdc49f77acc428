"""Varints and compression codecs."""

import functools
import gzip
import struct
import tracemalloc
from concurrent.futures import ThreadPoolExecutor

import cramjam
import lz4.frame
import pytest
import zstandard
from hypothesis import given
from hypothesis import strategies as st

from gregor.protocol.exceptions import ProtocolError
from gregor.protocol.records import compression as c
from gregor.protocol.records.varint import encode_varint, read_varint, varint_size

# --- varints ---


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, b"\x00"),
        (-1, b"\x01"),
        (1, b"\x02"),
        (63, b"\x7e"),
        (-64, b"\x7f"),
        (64, b"\x80\x01"),
        (150, b"\xac\x02"),
        (-(2**31), b"\xff\xff\xff\xff\x0f"),
        (2**63 - 1, b"\xfe" + b"\xff" * 8 + b"\x01"),
        (-(2**63), b"\xff" * 9 + b"\x01"),
    ],
)
def test_varint_known_encodings(value, encoded):
    assert encode_varint(value) == encoded
    assert varint_size(value) == len(encoded)
    assert read_varint(b"\xaa" + encoded + b"\xbb", 1) == (value, 1 + len(encoded))


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_varint_round_trip(value):
    enc = encode_varint(value)
    assert read_varint(enc, 0) == (value, len(enc))


def test_varint_rejects_truncated_overlong_and_overflowing():
    with pytest.raises(ProtocolError):
        read_varint(b"\x80\x80", 0)
    with pytest.raises(ProtocolError):
        read_varint(b"\x80" * 10 + b"\x00", 0)
    with pytest.raises(ProtocolError):  # 10th byte carries bits past 64
        read_varint(b"\xff" * 9 + b"\x7f", 0)
    with pytest.raises(ValueError):
        encode_varint(2**63)


# --- xxhash32 (lz4 frame header checksum) ---


@pytest.mark.parametrize(
    ("data", "digest"),
    [
        (b"", 0x02CC5D05),
        (b"a", 0x550D7456),
        (b"abc", 0x32D153FF),
        (b"Nobody inspects the spammish repetition", 0xE2293B2F),
    ],
)
def test_xxh32_reference_vectors(data, digest):
    assert c.xxh32(data) == digest


# --- round trips ---

PAYLOADS = [b"", b"x", bytes(range(256)) * 700, b"kafka " * 30000]


@pytest.mark.parametrize("codec", list(c.Compression))
@pytest.mark.parametrize("magic", [0, 1, 2])
@pytest.mark.parametrize("payload", PAYLOADS, ids=["empty", "one", "binary", "text"])
def test_codec_round_trip(codec, magic, payload):
    enc = c.compress(codec, payload, magic=magic)
    assert c.decompress(codec, enc) == payload
    assert c.decompress(codec, enc, max_size=len(payload)) == payload
    if payload:
        with pytest.raises(ProtocolError, match="over|exceeds"):
            c.decompress(codec, enc, max_size=len(payload) - 1)


@given(st.binary(max_size=3000), st.sampled_from(list(c.Compression)))
def test_codec_round_trip_property(payload, codec):
    assert c.decompress(codec, c.compress(codec, payload)) == payload


def test_gzip_reads_stdlib_gzip_and_standard_tools_read_ours():
    data = b"record " * 1000
    assert c.decompress(c.Compression.GZIP, gzip.compress(data)) == data
    assert gzip.decompress(c.compress(c.Compression.GZIP, data)) == data


# --- snappy framing ---


def test_snappy_writes_xerial_framing_with_32k_blocks():
    data = bytes(range(256)) * 300  # 76,800 bytes: blocks of 32768, 32768, 11264
    enc = c.compress(c.Compression.SNAPPY, data)
    assert enc[:16] == b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01"
    pos = 16
    sizes = []
    while pos < len(enc):
        (n,) = struct.unpack_from(">i", enc, pos)
        block = enc[pos + 4 : pos + 4 + n]
        sizes.append(len(cramjam.snappy.decompress_raw(block)))
        pos += 4 + n
    assert pos == len(enc)
    assert sizes == [32768, 32768, 11264]


def test_snappy_reads_raw_blocks_as_librdkafka_writes():
    data = b"librdkafka " * 500
    raw = bytes(cramjam.snappy.compress_raw(data))
    assert c.decompress(c.Compression.SNAPPY, raw) == data


def test_snappy_xerial_rejects_overrunning_block():
    enc = bytearray(c.compress(c.Compression.SNAPPY, b"abc" * 100))
    struct.pack_into(">i", enc, 16, 10_000)
    with pytest.raises(ProtocolError):
        c.decompress(c.Compression.SNAPPY, bytes(enc))


# --- lz4 and the KIP-57 header checksum ---


def _hc(frame: bytes, start: int) -> int:
    return (c.xxh32(frame[start:6]) >> 8) & 0xFF


def test_lz4_frame_shape_and_header_checksums():
    data = b"lz4 " * 5000
    good = c.compress(c.Compression.LZ4, data, magic=1)
    broken = c.compress(c.Compression.LZ4, data, magic=0)
    assert good[:4] == broken[:4] == b"\x04\x22\x4d\x18"
    flg = good[4]
    assert flg >> 6 == 1  # version 01
    assert flg & 0x20  # independent blocks: Kafka does not support linked blocks
    assert not flg & 0x08  # no content size
    # Correct HC hashes the descriptor (FLG, BD); Kafka's old one also hashed the magic.
    assert good[6] == _hc(good, 4)
    assert broken[6] == _hc(broken, 0)
    assert good[6] != broken[6]
    assert good[7:] == broken[7:]
    assert c.compress(c.Compression.LZ4, data, magic=2)[6] == good[6]
    # The standard library of lz4 (via cramjam) accepts only the correct checksum.
    assert bytes(cramjam.lz4.decompress(good)) == data
    with pytest.raises(Exception):  # noqa: B017 - cramjam's own error type
        cramjam.lz4.decompress(broken)
    # We read both.
    assert c.decompress(c.Compression.LZ4, good) == data
    assert c.decompress(c.Compression.LZ4, broken) == data


def test_lz4_rejects_a_header_checksum_matching_neither_rule():
    frame = bytearray(c.compress(c.Compression.LZ4, b"abc" * 100))
    for candidate in range(256):
        if candidate not in (_hc(bytes(frame), 0), _hc(bytes(frame), 4)):
            frame[6] = candidate
            break
    with pytest.raises(ProtocolError, match="header checksum"):
        c.decompress(c.Compression.LZ4, bytes(frame))


def test_lz4_reads_linked_blocks_and_content_size_frames():
    data = bytes(range(256)) * 1000
    comp = cramjam.lz4.Compressor(content_checksum=True, block_linked=True)
    comp.compress(data)
    linked = bytes(comp.finish())
    assert c.decompress(c.Compression.LZ4, linked) == data
    plain = bytes(cramjam.lz4.compress(data))
    assert c.decompress(c.Compression.LZ4, plain) == data


# --- bombs and corruption ---


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_decompression_bomb_is_capped(codec):
    bomb = c.compress(codec, bytes(50 * 1024 * 1024))
    assert len(bomb) < 3 * 1024 * 1024
    with pytest.raises(ProtocolError, match="over"):
        c.decompress(codec, bomb, max_size=1024 * 1024)


MIB = 1024 * 1024


@functools.cache
def _bombs() -> dict[str, tuple[int, bytes]]:
    """Payloads that inflate far past 1 MiB, in every shape a codec's reader takes, by name
    (built when a test first asks, once per process: compressing 50 MiB four ways takes about a
    second, which every collection of the suite paid when the parameters held them)."""
    zeros = bytes(50 * MIB)
    raw_snappy_liar = b"\xff\xff\xff\xff\x0f" + b"\x00" * 16  # preamble: 4 GiB
    lz4_small_claim = lz4.frame.compress(zeros, store_size=True)
    lz4_small_claim = (  # content size said to be 10 bytes (and the header checksum fixed)
        lz4_small_claim[:6] + (10).to_bytes(8, "little") + lz4_small_claim[14:]
    )
    hc = (c.xxh32(lz4_small_claim[4:14]) >> 8) & 0xFF
    lz4_small_claim = lz4_small_claim[:14] + bytes((hc,)) + lz4_small_claim[15:]
    zstd_no_size = zstandard.ZstdCompressor(write_content_size=False).compress(zeros)
    zstd_small = zstandard.ZstdCompressor().compress(b"small")
    return {
        "gzip": (1, c.compress(1, zeros)),
        "snappy-xerial": (2, c.compress(2, zeros)),
        "snappy-raw-lying-preamble": (2, raw_snappy_liar),
        "lz4": (3, c.compress(3, zeros)),
        "lz4-content-size-10": (3, lz4_small_claim),
        "zstd": (4, c.compress(4, zeros)),
        "zstd-no-content-size": (4, zstd_no_size),
        "zstd-second-frame": (4, zstd_small + zstd_no_size),
    }


BOMBS = (
    "gzip",
    "snappy-xerial",
    "snappy-raw-lying-preamble",
    "lz4",
    "lz4-content-size-10",
    "zstd",
    "zstd-no-content-size",
    "zstd-second-frame",
)


@pytest.mark.parametrize("name", BOMBS)
def test_a_bomb_costs_at_most_the_bound(name: str) -> None:
    """A payload that inflates to 50 MiB, read with a bound of 1 MiB, is refused after at most
    twice the bound was allocated (tracemalloc sees every buffer the readers allocate: zlib's,
    python-lz4's and zstandard's output and ours)."""
    codec, bomb = _bombs()[name]
    c.decompress(codec, c.compress(codec, b"warm up this thread's contexts"))
    tracemalloc.start()
    try:
        with pytest.raises(ProtocolError):
            c.decompress(codec, bomb, max_size=MIB)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak <= 2 * MIB + 256 * 1024, peak


@pytest.mark.parametrize("name", BOMBS)
def test_a_refused_payload_leaves_the_thread_able_to_decompress(name: str) -> None:
    """The thread's reused contexts come out of a refusal (the bound, or corrupt data) ready for
    the next batch."""
    codec, bomb = _bombs()[name]
    good = b"the next batch " * 100
    enc = c.compress(codec, good)
    for bad in (bomb, bytes(range(200)), enc[: len(enc) // 2]):
        with pytest.raises(ProtocolError):
            c.decompress(codec, bad, max_size=MIB)
        assert c.decompress(codec, enc) == good


def test_zstd_frames_without_a_content_size_as_the_java_client_writes_them() -> None:
    data = b"java zstd " * 5000
    enc = zstandard.ZstdCompressor(write_content_size=False).compress(data)
    assert c._zstd_content_size(enc) is None
    assert c.decompress(c.Compression.ZSTD, enc) == data
    chunked = zstandard.ZstdCompressor(write_content_size=False).compressobj()
    streamed = b"".join(chunked.compress(data[i : i + 1000]) for i in range(0, len(data), 1000))
    streamed += chunked.flush()
    assert c.decompress(c.Compression.ZSTD, streamed) == data
    with pytest.raises(ProtocolError, match="over"):
        c.decompress(c.Compression.ZSTD, enc, max_size=len(data) - 1)
    assert c.decompress(c.Compression.ZSTD, enc, max_size=len(data)) == data


@pytest.mark.parametrize("content_size", [True, False], ids=["content-size", "no-content-size"])
def test_zstd_truncated_or_trailing_bytes_are_refused(content_size: bool) -> None:
    """zstandard's reader stops without an error where a truncated frame ends, and its
    one-call decompress ignores what follows a frame without a content size: both must still
    be refused."""
    data = bytes(range(256)) * 40
    enc = zstandard.ZstdCompressor(write_content_size=content_size, write_checksum=True).compress(
        data
    )
    for cut in (1, 4, 5, len(enc) // 2, len(enc) - 9):
        with pytest.raises(ProtocolError, match="zstd"):
            c.decompress(c.Compression.ZSTD, enc[:-cut])
    for tail in (b"x", b"garbage after the frame", c.ZSTD_MAGIC + b"\x00" * 8):
        with pytest.raises(ProtocolError, match="zstd"):
            c.decompress(c.Compression.ZSTD, enc + tail)


def test_zstd_reads_every_frame_and_skips_skippable_frames() -> None:
    a, b = b"first frame " * 100, b"second frame " * 300
    with_size = zstandard.ZstdCompressor().compress
    without_size = zstandard.ZstdCompressor(write_content_size=False).compress
    skippable = (0x184D2A53).to_bytes(4, "little") + (5).to_bytes(4, "little") + b"skip!"
    for first, second in [(with_size, with_size), (with_size, without_size),
                          (without_size, with_size)]:  # fmt: skip
        enc = first(a) + skippable + second(b)
        assert c.decompress(c.Compression.ZSTD, enc) == a + b
    with pytest.raises(ProtocolError, match="over"):
        c.decompress(c.Compression.ZSTD, with_size(a) + with_size(b), max_size=len(a + b) - 1)


def test_lz4_reads_every_frame_and_refuses_truncated_or_trailing_bytes() -> None:
    a, b = b"first frame " * 100, bytes(range(256)) * 300
    enc = c.compress(c.Compression.LZ4, a) + c.compress(c.Compression.LZ4, b)
    assert c.decompress(c.Compression.LZ4, enc) == a + b
    with pytest.raises(ProtocolError, match="over"):
        c.decompress(c.Compression.LZ4, enc, max_size=len(a + b) - 1)
    one = c.compress(c.Compression.LZ4, b)
    for cut in (1, 4, len(one) // 2):
        with pytest.raises(ProtocolError, match="lz4"):
            c.decompress(c.Compression.LZ4, one[:-cut])
    for tail in (b"x", b"garbage after the frame"):
        with pytest.raises(ProtocolError, match="lz4"):
            c.decompress(c.Compression.LZ4, one + tail)


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_threads_decompress_at_once(codec: int) -> None:
    """Each thread reads with its own codec contexts (the event loop's thread and the workers
    large batches are scanned in): payloads decompressed in four threads at once all come out
    whole."""
    payloads = [bytes([i]) * 300_000 + bytes(range(256)) * (i + 1) for i in range(32)]
    encoded = [c.compress(codec, p) for p in payloads]

    def decode(i: int) -> bool:
        return all(c.decompress(codec, encoded[i]) == payloads[i] for _ in range(5))

    with ThreadPoolExecutor(4) as pool:
        assert all(pool.map(decode, range(len(payloads))))


def test_gzip_with_lying_size_trailer_still_decodes_and_caps():
    data = b"z" * 100_000
    enc = bytearray(c.compress(c.Compression.GZIP, data))
    enc[-4:] = (10).to_bytes(4, "little")  # ISIZE claims 10 bytes
    # The trailer is only a hint; the gzip CRC/size check then fails in the codec itself.
    with pytest.raises(ProtocolError):
        c.decompress(c.Compression.GZIP, bytes(enc), max_size=50_000)


def test_zstd_content_size_hint():
    data = b"q" * 12345
    enc = c.compress(c.Compression.ZSTD, data)
    assert c._zstd_content_size(enc) == 12345


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_corrupt_payloads_raise_protocol_error(codec):
    data = b"some record bytes " * 200
    enc = bytearray(c.compress(codec, data))
    for i in range(len(enc)):
        mutated = bytearray(enc)
        mutated[i] ^= 0x55
        try:
            c.decompress(codec, bytes(mutated), max_size=1 << 20)
        except ProtocolError:
            pass
    # A truncated payload fails, or at most yields a prefix (snappy cut at a block boundary).
    for n in range(len(enc)):
        try:
            out = c.decompress(codec, bytes(enc[:n]), max_size=1 << 20)
        except ProtocolError:
            continue
        assert data.startswith(out)


def test_unknown_codecs():
    with pytest.raises(ProtocolError):
        c.decompress(5, b"abc")
    with pytest.raises(ValueError):
        c.compress(7, b"abc")


def test_every_bomb_is_named_in_the_parameters() -> None:
    assert sorted(BOMBS) == sorted(_bombs())
