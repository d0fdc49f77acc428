"""confluent-kafka (librdkafka) against a real Gregor broker."""

from __future__ import annotations

import json
import threading
import time

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    KafkaError,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient
from interop_clients import ck_consume, ck_consumer, ck_drain, ck_produce, ck_producer
from interop_helpers import (
    BASE_TS,
    CODEC_IDS,
    Rec,
    assert_same_per_partition,
    create_topic,
    make_records,
    stored_codecs,
    supports_api,
    topic_name,
)

from gregor.testing import BrokerProcess

P = 3
FIND_COORDINATOR_KEY = 10


def test_metadata(broker) -> None:  # noqa: ANN001
    topic = topic_name("md")
    create_topic(broker.bootstrap_servers, topic, P)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    md = admin.list_topics(timeout=10)
    assert list(md.brokers) == [1]
    b = md.brokers[1]
    assert (b.host, b.port) == ("127.0.0.1", broker.port)
    assert md.controller_id == 1
    assert md.cluster_id
    t = md.topics[topic]
    assert t.error is None
    assert sorted(t.partitions) == list(range(P))
    for p in t.partitions.values():
        assert (p.leader, p.replicas, p.isrs) == (1, [1], [1])
    # A single-topic request names just that topic.
    one = admin.list_topics(topic, timeout=10)
    assert list(one.topics) == [topic]


def test_roundtrip_10k(broker) -> None:  # noqa: ANN001
    topic = topic_name("ck-rt")
    create_topic(broker.bootstrap_servers, topic, P)
    recs = make_records(10_000, P)
    delivered = ck_produce(broker.bootstrap_servers, topic, recs)
    # Delivery reports carry the offsets the broker assigned: 0..n-1 per partition.
    per_part: dict[int, list[int]] = {}
    for m in delivered:
        per_part.setdefault(m.partition(), []).append(m.offset())
    assert {p: sorted(o) for p, o in per_part.items()} == {
        p: list(range(sum(1 for r in recs if r.partition == p))) for p in range(P)
    }
    got = ck_consume(broker.bootstrap_servers, topic, P, len(recs))
    assert len(got) == len(recs)
    assert_same_per_partition(recs, got)


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_codecs(broker, codec: str) -> None:  # noqa: ANN001
    topic = topic_name(f"ck-{codec}")
    create_topic(broker.bootstrap_servers, topic, P)
    recs = make_records(600, P, text=True)  # compressible, so librdkafka keeps the codec
    ck_produce(
        broker.bootstrap_servers, topic, recs, **{"compression.type": codec, "linger.ms": 20}
    )
    got = ck_consume(broker.bootstrap_servers, topic, P, len(recs))
    assert_same_per_partition(recs, got)
    # The batches are stored as the client compressed them (the broker keeps them opaque).
    want = CODEC_IDS[codec]
    if codec == "lz4" and not supports_api(broker.bootstrap_servers, FIND_COORDINATOR_KEY):
        # librdkafka takes FindCoordinator as the sign of LZ4 support and sends lz4 batches
        # uncompressed to a broker without it (consumer groups are a later issue).
        want = CODEC_IDS["none"]
    for p in range(P):
        codecs = stored_codecs(broker.data_dir, topic, p)
        assert codecs and set(codecs) == {want}


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_acks(broker, acks: str) -> None:  # noqa: ANN001
    topic = topic_name(f"ck-acks{acks}")
    create_topic(broker.bootstrap_servers, topic, P)
    recs = make_records(1_000, P)
    delivered = ck_produce(broker.bootstrap_servers, topic, recs, acks=acks)
    assert len(delivered) == len(recs)
    if acks == "0":
        # No response, so no offsets to report.
        assert {m.offset() for m in delivered} == {None}
    got = ck_consume(broker.bootstrap_servers, topic, P, len(recs))
    assert_same_per_partition(recs, got)


def test_large_record_accepted_and_oversize_rejected(broker) -> None:  # noqa: ANN001
    topic = topic_name("ck-large")
    create_topic(broker.bootstrap_servers, topic, P)
    big = bytes(range(256)) * 3900  # 998,400 bytes: fits message.max.bytes (1,048,588)
    huge = b"z" * 1_100_000  # does not
    p = ck_producer(
        broker.bootstrap_servers, **{"message.max.bytes": 4_000_000, "compression.type": "none"}
    )
    results: list[tuple[bytes | None, object, int]] = []

    def report(err, msg) -> None:  # noqa: ANN001
        results.append((msg.key(), err, msg.offset()))

    p.produce(topic, value=big, key=b"big", partition=0, on_delivery=report)
    p.flush(30)
    p.produce(topic, value=huge, key=b"huge", partition=0, on_delivery=report)
    p.flush(30)
    p.produce(topic, value=b"small", key=b"after", partition=0, on_delivery=report)
    p.flush(30)
    assert [(k, e.code() if e else None, o) for k, e, o in results] == [
        (b"big", None, 0),
        (b"huge", KafkaError.MSG_SIZE_TOO_LARGE, None),
        (b"after", None, 1),
    ]
    got = ck_consume(broker.bootstrap_servers, topic, 1, 2)
    assert [(o, r.key, r.value) for o, r in got] == [(0, b"big", big), (1, b"after", b"small")]


