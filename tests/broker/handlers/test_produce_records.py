"""The leader checks every record of every produced batch, as Kafka's LogValidator does.

Each batch here is written byte by byte (a client library would refuse to build it) and sent in
a real Produce request to an in-process broker. Before issue 35 the leader read only the batch
header and CRC, so every one of these was stored; now each is refused with Kafka's error and
message (and, for per-record faults, KIP-467's ``record_errors``), nothing of it reaches the
log, and the next good batch gets offset 0.
"""

from __future__ import annotations

import os
import struct

import crc32c
import pytest
from handler_requests import BASE_TS, PP, PT, batch, create_topic, fetch, partitions_of, produce
from handler_wire import Wire

from gregor.protocol.errors import ErrorCode
from gregor.protocol.messages.produce import ProduceRequest
from gregor.protocol.records.batch import build_batch, decode_batches
from gregor.protocol.records.compression import compress
from gregor.protocol.records.control import build_control_batch
from gregor.protocol.records.header import read_header
from gregor.protocol.records.varint import encode_varint

pytestmark = pytest.mark.timeout(60)

_HEADER = struct.Struct(">qiibIhiqqqhii")


def rec(
    offset_delta: int,
    ts_delta: int = 0,
    key: bytes | None = None,
    value: bytes | None = b"v",
    tail: bytes = b"\x00",
) -> bytes:
    """One record's bytes (length prefix included); ``tail`` is its header count and headers."""

    def blob(b: bytes | None) -> bytes:
        return encode_varint(-1) if b is None else encode_varint(len(b)) + b

    body = (
        b"\x00"
        + encode_varint(ts_delta)
        + encode_varint(offset_delta)
        + blob(key)
        + blob(value)
        + tail
    )
    return encode_varint(len(body)) + body


def raw_batch(
    records: bytes,
    count: int,
    last_offset_delta: int | None = None,
    *,
    base_ts: int = BASE_TS,
    max_ts: int | None = None,
    attributes: int = 0,
    codec: int = 0,
    base_offset: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
) -> bytes:
    """A v2 batch around ``records`` (compressed with ``codec`` unless the attributes already
    name one) with the header fields given and a correct CRC."""
    if last_offset_delta is None:
        last_offset_delta = count - 1
    if max_ts is None:
        max_ts = base_ts
    if codec:
        records = compress(codec, records)
        attributes |= codec
    out = bytearray(61) + records
    _HEADER.pack_into(
        out,
        0,
        base_offset,
        len(out) - 12,
        -1,
        2,
        0,
        attributes,
        last_offset_delta,
        base_ts,
        max_ts,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    )
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:])))
    return bytes(out)


def stored(wire: Wire, topic: str, partition: int = 0) -> list[tuple[int, bytes | None]]:
    """(offset, value) of every record the partition holds."""
    p = partitions_of(fetch(wire, {topic: {partition: 0}}))[(topic, partition)]
    assert p.error_code == 0
    return [(r.offset, r.value) for b in decode_batches(bytes(p.records or b"")) for r in b.records]


def refused(
    wire: Wire,
    topic: str,
    records: bytes,
    code: int,
    message: str,
    record_errors: list[tuple[int, str]] | None = None,
    version: int = 9,
) -> None:
    """``records`` is refused with ``code`` and ``message``; nothing of it is stored; the next
    good batch gets offset 0."""
    p = produce(wire, topic, 0, records, version=version)
    assert (p.error_code, p.base_offset) == (code, -1), (
        ErrorCode(p.error_code).name,
        p.error_message,
    )
    assert p.error_message == message
    assert [(e.batch_index, e.batch_index_error_message) for e in p.record_errors] == (
        record_errors or []
    )
    assert stored(wire, topic) == []
    assert produce(wire, topic, 0, batch(b"good")).base_offset == 0
    assert stored(wire, topic) == [(0, b"good")]


@pytest.fixture
def topic(wire: Wire) -> str:
    create_topic(wire, "r", 1)
    return "r"


# --- the records do not fill the batch as its header says ---


