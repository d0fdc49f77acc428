"""Helpers for the replication tests: wait for metadata, produce in the background, read back.

Every wait polls a condition through a real client, bounded by the test timeout; no sleeps.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ClusterMetadata, NewTopic, PartitionMetadata

from gregor.testing.cluster import ClusterProcess
from gregor.testing.etcd import etcd_binary
from gregor.testing.inprocess_cluster import InProcessCluster

#: Broker processes on etcd (``ClusterProcess``) or brokers in this process (``InProcessCluster``).
Cluster = ClusterProcess | InProcessCluster

#: The etcd binary is needed by a test on ``ClusterProcess`` (one marked ``process``).
needs_etcd = pytest.mark.skipif(
    etcd_binary() is None, reason="no etcd binary (scripts/system-deps.sh)"
)

#: Fast failure detection for tests: leases of 2 s (the ClusterProcess default), followers
#: out of the ISR after 3 s behind.
CLUSTER_CONFIG: dict[str, object] = {
    "replica.lag.time.max.ms": 3000,
    "replica.fetch.backoff.ms": 200,
    "offsets.topic.replication.factor": 3,
    "offsets.topic.num.partitions": 5,
    "transaction.state.log.replication.factor": 3,
    "transaction.state.log.num.partitions": 5,
    "share.coordinator.state.topic.replication.factor": 3,
    "share.coordinator.state.topic.num.partitions": 5,
}


def metadata_until(
    cluster: Cluster, condition: Callable[[ClusterMetadata], bool]
) -> ClusterMetadata:
    """Metadata from any running broker, asked again until ``condition`` holds."""
    while True:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        try:
            md = admin.list_topics(timeout=10)
        except KafkaException:
            continue
        if condition(md):
            return md


def partition_until(
    cluster: Cluster, topic: str, index: int, condition: Callable[[PartitionMetadata], bool]
) -> PartitionMetadata:
    def holds(md: ClusterMetadata) -> bool:
        t = md.topics.get(topic)
        p = t.partitions.get(index) if t is not None and t.error is None else None
        # A partition with no live leader is reported with LEADER_NOT_AVAILABLE and leader -1.
        return (
            p is not None
            and (p.error is None or p.error.code() == KafkaError.LEADER_NOT_AVAILABLE)
            and condition(p)
        )

    return metadata_until(cluster, holds).topics[topic].partitions[index]


def create_topic(
    cluster: Cluster,
    name: str,
    partitions: int,
    rf: int,
    configs: dict[str, str] | None = None,
) -> None:
    metadata_until(cluster, lambda m: len(m.brokers) == cluster.size)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    while True:
        try:
            admin.create_topics([NewTopic(name, partitions, rf, config=configs or {})])[
                name
            ].result(30)
            break
        except KafkaException as e:
            # on a busy machine a broker can miss a heartbeat and be fenced for a moment: the
            # controller then counts fewer live brokers than the metadata just showed
            if e.args[0].code() != KafkaError.INVALID_REPLICATION_FACTOR:
                raise
    for i in range(partitions):
        partition_until(cluster, name, i, lambda p: len(p.isrs) == rf and p.leader >= 0)


def read_all(
    cluster: Cluster, topic: str, partitions: int, expected: int
) -> dict[int, list[bytes]]:
    """Every record of ``topic`` (``expected`` in all), by partition, in offset order."""
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": "replication-reader",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.assign([TopicPartition(topic, i, 0) for i in range(partitions)])
        out: dict[int, list[bytes]] = {i: [] for i in range(partitions)}
        n = 0
        while n < expected:
            msg = consumer.poll(1.0)
            if msg is None or msg.error() is not None:
                continue
            out[msg.partition()].append(msg.value())
            n += 1
        return out
    finally:
        consumer.close()


class BackgroundProducer:
    """A confluent-kafka producer (acks=all, idempotent) writing numbered records from a
    thread until stopped; ``acked`` lists (partition, value) in acknowledgement order."""

    def __init__(self, cluster: Cluster, topic: str, partitions: int) -> None:
        self.topic = topic
        self.partitions = partitions
        self.producer = Producer(
            {
                "bootstrap.servers": cluster.bootstrap_servers,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 2,
                "message.timeout.ms": 120000,
            }
        )
        self.acked: list[tuple[int, bytes]] = []
        self.offsets: dict[bytes, int] = {}
        self.errors: list[str] = []
        self.sent = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> BackgroundProducer:
        self._thread.start()
        return self

    def _delivered(self, err: object, msg: object) -> None:
        with self._lock:
            if err is not None:
                self.errors.append(str(err))
            else:
                self.acked.append((msg.partition(), msg.value()))  # type: ignore[attr-defined]
                self.offsets[msg.value()] = msg.offset()  # type: ignore[attr-defined]

    def _run(self) -> None:
        while not self._stop.is_set():
            value = b"%08d" % self.sent
            try:
                self.producer.produce(
                    self.topic,
                    value,
                    partition=self.sent % self.partitions,
                    on_delivery=self._delivered,
                )
            except BufferError:
                self.producer.poll(0.1)
                continue
            self.sent += 1
            self.producer.poll(0)
            if self.sent % 50 == 0:
                self.producer.poll(0.01)

    def wait_for_acks(self, n: int) -> None:
        while True:
            with self._lock:
                if len(self.acked) >= n:
                    return
            self._stop.wait(0.01)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        remaining = self.producer.flush(120)
        assert remaining == 0, f"{remaining} records never delivered"