def test_offsets_for_times(broker) -> None:  # noqa: ANN001
    topic = topic_name("ck-oft")
    create_topic(broker.bootstrap_servers, topic, P)
    recs = [Rec(1, b"k", str(i).encode(), (), BASE_TS + 1000 * i) for i in range(50)]
    ck_produce(broker.bootstrap_servers, topic, recs, **{"linger.ms": 0, "batch.num.messages": 7})
    c = ck_consumer(broker.bootstrap_servers)
    try:
        # (target timestamp, first offset whose timestamp is at or after it)
        cases = [
            (BASE_TS - 5, 0),  # before everything
            (BASE_TS + 1000 * 17, 17),  # exact hit
            (BASE_TS + 1000 * 17 + 1, 18),  # between two records
            (BASE_TS + 1000 * 49, 49),  # the last record
        ]
        for ts, want in cases:
            got = c.offsets_for_times([TopicPartition(topic, 1, ts)], timeout=10)
            assert [(tp.partition, tp.offset, tp.error) for tp in got] == [(1, want, None)]
        after = c.offsets_for_times([TopicPartition(topic, 1, BASE_TS + 1000 * 50)], timeout=10)
        assert after[0].offset == OFFSET_END  # nothing at or after: -1
        assert c.get_watermark_offsets(TopicPartition(topic, 1), timeout=10) == (0, 50)
        assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, 0)
    finally:
        c.close()


def test_seek_beginning_and_end(broker) -> None:  # noqa: ANN001
    topic = topic_name("ck-seek")
    create_topic(broker.bootstrap_servers, topic, P)
    first = [Rec(2, f"a{i}".encode(), b"old", (), BASE_TS + i) for i in range(20)]
    ck_produce(broker.bootstrap_servers, topic, first)
    fetch_state: dict[str, object] = {}

    def on_stats(text: str) -> None:
        part = json.loads(text).get("topics", {}).get(topic, {}).get("partitions", {}).get("2", {})
        fetch_state.update(state=part.get("fetch_state"), next_offset=part.get("next_offset"))

    c = ck_consumer(
        broker.bootstrap_servers, **{"statistics.interval.ms": 100, "stats_cb": on_stats}
    )
    try:
        c.assign([TopicPartition(topic, 2, OFFSET_END)])
        # Nothing new yet; wait until the consumer has resolved "end" (ListOffsets latest) to
        # offset 20 and is fetching from there, so the next records are after its start.
        while fetch_state != {"state": "active", "next_offset": 20}:
            assert ck_drain(c, 1, budget=0.1) == []
        assert fetch_state == {"state": "active", "next_offset": 20}
        second = [Rec(2, f"b{i}".encode(), b"new", (), BASE_TS + 100 + i) for i in range(5)]
        ck_produce(broker.bootstrap_servers, topic, second)
        got = ck_drain(c, 5)
        assert [(o, r) for o, r in got] == list(zip(range(20, 25), second, strict=True))
        c.seek(TopicPartition(topic, 2, OFFSET_BEGINNING))
        again = ck_drain(c, 25)
        assert [(o, r) for o, r in again] == list(enumerate(first + second))
    finally:
        c.close()


def test_long_poll_wakes_on_produce(broker) -> None:  # noqa: ANN001
    """A consumer whose fetches may wait 290 s gets a record produced 1 s later.

    If the broker only answered when fetch.wait.max.ms expired, nothing would arrive within
    the 60 s poll budget; receiving it at all shows the append woke the waiting fetch."""
    topic = topic_name("ck-lp")
    create_topic(broker.bootstrap_servers, topic, P)
    c = ck_consumer(
        broker.bootstrap_servers,
        **{"fetch.wait.max.ms": 290_000, "socket.timeout.ms": 300_000, "fetch.min.bytes": 1},
    )
    try:
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        assert ck_drain(c, 1, budget=1.0) == []  # the consumer is now parked in a fetch
        produced_at: list[float] = []

        def produce_later() -> None:
            time.sleep(1.0)
            produced_at.append(time.monotonic())
            ck_produce(broker.bootstrap_servers, topic, [Rec(0, b"k", b"late", (), BASE_TS)])

        t = threading.Thread(target=produce_later)
        t.start()
        got = ck_drain(c, 1, budget=60.0)
        received_at = time.monotonic()
        t.join()
        assert [(o, r.value) for o, r in got] == [(0, b"late")]
        assert produced_at and produced_at[0] <= received_at
    finally:
        c.close()


def test_500_partitions() -> None:
    n = 500
    with BrokerProcess(config={"num.partitions": n}) as b:
        topic = topic_name("ck-500")
        create_topic(b.bootstrap_servers, topic, n)
        recs = make_records(n * 4, n)
        ck_produce(b.bootstrap_servers, topic, recs, **{"linger.ms": 20})
        got = ck_consume(b.bootstrap_servers, topic, n, len(recs))
        assert_same_per_partition(recs, got)
        md = AdminClient({"bootstrap.servers": b.bootstrap_servers}).list_topics(topic, timeout=10)
        assert sorted(md.topics[topic].partitions) == list(range(n))
