"""RecordBatch v2: exact layout, round trips, CRC, header fast path helpers."""

import struct

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from gregor.protocol.exceptions import ProtocolError
from gregor.protocol.records import (
    HEADER_SIZE,
    Record,
    RecordBatchBuilder,
    assign_offsets,
    build_batch,
    count_records,
    decode_batch,
    decode_batches,
    iter_batches,
    iter_records,
    read_header,
    valid_prefix_size,
    validate_batches,
)

# --- exact bytes ---


def test_single_record_batch_exact_bytes():
    b = RecordBatchBuilder(base_offset=0)
    b.append(0, None, b"a")
    raw = b.build()
    # record: attributes 0, ts delta 0, offset delta 0, key len -1, value len 1, 'a', 0 headers
    record = bytes([0x0E, 0x00, 0x00, 0x00, 0x01, 0x02, 0x61, 0x00])
    after_crc = (
        struct.pack(">hiqqqhii", 0, 0, 0, 0, -1, -1, -1, 1)  # attrs..records_count
        + record
    )
    expected = (
        struct.pack(">qiib", 0, len(after_crc) + 9, -1, 2)
        + struct.pack(">I", crc32c(after_crc))
        + after_crc
    )
    assert raw == expected
    assert len(raw) == 69


def test_header_fields_written_by_builder():
    b = RecordBatchBuilder(
        base_offset=1000,
        producer_id=42,
        producer_epoch=3,
        base_sequence=17,
        is_transactional=True,
        partition_leader_epoch=9,
        compression=1,
    )
    b.append(5000, b"k", b"v")
    b.append(4990, b"k", b"v")  # negative delta
    b.append(5020, None, None)
    raw = b.build()
    h = read_header(raw)
    assert h.base_offset == 1000
    assert h.batch_length == len(raw) - 12
    assert h.partition_leader_epoch == 9
    assert h.magic == 2
    assert h.attributes == 0x10 | 1
    assert h.last_offset_delta == 2
    assert h.base_timestamp == 5000
    assert h.max_timestamp == 5020
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (42, 3, 17)
    assert h.records_count == 3
    assert h.last_sequence == 19
    assert h.crc == crc32c(raw[21:])
    assert [tuple(r) for r in decode_batch(raw)] == [
        (1000, 5000, b"k", b"v", []),
        (1001, 4990, b"k", b"v", []),
        (1002, 5020, None, None, []),
    ]


def test_offset_gaps_and_explicit_last_offset_delta():
    b = RecordBatchBuilder(base_offset=50)
    b.append(1, b"a", b"1", offset_delta=0)
    b.append(2, b"b", b"2", offset_delta=7)
    raw = b.build(last_offset_delta=10)
    h = read_header(raw)
    assert (h.last_offset_delta, h.records_count) == (10, 2)
    assert [r.offset for r in decode_batch(raw)] == [50, 57]
    with pytest.raises(ValueError):
        b.append(3, b"c", b"3", offset_delta=7)
    with pytest.raises(ValueError):
        b.build(last_offset_delta=6)


def test_log_append_time_batches_report_max_timestamp_for_every_record():
    b = RecordBatchBuilder(timestamp_type=1)
    b.append(10, None, b"x")
    b.append(20, None, b"y")
    raw = b.build(max_timestamp=99)
    batch = decode_batch(raw)
    assert batch.timestamp_type == 1
    assert [r.timestamp for r in batch] == [99, 99]


def test_empty_batch():
    raw = RecordBatchBuilder(base_offset=7, producer_id=1, producer_epoch=0).build(
        last_offset_delta=3
    )
    h = read_header(raw)
    assert (h.records_count, h.base_timestamp, h.max_timestamp, h.last_offset) == (0, -1, -1, 10)
    assert decode_batch(raw).records == []
    assert len(raw) == HEADER_SIZE


def test_headers_and_utf8_keys():
    hs = [("trace-id", b"abc"), ("ünïcode", None), ("", b"")]
    raw = build_batch([Record(3, 11, b"k", b"v", hs)], base_offset=3)
    (r,) = decode_batch(raw).records
    assert r == Record(3, 11, b"k", b"v", hs)


def test_builder_accepts_bytearray_and_memoryview_fields():
    b = RecordBatchBuilder()
    b.append(1, bytearray(b"key"), memoryview(b"value"), [("h", bytearray(b"x"))])
    assert decode_batch(b.build()).records == [Record(0, 1, b"key", b"value", [("h", b"x")])]


# --- hypothesis round trips ---

