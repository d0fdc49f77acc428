"""Legacy message sets v0/v1, up/down-conversion, control records."""

import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from gregor.protocol.exceptions import ProtocolError
from gregor.protocol.records import (
    ControlRecordType,
    MessageSetBuilder,
    Record,
    RecordBatchBuilder,
    UnsupportedCompressionError,
    build_batch,
    build_control_batch,
    decode_batch,
    decode_batches,
    downconvert,
    iter_legacy_messages,
    iter_record_set,
    parse_control_record,
    read_header,
    upconvert,
)
from gregor.protocol.records.control import parse_control_key, parse_end_txn_marker
from gregor.protocol.records.legacy import (
    LegacyMessage,
    deep_messages,
    encode_message,
    iter_shallow_messages,
    read_message,
)

# --- exact layout ---


def test_v0_message_exact_bytes():
    raw = encode_message(7, 0, 0, -1, b"k", b"val")
    body = b"\x00\x00" + b"\x00\x00\x00\x01k" + b"\x00\x00\x00\x03val"
    assert raw == struct.pack(">qiI", 7, 4 + len(body), zlib.crc32(body)) + body
    assert read_message(raw) == (LegacyMessage(7, 0, 0, -1, b"k", b"val"), len(raw))


def test_v1_message_exact_bytes_with_null_key():
    raw = encode_message(3, 1, 0x08, 1234, None, b"")
    body = b"\x01\x08" + struct.pack(">q", 1234) + b"\xff\xff\xff\xff" + b"\x00\x00\x00\x00"
    assert raw == struct.pack(">qiI", 3, 4 + len(body), zlib.crc32(body)) + body
    msg, _ = read_message(raw)
    assert msg == LegacyMessage(3, 1, 8, 1234, None, b"")
    assert msg.timestamp_type == 1


@pytest.mark.parametrize("codec", [1, 2, 3])
def test_compressed_v1_wrapper_layout(codec):
    b = MessageSetBuilder(1, codec, base_offset=100)
    for i in range(4):
        b.append(1000 + i, None, b"v%d" % i)
    raw = b.build()
    (wrapper,) = list(iter_shallow_messages(raw))
    assert wrapper.offset == 103  # the last inner offset
    assert wrapper.compression == codec
    assert wrapper.timestamp == 1003  # max inner timestamp
    assert wrapper.key is None
    from gregor.protocol.records.compression import decompress

    inner = list(iter_shallow_messages(decompress(codec, wrapper.value)))
    assert [m.offset for m in inner] == [0, 1, 2, 3]  # relative
    msgs = list(iter_legacy_messages(raw))
    assert [(m.offset, m.timestamp, m.value) for m in msgs] == [
        (100 + i, 1000 + i, b"v%d" % i) for i in range(4)
    ]


@pytest.mark.parametrize("codec", [1, 2, 3])
def test_compressed_v0_wrapper_has_absolute_inner_offsets(codec):
    b = MessageSetBuilder(0, codec, base_offset=40)
    for i in range(3):
        b.append(0, b"k", b"v%d" % i)
    raw = b.build()
    (wrapper,) = list(iter_shallow_messages(raw))
    assert wrapper.offset == 42
    from gregor.protocol.records.compression import decompress

    inner = list(iter_shallow_messages(decompress(codec, wrapper.value)))
    assert [m.offset for m in inner] == [40, 41, 42]
    assert [m.offset for m in iter_legacy_messages(raw)] == [40, 41, 42]
    assert all(m.timestamp == -1 for m in iter_legacy_messages(raw))


def test_v0_lz4_wrapper_uses_kafkas_old_header_checksum():
    from gregor.protocol.records.compression import xxh32

    for magic, start in ((0, 0), (1, 4)):
        b = MessageSetBuilder(magic, 3)
        b.append(5, None, b"x" * 100)
        (wrapper,) = list(iter_shallow_messages(b.build()))
        frame = wrapper.value
        assert frame[6] == (xxh32(frame[start:6]) >> 8) & 0xFF


def test_log_append_time_wrapper_overrides_inner_timestamps():
    b = MessageSetBuilder(1, 1, timestamp_type=1)
    b.append(1, None, b"a")
    b.append(2, None, b"b")
    raw = b.build(wrapper_timestamp=555)
    msgs = list(iter_legacy_messages(raw))
    assert [(m.timestamp, m.timestamp_type) for m in msgs] == [(555, 1), (555, 1)]


# --- legacy errors ---


def _wrap(inner: bytes, magic: int = 1, offset: int = 0, codec: int = 1) -> bytes:
    from gregor.protocol.records.compression import compress

    return encode_message(offset, magic, codec, 0, None, compress(codec, inner))


