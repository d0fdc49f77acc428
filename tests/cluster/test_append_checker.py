"""A checker in the style of Jepsen's append workload: an idempotent acks=all producer writes
numbered records to 3 replicated partitions while faults hit the cluster on a seeded schedule
(SIGKILL and restart, SIGSTOP and SIGCONT, SIGTERM and restart, of a partition leader or a
follower); then every partition is read to its end and compared with every acknowledged write.

It reports (and asserts none of): acknowledged records lost, records duplicated, records that
were never sent, records out of the order they were sent in, and acknowledged offsets that
hold another record. The report is printed (``pytest -s`` shows it).
"""

from __future__ import annotations

import random

import pytest
from confluent_kafka import Consumer, TopicPartition
from replication_helpers import BackgroundProducer, create_topic, partition_until

from gregor.testing.cluster import ClusterProcess
from gregor.testing.etcd import etcd_binary

pytestmark = [
    pytest.mark.process,
    pytest.mark.slow,
    pytest.mark.skipif(etcd_binary() is None, reason="no etcd binary (scripts/system-deps.sh)"),
]

PARTITIONS = 3
FAULTS = 6
ACKS_BETWEEN_FAULTS = 400
SEED = 20261125


def read_to_end(cluster: ClusterProcess, topic: str) -> dict[int, list[tuple[int, bytes]]]:
    """(offset, value) of every record of every partition, up to the high watermarks."""
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": "checker",
            "enable.auto.commit": False,
        }
    )
    try:
        ends = {
            i: consumer.get_watermark_offsets(TopicPartition(topic, i), timeout=30)[1]
            for i in range(PARTITIONS)
        }
        consumer.assign([TopicPartition(topic, i, 0) for i in range(PARTITIONS)])
        out: dict[int, list[tuple[int, bytes]]] = {i: [] for i in range(PARTITIONS)}
        done = {i for i, end in ends.items() if end == 0}
        while len(done) < PARTITIONS:
            msg = consumer.poll(1.0)
            if msg is None or msg.error() is not None:
                continue
            out[msg.partition()].append((msg.offset(), msg.value()))
            if msg.offset() + 1 >= ends[msg.partition()]:
                done.add(msg.partition())
        return out
    finally:
        consumer.close()


def inject(cluster: ClusterProcess, rng: random.Random, topic: str, kind: str) -> str:
    """One fault on a partition's leader or a follower; waits until the cluster is whole again."""
    partition = rng.randrange(PARTITIONS)
    p = partition_until(cluster, topic, partition, lambda p: len(p.isrs) == 3 and p.leader >= 0)
    target = (
        p.leader if rng.random() < 0.7 else rng.choice([r for r in p.replicas if r != p.leader])
    )
    if kind == "kill":
        cluster.kill(target)
        partition_until(cluster, topic, partition, lambda q: target not in q.isrs and q.leader >= 0)
        cluster.restart(target)
    elif kind == "stop":
        cluster.stop(target)  # SIGTERM: controlled shutdown
        cluster.restart(target)
    else:
        cluster.pause(target)  # SIGSTOP until it drops out of the ISR, then SIGCONT
        partition_until(cluster, topic, partition, lambda q: target not in q.isrs and q.leader >= 0)
        cluster.resume(target)
    role = "leader" if target == p.leader else "follower"
    return f"{kind} {role} {target} (of {topic}-{partition})"


def test_no_acknowledged_append_is_lost_under_faults(cluster: ClusterProcess) -> None:
    create_topic(cluster, "appends", PARTITIONS, 3, {"min.insync.replicas": "2"})
    rng = random.Random(SEED)
    producer = BackgroundProducer(cluster, "appends", PARTITIONS).start()
    faults = []
    for n in range(FAULTS):
        producer.wait_for_acks((n + 1) * ACKS_BETWEEN_FAULTS)
        faults.append(inject(cluster, rng, "appends", ("kill", "pause", "stop")[n % 3]))
    producer.wait_for_acks((FAULTS + 1) * ACKS_BETWEEN_FAULTS)
    producer.stop()
    for i in range(PARTITIONS):
        partition_until(cluster, "appends", i, lambda p: len(p.isrs) == 3 and p.leader >= 0)
    found = read_to_end(cluster, "appends")

    sent = {b"%08d" % n: n % PARTITIONS for n in range(producer.sent)}
    acked = {value: partition for partition, value in producer.acked}
    seen: dict[bytes, list[tuple[int, int]]] = {}
    for partition, records in found.items():
        for offset, value in records:
            seen.setdefault(value, []).append((partition, offset))
    lost = sorted(v for v in acked if v not in seen)
    duplicated = sorted(v for v, places in seen.items() if len(places) > 1)
    never_sent = sorted(v for v in seen if v not in sent)
    misplaced = sorted(v for v, places in seen.items() if v in sent and places[0][0] != sent[v])
    out_of_order = [
        partition
        for partition, records in found.items()
        if [v for _, v in records] != sorted(v for _, v in records)
    ]
    wrong_offsets = sorted(
        v for v, offset in producer.offsets.items() if v in seen and seen[v][0][1] != offset
    )
    print(
        f"\nappend checker (seed {SEED}): {producer.sent} sent, {len(acked)} acknowledged, "
        f"{sum(len(r) for r in found.values())} read back from {PARTITIONS} partitions after "
        f"{len(faults)} faults:\n  " + "\n  ".join(faults) + "\n"
        f"  lost {len(lost)}, duplicated {len(duplicated)}, never sent {len(never_sent)}, "
        f"wrong partition {len(misplaced)}, partitions out of order {len(out_of_order)}, "
        f"acknowledged offsets holding another record {len(wrong_offsets)}, "
        f"producer errors {len(producer.errors)}"
    )
    assert producer.errors == []
    assert (lost, duplicated, never_sent, misplaced, out_of_order, wrong_offsets) == (
        [],
        [],
        [],
        [],
        [],
        [],
    )
    assert len(acked) == producer.sent
