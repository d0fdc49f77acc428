"""librdkafka's own batches decode in our readers.

The fixtures are the records of Produce requests a confluent-kafka producer sent to
tools/capture/fake_broker.py (regenerate with `.venv/bin/python tools/capture/fake_broker.py`).
The same capture also runs live here, so a newer librdkafka is checked too.
"""

import importlib.util
from pathlib import Path

import pytest

from gregor.protocol.records import (
    decode_batch,
    iter_legacy_messages,
    iter_record_set,
    read_header,
    upconvert,
    validate_batches,
)
from gregor.protocol.records.compression import xxh32
from gregor.protocol.records.legacy import iter_shallow_messages

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = Path(__file__).resolve().parent / "fixtures"

_spec = importlib.util.spec_from_file_location(
    "gregor_capture_fake_broker", ROOT / "tools" / "capture" / "fake_broker.py"
)
fake_broker = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fake_broker)

CASES = [
    (profile, codec)
    for profile in ("v2", "v1", "v0")
    for codec in fake_broker.CODECS
    if codec != "zstd" or profile == "v2"
]


def _check(raw: bytes, profile: str, codec: str) -> None:
    codec_id = fake_broker.CODECS[codec]
    magic = int(profile[1])
    expected = fake_broker.sample_messages(with_headers=magic == 2)
    assert raw[16] == magic
    if magic == 2:
        ((_, h),) = validate_batches(raw)
        assert h.compression == codec_id
        assert (h.records_count, h.last_offset_delta) == (12, 11)
        assert h.base_timestamp == expected[0]["timestamp"]
        assert h.max_timestamp == max(m["timestamp"] for m in expected)
        records = decode_batch(raw).records
    else:
        (wrapper,) = list(iter_shallow_messages(raw))
        assert wrapper.compression == codec_id
        assert [m.magic for m in iter_legacy_messages(raw)] == [magic] * 12
        records = list(iter_record_set(raw))
        # Up-conversion keeps everything v0/v1 can carry, and the codec.
        (up,) = [decode_batch(upconvert(raw))]
        assert up.compression == codec_id
        assert up.records == records
    assert [r.offset for r in records] == list(range(12))
    assert [(r.key, r.value) for r in records] == [(m["key"], m["value"]) for m in expected]
    assert [r.timestamp for r in records] == [m["timestamp"] if magic else -1 for m in expected]
    assert [r.headers for r in records] == [m.get("headers", []) for m in expected]


@pytest.mark.parametrize(("profile", "codec"), CASES)
def test_captured_fixture_decodes(profile, codec):
    raw = (FIXTURES / fake_broker.fixture_name(profile, codec)).read_bytes()
    _check(raw, profile, codec)


@pytest.mark.parametrize(("profile", "hc_start"), [("v0", 0), ("v1", 4)])
def test_librdkafka_lz4_header_checksum_follows_kafka_per_magic(profile, hc_start):
    raw = (FIXTURES / fake_broker.fixture_name(profile, "lz4")).read_bytes()
    (wrapper,) = list(iter_shallow_messages(raw))
    frame = wrapper.value
    assert frame[:4] == b"\x04\x22\x4d\x18"
    assert frame[6] == (xxh32(frame[hc_start:6]) >> 8) & 0xFF
    assert frame[6] != (xxh32(frame[4 - hc_start : 6]) >> 8) & 0xFF


def test_librdkafka_snappy_is_raw_not_xerial():
    raw = (FIXTURES / fake_broker.fixture_name("v2", "snappy")).read_bytes()
    assert read_header(raw).compression == 2
    assert raw[61:69] != b"\x82SNAPPY\x00"


@pytest.mark.parametrize(("profile", "codec"), CASES)
def test_live_capture_from_confluent_kafka(profile, codec):
    got = fake_broker.capture_librdkafka(profile, codec, timeout=30)
    assert got.topic == "captured" and got.partition == 0 and got.acks == 0
    assert got.api_version == {"v2": 7, "v1": 2, "v0": 1}[profile]
    _check(got.records, profile, codec)
