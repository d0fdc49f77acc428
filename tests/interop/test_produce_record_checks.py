"""The leader checks every record it is sent (issue 35), seen with real clients.

The issue's cases, sent as raw Produce requests (no client library builds such batches), are
refused with Kafka's errors, and afterwards librdkafka (confluent-kafka) and kafka-python read
exactly what was acknowledged: before, a batch declaring one record and holding three made
librdkafka deliver offsets 0, 1, 2, 1, 2, 3 and kafka-python drop two records, and a zstd
payload that does not decompress stopped every librdkafka consumer at its offset. Valid
traffic of every codec, idempotent and transactional, still goes in and comes out the same.
"""

from __future__ import annotations

import os
import struct

import pytest
from confluent_kafka import Producer
from crc32c import crc32c
from interop_clients import ck_consume, ck_produce, kp_consume
from interop_helpers import (
    BASE_TS,
    CODEC_IDS,
    RawClient,
    Rec,
    assert_same_per_partition,
    create_topic,
    make_records,
    stored_codecs,
    topic_name,
)

from gregor.protocol.errors import ErrorCode
from gregor.protocol.messages.produce import ProduceRequest
from gregor.protocol.records.varint import encode_varint

pytestmark = pytest.mark.timeout(300)


def record(offset_delta: int, value: bytes) -> bytes:
    body = (
        b"\x00\x00"
        + encode_varint(offset_delta)
        + b"\x01"
        + encode_varint(len(value))
        + value
        + b"\x00"
    )
    return encode_varint(len(body)) + body


def raw_batch(payload: bytes, count: int, attributes: int = 0) -> bytes:
    out = bytearray(61) + payload
    struct.pack_into(
        ">qiibIhiqqqhii",
        out,
        0,
        0,
        len(out) - 12,
        -1,
        2,
        0,
        attributes,
        count - 1,
        BASE_TS,
        BASE_TS,
        -1,
        -1,
        -1,
        count,
    )
    struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
    return bytes(out)


def raw_produce(bootstrap: str, topic: str, records: bytes) -> tuple[int, str | None]:
    with RawClient(bootstrap) as c:
        resp = c.request(
            ProduceRequest(
                acks=-1,
                timeout_ms=10000,
                topic_data=[
                    ProduceRequest.TopicData(
                        name=topic,
                        partition_data=[
                            ProduceRequest.TopicData.PartitionData(index=0, records=records)
                        ],
                    )
                ],
            ),
            9,
        )
    p = resp.responses[0].partition_responses[0]
    return p.error_code, p.error_message


def test_bad_batches_are_refused_and_readers_agree(broker) -> None:  # noqa: ANN001
    bs = broker.bootstrap_servers
    topic = topic_name("checked")
    create_topic(bs, topic, 1)
    three_in_one = raw_batch(record(0, b"x0") + record(1, b"x1") + record(2, b"x2"), 1)
    assert raw_produce(bs, topic, three_in_one) == (
        ErrorCode.INVALID_RECORD,
        "Incorrect declared batch size, records still remaining in file",
    )
    code, message = raw_produce(bs, topic, raw_batch(os.urandom(200), 1, attributes=4))
    assert code == ErrorCode.CORRUPT_MESSAGE and message.startswith(
        "Failed to decompress record stream"
    )
    recs = [Rec(0, b"k%d" % i, b"v%d" % i, (), BASE_TS + i) for i in range(4)]
    ck_produce(bs, topic, recs)
    expected = [(i, r) for i, r in enumerate(recs)]
    assert ck_consume(bs, topic, 1, 4) == expected
    assert kp_consume(bs, topic, 1, 4) == expected


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_every_codec_idempotent_and_transactional(broker, codec: str) -> None:  # noqa: ANN001
    bs = broker.bootstrap_servers
    topic = topic_name(f"checked-{codec}")
    create_topic(bs, topic, 2)
    # kafka-python reads neither null header values nor records with neither key nor value
    plain = make_records(300, 2, text=True, null_header_values=False, both_null=False)
    ck_produce(
        bs, topic, plain, **{"compression.type": codec, "enable.idempotence": True, "linger.ms": 20}
    )
    txn = [
        Rec(r.partition, r.key, r.value, r.headers, r.timestamp + 1_000_000)
        for r in make_records(300, 2, text=True, null_header_values=False, both_null=False)
    ]
    p = Producer(
        {
            "bootstrap.servers": bs,
            "transactional.id": f"tx-{topic}",
            "compression.type": codec,
            "linger.ms": 20,
        }
    )
    p.init_transactions()
    p.begin_transaction()
    for r in txn:
        p.produce(
            topic,
            value=r.value,
            key=r.key,
            partition=r.partition,
            timestamp=r.timestamp,
            headers=list(r.headers) or None,
        )
    p.commit_transaction()
    # Per partition: the idempotent records at 0.., the transaction's after them, its marker last.
    want = plain + txn
    assert_same_per_partition(
        want, ck_consume(bs, topic, 2, len(want), **{"isolation.level": "read_committed"})
    )
    assert_same_per_partition(
        want, kp_consume(bs, topic, 2, len(want), isolation_level="read_committed")
    )
    for partition in range(2):
        assert set(stored_codecs(broker.data_dir, topic, partition)) == {CODEC_IDS[codec]}
