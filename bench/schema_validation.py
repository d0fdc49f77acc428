"""Produce throughput with schema validation at level id and at level decode, as ratios to
validation off (issue 38).

One Gregor broker (``gregor serve``, data on disk) serves its own schema registry
(``schema.registry.listener``), so the broker validates against the registry beside it. An Avro
schema of about 1 KB records (an id and a padded text field) is registered through
confluent-kafka's SchemaRegistryClient and a set of distinct values is serialized with its
AvroSerializer before any clock starts. Each round produces the same N pre-serialized records
with confluent-kafka's producer (acks=1, linger.ms=5, one partition) to three topics: one with
``confluent.value.schema.validation=true`` (level ``id``, Confluent Server's check), one with
it and ``gregor.value.schema.validation.level=decode`` (every payload decoded against the
schema with fastavro), and one without validation; the three take turns (the order rotates
each round), and the table shows the median msgs/s of each and its ratio to off (goals: id at
least 0.9, decode at least 0.5). Every record of a validated topic is checked by the leader;
after the first batch its schema id (and parsed schema) is answered from the broker's cache.
Beside the rates, the broker process's CPU time per record (user + system, from /proc) of each
run: on a shared machine the rates swing with other processes' load, the broker's own work per
record much less.

Run: .venv/bin/python bench/schema_validation.py [--scale 1.0] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
import urllib.request
import uuid

from gregor.launch.ports import free_port
from gregor.testing import BrokerProcess

RECORDS = 60_000  # per run at --scale 1
DISTINCT = 2_000  # distinct pre-serialized values, cycled
SCHEMA = json.dumps(
    {
        "type": "record",
        "name": "Click",
        "namespace": "bench.gregor",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "user", "type": "string"},
            {"name": "payload", "type": "string"},
        ],
    }
)


def wait_for_registry(url: str) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"{url}/subjects", timeout=5) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"the schema registry at {url} did not come up")
        time.sleep(0.1)


def create_topic(bootstrap: str, name: str, configs: dict[str, str]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 1, 1, config=configs)])[name].result(30)


def values(url: str, topic: str) -> list[bytes]:
    """``DISTINCT`` serialized records of about 1 KB, registered under ``<topic>-value``."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    ser = AvroSerializer(SchemaRegistryClient({"url": url}), SCHEMA)
    ctx = SerializationContext(topic, MessageField.VALUE)
    out = [
        ser({"id": i, "user": f"user-{i % 97}", "payload": f"{i:08d}" * 124}, ctx)
        for i in range(DISTINCT)
    ]
    assert all(1000 <= len(v) <= 1100 for v in out), len(out[0])
    return out


def produce(bootstrap: str, topic: str, records: list[bytes], n: int) -> float:
    """msgs/s of ``n`` records (cycling ``records``) from the first produce() to flush()."""
    from confluent_kafka import Producer

    errors: list[object] = []
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "1",
            "linger.ms": 5,
            "queue.buffering.max.messages": 500_000,
            "queue.buffering.max.kbytes": 512 * 1024,
            "delivery.report.only.error": True,
            "on_delivery": lambda err, msg: errors.append(err),
        }
    )
    p.produce(topic, records[0])  # connect, metadata, the first lookup: before the clock
    p.flush(30)
    produce_ = p.produce
    k = len(records)
    start = time.perf_counter()
    for i in range(n):
        try:
            produce_(topic, records[i % k])
        except BufferError:
            p.poll(0.001)
            produce_(topic, records[i % k])
    left = p.flush(120)
    elapsed = time.perf_counter() - start
    if left or errors:
        raise RuntimeError(f"produce failed: {left} unflushed, errors {errors[:3]}")
    return n / elapsed


def cpu_seconds(pid: int) -> float:
    """The process's user + system CPU time so far (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    n = max(1000, int(RECORDS * args.scale))
    url = f"http://127.0.0.1:{free_port()}"
    broker = BrokerProcess({"schema.registry.listener": url}).start()
    try:
        bs = broker.bootstrap_servers
        wait_for_registry(url)
        tag = uuid.uuid4().hex[:8]
        configs = {
            "off": {},
            "id": {"confluent.value.schema.validation": "true"},
            "decode": {
                "confluent.value.schema.validation": "true",
                "gregor.value.schema.validation.level": "decode",
            },
        }
        topics = {label: f"clicks-{label}-{tag}" for label in configs}
        records = values(url, topics["id"])
        for label, topic in topics.items():
            create_topic(bs, topic, configs[label])
        if topics["decode"] != topics["id"]:  # the same schema under the other topics' subjects
            values(url, topics["decode"])
        rates: dict[str, list[float]] = {label: [] for label in configs}
        cpu: dict[str, list[float]] = {label: [] for label in configs}
        labels = list(configs)
        assert broker.proc is not None
        pid = broker.proc.pid
        for r in range(args.repeats):
            turn = labels[r % 3 :] + labels[: r % 3]
            for label in turn:
                before = cpu_seconds(pid)
                rates[label].append(produce(bs, topics[label], records, n))
                cpu[label].append((cpu_seconds(pid) - before) / n * 1e6)
                print(
                    f"  round {r + 1} {label:>6}: {rates[label][-1]:>10,.0f} msgs/s, "
                    f"broker {cpu[label][-1]:.1f} us CPU a record",
                    flush=True,
                )
        medians = {label: statistics.median(v) for label, v in rates.items()}
        cpu_medians = {label: statistics.median(v) for label, v in cpu.items()}
        print()
        print(f"1 KB Avro records, {n:,} per run, median of {args.repeats} rounds (turns)")
        print(
            f"{'validation':<12}{'msgs/s':>12}{'MB/s':>10}{'/off':>8}{'goal':>8}"
            f"{'broker CPU us/rec':>20}{'off/this':>10}"
        )
        goals = {"off": "", "id": ">= 0.9", "decode": ">= 0.5"}
        for label, m in medians.items():
            c = cpu_medians[label]
            print(
                f"{label:<12}{m:>12,.0f}{m * len(records[0]) / 1e6:>10.1f}"
                f"{m / medians['off']:>8.3f}{goals[label]:>8}"
                f"{c:>20.2f}{cpu_medians['off'] / c:>10.3f}"
            )
    finally:
        broker.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
