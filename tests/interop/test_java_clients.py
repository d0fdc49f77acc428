"""The Java client (Apache Kafka's kafka-clients, the pinned release) against a real Gregor broker:
producer, consumer (classic and ``group.protocol=consumer``), the transactional producer in an
exactly-once consume-transform-produce loop, the share consumer and the AdminClient, driven by
the Java harness (``gregor.testing.kafka.JavaHarness``, one JVM per session). What the Java side
wrote is read back by confluent-kafka too, and the other way round."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from gregor.testing import BrokerProcess

pytestmark = pytest.mark.jvm


def new_topic(broker: BrokerProcess, partitions: int = 3) -> str:
    name = f"java-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    return name


def read_all(
    broker: BrokerProcess, topic: str, count: int, **settings: Any
) -> list[tuple[int, int, bytes | None, bytes | None]]:
    """``count`` records of ``topic`` read by confluent-kafka: (partition, offset, key, value)."""
    c = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": f"check-{uuid.uuid4().hex[:6]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **settings,
        }
    )
    c.subscribe([topic])
    got = []
    while len(got) < count:
        for m in c.consume(500, 0.5):
            if m.error() is None:
                got.append((m.partition(), m.offset(), m.key(), m.value()))
    c.close()
    return sorted(got)


def test_java_producer_to_confluent_consumer_and_back(java_harness, broker: BrokerProcess) -> None:  # noqa: ANN001
    topic = new_topic(broker)
    records = [
        {"key": f"k{i}", "value": f"v{i}", "partition": i % 3, "headers": {"h": f"x{i}"}}
        for i in range(60)
    ]
    sent = java_harness.call(
        "produce",
        props={"bootstrap.servers": broker.bootstrap_servers},
        topic=topic,
        records=records,
    )["offsets"]
    assert sorted(sent) == sorted([p, o] for p in range(3) for o in range(20))
    got = read_all(broker, topic, 60)
    assert got == sorted((i % 3, i // 3, f"k{i}".encode(), f"v{i}".encode()) for i in range(60))
    # confluent-kafka writes, the Java consumer (classic group) reads and commits.
    p = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i in range(30):
        p.produce(
            topic,
            key=f"c{i}".encode(),
            value=f"w{i}".encode(),
            partition=i % 3,
            headers={"h": b"y"},
        )
    assert p.flush(30) == 0
    r = java_harness.call(
        "consume",
        props={"bootstrap.servers": broker.bootstrap_servers, "group.id": f"g-{topic}"},
        topics=[topic],
        count=90,
    )
    values = sorted(x["value"] for x in r["records"])
    assert values == sorted([f"v{i}" for i in range(60)] + [f"w{i}" for i in range(30)])
    assert {x["headers"]["h"] for x in r["records"] if x["value"].startswith("w")} == {"y"}
    assert r["committed"] == {f"{topic}-{n}": 30 for n in range(3)}
    assert r["generation"] >= 1


def test_java_consumer_group_protocol_consumer(java_harness, broker: BrokerProcess) -> None:  # noqa: ANN001
    """KIP-848: the Java consumer's own group protocol (ConsumerGroupHeartbeat)."""
    topic = new_topic(broker)
    java_harness.call(
        "produce",
        props={"bootstrap.servers": broker.bootstrap_servers},
        topic=topic,
        records=[{"value": f"v{i}", "partition": i % 3} for i in range(45)],
    )
    group = f"kip848-{topic}"
    props = {
        "bootstrap.servers": broker.bootstrap_servers,
        "group.id": group,
        "group.protocol": "consumer",
    }
    r = java_harness.call("consume", props=props, topics=[topic], count=45)
    assert sorted(x["value"] for x in r["records"]) == sorted(f"v{i}" for i in range(45))
    assert r["committed"] == {f"{topic}-{n}": 15 for n in range(3)}
    assert r["generation"] >= 1  # the member epoch
    # A second member of the same group resumes from the committed offsets: nothing is left.
    java_harness.call(
        "produce",
        props={"bootstrap.servers": broker.bootstrap_servers},
        topic=topic,
        records=[{"value": "late", "partition": 1}],
    )
    r = java_harness.call("consume", props=props, topics=[topic], count=1)
    assert [x["value"] for x in r["records"]] == ["late"]
    assert r["committed"][f"{topic}-1"] == 16


