"""Admin client calls against each broker, and a broker restart in the middle of producing."""

from __future__ import annotations

import threading
import time

import pytest
from client_helpers import BrokerInfo, create_topic, probe

from gregor.client import AdminClient, Consumer, NewTopic, Producer, TopicPartition
from gregor.client.admin import OP_DELETE, OP_SET, TOPIC
from gregor.protocol.errors import (
    InvalidPartitionsError,
    OffsetOutOfRangeError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from gregor.testing import BrokerProcess

CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS, DELETE_RECORDS = 19, 20, 37, 21
DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS, DESCRIBE_CLUSTER, INIT_PRODUCER_ID = 32, 44, 60, 22


def _admin(b: BrokerInfo) -> AdminClient:
    return AdminClient({"bootstrap.servers": b.bootstrap_servers})


def test_create_list_describe_delete_topics(broker: BrokerInfo, topic_name: str) -> None:
    broker.require(CREATE_TOPICS, DELETE_TOPICS)
    with _admin(broker) as admin:
        assert admin.create_topics([NewTopic(topic_name, 3, 1)]) == {topic_name: None}
        again = admin.create_topics([NewTopic(topic_name, 3, 1)])
        assert isinstance(again[topic_name], TopicAlreadyExistsError)
        while topic_name not in admin.list_topics():
            time.sleep(0.1)
        d = admin.describe_topics([topic_name])[topic_name]
        assert [p.partition for p in d.partitions] == [0, 1, 2]
        assert admin.delete_topics([topic_name]) == {topic_name: None}
        while topic_name in admin.list_topics():
            time.sleep(0.1)
        assert topic_name not in admin.list_topics()
        gone = admin.delete_topics([topic_name])
        assert isinstance(gone[topic_name], UnknownTopicOrPartitionError)


def test_create_partitions(broker: BrokerInfo, topic_name: str) -> None:
    broker.require(CREATE_TOPICS, CREATE_PARTITIONS)
    create_topic(broker, topic_name, 1)
    with _admin(broker) as admin:
        assert admin.create_partitions({topic_name: 3}) == {topic_name: None}
        assert len(admin.describe_topics([topic_name])[topic_name].partitions) == 3
        shrink = admin.create_partitions({topic_name: 2})
        assert isinstance(shrink[topic_name], InvalidPartitionsError)


def test_describe_and_alter_topic_configs(broker: BrokerInfo, topic_name: str) -> None:
    broker.require(CREATE_TOPICS, DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS)
    if broker.name == "tansu":
        pytest.xfail("Tansu 0.6.0 reports an altered topic config with source DEFAULT_CONFIG")
    create_topic(broker, topic_name, 1)
    with _admin(broker) as admin:
        res = admin.incremental_alter_configs(
            {(TOPIC, topic_name): [("retention.ms", OP_SET, "12345")]}
        )
        assert res == {(TOPIC, topic_name): None}
        cfg = admin.describe_configs([("topic", topic_name)])[(TOPIC, topic_name)]
        assert cfg["retention.ms"].value == "12345"
        assert cfg["retention.ms"].source == "DYNAMIC_TOPIC_CONFIG"
        admin.incremental_alter_configs(
            {(TOPIC, topic_name): [("retention.ms", OP_DELETE, None)]}, raise_on_error=True
        )
        cfg = admin.describe_configs([("topic", topic_name)])[(TOPIC, topic_name)]
        assert cfg["retention.ms"].value != "12345"
        assert cfg["retention.ms"].source != "DYNAMIC_TOPIC_CONFIG"


def test_delete_records_and_list_offsets(broker: BrokerInfo, topic_name: str) -> None:
    broker.require(CREATE_TOPICS, DELETE_RECORDS)
    if broker.name == "tansu":
        pytest.xfail("Tansu 0.6.0 advertises DeleteRecords but closes the connection on it")
    create_topic(broker, topic_name, 1)
    tp = TopicPartition(topic_name, 0)
    with Producer({"bootstrap.servers": broker.bootstrap_servers}) as p:
        for i in range(10):
            p.send(topic_name, b"%d" % i, partition=0).result()  # one batch per record
    with _admin(broker) as admin:
        assert admin.delete_records({tp: 4}) == {tp: 4}
        assert admin.list_offsets({tp: "earliest"})[tp][0] == 4
        assert admin.list_offsets({tp: "latest"})[tp][0] == 10
        bad = admin.delete_records({tp: 11})
        assert isinstance(bad[tp], OffsetOutOfRangeError)
    with Consumer(
        {"bootstrap.servers": broker.bootstrap_servers, "auto.offset.reset": "earliest"}
    ) as c:
        c.assign([tp])
        got: list = []
        while len(got) < 6:
            got += c.poll(300)
        assert [r.offset for r in got] == [4, 5, 6, 7, 8, 9]


def test_describe_cluster(broker: BrokerInfo) -> None:
    with _admin(broker) as admin:
        d = admin.describe_cluster()
    host, port = broker.bootstrap_servers.split(":")
    assert [(h, p) for _, h, p, _ in d.brokers] == [(host, int(port))]
    assert d.cluster_id


def _produce_through_restart(idempotence: bool) -> None:
    with BrokerProcess() as b:
        bootstrap = b.bootstrap_servers
        if idempotence and INIT_PRODUCER_ID not in probe(bootstrap):
            pytest.skip("the broker does not implement InitProducerId")
        create_topic(BrokerInfo("gregor", bootstrap, probe(bootstrap)), "restart", 1)
        acked: list[int] = []
        failed: list[int] = []
        lock = threading.Lock()

        def on_delivery(i: int):  # noqa: ANN202
            def cb(fut) -> None:  # noqa: ANN001
                with lock:
                    (acked if fut.exception() is None else failed).append(i)

            return cb

        n = 3000
        # Without idempotence order survives retries only with one request in flight, as with
        # Kafka's producer (max.in.flight > 1 lets a retried batch land after a later one).
        with Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": idempotence,
                "linger.ms": 2,
                "batch.size": 4096,
                "delivery.timeout.ms": 60000,
                "request.timeout.ms": 5000,
                "retry.backoff.ms": 50,
                "max.in.flight.requests.per.connection": 5 if idempotence else 1,
            }
        ) as p:
            restarter = threading.Thread(target=b.restart, kwargs={"hard": True})
            for i in range(n):
                p.send("restart", b"%06d" % i, partition=0, on_delivery=on_delivery(i))
                if i == n // 3:
                    restarter.start()  # SIGKILL and start again while batches are in flight
                if i % 100 == 0:
                    time.sleep(0.005)
            restarter.join()
            p.flush(60)
        assert failed == []
        assert sorted(acked) == list(range(n))
        got: list = []
        with Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"}) as c:
            c.assign([TopicPartition("restart", 0)])
            while len(got) < n:
                got += c.poll(500)
            got += c.poll(500)
        values = [int(r.value) for r in got]
        assert set(values) == set(range(n))  # every acknowledged record is there
        first_seen = list(dict.fromkeys(values))
        assert first_seen == list(range(n))  # in the order sent
        if idempotence:
            assert values == list(range(n))  # and none twice


@pytest.mark.slow
def test_restart_mid_produce_loses_no_acknowledged_record() -> None:
    _produce_through_restart(idempotence=False)


@pytest.mark.slow
def test_restart_mid_produce_idempotent_no_duplicates() -> None:
    _produce_through_restart(idempotence=True)
