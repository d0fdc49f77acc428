"""AlterReplicaLogDirs against a real broker process with two log directories, driven by
kafka-python's admin client (``alter_replica_log_dirs``, ``describe_log_dirs``): a partition
moves to the other directory while a confluent-kafka producer keeps writing to it with
acks=all; afterwards every acknowledged record reads back once, in order, the partition is
listed in its new directory only, its old directory is gone, and all of it survives a restart.
A path that is not a log directory is LOG_DIR_NOT_FOUND, a partition the broker does not host
REPLICA_NOT_AVAILABLE.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient, TopicPartitionReplica
from kafka.errors import LogDirNotFoundError, NoError, ReplicaNotAvailableError

from gregor.testing import BrokerProcess

pytestmark = [pytest.mark.timeout(300)]


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    dirs = f"{tmp_path}/first,{tmp_path}/second"
    with BrokerProcess(
        config={"log.dirs": dirs, "log.segment.bytes": 256 * 1024}, data_dir=tmp_path / "broker"
    ) as b:
        yield b


def where(admin: KafkaAdminClient, topic: str) -> dict[str, list[tuple[int, bool]]]:
    """log dir -> [(partition, is_future_key)] of ``topic``."""
    (entry,) = admin.describe_log_dirs()
    out: dict[str, list[tuple[int, bool]]] = {}
    for d in entry["log_dirs"]:
        for t in d["topics"]:
            if t["name"] == topic:
                out[d["log_dir"]] = sorted(
                    (p["partition_index"], p["is_future_key"]) for p in t["partitions"]
                )
    return out


def read(bootstrap: str, topic: str, count: int) -> list[bytes]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    while len(got) < count:
        m = consumer.poll(1.0)
        if m is not None and m.error() is None:
            got.append(m.value())
    consumer.close()
    return got


def test_a_partition_moves_between_log_dirs_while_written(
    broker: BrokerProcess, tmp_path: Path
) -> None:
    first, second = str(tmp_path / "first"), str(tmp_path / "second")
    creator = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    creator.create_topics([NewTopic("moving", 1, 1, config={"file.delete.delay.ms": "0"})])[
        "moving"
    ].result(30)
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "acks": "all",
            "linger.ms": 1,
            "batch.size": 32768,
        }
    )
    acked: list[bytes] = []
    errors: list[Any] = []
    stop = threading.Event()

    def write() -> None:
        i = 0
        while not stop.is_set():
            try:
                producer.produce(
                    "moving",
                    b"%06d" % i + b"x" * 200,
                    partition=0,
                    on_delivery=lambda err, msg: (
                        errors.append(err) if err else acked.append(msg.value())
                    ),
                )
                i += 1
            except BufferError:
                pass
            producer.poll(0)
        producer.flush(60)

    writer = threading.Thread(target=write)
    writer.start()
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    here = TopicPartitionReplica("moving", 0, 1)
    try:
        while len(acked) < 3000:  # several segments before the move
            stop.wait(0.01)
        assert where(admin, "moving") == {first: [(0, False)]}
        assert admin.alter_replica_log_dirs({here: second}) == {here: NoError}
        while where(admin, "moving").get(second) != [
            (0, False)
        ]:  # the future replica, then the log
            pass
        moved_at = len(acked)
        while len(acked) < moved_at + 1000:  # and writes go on to the moved log
            stop.wait(0.01)
        stop.set()
        writer.join()
        assert errors == []
        assert where(admin, "moving") == {second: [(0, False)]}
        assert admin.alter_replica_log_dirs({here: "/not/a/log/dir"}) == {here: LogDirNotFoundError}
        missing = TopicPartitionReplica("missing", 0, 1)
        assert admin.alter_replica_log_dirs({missing: first}) == {missing: ReplicaNotAvailableError}
    finally:
        admin.close()
    assert read(broker.bootstrap_servers, "moving", len(acked)) == acked
    assert not (Path(first) / "moving-0").exists() and (Path(second) / "moving-0").is_dir()
    assert f"moved log moving-0 to {second}" in broker.read_log()
    broker.stop()
    broker.start()
    assert read(broker.bootstrap_servers, "moving", len(acked)) == acked
    assert not any(p.name.startswith("moving-0") for p in Path(first).iterdir())
