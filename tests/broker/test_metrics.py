"""The Prometheus endpoint (``metrics.listener``) of a real broker, scraped and parsed with
prometheus-client's own parser, its values checked against traffic of known size from
confluent-kafka."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer
from prometheus_client.parser import text_string_to_metric_families

from gregor.testing import BrokerProcess
from gregor.testing.process import BrokerStartError

pytestmark = pytest.mark.interop

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    with BrokerProcess(
        config={
            "metrics.listener": "http://127.0.0.1:0",
            "offsets.topic.num.partitions": 2,
            "num.partitions": 2,
            "metrics.cache.ms": 0,  # each scrape sees the traffic sent just before it
        }
    ) as b:
        yield b


def scrape(b: BrokerProcess) -> Samples:
    assert b.metrics_url is not None
    with urllib.request.urlopen(b.metrics_url, timeout=30) as resp:
        assert resp.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = resp.read().decode()
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def test_traffic_log_and_group_metrics_match_what_was_sent(broker: BrokerProcess) -> None:
    topic = "metered"
    p = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    counts = {0: 0, 1: 0}
    for i in range(30):
        part = i % 3 % 2  # 20 records to partition 0, 10 to partition 1
        p.produce(topic, b"v" * (10 + i), key=b"k%d" % i, partition=part)
        counts[part] += 1
        p.poll(0)
    assert p.flush(30) == 0
    s = scrape(broker)
    for part, n in counts.items():
        assert value(s, "kafka_log_log_logendoffset", topic=topic, partition=str(part)) == n
    log_bytes = sum(
        value(s, "kafka_log_log_size", topic=topic, partition=str(part)) for part in counts
    )
    assert value(s, "kafka_server_brokertopicmetrics_messagesin_total", topic=topic) == 30
    # batches are stored as they arrive: the bytes in are the log's bytes
    assert value(s, "kafka_server_brokertopicmetrics_bytesin_total", topic=topic) == log_bytes
    assert value(s, "kafka_server_brokertopicmetrics_failedproducerequests_total", topic=topic) == 0
    produces = value(s, "kafka_network_requestmetrics_requests_total", request="Produce")
    assert produces >= 1
    assert value(s, "kafka_network_requestmetrics_totaltimems_count", request="Produce") == produces
    assert (
        value(s, "kafka_network_requestmetrics_totaltimems_bucket", request="Produce", le="+Inf")
        == produces
    )
    assert (
        value(s, "kafka_network_requestmetrics_requestqueuetimems_count", request="Produce")
        == produces
    )
    assert value(s, "kafka_network_requestmetrics_localtimems_count", request="Produce") == produces
    assert (
        value(s, "kafka_network_requestmetrics_remotetimems_count", request="Produce") == produces
    )
    # waiting in the queue is part of the total
    assert value(
        s, "kafka_network_requestmetrics_requestqueuetimems_sum", request="Produce"
    ) <= value(s, "kafka_network_requestmetrics_totaltimems_sum", request="Produce")

    c = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": "metered-readers",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        c.subscribe([topic])
        got = 0
        while got < 30:
            got += sum(1 for m in c.consume(30, 1.0) if not m.error())
        c.commit(asynchronous=False)
        s = scrape(broker)
        assert value(s, "kafka_server_brokertopicmetrics_bytesout_total", topic=topic) >= log_bytes
        assert value(s, "kafka_network_requestmetrics_requests_total", request="Fetch") >= 1
        for part, n in counts.items():
            labels = {"consumergroup": "metered-readers", "topic": topic, "partition": str(part)}
            assert value(s, "kafka_consumergroup_current_offset", **labels) == n
            assert value(s, "kafka_consumergroup_lag", **labels) == 0
        # five more records on one partition: that partition's lag is five
        first = 1
        for _ in range(5):
            p.produce(topic, b"more", partition=first)
        assert p.flush(30) == 0
        s = scrape(broker)
        assert (
            value(
                s,
                "kafka_consumergroup_lag",
                consumergroup="metered-readers",
                topic=topic,
                partition=str(first),
            )
            == 5
        )
        assert (
            value(s, "kafka_server_socketservermetrics_connection_count", listener="PLAINTEXT") >= 1
        )
    finally:
        c.close()
    assert (
        value(s, "kafka_server_socketservermetrics_incoming_byte_total", listener="PLAINTEXT")
        > log_bytes
    )
    assert (
        value(s, "kafka_server_socketservermetrics_outgoing_byte_total", listener="PLAINTEXT")
        > log_bytes
    )
    assert (
        value(s, "kafka_server_socketservermetrics_connection_creation_total", listener="PLAINTEXT")
        >= 2
    )
    # one node: it is the controller and leads every partition it hosts
    assert value(s, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert value(s, "kafka_server_replicamanager_leadercount") == value(
        s, "kafka_server_replicamanager_partitioncount"
    )
    assert value(s, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert value(s, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0


def test_refused_produce_requests_are_counted(broker: BrokerProcess) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = "small-records"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 1, config={"max.message.bytes": "200"})])[topic].result(
        30
    )
    errors: list[object] = []
    p = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    p.produce(topic, b"x" * 1000, on_delivery=lambda err, msg: errors.append(err))
    p.flush(30)  # one batch each: the second is not refused with the first
    p.produce(topic, b"ok", on_delivery=lambda err, msg: errors.append(err))
    p.flush(30)
    assert errors[0] is not None and errors[1] is None
    s = scrape(broker)
    assert value(s, "kafka_server_brokertopicmetrics_failedproducerequests_total", topic=topic) == 1
    assert value(s, "kafka_server_brokertopicmetrics_bytesrejected_total", topic=topic) > 1000
    assert value(s, "kafka_server_brokertopicmetrics_messagesin_total", topic=topic) == 1


def test_other_paths_and_methods(broker: BrokerProcess) -> None:
    assert broker.metrics_url is not None
    base = broker.metrics_url.rsplit("/", 1)[0]
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(base + "/nothing", timeout=30)
    assert e.value.code == 404
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(
            urllib.request.Request(broker.metrics_url, data=b"x", method="POST"), timeout=30
        )
    assert e.value.code == 405


def test_a_bad_metrics_listener_stops_the_broker() -> None:
    with pytest.raises(BrokerStartError, match="metrics.listener"):
        with BrokerProcess(config={"metrics.listener": "http://nowhere"}):
            pass
