"""Interop with real clients' record code: kafka-python and aiokafka build, we read; we build,
they read. kafka-python here has gzip only (its other codecs need optional packages);
aiokafka has every codec through cramjam."""

import kafka.codec
import pytest
from aiokafka.record.default_records import (
    DefaultRecordBatchBuilder as AioDefaultBuilder,
)
from aiokafka.record.legacy_records import LegacyRecordBatchBuilder as AioLegacyBuilder
from aiokafka.record.memory_records import MemoryRecords as AioMemoryRecords
from kafka.record.default_records import DefaultRecordBatchBuilder as KpDefaultBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder as KpLegacyBuilder
from kafka.record.memory_records import MemoryRecords as KpMemoryRecords

from gregor.protocol.records import (
    Record,
    RecordBatchBuilder,
    build_control_batch,
    decode_batch,
    downconvert,
    iter_legacy_messages,
    iter_record_set,
    read_header,
    upconvert,
    validate_batches,
)

# Cross-checks against another implementation: in the full suite, not the fast run.
pytestmark = pytest.mark.interop

KP_CODECS = [
    c
    for c, has in (
        (0, True),
        (1, kafka.codec.has_gzip()),
        (2, kafka.codec.has_snappy()),
        (3, kafka.codec.has_lz4()),
        (4, kafka.codec.has_zstd()),
    )
    if has
]
ALL_CODECS = [0, 1, 2, 3, 4]
TS = 1_700_000_000_000


def _sample() -> list[Record]:
    """Records with the awkward cases: null key/value, empty value, headers, ts going back."""
    out = []
    for i in range(40):
        key = None if i % 5 == 0 else b"key-%d" % i
        value = None if i % 7 == 3 else (b"" if i % 11 == 4 else b"value %d " % i * (i % 9 + 1))
        headers = [(f"h{j}", None if j == 1 else b"hv%d" % j) for j in range(i % 3)]
        out.append(Record(i, TS + (i * 13) % 50 - 20, key, value, headers))
    return out


def _strip(records) -> list[tuple]:
    return [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in records]


# --- they build v2, we read ---


@pytest.mark.parametrize("codec", KP_CODECS)
def test_kafka_python_v2_batches_decode(codec):
    b = KpDefaultBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=True,
        producer_id=123,
        producer_epoch=4,
        base_sequence=56,
        batch_size=1 << 24,
    )
    recs = _sample()
    for r in recs:
        b.append(r.offset, r.timestamp, r.key, r.value, r.headers)
    raw = bytes(b.build())
    validate_batches(raw)
    batch = decode_batch(raw)
    assert _strip(batch.records) == _strip(recs)
    h = batch.header
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (123, 4, 56)
    assert (h.is_transactional, h.compression, h.records_count) == (True, codec, 40)
    assert h.max_timestamp == max(r.timestamp for r in recs)


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_aiokafka_v2_batches_decode(codec):
    b = AioDefaultBuilder(2, codec, 0, -1, -1, -1, 1 << 24)
    recs = _sample()
    for r in recs:
        b.append(r.offset, r.timestamp, r.key, r.value, r.headers)
    raw = bytes(b.build())
    batch = decode_batch(raw)
    assert _strip(batch.records) == _strip(recs)
    assert batch.compression == codec


# --- they build v0/v1, we read and up-convert ---


def _legacy_check(raw: bytes, magic: int, codec: int, recs: list[Record]) -> None:
    msgs = list(iter_legacy_messages(raw))
    assert [(m.offset, m.key, m.value) for m in msgs] == [(r.offset, r.key, r.value) for r in recs]
    expected_ts = [r.timestamp if magic else -1 for r in recs]
    assert [m.timestamp for m in msgs] == expected_ts
    (batch,) = [decode_batch(upconvert(raw))]
    assert batch.compression == codec
    assert _strip(batch.records) == [
        (r.offset, ts, r.key, r.value, []) for r, ts in zip(recs, expected_ts, strict=True)
    ]


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [c for c in KP_CODECS if c != 4])
def test_kafka_python_legacy_sets_decode(magic, codec):
    b = KpLegacyBuilder(magic, codec, 1 << 24)
    recs = [r._replace(headers=[]) for r in _sample()]
    for r in recs:
        b.append(r.offset, r.timestamp, r.key, r.value)
    _legacy_check(bytes(b.build()), magic, codec, recs)