def test_a_batch_declaring_one_record_and_holding_three(wire: Wire, topic: str) -> None:
    # The first case: given one offset, its records carry three; readers disagreed.
    bad = raw_batch(rec(0) + rec(1) + rec(2), count=1)
    refused(
        wire,
        topic,
        bad,
        ErrorCode.INVALID_RECORD,
        "Incorrect declared batch size, records still remaining in file",
    )


def test_count_and_delta_beyond_the_records(wire: Wire, topic: str) -> None:
    bad = raw_batch(rec(0), count=1000, last_offset_delta=999)
    refused(
        wire,
        topic,
        bad,
        ErrorCode.INVALID_RECORD,
        "Incorrect declared batch size, premature EOF reached",
    )


def test_a_record_length_claiming_one_gib(wire: Wire, topic: str) -> None:
    body = b"\x00\x00\x00\x01\x02v\x00"  # attributes, ts and offset deltas 0, null key, "v", no headers
    bad = raw_batch(encode_varint(1 << 30) + body, count=1)
    refused(
        wire,
        topic,
        bad,
        ErrorCode.INVALID_RECORD,
        "Invalid record size: expected 1073741824 bytes in record payload, but instead the buffer has "
        "only 7 remaining bytes.",
    )


def test_a_truncated_record(wire: Wire, topic: str) -> None:
    whole = rec(0, value=b"value")
    cut = encode_varint(len(whole) - 4) + whole[1:-3]  # a consistent length, the value cut short
    bad = raw_batch(cut, count=1)
    refused(wire, topic, bad, ErrorCode.INVALID_RECORD, "Found invalid record structure")


def test_record_fields_shorter_than_the_record(wire: Wire, topic: str) -> None:
    whole = rec(0, value=b"value")
    padded = encode_varint(len(whole)) + whole[1:] + b"\x00"  # one byte more than its fields
    bad = raw_batch(padded, count=1)
    refused(
        wire,
        topic,
        bad,
        ErrorCode.INVALID_RECORD,
        f"Invalid record size: expected to read {len(whole)} bytes in record payload, but instead read "
        f"{len(whole) - 1}",
    )


def test_a_varint_longer_than_ten_bytes(wire: Wire, topic: str) -> None:
    bad_ts = b"\xff" * 11
    body = b"\x00" + bad_ts + b"\x00\x01\x02v\x00"
    bad = raw_batch(encode_varint(len(body)) + body, count=1)
    refused(wire, topic, bad, ErrorCode.INVALID_RECORD, "varint longer than 10 bytes")


def test_a_negative_header_count(wire: Wire, topic: str) -> None:
    bad = raw_batch(rec(0, tail=encode_varint(-2)), count=1)
    refused(wire, topic, bad, ErrorCode.INVALID_RECORD, "Found invalid number of record headers -2")


def test_offset_deltas_that_are_not_consecutive(wire: Wire, topic: str) -> None:
    bad = raw_batch(rec(0, value=b"a") + rec(5, value=b"b") + rec(2, value=b"c"), count=3)
    why = "Record 1 has offset delta 5: the records of a batch must have offset deltas 0, 1, 2, ..."
    refused(
        wire,
        topic,
        bad,
        ErrorCode.INVALID_RECORD,
        "One or more records have been rejected due to 1 record errors in total, and only showing the "
        f"first three errors at most: [RecordError(batchIndex=1, message='{why}')]",
        [(1, why)],
    )


# --- compressed batches are checked after decompressing ---


@pytest.mark.parametrize("codec", [1, 2, 3, 4], ids=["gzip", "snappy", "lz4", "zstd"])
def test_a_payload_that_does_not_decompress(wire: Wire, topic: str, codec: int) -> None:
    junk = bytes(range(200)) if codec != 4 else os.urandom(200)
    p = produce(wire, topic, 0, raw_batch(junk, count=1, attributes=codec))
    assert (p.error_code, p.base_offset) == (ErrorCode.CORRUPT_MESSAGE, -1), p.error_message
    assert p.error_message.startswith("Failed to decompress record stream: ")
    assert stored(wire, topic) == []
    assert produce(wire, topic, 0, batch(b"good")).base_offset == 0


