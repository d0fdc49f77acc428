"""Primitive types against the guide: varints, zig-zag, UUID, FLOAT64, strings, bytes, arrays."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from gregor.protocol.primitives import (
    ProtocolError,
    Reader,
    Writer,
    read_tag_buffer,
    read_uvarint,
    read_varint,
    read_varlong,
    uuid_from_bytes,
    uuid_from_int,
    uvarint_bytes,
    varint_bytes,
    varlong_bytes,
    write_tag_buffer,
    zigzag_decode,
    zigzag_encode,
)

UVARINTS = [
    (0, "00"),
    (1, "01"),
    (127, "7f"),
    (128, "8001"),
    (300, "ac02"),
    (16383, "ff7f"),
    (16384, "808001"),
    (2**31 - 1, "ffffffff07"),
    (2**32 - 1, "ffffffff0f"),
]


@pytest.mark.parametrize("value,hexed", UVARINTS)
def test_unsigned_varint_edges(value: int, hexed: str) -> None:
    assert uvarint_bytes(value).hex() == hexed
    assert read_uvarint(bytes.fromhex(hexed), 0) == (value, len(hexed) // 2)
    assert Reader(bytes.fromhex(hexed)).unsigned_varint() == value


ZIGZAG = [(0, 0), (-1, 1), (1, 2), (-2, 3), (2, 4), (2**31 - 1, 2**32 - 2), (-(2**31), 2**32 - 1)]


@pytest.mark.parametrize("value,encoded", ZIGZAG)
def test_zigzag(value: int, encoded: int) -> None:
    assert zigzag_encode(value) == encoded
    assert zigzag_decode(encoded) == value


def test_varint_edges() -> None:
    assert varint_bytes(0).hex() == "00"
    assert varint_bytes(-1).hex() == "01"
    assert varint_bytes(1).hex() == "02"
    assert varint_bytes(-64).hex() == "7f"
    assert varint_bytes(64).hex() == "8001"
    assert varint_bytes(2**31 - 1).hex() == "feffffff0f"
    assert varint_bytes(-(2**31)).hex() == "ffffffff0f"
    assert read_varint(bytes.fromhex("ffffffff0f"), 0) == (-(2**31), 5)
    with pytest.raises(ProtocolError):
        varint_bytes(2**31)
    with pytest.raises(ProtocolError):
        varint_bytes(-(2**31) - 1)


def test_varlong_edges() -> None:
    assert varlong_bytes(-(2**63)).hex() == "ffffffffffffffffff01"
    assert varlong_bytes(2**63 - 1).hex() == "feffffffffffffffff01"
    assert read_varlong(bytes.fromhex("ffffffffffffffffff01"), 0) == (-(2**63), 10)
    with pytest.raises(ProtocolError):
        varlong_bytes(2**63)


def test_varint_longer_than_5_bytes_is_malformed() -> None:
    with pytest.raises(ProtocolError):
        read_varint(bytes.fromhex("8080808080"), 0)  # 5 bytes, continuation still set
    with pytest.raises(ProtocolError):
        read_uvarint(bytes.fromhex("808080808001"), 0)
    with pytest.raises(ProtocolError):
        Reader(bytes.fromhex("808080808001")).varint()


def test_varint_value_past_32_bits_is_malformed() -> None:
    with pytest.raises(ProtocolError):
        read_uvarint(bytes.fromhex("ffffffff1f"), 0)


def test_varlong_longer_than_10_bytes_is_malformed() -> None:
    with pytest.raises(ProtocolError):
        read_varlong(bytes.fromhex("80808080808080808080") + b"\x01", 0)
    with pytest.raises(ProtocolError):
        Reader(bytes.fromhex("ffffffffffffffffff7f")).varlong()  # 70 bits: past int64


def test_truncated_varint() -> None:
    with pytest.raises(ProtocolError):
        read_uvarint(b"\x80\x80", 0)
    with pytest.raises(ProtocolError):
        Reader(b"").unsigned_varint()


@settings(max_examples=examples(200))
@given(st.integers(-(2**31), 2**31 - 1))
def test_varint_roundtrip(n: int) -> None:
    data = varint_bytes(n)
    assert len(data) <= 5
    assert read_varint(data, 0) == (n, len(data))


@settings(max_examples=examples(200))
@given(st.integers(-(2**63), 2**63 - 1))
def test_varlong_roundtrip(n: int) -> None:
    data = varlong_bytes(n)
    assert len(data) <= 10
    assert read_varlong(data, 0) == (n, len(data))


def test_uuid_big_endian() -> None:
    raw = bytes(range(16))
    u = Reader(raw).uuid()
    assert u == uuid.UUID(bytes=raw)
    assert str(u) == "00010203-0405-0607-0809-0a0b0c0d0e0f"
    assert uuid_from_bytes(raw) == u
    w = Writer()
    w.uuid(u)
    assert w.getvalue() == raw


def test_fast_uuid_is_a_real_uuid() -> None:
    n = 0x1234567890ABCDEF1234567890ABCDEF
    fast = uuid_from_int(n)
    slow = uuid.UUID(int=n)
    assert fast == slow and hash(fast) == hash(slow) and str(fast) == str(slow)
    assert fast.bytes == slow.bytes and fast.version == slow.version
    assert uuid_from_int(0) == uuid.UUID(int=0)


def test_fixed_width_types() -> None:
    w = Writer()
    w.boolean(True)
    w.int8(-1)
    w.int16(-2)
    w.int32(-3)
    w.int64(-4)
    w.uint16(65535)
    w.uint32(2**32 - 1)
    w.float64(1.5)
    data = w.getvalue()
    assert data.hex() == ("01fffffefffffffdfffffffffffffffcffffffffffff3ff8000000000000")
    r = Reader(data)
    assert [r.boolean(), r.int8(), r.int16(), r.int32(), r.int64()] == [True, -1, -2, -3, -4]
    assert [r.uint16(), r.uint32(), r.float64()] == [65535, 2**32 - 1, 1.5]
    assert r.remaining == 0


def test_boolean_any_nonzero_is_true() -> None:
    assert Reader(b"\x02").boolean() is True
    assert Reader(b"\x00").boolean() is False


def test_out_of_range_fixed_int_is_refused() -> None:
    with pytest.raises(ProtocolError):
        Writer().int16(2**15)


def test_strings() -> None:
    w = Writer()
    w.string("héllo")
    w.nullable_string(None)
    w.compact_string("ab")
    w.compact_nullable_string(None)
    w.compact_nullable_string("")
    data = w.getvalue()
    assert data.hex() == "0006" + "68c3a96c6c6f" + "ffff" + "03" + "6162" + "00" + "01"
    r = Reader(data)
    assert r.string() == "héllo"
    assert r.nullable_string() is None
    assert r.compact_string() == "ab"
    assert r.compact_nullable_string() is None
    assert r.compact_nullable_string() == ""
    assert r.remaining == 0


@pytest.mark.parametrize(
    "method,data",
    [
        ("string", b"\xff\xff"),  # null in a non-nullable STRING
        ("string", b"\xff\xfe"),  # negative length
        ("nullable_string", b"\xff\xfe"),  # only -1 means null
        ("compact_string", b"\x00"),  # null in a non-nullable COMPACT_STRING
        ("string", b"\x00\x05abc"),  # length past the end
        ("compact_string", b"\x06abc"),
        ("string", b"\x00\x02\xc3\x28"),  # invalid UTF-8
        ("compact_nullable_string", b"\x03\xff\xfe"),
        ("bytes", b"\xff\xff\xff\xff"),
        ("bytes", b"\x00\x00\x00\x09abc"),
        ("compact_bytes", b"\x00"),
        ("nullable_bytes", b"\xff\xff\xff\xfe"),
        ("int32", b"\x00\x00\x01"),
        ("uuid", b"\x00" * 15),
    ],
)
def test_malformed_is_protocol_error(method: str, data: bytes) -> None:
    with pytest.raises(ProtocolError):
        getattr(Reader(data), method)()


def test_bytes_and_records() -> None:
    w = Writer()
    w.bytes(b"xy")
    w.nullable_bytes(None)
    w.compact_bytes(b"z")
    w.compact_nullable_bytes(None)
    w.records(b"rec")
    w.records(None)
    w.compact_records(b"r")
    data = w.getvalue()
    assert data.hex() == "000000027879ffffffff027a0000000003726563ffffffff0272"
    r = Reader(data)
    assert r.bytes() == b"xy" and r.nullable_bytes() is None
    assert r.compact_bytes() == b"z" and r.compact_nullable_bytes() is None
    assert bytes(r.records()) == b"rec" and r.records() is None
    assert bytes(r.compact_records()) == b"r"


def test_records_are_views_not_copies() -> None:
    buf = bytearray(b"\x00\x00\x00\x03abc")
    view = Reader(buf).records()
    assert isinstance(view, memoryview) and view.obj is buf
    buf[4] = ord("X")
    assert bytes(view) == b"Xbc"


def test_arrays() -> None:
    w = Writer()
    w.array([1, 2], w.int32)
    w.array(None, w.int32)
    w.compact_array([7], w.int8)
    w.compact_array(None, w.int8)
    data = w.getvalue()
    assert data.hex() == "000000020000000100000002ffffffff020700"
    r = Reader(data)
    assert r.array(r.int32) == [1, 2]
    assert r.array(r.int32) is None
    assert r.compact_array(r.int8) == [7]
    assert r.compact_array(r.int8) is None


def test_array_count_beyond_the_buffer() -> None:
    with pytest.raises(ProtocolError):
        Reader(b"\x7f\xff\xff\xff\x00").array(Reader(b"").int8)
    with pytest.raises(ProtocolError):
        Reader(b"\xff\xff\xff\xfe").array_length()  # -2


def test_tag_buffer_sorted_and_read_back() -> None:
    parts: list[bytes] = []
    write_tag_buffer(parts.append, [(5, b"\x01"), (0, b""), (200, b"xy")])
    data = b"".join(parts)
    assert data.hex() == "030000050101c801027879"
    assert read_tag_buffer(data, 0) == ({0: b"", 5: b"\x01", 200: b"xy"}, len(data))
    with pytest.raises(ProtocolError):
        read_tag_buffer(b"\x01\x00\x05ab", 0)  # size past the end


@settings(max_examples=examples(100))
@given(
    st.text(st.characters(blacklist_categories=("Cs",)), max_size=20),
    st.one_of(st.none(), st.binary(max_size=20)),
    st.lists(st.integers(-(2**31), 2**31 - 1), max_size=5),
)
def test_writer_reader_roundtrip(text: str, blob: bytes | None, ints: list[int]) -> None:
    w = Writer()
    w.compact_string(text)
    w.nullable_bytes(blob)
    w.compact_array(ints, w.varint)
    w.string(text)
    r = Reader(w.getvalue())
    assert r.compact_string() == text
    assert r.nullable_bytes() == blob
    assert r.compact_array(r.varint) == ints
    assert r.string() == text
    assert r.remaining == 0
