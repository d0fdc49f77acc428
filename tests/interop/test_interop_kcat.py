"""Debian's kcat (built on an older librdkafka) against a real Gregor broker.

With ``api.version.request=false`` and ``broker.version.fallback`` set to 0.8.2 or 0.9.0, kcat
speaks the protocol of an old Kafka (magic 0 message sets, Produce/Fetch v0 or v1), which
exercises the broker's up- and down-conversion with a second, independent implementation.
(A 0.10 fallback is not old enough: that librdkafka then asks for ApiVersions and uses the
modern versions the broker offers.)"""

from __future__ import annotations

import json
import time

import pytest
from conftest import gregor_only
from interop_clients import KCAT, ck_consume, ck_produce, kcat, kcat_consume_json, kcat_produce
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

pytestmark = pytest.mark.skipif(KCAT is None, reason="kcat is not installed (apt-get install kcat)")

P = 3
FIND_COORDINATOR_KEY = 10


def _from_json(m: dict) -> tuple[int, Rec]:
    h = m.get("headers") or []
    headers = tuple(
        (h[i], None if h[i + 1] is None else h[i + 1].encode()) for i in range(0, len(h), 2)
    )
    key = None if m["key"] is None else m["key"].encode()
    value = None if m["payload"] is None else m["payload"].encode()
    return m["offset"], Rec(m["partition"], key, value, headers, m.get("ts", -1))


def _lines(n: int, partition: int) -> list[tuple[bytes | None, bytes | None]]:
    """kcat input: null keys every 5th, null values every 9th (``-Z`` sends empty as null)."""
    return [
        (
            None if i % 5 == 2 else f"p{partition}-k{i}".encode(),
            None if i % 9 == 4 else f"p{partition}-value-{i}-".encode() + b"y" * (i % 50),
        )
        for i in range(n)
    ]


def test_metadata(broker) -> None:  # noqa: ANN001
    topic = topic_name("kc-md")
    create_topic(broker.bootstrap_servers, topic, P)
    md = json.loads(kcat(broker.bootstrap_servers, "-L", "-J", "-t", topic))
    assert [(b["id"], b["name"]) for b in md["brokers"]] == [(1, f"127.0.0.1:{broker.port}")]
    assert md["controllerid"] == 1
    [t] = md["topics"]
    assert t["topic"] == topic
    assert [
        (
            p["partition"],
            p["leader"],
            [r["id"] for r in p["replicas"]],
            [r["id"] for r in p["isrs"]],
        )
        for p in t["partitions"]
    ] == [(p, 1, [1], [1]) for p in range(P)]


