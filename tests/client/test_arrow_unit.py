"""The Arrow bulk decoder against the record decoder of gregor.protocol, on built batches."""

from __future__ import annotations

import sys
import weakref
from collections.abc import Iterator

import pyarrow as pa
import pytest

from gregor.client.consumer.arrow import ArrowBatchBuilder, spark_schema
from gregor.protocol.exceptions import ProtocolError
from gregor.protocol.records import (
    LOG_APPEND_TIME,
    RecordBatchBuilder,
    build_control_batch,
    iter_records,
    scan,
)


@pytest.fixture(params=scan.available(), autouse=True)
def record_walk(request: pytest.FixtureRequest) -> Iterator[str]:
    """Each test runs on the compiled record walk and on the pure-Python reference."""
    previous = scan.set_implementation(request.param)
    try:
        yield request.param
    finally:
        scan.set_implementation(previous)


def _batch(base: int, n: int, codec: int = 0, **kw: object) -> bytes:
    b = RecordBatchBuilder(base_offset=base, compression=codec, **kw)  # type: ignore[arg-type]
    for i in range(n):
        o = base + i
        b.append(
            1_700_000_000_000 + o,
            None if o % 7 == 0 else b"k%d" % o,
            None if o % 11 == 0 else bytes([o % 256]) * (o % 300),
            [("h", b"x"), ("n", None)] if o % 5 == 0 else [],
        )
    return b.build()


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_matches_record_decoder(codec: int) -> None:
    data = _batch(0, 300, codec) + _batch(300, 200, codec)
    ab = ArrowBatchBuilder("topic-a", 4)
    assert ab.add_record_set(data) == 500
    rb = ab.build()
    assert rb.schema == spark_schema(True, "us")
    assert rb.num_rows == 500
    rows = rb.to_pylist()
    for row, rec in zip(rows, iter_records(data), strict=True):
        assert row["offset"] == rec.offset
        assert row["key"] == rec.key
        assert row["value"] == rec.value
        assert row["topic"] == "topic-a" and row["partition"] == 4
        assert int(row["timestamp"].timestamp() * 1000) == rec.timestamp
        assert row["timestampType"] == 0
        if rec.headers:
            assert [(h["key"], h["value"]) for h in row["headers"]] == rec.headers
        else:
            assert row["headers"] is None  # as Spark's Kafka source: null, not []
    assert rb.column("key").null_count == len([o for o in range(500) if o % 7 == 0])
    assert rb.column("value").null_count == len([o for o in range(500) if o % 11 == 0])


def test_columns_with_no_nulls_and_all_nulls() -> None:
    # the walk's null counts pick the bitmap: none, all zero bits, or packed from the flags
    b = RecordBatchBuilder(base_offset=0)
    for i in range(70):  # not a multiple of 8: the all-null bitmap's last byte is partial
        b.append(1_700_000_000_000 + i, None, b"v%d" % i, [("h", None)] if i == 3 else [])
    ab = ArrowBatchBuilder("t", 0)
    assert ab.add_record_set(b.build()) == 70
    rb = ab.build()
    rb.validate(full=True)
    assert rb.column("key").null_count == 70 and rb.column("key").to_pylist() == [None] * 70
    assert rb.column("key").buffers()[0] is not None
    assert rb.column("value").null_count == 0 and rb.column("value").buffers()[0] is None
    assert rb.column("value").to_pylist() == [b"v%d" % i for i in range(70)]
    assert rb.column("headers").null_count == 69 and rb.column("headers")[3].as_py() == [
        {"key": "h", "value": None}
    ]
    assert rb.column("timestamp").cast(pa.int64()).to_pylist() == [
        (1_700_000_000_000 + i) * 1000 for i in range(70)
    ]


def test_range_slicing_partial_tail_and_ms_unit() -> None:
    data = _batch(100, 50) + _batch(150, 50)
    ab = ArrowBatchBuilder("t", 0, include_headers=False, timestamp_unit="ms")
    # a fetch response may end with a partial batch: it is ignored
    assert ab.add_record_set(data + _batch(200, 10)[:40]) == 200
    rb = ab.build(120, 170)
    assert rb.schema.names == [
        "key",
        "value",
        "topic",
        "partition",
        "offset",
        "timestamp",
        "timestampType",
    ]
    assert rb.column("offset").to_pylist() == list(range(120, 170))
    assert rb.column("timestamp").type == pa.timestamp("ms", tz="UTC")
    assert rb.column("timestamp").cast(pa.int64()).to_pylist() == [
        1_700_000_000_000 + o for o in range(120, 170)
    ]


