"""The two record walks (compiled ``_scan``, pure-Python ``_scan_py``) agree on any input.

Differential tests: the same bytes go to both implementations of every sink; both must return
identical values (and identical Arrow column bytes), or both raise ProtocolError with the same
message. Inputs are arbitrary bytes, and valid records (built by the reference encoder) that
are then truncated, extended or have one byte changed, so every check of the walk is reached.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from gregor.protocol.exceptions import ProtocolError
from gregor.protocol.records import _scan_py, scan
from gregor.protocol.records.batch import Record, build_batch
from gregor.protocol.records.columns import ArrowColumns

try:
    from gregor.protocol.records import _scan as _compiled
except ImportError:  # pragma: no cover - the build failed; test_compiled_walk_is_built says so
    _compiled = None


@pytest.fixture(autouse=True)
def record_walk() -> None:
    """These tests call both implementations themselves (overrides the conftest's switch)."""


needs_compiled = pytest.mark.skipif(
    _compiled is None, reason="the compiled record walk is not built"
)

I64 = st.integers(-(2**63), 2**63 - 1)
SMALL = st.integers(-(2**20), 2**20)
HEADER = st.tuples(
    st.text(max_size=6),
    st.one_of(st.none(), st.binary(max_size=8)),
)
RECORD = st.tuples(
    st.one_of(SMALL, I64),  # offset delta
    st.one_of(SMALL, I64),  # timestamp delta
    st.one_of(st.none(), st.binary(max_size=40)),
    st.one_of(st.none(), st.binary(max_size=300)),
    st.lists(HEADER, max_size=3),
)


class ConsumerRecord(tuple):  # a NamedTuple-like tuple subclass, as the client's
    __slots__ = ()


def _records_bytes(records: list[tuple[int, int, Any, Any, Any]]) -> bytes:
    buf = bytearray()
    for od, td, key, value, headers in records:
        _scan_py.encode_record(buf, od, td, key, value, headers)
    return bytes(buf)


def _odd_refused(blob: bytes) -> str | None:
    return f"{len(blob)} is odd" if len(blob) % 2 else None


def _outcome(fn: Any) -> tuple[str, Any]:
    try:
        return "ok", fn()
    except ProtocolError as e:
        return "error", (type(e), str(e))


def _columns_bytes(c: ArrowColumns) -> dict[str, Any]:
    """Every buffer's bytes, and the counts (nulls, the timestamp scale) as they are."""
    values = {name: getattr(c, name) for name in ArrowColumns.__slots__}
    return {name: v if isinstance(v, int) else bytes(v) for name, v in values.items()}


def _all_sinks(
    mod: Any, data: bytes, count: int, base_offset: int, base_ts: int, lat: int | None
) -> list[Any]:
    out: list[Any] = []
    out.append(_outcome(lambda: mod.decode_records(data, count, base_offset, base_ts, lat, Record)))

    def consumer() -> list[Any]:
        got: list[Any] = []
        mod.consumer_records(
            data, count, base_offset, base_ts, lat, base_offset + 1, "t", 3, 7, ConsumerRecord, got
        )
        return [(type(r), tuple(r)) for r in got]

    out.append(_outcome(consumer))
    out.append(_outcome(lambda: mod.validate_records(data, count)))
    out.append(_outcome(lambda: mod.schema_ids(data, count, True)))
    out.append(_outcome(lambda: mod.schema_ids(data, count, False)))
    if count >= 0:
        ids = [len(data) % 3] * count
        checks = {ids[0] if ids else 0: _odd_refused}
        out.append(_outcome(lambda: mod.check_payloads(data, count, True, ids, checks)))
        out.append(_outcome(lambda: mod.check_payloads(data, count, False, ids, checks)))
    out.append(_outcome(lambda: mod.check_records(data, count, base_ts)))
    for include_headers, scale in ((False, 1), (True, 1), (True, 1000)):

        def arrow(include_headers: bool = include_headers, scale: int = scale) -> dict[str, Any]:
            c = ArrowColumns(timestamp_scale=scale)
            mod.arrow_records(data, count, base_offset, base_ts, lat, c, include_headers)
            mod.arrow_records(data, count, base_offset, base_ts, lat, c, include_headers)  # appends
            # into reserved room (the compiled walk writes in place), then past it (it grows)
            mod.reserve_columns(c, len(data) // 7, len(data))
            mod.arrow_records(data, count, base_offset, base_ts, lat, c, include_headers)
            mod.reserve_columns(c, 1, 0)
            mod.arrow_records(data, count, base_offset, base_ts, lat, c, include_headers)
            return _columns_bytes(c)

        kind, value = _outcome(arrow)
        out.append((kind, value))
    return out


def _agree(
    data: bytes, count: int, base_offset: int = 0, base_ts: int = 0, lat: int | None = None
) -> None:
    expected = _all_sinks(_scan_py, data, count, base_offset, base_ts, lat)
    got = _all_sinks(_compiled, data, count, base_offset, base_ts, lat)
    assert got == expected


@needs_compiled
@settings(max_examples=examples(400), suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(
    records=st.lists(RECORD, max_size=8),
    base_offset=st.one_of(SMALL, I64),
    base_ts=st.one_of(SMALL, I64),
    lat=st.one_of(st.none(), I64),
)
def test_valid_records_agree(
    records: list[Any], base_offset: int, base_ts: int, lat: int | None
) -> None:
    data = _records_bytes(records)
    _agree(data, len(records), base_offset, base_ts, lat)
    got = _compiled.decode_records(data, len(records), base_offset, base_ts, lat, Record)  # type: ignore[union-attr]
    assert [(r.key, r.value, r.headers) for r in got] == [
        (k, v, [(hk, hv) for hk, hv in hs]) for _, _, k, v, hs in records
    ]


@needs_compiled
@settings(max_examples=examples(600), suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(
    records=st.lists(RECORD, min_size=1, max_size=4),
    where=st.integers(0, 2000),
    byte=st.integers(0, 255),
    mode=st.sampled_from(["set", "cut", "insert", "count+1", "count-1"]),
)
def test_damaged_records_agree(records: list[Any], where: int, byte: int, mode: str) -> None:
    _agree(*_damaged(records, where, byte, mode))


def _damaged(records: list[Any], where: int, byte: int, mode: str) -> tuple[bytes, int]:
    """The records' bytes with one byte set, cut there or inserted, or a count one off."""
    data = bytearray(_records_bytes(records))
    count = len(records)
    at = where % len(data)
    if mode == "set":
        data[at] = byte
    elif mode == "cut":
        del data[at:]
    elif mode == "insert":
        data.insert(at, byte)
    elif mode == "count+1":
        count += 1
    elif mode == "count-1":
        count -= 1
    return bytes(data), count


# the compiled walk's inline path: records without headers whose varints take 1 to 3 bytes
SHORT = st.integers(-(2**20), 2**20 - 1)
COMMON_RECORD = st.tuples(
    SHORT,
    SHORT,
    st.one_of(st.none(), st.binary(max_size=70)),
    st.one_of(st.none(), st.binary(max_size=300)),
    st.just([]),
)


@needs_compiled
@settings(max_examples=examples(600), suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(
    records=st.lists(COMMON_RECORD, min_size=1, max_size=4),
    where=st.integers(0, 2000),
    byte=st.integers(0, 255),
    mode=st.sampled_from(["none", "set", "cut", "insert", "count+1", "count-1"]),
)
def test_damaged_common_records_agree(records: list[Any], where: int, byte: int, mode: str) -> None:
    _agree(*_damaged(records, where, byte, mode))


@needs_compiled
@settings(max_examples=examples(500), suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(data=st.binary(max_size=64), count=st.integers(-1, 6))
def test_arbitrary_bytes_agree(data: bytes, count: int) -> None:
    _agree(data, count)


@pytest.mark.parametrize(
    "data",
    [
        b"\xff" * 12,  # a length varint over 10 bytes
        b"\xff" * 9 + b"\x7f",  # ... that does not fit 64 bits
        b"\x0c\x00\x00\x00\x03\x00\x00\x00",  # key length -2
        b"\x0c\x00\x00\x00\x01\x05\x00",  # value length -3
        b"\x0e\x00\x00\x00\x01\x01\x02\x02\xc3",  # header key not UTF-8 (and short)
        b"\x10\x00\x00\x00\x01\x01\x02\x02\xc3\x28\x01",  # header key not UTF-8
        b"\x0c\x00\x00\x00\x01\x01\x0f",  # header count beyond the record
        b"\x0c\x00\x00\x00\x01\x01\x00\x00",  # left over
        b"\x0e\x00\x00\x00\x01\x04ab\x00",  # a value that runs past the record, not the data
        b"\x0c\x00\x00\x00\x01\x02a\x00",  # the header count where the record should end
        b"\x0c\x00\x00\x00\x01\x01\x02",  # a header count where no header follows
        b"\x80\x80\x80\x01\x00\x00\x00\x01\x01\x00",  # a 4-byte length past the data
        b"\x0d\x00\x00\x00\x01\x01\x00",  # a negative record length
    ],
)
@needs_compiled
def test_known_corruptions_agree(data: bytes) -> None:
    _agree(data, 1)
    with pytest.raises(ProtocolError):
        _scan_py.validate_records(data, 1)


@needs_compiled
def test_varints_written_longer_than_needed_agree() -> None:
    """Kafka's varints may carry padding continuation bytes: both walks read them alike."""
    padded = (
        b"\x94\x80\x00" + b"\x00" + b"\x82\x00" + b"\x84\x80\x00" + b"\x01" + b"\x02a" + b"\x00"
    )
    _agree(padded, 1)
    assert _scan_py.decode_records(padded, 1, 0, 0, None, Record) == [Record(2, 1, None, b"a", [])]


@needs_compiled
@settings(max_examples=examples(300), deadline=None)
@given(
    od=st.one_of(SMALL, st.integers(-(2**64), 2**64)),
    td=st.one_of(SMALL, st.integers(-(2**64), 2**64)),
    key=st.one_of(st.none(), st.binary(max_size=200)),
    value=st.one_of(st.none(), st.binary(max_size=20000)),
    headers=st.lists(
        st.tuples(
            st.one_of(st.text(max_size=5), st.binary(max_size=5)),
            st.one_of(st.none(), st.binary(max_size=5)),
        ),
        max_size=3,
    ),
)
def test_encoders_agree(
    od: int, td: int, key: bytes | None, value: bytes | None, headers: list[Any]
) -> None:
    def run(mod: Any) -> tuple[str, Any]:
        buf = bytearray(b"prefix")
        try:
            mod.encode_record(buf, od, td, key, value, headers)
        except ValueError as e:
            return "error", str(e)
        return "ok", bytes(buf)

    assert run(_compiled) == run(_scan_py)


APPEND = st.tuples(
    st.one_of(SMALL, st.integers(-(2**64), 2**64)),  # timestamp
    st.one_of(st.none(), st.binary(max_size=40)),
    st.one_of(st.none(), st.binary(max_size=300)),
    st.lists(HEADER, max_size=2),
    st.one_of(st.none(), st.integers(-5, 2**31 + 5)),  # explicit offset delta, or the next
)


@needs_compiled
@settings(max_examples=examples(300), deadline=None)
@given(appends=st.lists(APPEND, max_size=12))
def test_record_appenders_agree(appends: list[Any]) -> None:
    """The producer's batch building: the same record bytes, counters and errors."""

    def run(mod: Any) -> list[Any]:
        a = mod.RecordAppender()
        out: list[Any] = []
        for ts, key, value, headers, od in appends:
            try:
                out.append(a.append(ts, key, value, headers, od))
            except (ValueError, OverflowError) as e:
                out.append(("error", type(e).__name__, str(e)))
            out.append((bytes(a.buf), a.count, a.base_timestamp, a.max_timestamp, a.next_delta))
        return out

    assert run(_compiled) == run(_scan_py)


@needs_compiled
def test_consumer_records_match_decode_records_and_start() -> None:
    records = [(i, 10 * i, b"k%d" % i, b"v" * i, [("h", b"x")] if i % 2 else []) for i in range(6)]
    data = _records_bytes(records)
    for mod in (_scan_py, _compiled):
        out: list[Any] = []
        mod.consumer_records(data, 6, 100, 1000, None, 103, "t", 3, 7, ConsumerRecord, out)
        assert [tuple(r) for r in out] == [
            (
                "t",
                3,
                100 + i,
                1000 + 10 * i,
                0,
                b"k%d" % i,
                b"v" * i,
                (("h", b"x"),) if i % 2 else (),
                7,
            )
            for i in range(3, 6)
        ]
        assert all(type(r) is ConsumerRecord for r in out)


@needs_compiled
def test_consumer_records_without_headers_are_left_out_of_the_collector() -> None:
    """The compiled walk untracks a consumer record that can refer to nothing that refers
    back (no headers; topic, partition and leader epoch plain str and int), so a big poll
    sets off no garbage collection that walks every record; with headers it stays tracked."""
    import gc

    records = [
        (i, i, b"k" if i % 3 else None, b"v" * i, [("h", b"x")] if i % 2 else []) for i in range(6)
    ]
    data = _records_bytes(records)
    out: list[Any] = []
    _compiled.consumer_records(data, 6, 0, 0, None, 0, "t", 3, 7, ConsumerRecord, out)  # type: ignore[union-attr]
    assert [gc.is_tracked(r) for r in out] == [False, True, False, True, False, True]
    assert [tuple(r) for r in out] == [
        ("t", 3, i, i, 0, b"k" if i % 3 else None, b"v" * i, (("h", b"x"),) if i % 2 else (), 7)
        for i in range(6)
    ]

    class Topic(str):
        pass

    out = []
    _compiled.consumer_records(data, 6, 0, 0, None, 0, Topic("t"), 3, 7, ConsumerRecord, out)  # type: ignore[union-attr]
    assert all(gc.is_tracked(r) for r in out)  # an item of a type that could refer back
    gc.collect()
    assert [r[6] for r in out] == [b"v" * i for i in range(6)]


def _filled_columns(mod: Any) -> ArrowColumns:
    c = ArrowColumns()
    data = _records_bytes(
        [
            (i, i, b"k" if i % 2 else None, b"v" * i, [("h", b"x")] if i == 3 else [])
            for i in range(5)
        ]
    )
    mod.arrow_records(data, 5, 10, 20, None, c, True)
    return c


@needs_compiled
def test_null_counts_and_timestamp_scale() -> None:
    # records 0, 2, 4 have null keys; every record but 3 has no headers; 3's header value is null
    data = _records_bytes(
        [
            (i, i, b"k" if i % 2 else None, b"v" * i, [("h", None)] if i == 3 else [])
            for i in range(5)
        ]
    )
    for mod in (_scan_py, _compiled):
        c = ArrowColumns(timestamp_scale=1000)
        mod.arrow_records(data, 5, 10, 20, None, c, True)
        mod.arrow_records(data, 5, 15, -1, None, c, True)
        assert (c.key_nulls, c.value_nulls, c.header_nulls, c.hvalue_nulls) == (6, 0, 8, 2)
        for name in ("key", "value", "header", "hvalue"):
            assert getattr(c, f"{name}_nulls") == list(getattr(c, f"{name}_valid")).count(0)
        assert list(c.timestamps) == [t * 1000 for t in (20, 21, 22, 23, 24, -1, 0, 1, 2, 3)]
        # milliseconds whose microseconds do not fit int64: out of range, as for offsets
        with pytest.raises(ProtocolError, match="out of range"):
            mod.arrow_records(
                data, 5, 10, (1 << 63) // 1000, None, ArrowColumns(timestamp_scale=1000), False
            )
        with pytest.raises(ProtocolError, match="out of range"):
            mod.arrow_records(
                data, 5, 10, 0, -(1 << 63) // 1000 - 1, ArrowColumns(timestamp_scale=1000), False
            )


@needs_compiled
def test_reserve_columns_changes_no_column() -> None:
    for mod in (_scan_py, _compiled):
        c = _filled_columns(mod)
        before = _columns_bytes(c)
        mod.reserve_columns(c, 1000, 1 << 20)
        mod.reserve_columns(c, 0, 0)
        assert _columns_bytes(c) == before
        for bad in ((-1, 0), (0, -1)):
            with pytest.raises(ValueError, match="cannot be negative"):
                mod.reserve_columns(c, *bad)
        assert _columns_bytes(c) == before


@needs_compiled
def test_a_column_lent_out_is_not_resized() -> None:
    """A column whose buffer is exported (a memoryview, an Arrow buffer) is neither moved nor
    resized under it: both walks raise BufferError, as ``array`` does."""
    data = _records_bytes([(0, 0, None, b"abc", [])])
    for mod in (_scan_py, _compiled):
        c = _filled_columns(mod)
        view = memoryview(c.value_data)
        held = bytes(view)
        before = _columns_bytes(c)
        with pytest.raises(BufferError):
            mod.arrow_records(data, 1, 0, 0, None, c, False)
        assert bytes(view) == held and len(c.value_data) == len(held)
        view.release()
        if mod is _compiled:  # and no column was left longer than what was written
            assert _columns_bytes(c) == before
    c = _filled_columns(_compiled)
    with memoryview(c.offsets):
        with pytest.raises(BufferError):  # room for more records would move the offsets
            _compiled.reserve_columns(c, 1 << 16, 0)  # type: ignore[union-attr]


# --- which implementation loads ---


def _loaded(env_value: str | None) -> str:
    env = dict(os.environ)
    env.pop("GREGOR_NO_EXTENSIONS", None)
    if env_value is not None:
        env["GREGOR_NO_EXTENSIONS"] = env_value
    # the accelerators: the record walk, the log's append and its index appends, the send
    code = (
        "from gregor.protocol.records import scan; from gregor.storage import fast_append, index; "
        "from gregor.client.producer import fast_send; "
        "print(scan.implementation(), fast_append.implementation(), index.core_implementation(), "
        "fast_send.implementation())"
    )
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout.strip()


def test_no_extensions_forces_the_reference() -> None:
    assert _loaded("1") == "python python python python"


def test_compiled_walk_is_built_and_loaded_by_default() -> None:
    # pip install -e / scripts/setup.sh compile them; a missing build is a failed setup
    assert _compiled is not None, "gregor.protocol.records._scan is not built"
    assert _loaded(None) == "cython cython cython cython"
    assert scan.available() == ["python", "cython"]


@pytest.mark.parametrize("mod", [_scan_py, _compiled], ids=["python", "cython"])
def test_check_records_reports_what_the_leader_judges(mod: Any) -> None:
    """The leader's walk (issue 35): the smallest and largest timestamp (records without one
    left out), how many records have no key, the first offset delta out of order."""
    if mod is None:
        pytest.skip("the compiled record walk is not built")
    data = _records_bytes(
        [
            (0, 5, b"k", b"a", []),
            (1, -1 - 100, None, b"b", [("h", b"x")]),
            (2, -3, None, None, []),
            (3, 0, b"k", b"d", []),
        ]
    )
    assert mod.check_records(data, 4, 100) == (97, 105, 2, -1)
    assert mod.check_records(_records_bytes([(0, 0, None, b"a", [])]), 1, -1) == (-1, -1, 1, -1)
    out_of_order = _records_bytes(
        [(0, 0, b"k", b"a", []), (2, 0, b"k", b"b", []), (1, 0, b"k", b"c", [])]
    )
    assert mod.check_records(out_of_order, 3, 7) == (7, 7, 0, 1)
    with pytest.raises(ProtocolError, match="^Timestamp of record 0 does not fit 64 bits$"):
        mod.check_records(_records_bytes([(0, 2**62, b"k", b"a", [])]), 1, 2**62)
    with pytest.raises(
        ProtocolError, match="^Incorrect declared batch size, premature EOF reached$"
    ):
        mod.check_records(data, 5, 100)
    with pytest.raises(
        ProtocolError, match="^Incorrect declared batch size, records still remaining in file$"
    ):
        mod.check_records(data, 3, 100)


@pytest.mark.parametrize("mod", [_scan_py, _compiled], ids=["python", "cython"])
def test_schema_ids_read_confluent_framing(mod: Any) -> None:
    """The leader's schema ID validation reads each record's id without making its bytes:
    magic byte 0 then a 4-byte big-endian id; -2 for a null, -1 for anything else."""
    if mod is None:
        pytest.skip("the compiled record walk is not built")
    framed = b"\x00\x00\x00\x00\x07" + b"avro"
    records = [
        (0, None, framed),
        (0, b"k", None),
        (0, None, b'{"plain": "json"}'),
        (0, b"\x00\xff\xff\xff\xffkey", b"\x00\x00\x00\x00\x05"),
        (0, b"\x00\x00\x00\x01", b"\x01\x00\x00\x00\x07x"),  # 4 bytes; magic byte 1
    ]
    data = build_batch(records)[61:]
    assert mod.schema_ids(data, 5, True) == [7, -2, -1, 5, -1]
    assert mod.schema_ids(data, 5, False) == [-2, -1, -2, 4294967295, -1]
    with pytest.raises(ProtocolError, match="records still remaining"):
        mod.schema_ids(data, 4, True)


@pytest.mark.parametrize("mod", [_scan_py, _compiled], ids=["python", "cython"])
def test_check_payloads_runs_each_records_check(mod: Any) -> None:
    """The leader's schema decode: each non-null value (or key) checked by its schema id's
    check, an Avro walk in place (compiled) or any callable; the refusals by record index."""
    if mod is None:
        pytest.skip("the compiled record walk is not built")
    long_walk = mod.AvroValidator([3], [0], [0], [])  # the Avro schema "long"
    frame = b"\x00\x00\x00\x00\x07"
    records = [
        (0, None, frame + b"\x02"),
        (0, b"k", None),
        (0, None, frame + b"\x02\x00"),  # a byte left over
        (0, None, frame[:3]),
        (0, b"\x00\x00\x00\x00\x09key", b"odd"),
    ]
    data = build_batch(records)[61:]
    checks = {7: long_walk, 9: _odd_refused}
    assert mod.check_payloads(data, 5, True, [7, 7, 7, 7, 9], checks) == [
        (2, 7, "1 bytes left over after the datum"),
        (3, 7, "the payload ends too early"),
        (4, 9, "3 is odd"),
    ]
    assert mod.check_payloads(data, 5, False, [7, 9, 7, 7, 9], checks) == [(1, 9, "1 is odd")]
    with pytest.raises(ProtocolError, match="records still remaining"):
        mod.check_payloads(data, 4, True, [7] * 4, checks)
