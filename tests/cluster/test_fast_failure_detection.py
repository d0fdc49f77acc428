"""A broker process that dies is noticed by its port, not only by its session: with a session
timeout far longer than the test needs (60 s), SIGKILLing the leader of a partition, or the
controller, still gets the partition a new leader, because the other brokers see the dead
broker's port refuse connections and remove its registration at once (``broker.peer_gone``
in their logs). A confluent-kafka producer with acks=all keeps every acknowledged record.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from replication_helpers import (
    CLUSTER_CONFIG,
    BackgroundProducer,
    create_topic,
    metadata_until,
    partition_until,
    read_all,
)

from gregor.testing.cluster import ClusterProcess
from gregor.testing.etcd import etcd_binary

pytestmark = [
    pytest.mark.process,
    pytest.mark.slow,
    pytest.mark.timeout(300),
    pytest.mark.skipif(etcd_binary() is None, reason="no etcd binary (scripts/system-deps.sh)"),
]


@pytest.fixture
def slow_sessions() -> Iterator[ClusterProcess]:
    with ClusterProcess(3, config=CLUSTER_CONFIG, session_timeout_ms=60000) as c:
        yield c


def gone_in_logs(cluster: ClusterProcess, node: int) -> bool:
    return any(
        f"event=broker.peer_gone broker={node} " in cluster.broker(n).read_log()
        for n in cluster.brokers
        if n != node and cluster.broker(n).running
    )


@pytest.mark.parametrize("victim", ["leader", "controller"])
def test_a_killed_broker_is_replaced_before_its_session_ends(
    slow_sessions: ClusterProcess, victim: str
) -> None:
    cluster = slow_sessions
    create_topic(cluster, "orders", 1, 3, {"min.insync.replicas": "2"})
    producer = BackgroundProducer(cluster, "orders", 1).start()
    producer.wait_for_acks(300)
    p = partition_until(cluster, "orders", 0, lambda p: p.leader >= 0 and len(p.isrs) == 3)
    if victim == "leader":
        dead = p.leader
    else:
        dead = metadata_until(cluster, lambda m: m.controller_id > 0).controller_id
    cluster.kill(dead)
    moved = partition_until(
        cluster, "orders", 0, lambda q: q.leader not in (-1, dead) and dead not in q.isrs
    )
    assert moved.leader != dead
    assert gone_in_logs(cluster, dead)
    producer.wait_for_acks(len(producer.acked) + 300)
    producer.stop()
    assert producer.errors == []
    acked = [v for _, v in producer.acked]
    assert read_all(cluster, "orders", 1, len(acked)) == {0: acked}