def test_java_exactly_once_consume_transform_produce(java_harness, broker: BrokerProcess) -> None:  # noqa: ANN001
    source, sink = new_topic(broker, 2), new_topic(broker, 2)
    java_harness.call(
        "produce",
        props={"bootstrap.servers": broker.bootstrap_servers},
        topic=source,
        records=[{"key": f"k{i}", "value": f"word{i}", "partition": i % 2} for i in range(40)],
    )
    bootstrap = {"bootstrap.servers": broker.bootstrap_servers}
    r = java_harness.call(
        "eos",
        consumer=bootstrap,
        producer=bootstrap,
        input=source,
        output=sink,
        group=f"eos-{source}",
        transactional_id=f"tx-{source}",
        count=40,
        abort_first=True,
    )
    assert r["aborted"] == 1 and r["records"] == 40
    committed = read_all(broker, sink, 40, **{"isolation.level": "read_committed"})
    assert sorted(v for _, _, _, v in committed) == sorted(f"WORD{i}".encode() for i in range(40))
    # The aborted transaction's records are in the log (read_uncommitted sees them), and the
    # consumed offsets went in with the committed transactions only.
    uncommitted = java_harness.call(
        "consume",
        props={**bootstrap, "isolation.level": "read_uncommitted"},
        assign=[[sink, 0], [sink, 1]],
        count=41,
        limit_ms=5000,
    )["records"]
    assert len(uncommitted) > 40
    admin = AdminClient(bootstrap)
    offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(f"eos-{source}")])
    (result,) = [f.result(30) for f in offsets.values()]
    assert sorted((tp.partition, tp.offset) for tp in result.topic_partitions) == [(0, 20), (1, 20)]


def share_from_earliest(java_harness, broker: BrokerProcess, group: str) -> None:  # noqa: ANN001
    """A share group starts at the latest offset unless its share.auto.offset.reset says
    earliest (a group config, set here with Kafka's kafka-configs)."""
    java_harness.tool(
        "kafka-configs",
        "--bootstrap-server",
        broker.bootstrap_servers,
        "--alter",
        "--entity-type",
        "groups",
        "--entity-name",
        group,
        "--add-config",
        "share.auto.offset.reset=earliest",
    ).check()


def test_java_share_consumer(java_harness, broker: BrokerProcess) -> None:  # noqa: ANN001
    """KafkaShareConsumer (KIP-932): every record released on its first delivery comes back with
    delivery count 2 and is then accepted; each exactly once in the result."""
    topic = new_topic(broker, 1)
    java_harness.call(
        "produce",
        props={"bootstrap.servers": broker.bootstrap_servers},
        topic=topic,
        records=[{"value": f"s{i}"} for i in range(20)],
    )
    group = f"share-{topic}"
    share_from_earliest(java_harness, broker, group)
    r = java_harness.call(
        "share-consume",
        props={"bootstrap.servers": broker.bootstrap_servers},
        group=group,
        topics=[topic],
        count=20,
        ack="RELEASE_FIRST",
    )
    assert sorted(x["value"] for x in r["records"]) == sorted(f"s{i}" for i in range(20))
    assert {x["delivery_count"] for x in r["records"]} == {2}
    # All acknowledged: a second member of the group finds nothing to read.
    java_harness.call(
        "produce",
        props={"bootstrap.servers": broker.bootstrap_servers},
        topic=topic,
        records=[{"value": "after"}],
    )
    r = java_harness.call(
        "share-consume",
        props={"bootstrap.servers": broker.bootstrap_servers},
        group=group,
        topics=[topic],
        count=1,
    )
    assert [x["value"] for x in r["records"]] == ["after"]


