"""Cross-client: what Gregor's client writes, confluent-kafka and kafka-python read exactly,
and the other way round; keyed records land where librdkafka's murmur2_random puts them."""

from __future__ import annotations

from client_helpers import BrokerInfo, create_topic

from gregor.client import BulkReader, Consumer, Producer, TopicPartition

N = 200


def _expected(i: int) -> tuple[bytes | None, bytes, list[tuple[str, bytes]]]:
    key = None if i % 5 == 0 else b"key-%d" % (i % 17)
    value = b"value-%d-" % i + b"x" * (i % 50)
    headers = [("seq", b"%d" % i)] if i % 2 else []
    return key, value, headers


def _gregor_produce(b: BrokerInfo, topic: str, compression: str = "none") -> None:
    with Producer({"bootstrap.servers": b.bootstrap_servers, "compression.type": compression}) as p:
        for i in range(N):
            key, value, headers = _expected(i)
            p.send(
                topic,
                value,
                key=key,
                partition=0,
                timestamp_ms=1_700_000_000_000 + i,
                headers=headers,
            )
        p.flush()


def _gregor_consume(b: BrokerInfo, topic: str, n: int) -> list:
    out: list = []
    with Consumer({"bootstrap.servers": b.bootstrap_servers, "auto.offset.reset": "earliest"}) as c:
        c.assign([TopicPartition(topic, 0)])
        while len(out) < n:
            out += c.poll(300)
    return out


def test_confluent_reads_what_gregor_writes(broker: BrokerInfo, topic_name: str) -> None:
    from confluent_kafka import Consumer as CKConsumer
    from confluent_kafka import TopicPartition as CKTopicPartition

    create_topic(broker, topic_name, 1)
    _gregor_produce(broker, topic_name, "zstd")
    ck = CKConsumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": f"ck-{topic_name}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    ck.assign([CKTopicPartition(topic_name, 0, 0)])
    got = []
    try:
        while len(got) < N:
            m = ck.poll(0.5)
            if m is not None and not m.error():
                got.append(m)
    finally:
        ck.close()
    assert [m.offset() for m in got] == list(range(N))
    for i, m in enumerate(got):
        key, value, headers = _expected(i)
        assert m.key() == key and m.value() == value
        assert (m.headers() or []) == headers
        assert m.timestamp() == (1, 1_700_000_000_000 + i)  # (CreateTime, ms)


def test_kafka_python_reads_what_gregor_writes(broker: BrokerInfo, topic_name: str) -> None:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KPTopicPartition

    create_topic(broker, topic_name, 1)
    _gregor_produce(broker, topic_name, "gzip")
    kc = KafkaConsumer(
        bootstrap_servers=broker.bootstrap_servers,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=5000,
    )
    kc.assign([KPTopicPartition(topic_name, 0)])
    got = []
    try:
        for m in kc:
            got.append(m)
            if len(got) == N:
                break
    finally:
        kc.close()
    assert [m.offset for m in got] == list(range(N))
    for i, m in enumerate(got):
        key, value, headers = _expected(i)
        assert (m.key, m.value, list(m.headers), m.timestamp) == (
            key,
            value,
            headers,
            1_700_000_000_000 + i,
        )


def test_gregor_reads_what_confluent_writes(broker: BrokerInfo, topic_name: str) -> None:
    from confluent_kafka import Producer as CKProducer

    create_topic(broker, topic_name, 1)
    p = CKProducer(
        {"bootstrap.servers": broker.bootstrap_servers, "compression.type": "lz4", "linger.ms": 5}
    )
    for i in range(N):
        key, value, headers = _expected(i)
        p.produce(
            topic_name,
            value,
            key,
            partition=0,
            timestamp=1_700_000_000_000 + i,
            headers=headers or None,
        )
    assert p.flush(30) == 0
    got = _gregor_consume(broker, topic_name, N)
    assert [r.offset for r in got] == list(range(N))
    for i, r in enumerate(got):
        key, value, headers = _expected(i)
        assert (r.key, r.value, list(r.headers), r.timestamp) == (
            key,
            value,
            headers,
            1_700_000_000_000 + i,
        )
    # and the bulk Arrow path reads the same
    with BulkReader({"bootstrap.servers": broker.bootstrap_servers}) as br:
        rb = br.read(topic_name, 0, 0, N)
    assert rb.column("value").to_pylist() == [_expected(i)[1] for i in range(N)]
    assert rb.column("key").to_pylist() == [_expected(i)[0] for i in range(N)]


def test_gregor_reads_what_kafka_python_writes(broker: BrokerInfo, topic_name: str) -> None:
    from kafka import KafkaProducer

    create_topic(broker, topic_name, 1)
    p = KafkaProducer(
        bootstrap_servers=broker.bootstrap_servers, compression_type="snappy", linger_ms=5
    )
    for i in range(N):
        key, value, headers = _expected(i)
        p.send(
            topic_name,
            value=value,
            key=key,
            partition=0,
            timestamp_ms=1_700_000_000_000 + i,
            headers=headers,
        )
    p.flush(30)
    p.close()
    got = _gregor_consume(broker, topic_name, N)
    assert [r.offset for r in got] == list(range(N))
    for i, r in enumerate(got):
        key, value, headers = _expected(i)
        assert (r.key, r.value, list(r.headers)) == (key, value, headers)


def test_keyed_partitions_match_librdkafka_murmur2_random(
    broker: BrokerInfo, topic_name: str
) -> None:
    from confluent_kafka import Producer as CKProducer

    create_topic(broker, topic_name, 7)
    keys = [b"k-%d" % i for i in range(100)] + [b"", b"a", b"ab", b"abc", "ünïcode".encode()]
    placed: dict[bytes, int] = {}

    def report(err, msg) -> None:  # noqa: ANN001
        assert err is None
        placed[msg.key()] = msg.partition()

    ck = CKProducer(
        {"bootstrap.servers": broker.bootstrap_servers, "partitioner": "murmur2_random"}
    )
    for k in keys:
        ck.produce(topic_name, b"ck", k, on_delivery=report)
    assert ck.flush(30) == 0
    with Producer({"bootstrap.servers": broker.bootstrap_servers}) as p:
        futs = {k: p.send(topic_name, b"gregor", key=k) for k in keys}
        p.flush()
    ours = {k: f.result().partition for k, f in futs.items()}
    assert ours == placed
    assert len(set(ours.values())) == 7  # the keys spread over every partition