def test_legacy_errors():
    good = encode_message(0, 1, 0, 5, b"k", b"v")
    bad_crc = bytearray(good)
    bad_crc[-1] ^= 1
    with pytest.raises(ProtocolError, match="CRC"):
        read_message(bad_crc)
    assert read_message(bad_crc, verify_crc=False)[0].value == b"w"
    with pytest.raises(ProtocolError, match="magic"):
        read_message(good[:16] + b"\x02" + good[17:], verify_crc=False)
    with pytest.raises(ProtocolError, match="truncated"):
        read_message(good[:-1])
    with pytest.raises(ProtocolError, match="no messages"):
        list(iter_legacy_messages(_wrap(b"")))
    with pytest.raises(ProtocolError, match="itself compressed"):
        list(iter_legacy_messages(_wrap(_wrap(good))))
    with pytest.raises(ProtocolError, match="magic differs"):
        list(iter_legacy_messages(_wrap(encode_message(0, 0, 0, -1, None, b"x"))))
    # A produced wrapper (offset 0, below the last inner relative offset) keeps relative offsets.
    inner = encode_message(0, 1, 0, 0, None, b"x") + encode_message(1, 1, 0, 0, None, b"y")
    assert [m.offset for m in iter_legacy_messages(_wrap(inner, offset=0))] == [0, 1]
    assert [m.offset for m in iter_legacy_messages(_wrap(inner, offset=9))] == [8, 9]
    with pytest.raises(ProtocolError, match="null value"):
        list(iter_legacy_messages(encode_message(0, 1, 1, 0, None, None)))
    with pytest.raises(UnsupportedCompressionError):
        list(iter_legacy_messages(encode_message(0, 1, 4, 0, None, b"x")))
    # A field length running past the message.
    body = b"\x01\x00" + struct.pack(">q", 0) + b"\x00\x00\x00\x09k" + b"\xff\xff\xff\xff"
    raw = struct.pack(">qiI", 0, len(body) + 4, zlib.crc32(body)) + body
    with pytest.raises(ProtocolError, match="length"):
        read_message(raw)


def test_legacy_partial_tail():
    raw = encode_message(0, 1, 0, 1, None, b"a") + encode_message(1, 1, 0, 1, None, b"b")
    with pytest.raises(ProtocolError):
        list(iter_legacy_messages(raw[:-3]))
    assert [m.value for m in iter_legacy_messages(raw[:-3], allow_partial_tail=True)] == [b"a"]


# --- conversion ---

legacy_fields = st.none() | st.binary(max_size=80)
legacy_records = st.lists(
    st.tuples(st.integers(0, 2**41), legacy_fields, legacy_fields), min_size=1, max_size=40
)


@settings(max_examples=examples(80), deadline=None)
@given(
    recs=legacy_records,
    codec=st.sampled_from([0, 1, 2, 3]),
    magic=st.sampled_from([0, 1]),
    base=st.integers(0, 2**40),
)
def test_down_then_up_conversion_keeps_offsets_keys_values_timestamps(recs, codec, magic, base):
    v2 = build_batch(recs, compression=codec, base_offset=base)
    legacy = downconvert(v2, magic)
    msgs = list(iter_legacy_messages(legacy))
    assert [m.offset for m in msgs] == list(range(base, base + len(recs)))
    assert [(m.key, m.value) for m in msgs] == [(k, v) for _, k, v in recs]
    assert all(m.magic == magic for m in msgs)
    if magic == 1:
        assert [m.timestamp for m in msgs] == [t for t, _, _ in recs]
    shallow = list(iter_shallow_messages(legacy))
    assert len(shallow) == (1 if codec else len(recs))
    assert all(m.compression == codec for m in shallow)

    batches = decode_batches(upconvert(legacy))
    assert len(batches) == 1
    assert batches[0].compression == codec
    expected_ts = [t if magic else -1 for t, _, _ in recs]
    assert batches[0].records == [
        Record(base + i, expected_ts[i], k, v, []) for i, (_, k, v) in enumerate(recs)
    ]


def test_upconvert_groups_wrappers_and_plain_runs_and_renumbers():
    plain = encode_message(0, 1, 0, 10, None, b"a") + encode_message(1, 1, 0, 11, None, b"b")
    b = MessageSetBuilder(1, 2, base_offset=2)
    b.append(12, None, b"c")
    b.append(13, None, b"d")
    tail = encode_message(4, 1, 0x08, 99, None, b"e")  # LogAppendTime plain message
    buf = plain + b.build() + tail
    batches = decode_batches(upconvert(buf))
    assert [(bt.base_offset, bt.compression, bt.timestamp_type, len(bt)) for bt in batches] == [
        (0, 0, 0, 2),
        (2, 2, 0, 2),
        (4, 0, 1, 1),
    ]
    assert [r.value for bt in batches for r in bt] == [b"a", b"b", b"c", b"d", b"e"]
    assert batches[2].max_timestamp == 99
    renumbered = decode_batches(upconvert(buf, base_offset=1000))
    assert [r.offset for bt in renumbered for r in bt] == list(range(1000, 1005))


