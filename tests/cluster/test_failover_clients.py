"""kafka-python and aiokafka producers (idempotent, acks=all) keep writing while the partition
leader is SIGKILLed twice: afterwards every acknowledged record is present exactly once and in
order, and nothing was refused. (confluent-kafka does the same in ``test_replication``.)
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

import pytest
from replication_helpers import create_topic, partition_until, read_all

from gregor.testing.cluster import ClusterProcess
from gregor.testing.etcd import etcd_binary

pytestmark = [
    pytest.mark.process,
    pytest.mark.slow,
    pytest.mark.interop,
    pytest.mark.skipif(etcd_binary() is None, reason="no etcd binary (scripts/system-deps.sh)"),
]

RECORDS = 1500
IN_FLIGHT = 50


class Outcome:
    def __init__(self) -> None:
        self.acked: list[bytes] = []
        self.errors: list[str] = []
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)

    def ok(self, value: bytes) -> None:
        with self.lock:
            self.acked.append(value)
            self.changed.notify_all()

    def failed(self, error: object) -> None:
        with self.lock:
            self.errors.append(repr(error))
            self.changed.notify_all()

    def settled(self) -> int:
        return len(self.acked) + len(self.errors)

    def wait(self, condition: Callable[[], bool]) -> None:
        with self.lock:
            self.changed.wait_for(condition)


def with_kafka_python(bootstrap: str, topic: str, out: Outcome) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        enable_idempotence=True,
        linger_ms=2,
        request_timeout_ms=10000,
        delivery_timeout_ms=120000,
        retry_backoff_ms=100,
        metadata_max_age_ms=2000,
    )
    for i in range(RECORDS):
        out.wait(lambda i=i: i - out.settled() < IN_FLIGHT)
        value = b"%08d" % i
        future = producer.send(topic, value, partition=0)
        future.add_callback(lambda _md, v=value: out.ok(v))
        future.add_errback(out.failed)
    producer.flush()
    producer.close()


def with_aiokafka(bootstrap: str, topic: str, out: Outcome) -> None:
    from aiokafka import AIOKafkaProducer

    async def run() -> None:
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            acks="all",
            enable_idempotence=True,
            linger_ms=2,
            request_timeout_ms=10000,
            retry_backoff_ms=100,
            metadata_max_age_ms=2000,
        )
        await producer.start()
        try:
            pending: set[asyncio.Future[object]] = set()
            for i in range(RECORDS):
                while len(pending) >= IN_FLIGHT:
                    _, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                value = b"%08d" % i
                fut = await producer.send(topic, value, partition=0)
                fut.add_done_callback(
                    lambda f, v=value: out.failed(f.exception()) if f.exception() else out.ok(v)
                )
                pending.add(fut)
            await producer.flush()
            if pending:
                await asyncio.wait(pending)
        finally:
            await producer.stop()

    asyncio.run(run())


@pytest.mark.parametrize(
    "client", [with_kafka_python, with_aiokafka], ids=["kafka-python", "aiokafka"]
)
def test_idempotent_acks_all_survives_leader_kills(
    cluster: ClusterProcess, client: Callable[[str, str, Outcome], None]
) -> None:
    create_topic(cluster, "failover", 1, 3, {"min.insync.replicas": "2"})
    out = Outcome()
    thread = threading.Thread(
        target=client, args=(cluster.bootstrap_servers, "failover", out), daemon=True
    )
    thread.start()
    for kill_at in (RECORDS // 3, 2 * RECORDS // 3):
        out.wait(lambda n=kill_at: out.settled() >= n)
        leader = partition_until(cluster, "failover", 0, lambda p: len(p.isrs) == 3).leader
        cluster.kill(leader)
        partition_until(cluster, "failover", 0, lambda p, gone=leader: p.leader not in (gone, -1))
        cluster.restart(leader)
    thread.join()
    assert out.errors == []
    assert len(out.acked) == RECORDS
    assert read_all(cluster, "failover", 1, RECORDS)[0] == [b"%08d" % i for i in range(RECORDS)]