def test_log_append_time_and_control_batches() -> None:
    b = RecordBatchBuilder(base_offset=0, timestamp_type=LOG_APPEND_TIME)
    b.append(5, b"a", b"1")
    b.append(6, b"b", b"2")
    lat = b.build(max_timestamp=1234)
    ctrl = build_control_batch(9, 0, True, 0, base_offset=2, timestamp=7)
    ab = ArrowBatchBuilder("t", 1)
    assert ab.add_record_set(lat + ctrl) == 3
    rb = ab.build()
    assert rb.column("offset").to_pylist() == [0, 1]
    assert rb.column("timestampType").to_pylist() == [1, 1]
    assert rb.column("timestamp").cast(pa.int64()).to_pylist() == [1_234_000, 1_234_000]


def test_read_committed_drops_aborted_transactions() -> None:
    committed = _batch(
        0, 3, producer_id=1, producer_epoch=0, base_sequence=0, is_transactional=True
    )
    commit = build_control_batch(1, 0, True, 0, base_offset=3, timestamp=1)
    aborted = _batch(4, 2, producer_id=2, producer_epoch=0, base_sequence=0, is_transactional=True)
    abort = build_control_batch(2, 0, False, 0, base_offset=6, timestamp=1)
    plain = _batch(7, 2)
    data = committed + commit + aborted + abort + plain
    rc = ArrowBatchBuilder("t", 0, read_committed=True)
    rc.add_record_set(data, [(2, 4)])
    assert rc.build().column("offset").to_pylist() == [0, 1, 2, 7, 8]
    ru = ArrowBatchBuilder("t", 0)
    ru.add_record_set(data, [(2, 4)])
    assert ru.build().column("offset").to_pylist() == [0, 1, 2, 4, 5, 7, 8]


def test_empty_and_corrupt() -> None:
    ab = ArrowBatchBuilder("t", 0)
    rb = ab.build()
    assert rb.num_rows == 0 and rb.schema == spark_schema()
    bad = bytearray(_batch(0, 3))
    bad[-1] ^= 0xFF
    with pytest.raises(ProtocolError):
        ArrowBatchBuilder("t", 0).add_record_set(bytes(bad))


def test_read_committed_without_aborted_list_uses_abort_markers() -> None:
    # Some brokers (Tansu 0.6.0) send no aborted-transaction list: the ABORT marker that
    # follows a producer's transactional batches in the same data still identifies them.
    t1 = _batch(0, 2, producer_id=5, producer_epoch=0, base_sequence=0, is_transactional=True)
    abort = build_control_batch(5, 0, False, 0, base_offset=2, timestamp=1)
    t2 = _batch(3, 2, producer_id=5, producer_epoch=0, base_sequence=2, is_transactional=True)
    commit = build_control_batch(5, 0, True, 0, base_offset=5, timestamp=1)
    rc = ArrowBatchBuilder("t", 0, read_committed=True)
    assert rc.add_record_set(t1 + abort + t2 + commit, []) == 6
    assert rc.build().column("offset").to_pylist() == [3, 4]


def test_batches_with_offset_gaps() -> None:
    # a compacted batch keeps its records' original offset deltas
    b = RecordBatchBuilder(base_offset=100)
    for d in (0, 3, 4, 9):
        b.append(1000 + d, b"k%d" % d, b"v%d" % d, offset_delta=d)
    ab = ArrowBatchBuilder("t", 0)
    assert ab.add_record_set(b.build()) == 110
    rb = ab.build(103)
    assert rb.column("offset").to_pylist() == [103, 104, 109]
    assert rb.column("value").to_pylist() == [b"v3", b"v4", b"v9"]


def test_topic_and_partition_columns_are_shared_slices() -> None:
    a = ArrowBatchBuilder("t", 3)
    a.add_record_set(_batch(0, 10))
    b = ArrowBatchBuilder("t", 3)
    b.add_record_set(_batch(0, 200))
    small, big = a.build(), b.build()
    assert small.column("topic").to_pylist() == ["t"] * 10
    assert small.column("partition").to_pylist() == [3] * 10
    assert big.column("topic").to_pylist() == ["t"] * 200  # the kept array grew
    assert big.column("partition").to_pylist() == [3] * 200
    assert small.column("topic").to_pylist() == ["t"] * 10  # an earlier batch keeps its own
    other = ArrowBatchBuilder("u", 4)
    other.add_record_set(_batch(0, 5))
    assert other.build().column("topic").to_pylist() == ["u"] * 5