@pytest.mark.parametrize("codec", [1, 2, 3, 4], ids=["gzip", "snappy", "lz4", "zstd"])
def test_compressed_records_are_walked(wire: Wire, topic: str, codec: int) -> None:
    bad = raw_batch(rec(0) + rec(1) + rec(2), count=1, codec=codec)
    refused(
        wire,
        topic,
        bad,
        ErrorCode.INVALID_RECORD,
        "Incorrect declared batch size, records still remaining in file",
    )


@pytest.mark.parametrize("broker_config", [{"message.max.bytes": "2000000"}])
def test_a_payload_inflating_past_the_bound(wire: Wire, topic: str) -> None:
    # 65 MiB of one record's value compress to a few KiB of zstd: refused, not inflated.
    value = b"\0" * (65 << 20)
    bomb = raw_batch(rec(0, value=value), count=1, codec=4)
    assert len(bomb) < 100_000
    p = produce(wire, topic, 0, bomb)
    assert (p.error_code, p.base_offset) == (ErrorCode.MESSAGE_TOO_LARGE, -1), p.error_message
    assert p.error_message == "The record batch decompresses to more than 67108864 bytes"
    assert stored(wire, topic) == []


# --- Kafka's other leader checks ---


def test_clients_may_not_write_control_batches(wire: Wire, topic: str) -> None:
    # (A transactional one without the request's transactional id is refused before that.)
    marker = build_control_batch(7, 0, True, 0, timestamp=BASE_TS)
    assert (
        produce(wire, topic, 0, marker).error_code
        == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    )
    control = raw_batch(rec(0, key=b"\0\0\0\0", value=b"\0\0\0\0\0\0"), count=1, attributes=0x20)
    refused(
        wire,
        topic,
        control,
        ErrorCode.INVALID_RECORD,
        "Clients are not allowed to write control records in topic partition r-0",
    )


def test_a_base_offset_other_than_zero(wire: Wire, topic: str) -> None:
    refused(
        wire,
        topic,
        raw_batch(rec(0), count=1, base_offset=5),
        ErrorCode.INVALID_RECORD,
        "The baseOffset of the record batch in the append to r-0 should be 0, but it is 5",
    )


def test_more_than_one_batch_in_a_partition(wire: Wire, topic: str) -> None:
    refused(
        wire,
        topic,
        batch(b"a") + batch(b"b"),
        ErrorCode.INVALID_RECORD,
        "Produce requests with version 9 are only allowed to contain exactly one record batch",
    )


def test_a_record_timestamp_outside_the_bounds(wire: Wire) -> None:
    # The header's base and max timestamps are fine; the second record is a day old.
    create_topic(wire, "stamped", 1, **{"message.timestamp.before.max.ms": "3600000"})
    import time

    now = int(time.time() * 1000)
    records = rec(0, value=b"a") + rec(1, ts_delta=-86_400_000, value=b"b") + rec(2, value=b"c")
    p = produce(wire, "stamped", 0, raw_batch(records, count=3, base_ts=now, max_ts=now))
    assert (p.error_code, p.base_offset) == (ErrorCode.INVALID_TIMESTAMP, -1), p.error_message
    assert p.error_message == "One or more records have been rejected due to invalid timestamp"
    [(index, why)] = [(e.batch_index, e.batch_index_error_message) for e in p.record_errors]
    assert index == 1
    assert why.startswith(
        f"Timestamp {now - 86_400_000} of message with offset 1 is out of range. "
        "The timestamp should be within ["
    )
    assert stored(wire, "stamped") == []


def test_producers_may_not_set_log_append_time_on_a_log_append_time_topic(wire: Wire) -> None:
    create_topic(wire, "lat", 1, **{"message.timestamp.type": "LogAppendTime"})
    bad = raw_batch(rec(0, value=b"a") + rec(1, value=b"bc"), count=2, attributes=0x08)
    p = produce(wire, "lat", 0, bad)
    assert (p.error_code, p.base_offset) == (ErrorCode.INVALID_TIMESTAMP, -1), p.error_message
    assert p.error_message == "One or more records have been rejected due to invalid timestamp"
    assert [(e.batch_index, e.batch_index_error_message) for e in p.record_errors] == [
        (
            0,
            f"Invalid timestamp type in message DefaultRecord(offset=0, timestamp={BASE_TS}, key=0 bytes, "
            "value=1 bytes). Producer should not set timestamp type to LogAppendTime.",
        ),
        (
            1,
            f"Invalid timestamp type in message DefaultRecord(offset=1, timestamp={BASE_TS}, key=0 bytes, "
            "value=2 bytes). Producer should not set timestamp type to LogAppendTime.",
        ),
    ]
    assert stored(wire, "lat") == []


