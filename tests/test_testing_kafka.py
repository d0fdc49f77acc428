"""The JVM peers' launchers (``gregor.testing.kafka``): a 3-node Apache Kafka KRaft cluster that
serves acks=all through the loss of a node, and the Java harness's tool runner."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from gregor.testing.kafka import QUICK_JVM_OPTIONS, JavaError, KafkaCluster, _cluster_id

pytestmark = [pytest.mark.jvm, pytest.mark.slow]


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    errors: list[object] = []
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "on_delivery": lambda err, msg: errors.append(err) if err else None,
        }
    )
    for v in values:
        p.produce(topic, v, partition=0)
    assert p.flush(120) == 0
    assert errors == []


def test_kafka_cluster_keeps_acknowledged_records_through_a_node_kill(java_harness) -> None:  # noqa: ANN001
    topic = f"rf3-{uuid.uuid4().hex[:8]}"
    options = (*QUICK_JVM_OPTIONS, "-Xmx384m")
    with KafkaCluster(size=3, jvm_options=options, harness=java_harness) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        admin.create_topics([NewTopic(topic, 1, 3, config={"min.insync.replicas": "2"})])[
            topic
        ].result(60)
        # CreateTopics answers once the controller has the topic; each broker learns it from
        # the metadata log after that. Wait until every node knows it with three replicas in
        # sync, or the tool below may ask a node that does not know it yet ("does not exist").
        for node in cluster.nodes.values():
            one = AdminClient({"bootstrap.servers": node.bootstrap_servers})
            while True:
                meta = one.list_topics(topic, timeout=30).topics[topic]
                if meta.error is None and len(meta.partitions[0].isrs) == 3:
                    break
        # Kafka's own tool agrees: three replicas, all in sync.
        out = (
            java_harness.tool(
                "kafka-topics",
                "--bootstrap-server",
                cluster.bootstrap_servers,
                "--describe",
                "--topic",
                topic,
            )
            .check()
            .stdout
        )
        assert "ReplicationFactor: 3" in out
        first = [f"a{i}".encode() for i in range(50)]
        produce(cluster.bootstrap_servers, topic, first)
        leader = admin.list_topics(topic, timeout=30).topics[topic].partitions[0].leader
        cluster.kill(leader)
        second = [f"b{i}".encode() for i in range(50)]
        produce(cluster.bootstrap_servers, topic, second)
        c = Consumer(
            {
                "bootstrap.servers": cluster.bootstrap_servers,
                "group.id": "check",
                "enable.auto.commit": False,
            }
        )
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        got: list[bytes] = []
        while len(got) < 100:
            got += [m.value() for m in c.consume(100, 1.0) if m.error() is None]
        c.close()
        assert got == first + second
        assert not cluster.node(leader).running


def test_java_harness_tool_exit_codes_and_errors(java_harness) -> None:  # noqa: ANN001
    r = java_harness.tool("kafka-topics", "--no-such-option")
    assert r.exit == 1
    assert "no-such-option" in r.stdout + r.stderr
    r = java_harness.tool("kafka-topics", "--version")
    assert r.exit == 0
    assert r.stdout.startswith("4.1.1")
    with pytest.raises(JavaError, match="unknown op"):
        java_harness.call("no-such-op")


def test_cluster_ids_never_start_with_a_dash() -> None:
    """One random id in 64 started with "-", which ``kafka-storage format -t`` took for an
    option: that Kafka node failed to start (seen in the interop runs against Kafka)."""
    ids = [_cluster_id() for _ in range(2000)]
    assert not [i for i in ids if i.startswith("-")]
    assert all(len(i) == 22 for i in ids) and len(set(ids)) == len(ids)
