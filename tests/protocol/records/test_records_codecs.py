"""Varints and compression codecs."""

import gzip
import struct

import cramjam
import pytest
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
