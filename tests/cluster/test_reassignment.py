"""Partition reassignment (KIP-455) on a 3-broker cluster, driven by kafka-python's admin
client: the data moves to the new replicas while a producer keeps writing (acks=all), the
old replica is removed (its log directory goes), and every acknowledged record is read back
once, in order, from the new replicas; a reassignment that cannot finish (its leader is
down) is listed as in progress with its adding and removing replicas, and a cancel puts the
partition back on its original replica.

The reassignment that cannot finish needs its leader killed: that test is marked ``process``
(broker processes on etcd, ``ClusterProcess``); the other runs on brokers in this process
(``InProcessCluster``), as the ``cluster`` fixture gives them.
"""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient
from kafka import TopicPartition as KTopicPartition
from kafka.errors import InvalidReplicationAssignmentError
from replication_helpers import (
    BackgroundProducer,
    Cluster,
    metadata_until,
    needs_etcd,
    partition_until,
    read_all,
)

from gregor.testing.cluster import ClusterProcess
from gregor.testing.inprocess_cluster import InProcessCluster

pytestmark = [pytest.mark.timeout(300)]


def create_on(cluster: Cluster, name: str, replicas: list[int]) -> None:
    metadata_until(cluster, lambda m: len(m.brokers) == cluster.size)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(name, 1, replica_assignment=[replicas])])[name].result(30)
    partition_until(
        cluster, name, 0, lambda p: p.leader >= 0 and sorted(p.isrs) == sorted(replicas)
    )


def kafka_python_admin(cluster: ClusterProcess) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers, request_timeout_ms=30000)


def test_data_moves_to_the_new_replicas_and_the_old_one_is_removed(
    cluster: InProcessCluster,
) -> None:
    create_on(cluster, "moves", [1])
    producer = BackgroundProducer(cluster, "moves", 1).start()
    producer.wait_for_acks(300)
    admin = kafka_python_admin(cluster)
    try:
        tp = KTopicPartition("moves", 0)
        assert admin.alter_partition_reassignments({tp: [2, 3]}) == {tp: None}
        moved = partition_until(
            cluster, "moves", 0, lambda p: sorted(p.replicas) == [2, 3] and sorted(p.isrs) == [2, 3]
        )
        assert moved.leader == 2 and moved.replicas == [2, 3]
        assert admin.list_partition_reassignments() == {}
        producer.wait_for_acks(len(producer.acked) + 200)  # still writing, now to broker 2
        producer.stop()
    finally:
        admin.close()
    assert producer.errors == []
    old_dir = cluster.broker(1).data_dir / "logs" / "moves-0"
    while old_dir.exists():
        metadata_until(cluster, lambda m: True)
    for node in (2, 3):
        assert (cluster.broker(node).data_dir / "logs" / "moves-0").is_dir()
    acked = [v for _, v in producer.acked]
    assert read_all(cluster, "moves", 1, len(acked)) == {0: acked}


@pytest.mark.process
@pytest.mark.slow
@needs_etcd
def test_an_unfinished_reassignment_is_listed_and_cancelled(cluster: ClusterProcess) -> None:
    create_on(cluster, "stuck", [1])
    producer = BackgroundProducer(cluster, "stuck", 1).start()
    producer.wait_for_acks(100)
    producer.stop()
    acked = [v for _, v in producer.acked]
    tp = KTopicPartition("stuck", 0)
    admin = kafka_python_admin(cluster)
    try:
        assert admin.alter_partition_reassignments({tp: [2, 7]}) == {
            tp: InvalidReplicationAssignmentError
        }
    finally:
        admin.close()
    cluster.kill(1)  # the only replica: the partition goes offline, nothing can be copied
    offline = partition_until(cluster, "stuck", 0, lambda p: p.leader == -1)
    assert offline.error is not None and offline.error.code() == KafkaError.LEADER_NOT_AVAILABLE
    admin = kafka_python_admin(cluster)  # a new client: kafka-python keeps asking a dead controller
    try:
        assert admin.alter_partition_reassignments({tp: [2, 3]}) == {tp: None}
        assert admin.list_partition_reassignments() == {
            tp: {"replicas": [2, 3, 1], "adding_replicas": [2, 3], "removing_replicas": [1]}
        }
        assert admin.list_partition_reassignments([tp]) == admin.list_partition_reassignments()
        assert admin.alter_partition_reassignments({tp: None}) == {tp: None}
        assert admin.list_partition_reassignments() == {}
        cluster.restart(1)
        back = partition_until(cluster, "stuck", 0, lambda p: p.leader == 1)
        assert back.replicas == [1] and back.isrs == [1]
    finally:
        admin.close()
    assert read_all(cluster, "stuck", 1, len(acked)) == {0: acked}
