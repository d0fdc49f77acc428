"""DescribeCluster, DescribeTopicPartitions and DescribeLogDirs through confluent-kafka and
kafka-python against a real broker."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer, TopicCollection
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.admin import KafkaAdminClient

from gregor.testing import InProcessBroker

pytestmark = pytest.mark.timeout(120)

#: Upper bound of one client call (librdkafka's blocking calls need one); generous, so that
#: a busy machine is not mistaken for a broker that does not answer.
TIMEOUT = 60


@pytest.fixture(scope="module")
def broker() -> Iterator[InProcessBroker]:
    with InProcessBroker({"broker.rack": "rack-a"}) as b:
        yield b


@pytest.fixture(scope="module")
def admin(broker: InProcessBroker) -> AdminClient:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    fs = admin.create_topics([NewTopic("alpha", 3, 1), NewTopic("beta", 1, 1)])
    for f in fs.values():
        f.result(timeout=TIMEOUT)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    for i in range(20):
        producer.produce("alpha", b"payload-%d" % i, partition=2)
    assert producer.flush(TIMEOUT) == 0
    return admin


@pytest.fixture(scope="module")
def kadmin(broker: InProcessBroker, admin: AdminClient) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    yield client
    client.close()


def test_describe_cluster_confluent(broker: InProcessBroker, admin: AdminClient) -> None:
    # librdkafka describes the cluster with Metadata v10, not DescribeCluster.
    result = admin.describe_cluster().result(timeout=TIMEOUT)
    assert [(n.id, n.host, n.port, n.rack) for n in result.nodes] == [
        (1, "127.0.0.1", broker.port, "rack-a")
    ]
    assert result.controller.id == 1
    assert result.cluster_id == admin.list_topics(timeout=TIMEOUT).cluster_id


def test_describe_cluster_kafka_python(
    broker: InProcessBroker, admin: AdminClient, kadmin: KafkaAdminClient
) -> None:
    # kafka-python uses DescribeCluster (v1) and asks for the authorized operations.
    result = kadmin.describe_cluster()
    assert result["controller_id"] == 1
    assert result["brokers"] == [
        {"broker_id": 1, "host": "127.0.0.1", "port": broker.port, "rack": "rack-a"}
    ]
    assert result["cluster_id"] == admin.list_topics(timeout=TIMEOUT).cluster_id
    assert len(result["cluster_id"]) == 22  # 16 random bytes, URL-safe base64 without padding
    assert sorted(result["authorized_operations"]) == sorted(
        [
            "CREATE",
            "ALTER",
            "DESCRIBE",
            "CLUSTER_ACTION",
            "DESCRIBE_CONFIGS",
            "ALTER_CONFIGS",
            "IDEMPOTENT_WRITE",
        ]
    )


def test_describe_topics_confluent(admin: AdminClient) -> None:
    # librdkafka describes topics with Metadata too.
    fs = admin.describe_topics(TopicCollection(["alpha", "beta"]))
    alpha = fs["alpha"].result(timeout=TIMEOUT)
    beta = fs["beta"].result(timeout=TIMEOUT)
    assert [
        (p.id, p.leader.id, [r.id for r in p.replicas], [r.id for r in p.isr])
        for p in alpha.partitions
    ] == [
        (0, 1, [1], [1]),
        (1, 1, [1], [1]),
        (2, 1, [1], [1]),
    ]
    assert len(beta.partitions) == 1
    assert alpha.is_internal is False
    assert alpha.topic_id != beta.topic_id


def test_describe_topic_partitions_kafka_python(kadmin: KafkaAdminClient) -> None:
    page = kadmin.describe_topic_partitions(["beta", "alpha"], response_partition_limit=2)
    assert [
        (t["name"], [p["partition_index"] for p in t["partitions"]]) for t in page["topics"]
    ] == [("alpha", [0, 1])]
    assert page["next_cursor"] == {"topic_name": "alpha", "partition_index": 2}
    page = kadmin.describe_topic_partitions(
        ["beta", "alpha"], response_partition_limit=2, cursor=page["next_cursor"]
    )
    assert [
        (t["name"], [p["partition_index"] for p in t["partitions"]]) for t in page["topics"]
    ] == [
        ("alpha", [2]),
        ("beta", [0]),
    ]
    assert page["next_cursor"] is None
    ids = {t["name"]: t["topic_id"] for t in kadmin.describe_topics(["alpha"])}
    assert uuid.UUID(str(ids["alpha"])) == page["topics"][0]["topic_id"]


def test_describe_log_dirs_kafka_python(broker: InProcessBroker, kadmin: KafkaAdminClient) -> None:
    (entry,) = kadmin.describe_log_dirs()
    assert entry["broker"] == 1
    (log_dir,) = entry["log_dirs"]
    assert log_dir["error_code"] == 0
    assert log_dir["log_dir"] == str(broker.data_dir / "logs")
    topics = {
        t["name"]: {p["partition_index"]: p for p in t["partitions"]} for t in log_dir["topics"]
    }
    assert sorted(topics) == ["alpha", "beta"]
    assert sorted(topics["alpha"]) == [0, 1, 2]
    segment = broker.data_dir / "logs" / "alpha-2" / "00000000000000000000.log"
    assert topics["alpha"][2]["partition_size"] == segment.stat().st_size
    assert topics["alpha"][0]["partition_size"] == 0
    assert all(
        p["offset_lag"] == 0 and p["is_future_key"] is False for p in topics["alpha"].values()
    )
    assert 0 < log_dir["usable_bytes"] <= log_dir["total_bytes"]
