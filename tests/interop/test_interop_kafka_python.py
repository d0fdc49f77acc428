"""kafka-python against a real Gregor broker, with modern and old protocol versions.

Old ``api_version`` settings make kafka-python speak the protocol of Kafka 0.9/0.10: Produce
v1/v2 with magic 0/1 message sets (the broker up-converts them to v2 batches) and Fetch v1/v2
(the broker down-converts its v2 batches to magic 0/1)."""

from __future__ import annotations

import threading
import time

import pytest
from conftest import gregor_only
from interop_clients import (
    ck_consume,
    ck_produce,
    kp_consume,
    kp_consumer,
    kp_drain,
    kp_produce,
)
from interop_helpers import (
    BASE_TS,
    CODEC_IDS,
    Rec,
    assert_same_per_partition,
    create_topic,
    make_records,
    stored_codecs,
    topic_name,
)
from kafka import TopicPartition

P = 3
#: kafka-python refuses null header values and records with neither key nor value.
KP = {"null_header_values": False, "both_null": False}


def _strip(recs: list[Rec], *, magic: int, no_timestamp: int | None = -1) -> list[Rec]:
    """What an old message format carries: no headers before magic 2, no timestamps in 0
    (reported as ``no_timestamp``)."""
    return [
        Rec(
            r.partition,
            r.key,
            r.value,
            r.headers if magic >= 2 else (),
            r.timestamp if magic >= 1 else no_timestamp,
        )  # type: ignore[arg-type]
        for r in recs
    ]


def test_roundtrip_10k(broker) -> None:  # noqa: ANN001
    topic = topic_name("kp-rt")
    create_topic(broker.bootstrap_servers, topic, P)
    recs = make_records(10_000, P, **KP)
    metas = kp_produce(broker.bootstrap_servers, topic, recs)
    assert sorted((m.partition, m.offset) for m in metas) == sorted(
        (p, o) for p in range(P) for o in range(sum(1 for r in recs if r.partition == p))
    )
    got = kp_consume(broker.bootstrap_servers, topic, P, len(recs))
    assert len(got) == len(recs)
    assert_same_per_partition(recs, got)


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_codecs(broker, codec: str) -> None:  # noqa: ANN001
    topic = topic_name(f"kp-{codec}")
    create_topic(broker.bootstrap_servers, topic, P)
    recs = make_records(600, P, **KP)
    kp_produce(
        broker.bootstrap_servers, topic, recs, compression_type=None if codec == "none" else codec
    )
    for p in range(P):
        assert set(stored_codecs(broker.data_dir, topic, p)) == {CODEC_IDS[codec]}
    got = kp_consume(broker.bootstrap_servers, topic, P, len(recs))
    assert_same_per_partition(recs, got)


@pytest.mark.parametrize("acks", [0, 1, "all"])
def test_acks(broker, acks: object) -> None:  # noqa: ANN001
    topic = topic_name(f"kp-acks{acks}")
    create_topic(broker.bootstrap_servers, topic, P)
    recs = make_records(1_000, P, **KP)
    metas = kp_produce(broker.bootstrap_servers, topic, recs, acks=acks)
    assert len(metas) == len(recs)
    got = kp_consume(broker.bootstrap_servers, topic, P, len(recs))
    assert_same_per_partition(recs, got)


@pytest.mark.parametrize(
    ("api_version", "codec"),
    [
        ((0, 10, 0), None),
        ((0, 10, 0), "gzip"),
        ((0, 10, 0), "snappy"),
        ((0, 9), None),
        ((0, 9), "gzip"),
        ((0, 8, 2), None),
    ],
)
@gregor_only(
    "Kafka 4 serves none of the versions KIP-896 removed nor message formats v0/v1 (README, compatibility)"
)
def test_old_client_message_sets(broker, api_version: tuple, codec: str | None) -> None:  # noqa: ANN001
    """Magic 1 (0.10) and magic 0 (0.9) message sets in both directions, plus cross-client:
    what the old client wrote reads back exactly through a modern client, and what a modern
    client wrote is down-converted for the old one."""
    magic = 1 if api_version >= (0, 10) else 0
    topic = topic_name(f"kp-old{magic}")
    create_topic(broker.bootstrap_servers, topic, P)
    recs = make_records(900, P, **KP)
    kp_produce(
        broker.bootstrap_servers,
        topic,
        [Rec(r.partition, r.key, r.value, (), r.timestamp) for r in recs],
        api_version=api_version,
        compression_type=codec,
    )
    # Stored as v2 batches (up-converted), keeping the client's codec.
    for p in range(P):
        assert set(stored_codecs(broker.data_dir, topic, p)) == {CODEC_IDS[codec or "none"]}
    old = kp_consume(broker.bootstrap_servers, topic, P, len(recs), api_version=api_version)
    # kafka-python reports a magic 0 message's missing timestamp as None.
    assert_same_per_partition(_strip(recs, magic=magic, no_timestamp=None), old)
    # Up-converted magic 0 messages have no timestamp: the v2 batch says -1 (unknown).
    modern = ck_consume(broker.bootstrap_servers, topic, P, len(recs))
    assert_same_per_partition(_strip(recs, magic=magic, no_timestamp=-1), modern)

    # Modern producer (v2 batches with headers), old consumer: down-converted, headers dropped.
    topic2 = topic_name(f"kp-down{magic}")
    create_topic(broker.bootstrap_servers, topic2, P)
    rich = make_records(900, P)
    ck_produce(broker.bootstrap_servers, topic2, rich, **{"compression.type": codec or "none"})
    down = kp_consume(broker.bootstrap_servers, topic2, P, len(rich), api_version=api_version)
    assert_same_per_partition(_strip(rich, magic=magic, no_timestamp=None), down)


