"""Produce validation at the handler: each bad input gets its own error for its own partition,
nothing of it reaches the log, and the rest of the request and the connection carry on."""

from __future__ import annotations

import struct

import crc32c
import pytest
from handler_requests import PP, PT, batch, create_topic, fetch, partitions_of, produce, values_of
from handler_wire import Wire

from gregor.protocol.errors import ErrorCode
from gregor.protocol.messages.find_coordinator import FindCoordinatorRequest
from gregor.protocol.messages.produce import ProduceRequest
from gregor.protocol.records.batch import build_batch
from gregor.protocol.records.legacy import MessageSetBuilder

pytestmark = pytest.mark.timeout(60)

CRC_AT, ATTRIBUTES_AT, MAGIC_AT, LENGTH_AT, RECORDS_COUNT_AT = 17, 21, 16, 8, 57


def with_crc(data: bytearray) -> bytes:
    """A v2 batch whose CRC32C is right again after its header was edited."""
    struct.pack_into(">I", data, CRC_AT, crc32c.crc32c(bytes(data[ATTRIBUTES_AT:])))
    return bytes(data)


def log_of(wire: Wire, topic: str, partition: int = 0) -> list[tuple[int, bytes | None]]:
    p = partitions_of(fetch(wire, {topic: {partition: 0}}))[(topic, partition)]
    assert p.error_code == 0
    return values_of(p.records)


def rejected(p: object, code: int) -> None:
    assert (p.error_code, p.base_offset) == (code, -1), (p.error_code, p.error_message)  # type: ignore[attr-defined]


@pytest.fixture
def topic(wire: Wire) -> str:
    create_topic(wire, "v", 2)
    return "v"