timestamps = st.integers(min_value=-(2**40), max_value=2**42)
fields = st.none() | st.binary(max_size=200)
headers = st.lists(st.tuples(st.text(max_size=10), fields), max_size=3)
records = st.lists(st.tuples(timestamps, fields, fields, headers), max_size=60)


@pytest.mark.slow
@settings(max_examples=examples(150), suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(
    recs=records,
    codec=st.sampled_from([0, 1, 2, 3, 4]),
    transactional=st.booleans(),
    control=st.booleans(),
    base_offset=st.integers(min_value=0, max_value=2**62),
    producer=st.tuples(
        st.integers(-1, 2**63 - 1), st.integers(-1, 2**15 - 1), st.integers(-1, 2**31 - 1)
    ),
    leader_epoch=st.integers(-1, 2**31 - 1),
    gaps=st.lists(st.integers(0, 1000), min_size=60, max_size=60),
)
def test_round_trip(recs, codec, transactional, control, base_offset, producer, leader_epoch, gaps):
    b = RecordBatchBuilder(
        base_offset=base_offset,
        compression=codec,
        is_transactional=transactional,
        is_control=control,
        producer_id=producer[0],
        producer_epoch=producer[1],
        base_sequence=producer[2],
        partition_leader_epoch=leader_epoch,
    )
    expected = []
    delta = 0
    for (ts, key, value, hs), gap in zip(recs, gaps, strict=False):
        delta += gap
        assert b.append(ts, key, value, hs, offset_delta=delta) == delta
        expected.append(Record(base_offset + delta, ts, key, value, hs))
        delta += 1
    raw = b.build()
    batch = decode_batch(raw)
    assert batch.records == expected
    h = batch.header
    assert h.records_count == len(recs)
    assert h.compression == codec
    assert (h.is_transactional, h.is_control) == (transactional, control)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == producer
    assert h.partition_leader_epoch == leader_epoch
    assert h.last_offset_delta == max(delta - 1, 0)
    assert h.max_timestamp == max((r[0] for r in recs), default=-1)
    assert h.base_timestamp == (recs[0][0] if recs else -1)
    assert validate_batches(raw) == [(0, h)]


@pytest.mark.slow
def test_large_batch_round_trip_every_codec():
    recs = [
        (1_700_000_000_000 + i * 7, b"key-%d" % i, bytes([i % 251]) * (i % 300))
        for i in range(20_000)
    ]
    for codec in range(5):
        raw = build_batch(recs, compression=codec)
        got = decode_batch(raw).records
        assert len(got) == 20_000
        assert [(r.timestamp, r.key, r.value) for r in got] == recs
        assert got[-1].offset == 19_999


# --- several batches, fast path helpers ---


def _three_batches() -> bytes:
    parts = []
    for i, n in enumerate((3, 1, 5)):
        parts.append(build_batch([(100 + j, None, b"%d-%d" % (i, j)) for j in range(n)]))
    return b"".join(parts)


def test_iter_records_across_batches_and_assign_offsets():
    buf = bytearray(_three_batches())
    assert count_records(buf) == 9
    assert assign_offsets(buf, 500, partition_leader_epoch=4) == 509
    assert [r.offset for r in iter_records(buf)] == list(range(500, 509))
    assert [h.partition_leader_epoch for _, h in validate_batches(buf)] == [4, 4, 4]
    assert [h.base_offset for _, h in iter_batches(buf)] == [500, 503, 504]


def test_assign_offsets_with_log_append_time_keeps_crc_valid():
    buf = bytearray(_three_batches())
    assign_offsets(buf, 0, log_append_time=777)
    batches = decode_batches(buf)
    assert all(b.timestamp_type == 1 and b.max_timestamp == 777 for b in batches)
    assert {r.timestamp for b in batches for r in b} == {777}


def test_valid_prefix_size_stops_at_torn_or_corrupt_batch():
    buf = _three_batches()
    sizes = [h.size for _, h in iter_batches(buf)]
    assert valid_prefix_size(buf) == len(buf)
    assert valid_prefix_size(buf[:-1]) == sizes[0] + sizes[1]
    corrupt = bytearray(buf)
    corrupt[sizes[0] + 30] ^= 1
    assert valid_prefix_size(corrupt) == sizes[0]
    assert valid_prefix_size(corrupt, check_crc=False) == len(buf)
    assert valid_prefix_size(b"") == 0


def test_partial_tail_allowed_only_on_request():
    buf = _three_batches()
    cut = buf[:-4]
    with pytest.raises(ProtocolError):
        list(iter_records(cut))
    assert len(list(iter_records(cut, allow_partial_tail=True))) == 4
    assert len(decode_batches(cut, allow_partial_tail=True)) == 2


def test_skip_control():
    from gregor.protocol.records import build_control_batch

    buf = _three_batches() + build_control_batch(1, 0, True, 0, base_offset=9)
    assert len(list(iter_records(buf))) == 10
    assert len(list(iter_records(buf, skip_control=True))) == 9


# --- CRC ---


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_every_flipped_byte_is_detected(codec):
    raw = build_batch(
        [(1000 + i, b"k%d" % i, b"value %d" % i) for i in range(20)],
        compression=codec,
        producer_id=5,
        producer_epoch=1,
        base_sequence=0,
    )
    for i in range(len(raw)):
        flipped = bytearray(raw)
        flipped[i] ^= 0x01
        if i < 8 or 12 <= i < 16:
            # base_offset and partition_leader_epoch sit outside the CRC: the broker rewrites
            # them. Everything else (length, magic, CRC, attributes..records) must be caught.
            assert len(decode_batch(flipped).records) == 20
            continue
        with pytest.raises(ProtocolError):
            decode_batch(flipped)
        with pytest.raises(ProtocolError):
            validate_batches(flipped)


def test_crc_can_be_skipped_for_decoding():
    raw = bytearray(build_batch([(1, b"k", b"v")]))
    raw[17] ^= 0xFF  # the stored CRC itself
    with pytest.raises(ProtocolError, match="CRC"):
        decode_batch(raw)
    assert decode_batch(raw, verify_crc=False).records[0].value == b"v"


# --- malformed record data (with a correct CRC, so the record parser is reached) ---


def _with_records(payload: bytes, count: int, attributes: int = 0) -> bytes:
    body = struct.pack(">hiqqqhii", attributes, max(count - 1, 0), 0, 0, -1, -1, -1, count)
    body += payload
    return struct.pack(">qiib", 0, len(body) + 9, -1, 2) + struct.pack(">I", crc32c(body)) + body


@pytest.mark.parametrize(
    ("payload", "count", "match"),
    [
        # Kafka's texts where its record reader refuses the same (issue 35)
        (
            bytes([0x0E, 0, 0, 0, 1, 2, 0x61, 0]),
            2,
            "^Incorrect declared batch size, premature EOF reached$",
        ),
        (
            bytes([0x0E, 0, 0, 0, 1, 2, 0x61, 0, 0]),
            1,
            "^Incorrect declared batch size, records still remaining in file$",
        ),  # trailing byte
        (
            bytes([0x10, 0, 0, 0, 1, 2, 0x61, 0, 0]),
            1,  # length too long by one
            "^Invalid record size: expected to read 8 bytes in record payload, but instead read 7$",
        ),
        (
            bytes([0x0C, 0, 0, 0, 1, 2, 0x61, 0]),
            1,  # length too short by one
            "^Invalid record size: expected to read 6 bytes in record payload, but instead read 7$",
        ),
        (
            bytes([0x0C, 0, 0, 0, 1, 8, 0x61, 0]),
            1,
            "^Found invalid record structure$",
        ),  # value past the end
        (bytes([0x0E, 0, 0, 0, 3, 2, 0x61, 0]), 1, "^negative record key length$"),  # key length -2
        (bytes([0x0E, 0, 0, 0, 1, 5, 0x61, 0]), 1, "^negative record value length$"),  # value -3
        (bytes([0x0C, 0, 0, 0, 1, 1, 1]), 1, "^Found invalid number of record headers -1$"),
        (bytes([0x12, 0, 0, 0, 1, 1, 2, 2, 0xFF, 1]), 1, "UTF-8"),  # header key 0xff
        (
            bytes([0x7E, 0, 0, 0, 1, 1, 0]),
            1,  # length past the end
            r"^Invalid record size: expected 63 bytes in record payload, but instead the buffer has only 6 "
            r"remaining bytes\.$",
        ),
        (b"\xff" * 11, 1, "^varint longer than 10 bytes$"),
    ],
)
def test_malformed_records_raise(payload, count, match):
    with pytest.raises(ProtocolError, match=match):
        decode_batch(_with_records(payload, count))


def test_unknown_codec_in_attributes():
    with pytest.raises(ProtocolError, match="codec"):
        decode_batch(_with_records(b"\x00", 1, attributes=6))


def test_not_a_v2_batch():
    raw = bytearray(build_batch([(1, None, b"x")]))
    raw[16] = 1
    with pytest.raises(ProtocolError, match="magic"):
        decode_batch(raw)
    with pytest.raises(ProtocolError, match="truncated"):
        decode_batch(raw[:40])