def test_upconvert_splits_where_offsets_do_not_increase():
    buf = b"".join(encode_message(0, 0, 0, -1, None, b"%d" % i) for i in range(3))
    batches = decode_batches(upconvert(buf))
    assert [(bt.base_offset, len(bt)) for bt in batches] == [(0, 1), (0, 1), (0, 1)]
    assert [r.offset for bt in decode_batches(upconvert(buf, base_offset=7)) for r in bt] == [
        7,
        8,
        9,
    ]


def test_upconvert_log_append_time_wrapper():
    b = MessageSetBuilder(1, 1, base_offset=0, timestamp_type=1)
    b.append(1, None, b"x")
    (batch,) = decode_batches(upconvert(b.build(wrapper_timestamp=4242)))
    assert (batch.timestamp_type, batch.max_timestamp) == (1, 4242)
    assert batch.records[0].timestamp == 4242


def test_downconvert_details():
    # headers dropped, control batches and empty batches skipped, gaps kept
    b = RecordBatchBuilder(base_offset=10, compression=1, timestamp_type=1)
    b.append(1, b"k", b"v", [("h", b"x")])
    b.append(2, b"k2", b"v2", offset_delta=5)
    v2 = (
        b.build(max_timestamp=777)
        + build_control_batch(1, 0, False, 3, base_offset=16)
        + RecordBatchBuilder(base_offset=17).build()
    )
    msgs = list(iter_legacy_messages(downconvert(v2, 1)))
    assert [(m.offset, m.timestamp, m.timestamp_type, m.key) for m in msgs] == [
        (10, 777, 1, b"k"),
        (15, 777, 1, b"k2"),
    ]
    msgs0 = list(iter_legacy_messages(downconvert(v2, 0)))
    assert [(m.offset, m.timestamp, m.magic) for m in msgs0] == [(10, -1, 0), (15, -1, 0)]
    with pytest.raises(UnsupportedCompressionError):
        downconvert(build_batch([(1, None, b"z")], compression=4), 1)
    with pytest.raises(ValueError):
        downconvert(v2, 2)


def test_iter_record_set_mixes_formats():
    buf = (
        encode_message(0, 0, 0, -1, b"a", b"0")
        + _wrap(encode_message(0, 1, 0, 5, None, b"1"), offset=1)
        + build_batch([(9, None, b"2")], base_offset=2)
    )
    assert [tuple(r) for r in iter_record_set(buf)] == [
        (0, -1, b"a", b"0", []),
        (1, 5, None, b"1", []),
        (2, 9, None, b"2", []),
    ]
    assert len(list(iter_record_set(buf[:-1], allow_partial_tail=True))) == 2
    with pytest.raises(ProtocolError):
        list(iter_record_set(buf[:-1]))


# --- control records ---


@pytest.mark.parametrize("commit", [True, False])
def test_control_batch(commit):
    raw = build_control_batch(77, 4, commit, 12, base_offset=300, timestamp=1_650_000_000_000)
    h = read_header(raw)
    assert (h.is_control, h.is_transactional) == (True, True)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (77, 4, -1)
    assert (h.base_offset, h.records_count, h.max_timestamp) == (300, 1, 1_650_000_000_000)
    (rec,) = decode_batch(raw).records
    assert rec.key == struct.pack(">hh", 0, 1 if commit else 0)
    assert rec.value == struct.pack(">hi", 0, 12)
    ctrl = parse_control_record(rec)
    assert ctrl.type == (ControlRecordType.COMMIT if commit else ControlRecordType.ABORT)
    assert (ctrl.version, ctrl.coordinator_epoch, ctrl.is_commit) == (0, 12, commit)


def test_control_parsers_accept_newer_versions_and_reject_short_input():
    assert parse_control_key(struct.pack(">hh", 1, 1) + b"extra") == (1, 1)
    assert parse_end_txn_marker(struct.pack(">hi", 1, 9) + b"\x00") == (1, 9)
    unknown = parse_control_record(Record(0, 0, struct.pack(">hh", 0, 5), b"", []))
    assert (unknown.type, unknown.coordinator_epoch) == (5, None)
    for bad in (None, b"\x00\x00\x00"):
        with pytest.raises(ProtocolError):
            parse_control_key(bad)
        with pytest.raises(ProtocolError):
            parse_end_txn_marker(bad)
    with pytest.raises(ProtocolError):
        parse_control_key(struct.pack(">hh", -1, 0))


def test_deep_messages_of_plain_message_is_itself():
    msg = LegacyMessage(1, 1, 0, 2, None, b"x")
    assert deep_messages(msg) == [msg]