@pytest.mark.parametrize(
    ("magic", "codec"), [(m, c) for m in (0, 1) for c in (0, 1, 2, 3) if (m, c) != (0, 3)]
)
def test_aiokafka_legacy_sets_decode(magic, codec):
    # aiokafka refuses lz4 with magic 0 (the pre-KIP-57 framing); librdkafka fixtures cover it.
    b = AioLegacyBuilder(magic, codec, 1 << 24)
    recs = [r._replace(headers=[]) for r in _sample()]
    for r in recs:
        b.append(r.offset, r.timestamp, r.key, r.value)
    _legacy_check(bytes(b.build()), magic, codec, recs)


# --- we build, they read ---


def _ours(codec: int, **kw) -> tuple[bytes, list[Record]]:
    recs = [r._replace(offset=r.offset + 1000) for r in _sample()]
    b = RecordBatchBuilder(base_offset=1000, compression=codec, **kw)
    for r in recs:
        b.append_record(r)
    return b.build(), recs


def _read_all(memory_records) -> list[tuple]:
    out = []
    while memory_records.has_next():
        batch = memory_records.next_batch()
        assert batch.validate_crc()
        for r in batch:
            out.append((r.offset, r.timestamp, r.key, r.value, list(r.headers)))
    return out


@pytest.mark.parametrize("codec", KP_CODECS)
def test_our_v2_batches_decode_in_kafka_python(codec):
    raw, recs = _ours(codec, producer_id=7, producer_epoch=0, base_sequence=0)
    assert _read_all(KpMemoryRecords(raw)) == _strip(recs)


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_our_v2_batches_decode_in_aiokafka(codec):
    raw, recs = _ours(codec)
    assert _read_all(AioMemoryRecords(raw)) == _strip(recs)


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [c for c in KP_CODECS if c != 4])
def test_our_downconverted_sets_decode_in_kafka_python(magic, codec):
    raw, recs = _ours(codec)
    legacy = downconvert(raw, magic)
    assert _read_all(KpMemoryRecords(legacy)) == [
        (r.offset, r.timestamp if magic else None, r.key, r.value, []) for r in recs
    ]


@pytest.mark.parametrize(
    ("magic", "codec"), [(m, c) for m in (0, 1) for c in (0, 1, 2, 3) if (m, c) != (0, 3)]
)
def test_our_downconverted_sets_decode_in_aiokafka(magic, codec):
    raw, recs = _ours(codec)
    legacy = downconvert(raw, magic)
    assert _read_all(AioMemoryRecords(legacy)) == [
        (r.offset, r.timestamp if magic else None, r.key, r.value, []) for r in recs
    ]


def test_our_control_batch_is_a_control_record_to_kafka_python():
    raw = build_control_batch(99, 2, False, 5, base_offset=77, timestamp=TS)
    batch = KpMemoryRecords(raw).next_batch()
    assert batch.is_control_batch and batch.is_transactional
    (rec,) = list(batch)
    assert (rec.offset, rec.abort, rec.version) == (77, True, 0)
    assert read_header(raw).producer_id == batch.producer_id == 99


def test_mixed_set_from_both_libraries():
    kp = KpLegacyBuilder(1, 0, 1 << 20)
    kp.append(0, TS, b"k", b"legacy")
    aio = AioDefaultBuilder(2, 3, 0, -1, -1, -1, 1 << 20)
    aio.append(0, TS + 1, None, b"v2", [("a", b"b")])
    raw_v2 = bytearray(aio.build())
    raw_v2[0:8] = (1).to_bytes(8, "big")  # base offset lives outside the CRC
    buf = bytes(kp.build()) + bytes(raw_v2)
    assert _strip(iter_record_set(buf)) == [
        (0, TS, b"k", b"legacy", []),
        (1, TS + 1, None, b"v2", [("a", b"b")]),
    ]