def test_unknown_topic_and_partition(wire: Wire, topic: str) -> None:
    rejected(produce(wire, "no-such-topic", 0, batch(b"a")), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    rejected(produce(wire, topic, 2, batch(b"a")), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    rejected(produce(wire, topic, -1, batch(b"a")), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)


@pytest.mark.parametrize("broker_config", [{"auto.create.topics.enable": "true"}])
def test_produce_does_not_create_topics(wire: Wire) -> None:
    # As in Kafka, only Metadata creates topics automatically; a produce to a missing one fails.
    rejected(produce(wire, "not-created", 0, batch(b"a")), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    rejected(produce(wire, "not-created", 0, batch(b"a")), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)


@pytest.mark.parametrize("acks", [2, -2, 5])
def test_invalid_required_acks(wire: Wire, topic: str, acks: int) -> None:
    resp = wire.request(
        ProduceRequest(
            acks=acks,
            timeout_ms=5000,
            topic_data=[
                PT(
                    name=topic,
                    partition_data=[
                        PP(index=0, records=batch(b"a")),
                        PP(index=1, records=batch(b"b")),
                    ],
                ),
            ],
        ),
        9,
    )
    assert [
        (p.index, p.error_code, p.base_offset) for p in resp.responses[0].partition_responses
    ] == [(0, ErrorCode.INVALID_REQUIRED_ACKS, -1), (1, ErrorCode.INVALID_REQUIRED_ACKS, -1)]
    assert log_of(wire, topic, 0) == [] and log_of(wire, topic, 1) == []


@pytest.mark.parametrize("records", [b"", None], ids=["empty", "null"])
def test_empty_record_set(wire: Wire, topic: str, records: bytes | None) -> None:
    p = produce(wire, topic, 0, records)
    rejected(p, ErrorCode.CORRUPT_MESSAGE)
    assert p.error_message == "empty record set"


def _bad_crc() -> bytes:
    data = bytearray(batch(b"a"))
    data[-1] ^= 1
    return bytes(data)


def _bad_magic() -> bytes:
    data = bytearray(batch(b"a"))
    data[MAGIC_AT] = 3
    return bytes(data)


def _short_length() -> bytes:
    data = bytearray(batch(b"a"))
    struct.pack_into(">i", data, LENGTH_AT, 10)
    return bytes(data)


def _miscounted() -> bytes:
    data = bytearray(batch(b"a", b"b"))
    struct.pack_into(">i", data, RECORDS_COUNT_AT, 3)
    return with_crc(data)


@pytest.mark.parametrize(
    ("records", "code"),
    [
        (_bad_crc(), ErrorCode.CORRUPT_MESSAGE),
        (_bad_magic(), ErrorCode.CORRUPT_MESSAGE),
        (_short_length(), ErrorCode.CORRUPT_MESSAGE),
        (batch(b"a") + b"\0\0\0", ErrorCode.CORRUPT_MESSAGE),
        (_miscounted(), ErrorCode.INVALID_RECORD),
    ],
    ids=["crc", "magic", "length", "trailing-bytes", "record-count"],
)
def test_malformed_batches_are_refused_whole(
    wire: Wire, topic: str, records: bytes, code: int
) -> None:
    rejected(produce(wire, topic, 0, records), code)
    assert produce(wire, topic, 0, batch(b"good")).base_offset == 0
    assert log_of(wire, topic) == [(0, b"good")]


def test_a_bad_partition_does_not_fail_the_others(wire: Wire, topic: str) -> None:
    resp = wire.request(
        ProduceRequest(
            acks=1,
            timeout_ms=5000,
            topic_data=[
                PT(
                    name=topic,
                    partition_data=[
                        PP(index=0, records=_bad_crc()),
                        PP(index=1, records=batch(b"ok")),
                    ],
                ),
                PT(name="missing", partition_data=[PP(index=0, records=batch(b"x"))]),
            ],
        ),
        9,
    )
    assert [
        (t.name, p.index, p.error_code, p.base_offset)
        for t in resp.responses
        for p in t.partition_responses
    ] == [
        (topic, 0, ErrorCode.CORRUPT_MESSAGE, -1),
        (topic, 1, 0, 0),
        ("missing", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1),
    ]
    assert log_of(wire, topic, 0) == [] and log_of(wire, topic, 1) == [(0, b"ok")]


@pytest.mark.parametrize("broker_config", [{"message.max.bytes": "2000"}])
def test_batch_larger_than_max_message_bytes(wire: Wire, topic: str) -> None:
    big = batch(b"x" * 3000)
    p = produce(wire, topic, 0, big)
    rejected(p, ErrorCode.MESSAGE_TOO_LARGE)
    assert p.error_message == (
        f"The record batch size in the append to v-0 is {len(big)} bytes which exceeds the maximum "
        "configured value of 2000."
    )
    assert produce(wire, topic, 0, batch(b"x" * 1000)).base_offset == 0


def test_compacted_topic_needs_keys(wire: Wire) -> None:
    create_topic(wire, "compacted", 1, cleanup_policy="compact")
    p = produce(wire, "compacted", 0, build_batch([(1, b"k", b"v"), (2, None, b"no key")]))
    rejected(p, ErrorCode.INVALID_RECORD)
    # KIP-467: Kafka's summary and the bad record's batch index with Kafka's message (issue 12).
    why = "Compacted topic cannot accept message without key in topic partition compacted-0"
    assert p.error_message == (
        "One or more records have been rejected due to 1 record errors in total, and only "
        f"showing the first three errors at most: [RecordError(batchIndex=1, message='{why}')]"
    )
    assert [(e.batch_index, e.batch_index_error_message) for e in p.record_errors] == [(1, why)]
    assert produce(wire, "compacted", 0, build_batch([(1, b"k", b"v")])).base_offset == 0


def test_timestamp_outside_the_topic_bounds(wire: Wire) -> None:
    create_topic(wire, "stamped", 1, **{"message.timestamp.before.max.ms": "3600000"})
    rejected(produce(wire, "stamped", 0, batch(b"old", ts=1000)), ErrorCode.INVALID_TIMESTAMP)
    rejected(produce(wire, "stamped", 0, batch(b"future", ts=2**62)), ErrorCode.INVALID_TIMESTAMP)
    assert log_of(wire, "stamped") == []


def test_sequence_gap_and_duplicate_of_an_idempotent_producer(wire: Wire, topic: str) -> None:
    idem = {"producer_id": 4000, "producer_epoch": 0}
    assert produce(wire, topic, 0, batch(b"s0", b"s1", base_sequence=0, **idem)).base_offset == 0
    # The same batch again is a duplicate: answered with its first offset, not written twice.
    dup = produce(wire, topic, 0, batch(b"s0", b"s1", base_sequence=0, **idem))
    assert (dup.error_code, dup.base_offset) == (0, 0)
    gap = produce(wire, topic, 0, batch(b"s5", base_sequence=5, **idem))
    rejected(gap, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
    assert produce(wire, topic, 0, batch(b"s2", base_sequence=2, **idem)).base_offset == 2
    assert log_of(wire, topic) == [(0, b"s0"), (1, b"s1"), (2, b"s2")]


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_message_sets_are_taken_as_v2(wire: Wire, topic: str, magic: int) -> None:
    b = MessageSetBuilder(magic)
    b.append(1_700_000_000_000, b"k", b"old")
    b.append(1_700_000_000_001, None, b"older")
    p = produce(wire, topic, 0, b.build(), version=2)
    assert (p.error_code, p.base_offset) == (0, 0)
    assert log_of(wire, topic) == [(0, b"old"), (1, b"older")]


def test_acks_zero_errors_are_logged_and_the_connection_stays(wire: Wire, topic: str) -> None:
    assert produce(wire, "missing", 0, batch(b"lost"), acks=0) is None
    assert produce(wire, topic, 0, _bad_crc(), acks=0) is None
    assert produce(wire, topic, 0, batch(b"kept"), acks=0) is None
    # The next answered request on the same connection comes after the three above.
    assert produce(wire, topic, 0, batch(b"acked")).base_offset == 1
    assert log_of(wire, topic) == [(0, b"kept"), (1, b"acked")]
    log = wire.broker.read_log()
    assert (
        "event=produce.error topic=missing partition=0 error=UNKNOWN_TOPIC_OR_PARTITION acks=0"
        in log
    )
    assert f"event=produce.error topic={topic} partition=0 error=CORRUPT_MESSAGE acks=0" in log


# --- Kafka refuses these ---


def test_zstd_needs_produce_v7(wire: Wire, topic: str) -> None:
    rejected(
        produce(wire, topic, 0, batch(b"z", compression=4), version=6),
        ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
    )
    assert produce(wire, topic, 0, batch(b"z", compression=4), version=7).base_offset == 0


def test_unknown_compression_codec(wire: Wire, topic: str) -> None:
    data = bytearray(batch(b"a"))
    data[ATTRIBUTES_AT + 1] |= 5  # the low byte of the attributes: codec bits 0-2
    p = produce(wire, topic, 0, with_crc(data))
    assert p.error_code != 0 and p.base_offset == -1
    assert log_of(wire, topic) == []


@pytest.mark.parametrize("broker_config", [{"offsets.topic.num.partitions": "1"}])
def test_clients_cannot_append_to_internal_topics(wire: Wire) -> None:
    assert wire.request(FindCoordinatorRequest(key="g", key_type=0), 2).error_code == 0
    rejected(
        produce(wire, "__consumer_offsets", 0, build_batch([(1, b"k", b"v")])),
        ErrorCode.INVALID_TOPIC_EXCEPTION,
    )