def test_offsets_for_times_and_seek(broker) -> None:  # noqa: ANN001
    topic = topic_name("kp-oft")
    create_topic(broker.bootstrap_servers, topic, P)
    recs = [Rec(0, b"k", str(i).encode(), (), BASE_TS + 1000 * i) for i in range(40)]
    kp_produce(broker.bootstrap_servers, topic, recs, batch_size=200)
    c = kp_consumer(broker.bootstrap_servers)
    try:
        tp = TopicPartition(topic, 0)
        for ts, want in [(BASE_TS - 1, 0), (BASE_TS + 1000 * 7, 7), (BASE_TS + 1000 * 7 + 1, 8)]:
            r = c.offsets_for_times({tp: ts})[tp]
            assert (r.offset, r.timestamp) == (want, BASE_TS + 1000 * want)
        assert c.offsets_for_times({tp: BASE_TS + 1000 * 40})[tp] is None
        assert c.beginning_offsets([tp]) == {tp: 0}
        assert c.end_offsets([tp]) == {tp: 40}
        c.assign([tp])
        c.seek_to_end(tp)
        assert c.position(tp) == 40
        c.seek(tp, 35)
        assert [(o, r.value) for o, r in kp_drain(c, 5)] == [
            (i, str(i).encode()) for i in range(35, 40)
        ]
        c.seek_to_beginning(tp)
        assert [o for o, _ in kp_drain(c, 40)] == list(range(40))
    finally:
        c.close()


def test_long_poll_wakes_on_produce(broker) -> None:  # noqa: ANN001
    """fetch_max_wait_ms is far beyond the poll budget, so the record can only arrive in time
    if the append wakes the waiting fetch."""
    topic = topic_name("kp-lp")
    create_topic(broker.bootstrap_servers, topic, P)
    c = kp_consumer(broker.bootstrap_servers, fetch_max_wait_ms=290_000, request_timeout_ms=305_000)
    try:
        tp = TopicPartition(topic, 1)
        c.assign([tp])
        c.seek_to_beginning(tp)
        assert kp_drain(c, 1, budget=1.0) == []

        def produce_later() -> None:
            time.sleep(1.0)
            kp_produce(broker.bootstrap_servers, topic, [Rec(1, None, b"late", (), BASE_TS)])

        t = threading.Thread(target=produce_later)
        t.start()
        got = kp_drain(c, 1, budget=60.0)
        t.join()
        assert [(o, r.value) for o, r in got] == [(0, b"late")]
    finally:
        c.close()


@pytest.mark.parametrize("api_version", [(0, 10, 0), (0, 9)])
@gregor_only(
    "Kafka 4 serves none of the versions KIP-896 removed nor message formats v0/v1 (README, compatibility)"
)
def test_old_client_reads_past_its_fetch_limit(broker, api_version: tuple) -> None:  # noqa: ANN001
    """3 MB in batches of about 100 KB, read 64 KB per partition per fetch: most reads stop
    inside a batch, and down-conversion must still hand the old client whole messages."""
    topic = topic_name("kp-oldbig")
    create_topic(broker.bootstrap_servers, topic, P)
    recs = [Rec(i % 2, b"k%d" % i, bytes([i % 251]) * 1000, (), BASE_TS + i) for i in range(3000)]
    ck_produce(broker.bootstrap_servers, topic, recs, **{"linger.ms": 50, "batch.size": 100_000})
    got = kp_consume(
        broker.bootstrap_servers,
        topic,
        P,
        len(recs),
        api_version=api_version,
        max_partition_fetch_bytes=65536,
    )
    magic = 1 if api_version >= (0, 10) else 0
    assert_same_per_partition(_strip(recs, magic=magic, no_timestamp=None), got)