def test_consume_10k_from_confluent(broker) -> None:  # noqa: ANN001
    """Records with keys, headers (some null), timestamps and nulls, exactly as kcat sees them."""
    topic = topic_name("kc-rt")
    create_topic(broker.bootstrap_servers, topic, P)
    recs = make_records(10_000, P, text=True)
    ck_produce(broker.bootstrap_servers, topic, recs)
    got = [_from_json(m) for m in kcat_consume_json(broker.bootstrap_servers, topic, len(recs))]
    assert len(got) == len(recs)
    assert_same_per_partition(recs, got)


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_produce_codecs(broker, codec: str) -> None:  # noqa: ANN001
    """kcat produces 10,000 records (across all codecs' runs) with a header; librdkafka 2.x and
    kcat itself read them back exactly."""
    topic = topic_name(f"kc-{codec}")
    create_topic(broker.bootstrap_servers, topic, P)
    n = 2_000
    before = int(time.time() * 1000)
    expected: list[Rec] = []
    for p in range(P):
        lines = _lines(n // P + p, p)
        kcat_produce(broker.bootstrap_servers, topic, p, lines, "-z", codec, "-H", "src=kcat")
        expected += [Rec(p, k, v, (("src", b"kcat"),), 0) for k, v in lines]
    after = int(time.time() * 1000)
    want = CODEC_IDS[codec]
    if codec == "lz4" and not supports_api(broker.bootstrap_servers, FIND_COORDINATOR_KEY):
        want = CODEC_IDS["none"]  # librdkafka's LZ4 feature check asks for FindCoordinator
    for p in range(P):
        assert set(stored_codecs(broker.data_dir, topic, p)) == {want}
    got = ck_consume(broker.bootstrap_servers, topic, P, len(expected))
    # kcat stamps records with the time it produced them.
    assert all(before <= r.timestamp <= after for _, r in got)
    assert_same_per_partition(
        expected, [(o, Rec(r.partition, r.key, r.value, r.headers, 0)) for o, r in got]
    )
    mine = [
        _from_json(m) for m in kcat_consume_json(broker.bootstrap_servers, topic, len(expected))
    ]
    assert_same_per_partition(
        expected, [(o, Rec(r.partition, r.key, r.value, r.headers, 0)) for o, r in mine]
    )


@pytest.mark.parametrize("version", ["0.8.2", "0.9.0"])
@pytest.mark.parametrize("codec", ["none", "gzip", "snappy"])
@gregor_only(
    "Kafka 4 serves none of the versions KIP-896 removed nor message formats v0/v1 (README, compatibility)"
)
def test_old_protocol(broker, version: str, codec: str) -> None:  # noqa: ANN001
    """kcat as an 0.8.2/0.9 client: magic 0 message sets in, down-converted ones out."""
    old = ["-X", "api.version.request=false", "-X", f"broker.version.fallback={version}"]
    topic = topic_name("kc-old")
    create_topic(broker.bootstrap_servers, topic, P)
    lines = _lines(300, 1)
    kcat_produce(broker.bootstrap_servers, topic, 1, lines, "-z", codec, *old)
    assert set(stored_codecs(broker.data_dir, topic, 1)) == {CODEC_IDS[codec]}
    expected = [Rec(1, k, v, (), 0) for k, v in lines]
    modern = ck_consume(broker.bootstrap_servers, topic, P, len(expected))
    assert {r.timestamp for _, r in modern} == {-1}  # magic 0 has no timestamps
    assert_same_per_partition(
        expected, [(o, Rec(r.partition, r.key, r.value, (), 0)) for o, r in modern]
    )
    # A modern producer's v2 batches (with headers), down-converted for the old consumer.
    rich = make_records(300, P, text=True)
    topic2 = topic_name("kc-down")
    create_topic(broker.bootstrap_servers, topic2, P)
    ck_produce(broker.bootstrap_servers, topic2, rich, **{"compression.type": codec})
    got = [
        _from_json(m) for m in kcat_consume_json(broker.bootstrap_servers, topic2, len(rich), *old)
    ]
    assert_same_per_partition([Rec(r.partition, r.key, r.value, (), -1) for r in rich], got)


def test_offsets_and_relative_seek(broker) -> None:  # noqa: ANN001
    topic = topic_name("kc-q")
    create_topic(broker.bootstrap_servers, topic, P)
    recs = [Rec(1, b"k", str(i).encode(), (), BASE_TS + 1000 * i) for i in range(10)]
    ck_produce(broker.bootstrap_servers, topic, recs)
    q = json.loads(kcat(broker.bootstrap_servers, "-Q", "-J", "-t", f"{topic}:1:{BASE_TS + 3500}"))
    assert q[topic]["1"]["offset"] == 4
    q = json.loads(
        kcat(broker.bootstrap_servers, "-Q", "-J", "-t", f"{topic}:1:{BASE_TS + 10_000}")
    )
    assert q[topic]["1"]["offset"] == -1
    tail = kcat(
        broker.bootstrap_servers, "-C", "-t", topic, "-p", "1", "-o", "-3", "-e", "-f", "%o:%s\n"
    )
    assert tail == b"7:7\n8:8\n9:9\n"
    head = kcat(
        broker.bootstrap_servers,
        "-C",
        "-t",
        topic,
        "-p",
        "1",
        "-o",
        "beginning",
        "-c",
        "2",
        "-f",
        "%o:%s\n",
    )
    assert head == b"0:0\n1:1\n"
    at_end = kcat(
        broker.bootstrap_servers, "-C", "-t", topic, "-p", "1", "-o", "end", "-e", "-f", "%o:%s\n"
    )
    assert at_end == b""