def test_java_admin_client_every_family(java_harness, broker: BrokerProcess) -> None:  # noqa: ANN001
    bootstrap = {"bootstrap.servers": broker.bootstrap_servers}
    prefix = f"adm-{uuid.uuid4().hex[:6]}"
    # A group with committed offsets, a share group and a committed transaction to look at.
    topic = new_topic(broker, 2)
    java_harness.call(
        "produce",
        props=bootstrap,
        topic=topic,
        records=[{"value": f"v{i}", "partition": i % 2} for i in range(6)],
    )
    group = f"{prefix}-group"
    java_harness.call("consume", props={**bootstrap, "group.id": group}, topics=[topic], count=6)
    share_group = f"{prefix}-share"
    share_from_earliest(java_harness, broker, share_group)
    java_harness.call("share-consume", props=bootstrap, group=share_group, topics=[topic], count=6)
    txn = f"{prefix}-txn"
    java_harness.call(
        "produce",
        props={**bootstrap, "transactional.id": txn},
        topic=topic,
        records=[{"value": "t"}],
    )
    r = java_harness.call(
        "admin",
        props=bootstrap,
        prefix=prefix,
        group=group,
        share_group=share_group,
        transactional_id=txn,
    )
    a = f"{prefix}-a"
    assert r["create_topics"] == "ok"
    assert r["list_topics"] == [a, f"{prefix}-b"]  # the validate-only topic was not made
    assert r["describe_topics"] == {
        "internal": False,
        "leaders": [1, 1, 1],
        "partitions": 3,
        "replicas": [1, 1, 1],
        "topic_id_set": True,
    }
    assert r["create_partitions"] == 4
    assert r["describe_configs"] == {
        "broker num.partitions": "3",
        "retention.ms": ["86400000", "DYNAMIC_TOPIC_CONFIG"],
    }
    assert r["incremental_alter_configs"] == {
        "max.message.bytes": "2000000",
        "retention.ms": ["604800000", "DEFAULT_CONFIG"],
    }
    assert r["list_offsets"] == {
        "earliest": 0,
        "for_timestamp_4500": 4,
        "latest": 10,
        "max_timestamp": 9,
    }
    assert r["describe_producers"] == [{"epoch": 0, "last_sequence": 9}]
    assert r["delete_records"] == [3, 3]
    assert r["describe_log_dirs"] > 0
    assert r["describe_cluster"] == {"cluster_id_set": True, "controller_set": True, "nodes": [1]}
    assert r["describe_features"]["group.version"] == 1
    assert r["describe_features"]["share.version"] == 1
    assert r["list_groups"] == {group: ["Classic", "Empty"], share_group: ["Share", "Empty"]}
    assert r["describe_consumer_groups"] == {"members": 0, "state": "Empty", "type": "Classic"}
    assert r["list_consumer_group_offsets"] == {f"{topic}-0": 3, f"{topic}-1": 3}
    assert r["alter_consumer_group_offsets"] == {
        "after_delete_offsets": {f"{topic}-1": 3},
        "altered": {f"{topic}-0": 1, f"{topic}-1": 3},
    }
    assert r["delete_consumer_groups"] is False
    assert r["describe_share_groups"] == {"members": 0, "state": "Empty"}
    assert r["list_transactions"] == {txn: "CompleteCommit"}
    assert r["describe_transactions"] == {"state": "CompleteCommit", "topic_partitions": 0}
    assert r["client_quotas"] == {"producer_byte_rate": 1024.0}
    assert r["scram_credentials"] == [["SCRAM-SHA-256", 4096]]
    assert r["reassign_partitions"] == 0
    assert r["elect_leaders"] == "ElectionNotNeededException"
    assert r["delete_topics"] is False
    # No authorizer on this broker: the ACL calls answer SECURITY_DISABLED, as Kafka's do.
    assert r["acls"]["error"].startswith("SecurityDisabledException")