def test_the_max_timestamp_is_taken_from_the_records(wire: Wire, topic: str) -> None:
    # Kafka sets a batch's max timestamp from its records (and a CreateTime topic stores a
    # batch marked LogAppendTime by its producer as CreateTime); the CRC is made right again.
    records = rec(0, ts_delta=0, value=b"a") + rec(1, ts_delta=7, value=b"b")
    for attributes in (0, 0x08):
        p = produce(
            wire,
            topic,
            0,
            raw_batch(records, count=2, max_ts=BASE_TS + 500_000, attributes=attributes),
        )
        assert p.error_code == 0, p.error_message
    part = partitions_of(fetch(wire, {topic: {0: 0}}))[(topic, 0)]
    batches = decode_batches(bytes(part.records))  # checks each CRC
    assert [(b.max_timestamp, b.timestamp_type) for b in batches] == [
        (BASE_TS + 7, 0),
        (BASE_TS + 7, 0),
    ]
    assert [(r.offset, r.timestamp) for b in batches for r in b] == [
        (0, BASE_TS),
        (1, BASE_TS + 7),
        (2, BASE_TS),
        (3, BASE_TS + 7),
    ]


def test_compacted_keys_are_checked_in_compressed_batches_too(wire: Wire) -> None:
    create_topic(wire, "compacted", 1, cleanup_policy="compact")
    records = (
        rec(0, key=b"k", value=b"a") + rec(1, key=None, value=b"b") + rec(2, key=None, value=b"c")
    )
    p = produce(wire, "compacted", 0, raw_batch(records, count=3, codec=3))
    why = "Compacted topic cannot accept message without key in topic partition compacted-0"
    assert (p.error_code, p.base_offset) == (ErrorCode.INVALID_RECORD, -1)
    assert [(e.batch_index, e.batch_index_error_message) for e in p.record_errors] == [
        (1, why),
        (2, why),
    ]


# --- good traffic is untouched ---


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4], ids=["none", "gzip", "snappy", "lz4", "zstd"])
def test_good_batches_of_every_codec_are_stored_as_sent(wire: Wire, topic: str, codec: int) -> None:
    recs = [(BASE_TS + i, b"k%d" % i if i % 2 else None, b"value-%d" % i) for i in range(20)]
    sent = build_batch(recs, compression=codec)
    idem = build_batch(recs, compression=codec, producer_id=1000, producer_epoch=0, base_sequence=0)
    assert produce(wire, topic, 0, sent, version=7).base_offset == 0
    assert produce(wire, topic, 0, idem, version=7).base_offset == 20
    part = partitions_of(fetch(wire, {topic: {0: 0}}))[(topic, 0)]
    data = bytes(part.records)
    first = read_header(data)
    # Byte for byte what was sent, but for the base offset and the leader epoch.
    assert data[16 : first.size] == sent[16:] and data[first.size + 16 :] == idem[16:]
    assert [(r.offset, r.key, r.value) for b in decode_batches(data) for r in b] == [
        (i + n, k, v) for n in (0, 20) for i, (_, k, v) in enumerate(recs)
    ]


def test_one_bad_partition_leaves_the_others_appended(wire: Wire) -> None:
    create_topic(wire, "two", 2)
    resp = wire.request(
        ProduceRequest(
            acks=1,
            timeout_ms=5000,
            topic_data=[
                PT(
                    name="two",
                    partition_data=[
                        PP(index=0, records=raw_batch(rec(0) + rec(1), count=1)),
                        PP(index=1, records=batch(b"ok")),
                    ],
                ),
            ],
        ),
        9,
    )
    assert [
        (p.index, p.error_code, p.base_offset) for p in resp.responses[0].partition_responses
    ] == [(0, ErrorCode.INVALID_RECORD, -1), (1, 0, 0)]
    assert stored(wire, "two", 0) == [] and stored(wire, "two", 1) == [(0, b"ok")]