def test_reserved_room_comes_from_the_batch_headers() -> None:
    from gregor.protocol.records.scan import _record_set_room

    plain = _batch(0, 40)
    squeezed = _batch(40, 30, codec=4)
    assert _record_set_room(plain + squeezed) == (70, len(plain) - 12)  # no bytes for zstd
    assert _record_set_room(plain + squeezed[:-1]) == (40, len(plain) - 12)  # a partial tail
    assert _record_set_room(b"") == (0, 0)
    forged = bytearray(plain)
    forged[57:61] = (2**31 - 1).to_bytes(4, "big")  # a count the bytes cannot hold
    records, size = _record_set_room(bytes(forged))
    assert records == (len(plain) - 61) // 7 and size == len(plain) - 12
    with pytest.raises(ProtocolError):  # the walk itself still rejects the count
        ArrowBatchBuilder("t", 0, verify_crc=False).add_record_set(bytes(forged))


def _values(rb: pa.RecordBatch) -> list[bytes | None]:
    return rb.column("value").to_pylist()


def test_a_batch_still_held_keeps_its_columns_while_later_ones_are_built() -> None:
    expected = [rec.value for rec in iter_records(_batch(0, 300))]
    held = []
    for base in range(0, 3000, 300):  # more batches than the thread keeps spares of
        ab = ArrowBatchBuilder("t", 0)
        ab.add_record_set(_batch(base, 300))
        held.append(ab.build())
        del ab
    assert _values(held[0]) == expected
    for i, rb in enumerate(held):
        assert rb.column("offset").to_pylist() == list(range(300 * i, 300 * i + 300))
        assert _values(rb) == [rec.value for rec in iter_records(_batch(300 * i, 300))]


@pytest.fixture
def no_spares(monkeypatch: pytest.MonkeyPatch) -> None:
    """This thread starts with no spare column arrays (earlier tests left some)."""
    from gregor.protocol.records import spares

    monkeypatch.setattr(spares._spares, "arrays", {}, raising=False)


@pytest.mark.usefixtures("no_spares")
def test_the_columns_of_a_batch_no_one_holds_are_reused_emptied(record_walk: str) -> None:
    ab = ArrowBatchBuilder("t", 0)
    ab.add_record_set(_batch(0, 300))
    first = ab.build()
    values = weakref.ref(ab.columns.value_data)  # a reference of the test would keep it
    size = len(ab.columns.value_data)
    room = sys.getsizeof(ab.columns.value_data)
    assert first.num_rows == 300 and size > 0
    ab = ArrowBatchBuilder("t", 0)  # the first batch is alive: new arrays
    assert ab.columns.value_data is not values() and len(ab.columns.value_data) == 0
    del first, ab
    ab = ArrowBatchBuilder("t", 0)  # now nothing refers to them: taken again, emptied
    assert ab.columns.value_data is values()
    assert len(ab.columns.value_data) == 0 and list(ab.columns.value_offsets) == [0]
    if record_walk == "cython":  # the compiled walk keeps the room; the reference cannot
        assert sys.getsizeof(ab.columns.value_data) == room
    ab.add_record_set(_batch(300, 10))
    rb = ab.build()
    assert rb.column("offset").to_pylist() == list(range(300, 310))
    assert _values(rb) == [rec.value for rec in iter_records(_batch(300, 10))]


@pytest.mark.usefixtures("no_spares")
def test_a_spare_over_the_limit_is_let_go(monkeypatch: pytest.MonkeyPatch) -> None:
    from gregor.protocol.records import spares

    ab = ArrowBatchBuilder("t", 0)
    ab.add_record_set(_batch(0, 300))
    ab.build()
    big = weakref.ref(ab.columns.value_data)
    monkeypatch.setattr(spares, "SPARE_LIMIT", sys.getsizeof(ab.columns.value_data) - 1)
    del ab
    assert spares.new_arrow_columns().value_data is not big()
    assert big() is None  # no longer kept, and nothing else held it
