"""Topic administration against a real broker, driven by confluent-kafka (librdkafka) and
kafka-python: CreateTopics, DeleteTopics, CreatePartitions and DeleteRecords."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    NewPartitions,
    NewTopic,
    ResourceType,
)
from kafka.admin import KafkaAdminClient
from kafka.structs import TopicPartition as KTopicPartition

from gregor.testing import InProcessBroker

pytestmark = pytest.mark.timeout(120)

#: Upper bound of one client call (librdkafka's blocking calls need one); generous, so that
#: a busy machine is not mistaken for a broker that does not answer.
TIMEOUT = 60


@pytest.fixture(scope="module")
def broker() -> Iterator[InProcessBroker]:
    # num.partitions=2 so that "broker default" is distinguishable from 1.
    with InProcessBroker({"num.partitions": "2"}) as b:
        yield b


@pytest.fixture(scope="module")
def admin(broker: InProcessBroker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap_servers})


@pytest.fixture(scope="module")
def kadmin(broker: InProcessBroker) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    yield client
    client.close()


def error_code(future: object) -> int:
    """0 when the admin future succeeded, else the Kafka error code it failed with."""
    try:
        future.result(timeout=TIMEOUT)  # type: ignore[attr-defined]
    except KafkaException as e:
        return e.args[0].code()
    return 0


def partition_count(admin: AdminClient, topic: str) -> int | None:
    md = admin.list_topics(timeout=TIMEOUT)
    t = md.topics.get(topic)
    return None if t is None else len(t.partitions)


def assert_serving(broker: InProcessBroker, admin: AdminClient) -> None:
    """The broker is up, answers a fresh request, and no handler blew up."""
    assert broker.running
    admin.list_topics(timeout=TIMEOUT)
    log = broker.read_log()
    assert "request.failed" not in log and "handler failed" not in log


# --- CreateTopics ---


def test_create_topic_with_configs(broker: InProcessBroker, admin: AdminClient) -> None:
    fs = admin.create_topics(
        [NewTopic("orders", 3, 1, config={"retention.ms": "3600000", "cleanup.policy": "compact"})]
    )
    assert error_code(fs["orders"]) == 0
    assert partition_count(admin, "orders") == 3
    res = ConfigResource(ResourceType.TOPIC, "orders")
    configs = admin.describe_configs([res])[res].result(timeout=TIMEOUT)
    assert configs["retention.ms"].value == "3600000"
    assert configs["retention.ms"].source == 1  # DYNAMIC_TOPIC_CONFIG
    assert configs["cleanup.policy"].value == "compact"
    assert configs["segment.bytes"].source == 5  # DEFAULT_CONFIG
    assert "event=topic.created topic=orders" in broker.read_log()


@pytest.mark.parametrize(
    "topic, expected",
    [
        (NewTopic("bad name", 1, 1), 17),  # INVALID_TOPIC_EXCEPTION
        (NewTopic("a" * 250, 1, 1), 17),
        (NewTopic("unknown-config", 1, 1, config={"no.such.config": "1"}), 40),  # INVALID_CONFIG
        (NewTopic("bad-value", 1, 1, config={"retention.ms": "soon"}), 40),
        (NewTopic("bad-policy", 1, 1, config={"cleanup.policy": "shred"}), 40),
        (NewTopic("bad-range", 1, 1, config={"min.cleanable.dirty.ratio": "1.5"}), 40),
        (NewTopic("too-many-replicas", 1, 3), 38),  # INVALID_REPLICATION_FACTOR
        (NewTopic("unknown-broker", 1, replica_assignment=[[7]]), 39),  # INVALID_REPLICA_ASSIGNMENT
        (NewTopic("twice-same-broker", 1, replica_assignment=[[1, 1]]), 39),
    ],
    ids=lambda v: v.topic[:20] if isinstance(v, NewTopic) else str(v),
)
def test_create_topic_errors(
    broker: InProcessBroker, admin: AdminClient, topic: NewTopic, expected: int
) -> None:
    fs = admin.create_topics([topic])
    assert error_code(fs[topic.topic]) == expected
    assert partition_count(admin, topic.topic) is None
    assert_serving(broker, admin)


def test_create_existing_topic(broker: InProcessBroker, admin: AdminClient) -> None:
    assert error_code(admin.create_topics([NewTopic("exists", 1, 1)])["exists"]) == 0
    fs = admin.create_topics([NewTopic("exists", 4, 1)])
    assert error_code(fs["exists"]) == 36  # TOPIC_ALREADY_EXISTS
    assert partition_count(admin, "exists") == 1
    assert_serving(broker, admin)


def test_create_validate_only(broker: InProcessBroker, admin: AdminClient) -> None:
    fs = admin.create_topics(
        [NewTopic("dry-run", 5, 1, config={"retention.ms": "1000"})], validate_only=True
    )
    assert error_code(fs["dry-run"]) == 0
    assert partition_count(admin, "dry-run") is None
    fs = admin.create_topics(
        [NewTopic("dry-run", 1, 1, config={"retention.ms": "x"})], validate_only=True
    )
    assert error_code(fs["dry-run"]) == 40
    assert "topic=dry-run" not in broker.read_log()


def test_create_explicit_assignment(admin: AdminClient) -> None:
    fs = admin.create_topics([NewTopic("assigned", 4, replica_assignment=[[1], [1], [1], [1]])])
    assert error_code(fs["assigned"]) == 0
    md = admin.list_topics(timeout=TIMEOUT).topics["assigned"]
    assert sorted(md.partitions) == [0, 1, 2, 3]
    assert all(p.replicas == [1] and p.leader == 1 for p in md.partitions.values())


def test_create_many_topics_mixed_results(admin: AdminClient) -> None:
    fs = admin.create_topics(
        [NewTopic("mix-ok", 2, 1), NewTopic("mix bad", 1, 1), NewTopic("mix-ok2", 1, 1)]
    )
    assert {t: error_code(f) for t, f in fs.items()} == {"mix-ok": 0, "mix bad": 17, "mix-ok2": 0}
    assert partition_count(admin, "mix-ok") == 2


def test_kafka_python_create_with_defaults_and_v5_fields(
    kadmin: KafkaAdminClient, broker: InProcessBroker
) -> None:
    # kafka-python sends -1/-1 (broker defaults) and a v5+ request: the response carries the
    # resolved partition count, replication factor, topic id and configs with their sources.
    result = kadmin.create_topics({"defaults": {"configs": {"retention.bytes": "1048576"}}})
    (topic,) = result["topics"]
    assert topic["error_code"] == 0
    assert topic["num_partitions"] == 2  # num.partitions=2 on this broker
    assert topic["replication_factor"] == 1
    assert uuid.UUID(str(topic["topic_id"])) != uuid.UUID(int=0)
    assert topic["configs"]["retention.bytes"] == {
        "value": "1048576",
        "read_only": False,
        "config_source": "DYNAMIC_TOPIC_CONFIG",
        "is_sensitive": False,
    }
    assert topic["configs"]["cleanup.policy"]["config_source"] == "DEFAULT_CONFIG"
    assert topic["configs"]["cleanup.policy"]["value"] == "delete"
    described = kadmin.describe_topics(["defaults"])
    assert len(described[0]["partitions"]) == 2


def test_kafka_python_create_errors(kadmin: KafkaAdminClient) -> None:
    result = kadmin.create_topics(
        {
            "zero-partitions": {"num_partitions": 0, "replication_factor": 1},
            "zero-replicas": {"num_partitions": 1, "replication_factor": 0},
            "both-given": {"num_partitions": 2, "replication_factor": 1, "assignments": {0: [1]}},
            "gap": {"assignments": {0: [1], 2: [1]}},
            "null-config": {
                "num_partitions": 1,
                "replication_factor": 1,
                "configs": {"retention.ms": None},
            },
        },
        raise_errors=False,
    )
    codes = {t["name"]: (t["error_code"], t["num_partitions"]) for t in result["topics"]}
    assert codes == {
        "zero-partitions": (37, -1),  # INVALID_PARTITIONS
        "zero-replicas": (38, -1),  # INVALID_REPLICATION_FACTOR
        "both-given": (42, -1),  # INVALID_REQUEST
        "gap": (39, -1),  # INVALID_REPLICA_ASSIGNMENT
        "null-config": (40, -1),  # INVALID_CONFIG
    }
    assert all(t["error_message"] for t in result["topics"])
    assert set(kadmin.list_topics()).isdisjoint(codes)


def test_kafka_python_bad_input(
    broker: InProcessBroker, admin: AdminClient, kadmin: KafkaAdminClient
) -> None:
    kadmin.create_topics({"kp-exists": {"num_partitions": 1}})
    result = kadmin.create_topics(
        {
            "kp bad/name": {"num_partitions": 1},
            "kp-exists": {"num_partitions": 3},
            "kp-unknown-config": {"configs": {"retention.days": "7"}},
            "kp-bad-value": {"configs": {"max.message.bytes": "-5"}},
            "kp.exists": {"num_partitions": 1},  # no clash with kp-exists: only '.' and '_' collide
            "kp_exists": {"num_partitions": 1},
            "kp.exists2": {"num_partitions": 1},
        },
        raise_errors=False,
    )
    got = {t["name"]: (t["error_code"], t["error_message"]) for t in result["topics"]}
    assert got == {
        "kp bad/name": (17, "topic name may contain only ASCII letters, digits, '.', '_' and '-'"),
        "kp-exists": (36, "Topic 'kp-exists' already exists."),
        "kp-unknown-config": (40, "Unknown topic config name: retention.days"),
        "kp-bad-value": (
            40,
            "Invalid value -5 for configuration max.message.bytes: must be at least 0",
        ),
        "kp.exists": (0, None),
        "kp_exists": (17, "Topic 'kp_exists' collides with existing topic: kp.exists"),
        "kp.exists2": (0, None),
    }
    assert_serving(broker, admin)


def test_kafka_python_validate_only(kadmin: KafkaAdminClient) -> None:
    result = kadmin.create_topics({"kp-dry": {"num_partitions": 3}}, validate_only=True)
    (topic,) = result["topics"]
    assert (topic["error_code"], topic["num_partitions"], topic["replication_factor"]) == (0, 3, 1)
    assert "kp-dry" not in kadmin.list_topics()


# --- DeleteTopics ---


def test_delete_topics(broker: InProcessBroker, admin: AdminClient) -> None:
    assert error_code(admin.create_topics([NewTopic("doomed", 2, 1)])["doomed"]) == 0
    fs = admin.delete_topics(["doomed", "never-existed"])
    assert error_code(fs["doomed"]) == 0
    assert error_code(fs["never-existed"]) == 3  # UNKNOWN_TOPIC_OR_PARTITION
    assert partition_count(admin, "doomed") is None
    assert "event=topic.deleted topic=doomed" in broker.read_log()
    # The name is free again.
    assert error_code(admin.create_topics([NewTopic("doomed", 1, 1)])["doomed"]) == 0
    assert partition_count(admin, "doomed") == 1
    assert_serving(broker, admin)


def test_kafka_python_delete_by_id(kadmin: KafkaAdminClient) -> None:
    created = kadmin.create_topics({"by-id": {"num_partitions": 1}})
    topic_id = uuid.UUID(str(created["topics"][0]["topic_id"]))
    unknown = uuid.uuid4()
    result = kadmin.delete_topics([topic_id, unknown], raise_errors=False)
    by_id = {uuid.UUID(str(t["topic_id"])): (t["name"], t["error_code"]) for t in result["topics"]}
    assert by_id == {topic_id: ("by-id", 0), unknown: (None, 100)}  # UNKNOWN_TOPIC_ID
    assert "by-id" not in kadmin.list_topics()


# --- CreatePartitions ---


def test_create_partitions(broker: InProcessBroker, admin: AdminClient) -> None:
    assert error_code(admin.create_topics([NewTopic("growing", 1, 1)])["growing"]) == 0
    assert error_code(admin.create_partitions([NewPartitions("growing", 3)])["growing"]) == 0
    assert partition_count(admin, "growing") == 3
    assert "event=topic.partitions_added topic=growing partitions=3" in broker.read_log()

    fs = admin.create_partitions([NewPartitions("growing", 2)])
    assert error_code(fs["growing"]) == 37  # INVALID_PARTITIONS: a decrease
    fs = admin.create_partitions([NewPartitions("growing", 3)])
    assert error_code(fs["growing"]) == 37  # no increase
    fs = admin.create_partitions([NewPartitions("growing", 6)], validate_only=True)
    assert error_code(fs["growing"]) == 0
    assert partition_count(admin, "growing") == 3
    fs = admin.create_partitions([NewPartitions("growing", 5, replica_assignment=[[1], [1]])])
    assert error_code(fs["growing"]) == 0
    assert partition_count(admin, "growing") == 5
    fs = admin.create_partitions([NewPartitions("growing", 6, replica_assignment=[[9]])])
    assert error_code(fs["growing"]) == 39  # INVALID_REPLICA_ASSIGNMENT
    fs = admin.create_partitions([NewPartitions("no-such-topic", 2)])
    assert error_code(fs["no-such-topic"]) == 3
    assert partition_count(admin, "growing") == 5
    assert_serving(broker, admin)


def test_new_partitions_take_writes(broker: InProcessBroker, admin: AdminClient) -> None:
    assert error_code(admin.create_topics([NewTopic("widen", 1, 1)])["widen"]) == 0
    assert error_code(admin.create_partitions([NewPartitions("widen", 2)])["widen"]) == 0
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap_servers, "topic.metadata.refresh.interval.ms": 100}
    )
    delivered = []
    producer.produce(
        "widen",
        b"v",
        partition=1,
        on_delivery=lambda err, msg: delivered.append((err, msg.offset())),
    )
    assert producer.flush(TIMEOUT) == 0
    assert delivered == [(None, 0)]


def test_kafka_python_create_partitions_messages(kadmin: KafkaAdminClient) -> None:
    kadmin.create_topics({"kp-grow": {"num_partitions": 2}})
    response = kadmin.create_partitions({"kp-grow": 1, "kp-missing": 3}, raise_errors=False)
    results = {r.name: (r.error_code, r.error_message) for r in response.results}
    assert results["kp-grow"][0] == 37
    assert "2 partitions" in results["kp-grow"][1]
    assert results["kp-missing"] == (3, "Topic 'kp-missing' does not exist.")


# --- DeleteRecords ---


def _produce(broker: InProcessBroker, topic: str, partition: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    for i in range(count):
        producer.produce(topic, f"v{i}".encode(), partition=partition)
    assert producer.flush(TIMEOUT) == 0


def test_delete_records(broker: InProcessBroker, admin: AdminClient) -> None:
    from confluent_kafka import Consumer

    assert error_code(admin.create_topics([NewTopic("trim", 2, 1)])["trim"]) == 0
    _produce(broker, "trim", 0, 10)
    fs = admin.delete_records([TopicPartition("trim", 0, 4)])
    (f,) = fs.values()
    assert f.result(timeout=TIMEOUT).low_watermark == 4
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "unused"})
    try:
        assert consumer.get_watermark_offsets(TopicPartition("trim", 0), timeout=TIMEOUT) == (4, 10)
        # Beyond the high watermark: OFFSET_OUT_OF_RANGE, nothing changes.
        (f,) = admin.delete_records([TopicPartition("trim", 0, 11)]).values()
        assert error_code(f) == 1
        assert consumer.get_watermark_offsets(TopicPartition("trim", 0), timeout=TIMEOUT) == (4, 10)
        # -1 (OFFSET_END): up to the high watermark.
        (f,) = admin.delete_records([TopicPartition("trim", 0, -1)]).values()
        assert f.result(timeout=TIMEOUT).low_watermark == 10
        assert consumer.get_watermark_offsets(TopicPartition("trim", 0), timeout=TIMEOUT) == (
            10,
            10,
        )
    finally:
        consumer.close()
    assert "event=records.deleted topic=trim partition=0 log_start_offset=4" in broker.read_log()
    assert_serving(broker, admin)


def test_delete_records_on_compact_only_topic_is_refused(
    broker: InProcessBroker, admin: AdminClient
) -> None:
    fs = admin.create_topics([NewTopic("compacted", 1, 1, config={"cleanup.policy": "compact"})])
    assert error_code(fs["compacted"]) == 0
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    for i in range(3):
        producer.produce("compacted", b"v", key=b"k%d" % i)
    assert producer.flush(TIMEOUT) == 0
    (f,) = admin.delete_records([TopicPartition("compacted", 0, 2)]).values()
    assert error_code(f) == 44  # POLICY_VIOLATION
    assert_serving(broker, admin)


def test_kafka_python_delete_records(broker: InProcessBroker, kadmin: KafkaAdminClient) -> None:
    kadmin.create_topics({"kp-trim": {"num_partitions": 1}})
    _produce(broker, "kp-trim", 0, 5)
    result = kadmin.delete_records({KTopicPartition("kp-trim", 0): 3})
    assert result == {
        KTopicPartition("kp-trim", 0): {"partition_index": 0, "low_watermark": 3, "error_code": 0}
    }
    # Deleting below the current low watermark is a no-op that reports it.
    result = kadmin.delete_records({KTopicPartition("kp-trim", 0): 1})
    assert result[KTopicPartition("kp-trim", 0)]["low_watermark"] == 3
