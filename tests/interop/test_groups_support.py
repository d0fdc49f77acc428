"""Group members in child processes, for the consumer group interop tests (no tests here).

A test starts members with ``Member(...)``: each runs ``python test_groups_support.py`` with a
real client (confluent-kafka, kafka-python or aiokafka) subscribed to a topic, and prints a JSON
line with its full assignment whenever it changes. The parent reads those lines on a thread and
can close a member cleanly (a line on its stdin) or kill it with SIGKILL, which is why members
are processes and not threads.

Client flavours (``kind``):
  ck-eager        confluent-kafka, classic protocol, range assignor (eager)
  ck-cooperative  confluent-kafka, classic protocol, cooperative-sticky (incremental)
  ck-consumer     confluent-kafka, group.protocol=consumer (KIP-848, server-side assignor)
  kafka-python    kafka-python, classic protocol, its default (range, round robin) assignors
  aiokafka        aiokafka, classic protocol, its default (round robin) assignor
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable

KINDS = ("ck-eager", "ck-cooperative", "ck-consumer", "kafka-python", "aiokafka")
SESSION_TIMEOUT_MS = 3000
HEARTBEAT_MS = 300

#: Broker settings for group tests: short sessions so expiry tests stay quick (their bounds
#: lowered with them: Kafka, and Gregor, refuse to start with a value outside its bounds).
BROKER_CONFIG = {
    "group.min.session.timeout.ms": 1000,
    "group.consumer.session.timeout.ms": SESSION_TIMEOUT_MS,
    "group.consumer.min.session.timeout.ms": 1000,
    "group.consumer.heartbeat.interval.ms": HEARTBEAT_MS,
    "group.consumer.min.heartbeat.interval.ms": 100,
}


# --- parent side -----------------------------------------------------------------------------


def _stderr_sink() -> object:
    """Members' client logs: discarded, or with GROUP_MEMBER_DEBUG=1 kept (DEBUG level) in
    a temporary file per member for diagnosing a failure."""
    if os.environ.get("GROUP_MEMBER_DEBUG"):
        import tempfile

        return tempfile.NamedTemporaryFile("w", prefix="group-member-", suffix=".log", delete=False)
    return subprocess.DEVNULL


class Member:
    """A consumer group member in a child process."""

    def __init__(
        self,
        kind: str,
        bootstrap: str,
        group: str,
        topic: str,
        instance_id: str | None = None,
        session_timeout_ms: int = SESSION_TIMEOUT_MS,
    ) -> None:
        args = [
            sys.executable,
            os.path.abspath(__file__),
            "--kind",
            kind,
            "--bootstrap",
            bootstrap,
            "--group",
            group,
            "--topic",
            topic,
            "--session-timeout-ms",
            str(session_timeout_ms),
        ]
        if instance_id is not None:
            args += ["--instance-id", instance_id]
        self.kind = kind
        self.proc = subprocess.Popen(
            args,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=_stderr_sink(),
            text=True,
        )
        self.lock = threading.Lock()
        self.assignment: frozenset[int] = frozenset()
        self.changes = 0  # assignment changes seen, the first one included
        self.closed = False
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            msg = json.loads(line)
            with self.lock:
                if "assignment" in msg:
                    self.assignment = frozenset(msg["assignment"])
                    self.changes += 1
                if msg.get("closed"):
                    self.closed = True

    def state(self) -> tuple[frozenset[int], int]:
        with self.lock:
            return self.assignment, self.changes

    def close(self) -> None:
        """Leave cleanly: the client's own close(). Waits for the member to exit however long
        that takes on a busy machine (the test's own timeout is the backstop)."""
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.write("close\n")
            self.proc.stdin.flush()
            self.proc.wait()
        self.reader.join()
        with self.lock:
            self.assignment = frozenset()

    def kill(self) -> None:
        """SIGKILL: no LeaveGroup, the coordinator only notices the silence."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        with self.lock:
            self.assignment = frozenset()

    def __enter__(self) -> Member:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def wait_for(cond: Callable[[], bool], what: str) -> float:
    """Poll ``cond`` until true; returns the seconds it took. There is no deadline: how long a
    rebalance takes depends on the machine, and the test's timeout (pytest-timeout) ends a wait
    that never comes true, with this call and its ``what`` in the traceback."""
    start = time.monotonic()
    while not cond():
        time.sleep(0.05)
    return time.monotonic() - start


def splits_evenly(members: list[Member], partitions: int) -> bool:
    """Disjoint assignments, together covering every partition, none empty, sizes at most one
    apart: the settled state every assignor here reaches. (Incremental protocols pass through
    covering but uneven states, e.g. 1/2/3 of six while a new member receives partitions as the
    others release them one by one, so covering alone is not "settled".)"""
    sets = [m.state()[0] for m in members]
    union: set[int] = set()
    for s in sets:
        if not s or union & s:
            return False
        union |= s
    sizes = [len(s) for s in sets]
    return union == set(range(partitions)) and max(sizes) - min(sizes) <= 1


def consume_and_commit(
    kind: str, bootstrap: str, group: str, topic: str, n: int
) -> list[tuple[int, int, bytes]]:
    """Join ``group`` as its only member, take exactly ``n`` records, commit what was taken
    (synchronously), leave. Returns (partition, offset, value) in delivery order. No deadline:
    a consumer that never gets ``n`` records ends in the test's timeout."""
    if kind.startswith("ck-"):
        return _ck_consume_and_commit(kind, bootstrap, group, topic, n)
    if kind == "kafka-python":
        return _kp_consume_and_commit(bootstrap, group, topic, n)
    return asyncio.run(_aio_consume_and_commit(bootstrap, group, topic, n))


def _ck_config(kind: str, bootstrap: str, group: str) -> dict[str, object]:
    conf: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    }
    if kind == "ck-consumer":
        conf["group.protocol"] = "consumer"
    else:
        conf["session.timeout.ms"] = SESSION_TIMEOUT_MS
        conf["heartbeat.interval.ms"] = HEARTBEAT_MS
        conf["partition.assignment.strategy"] = (
            "cooperative-sticky" if kind == "ck-cooperative" else "range"
        )
    return conf


def _ck_consume_and_commit(
    kind: str, bootstrap: str, group: str, topic: str, n: int
) -> list[tuple[int, int, bytes]]:
    from confluent_kafka import Consumer

    c = Consumer(_ck_config(kind, bootstrap, group))
    c.subscribe([topic])
    out: list[tuple[int, int, bytes]] = []
    while len(out) < n:
        msg = c.poll(0.1)
        if msg is None:
            continue
        assert msg.error() is None, msg.error()
        out.append((msg.partition(), msg.offset(), msg.value()))
    c.commit(asynchronous=False)
    c.close()
    return out


def _kp_consume_and_commit(
    bootstrap: str, group: str, topic: str, n: int
) -> list[tuple[int, int, bytes]]:
    from kafka import KafkaConsumer

    c = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=SESSION_TIMEOUT_MS,
        heartbeat_interval_ms=HEARTBEAT_MS,
    )
    c.subscribe([topic])
    out: list[tuple[int, int, bytes]] = []
    while len(out) < n:
        for records in c.poll(timeout_ms=1000, max_records=n - len(out)).values():
            out.extend((r.partition, r.offset, r.value) for r in records)
    c.commit()
    c.close()
    return out


async def _aio_consume_and_commit(
    bootstrap: str, group: str, topic: str, n: int
) -> list[tuple[int, int, bytes]]:
    from aiokafka import AIOKafkaConsumer

    c = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=SESSION_TIMEOUT_MS,
        heartbeat_interval_ms=HEARTBEAT_MS,
    )
    await c.start()
    out: list[tuple[int, int, bytes]] = []
    try:
        while len(out) < n:
            batch = await c.getmany(timeout_ms=200, max_records=n - len(out))
            for records in batch.values():
                out.extend((r.partition, r.offset, r.value) for r in records)
        await c.commit()
    finally:
        await c.stop()
    return out


# --- child side ------------------------------------------------------------------------------


def _emit(**msg: object) -> None:
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def _stdin_closed_flag() -> threading.Event:
    ev = threading.Event()

    def watch() -> None:
        for line in sys.stdin:
            if line.strip() == "close":
                break
        ev.set()

    threading.Thread(target=watch, daemon=True).start()
    return ev


def _run_confluent(a: argparse.Namespace, stop: threading.Event) -> None:
    from confluent_kafka import Consumer

    conf: dict[str, object] = {
        "bootstrap.servers": a.bootstrap,
        "group.id": a.group,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "topic.metadata.refresh.interval.ms": 1000,
    }
    if a.kind == "ck-consumer":
        conf["group.protocol"] = "consumer"
    else:
        conf["session.timeout.ms"] = a.session_timeout_ms
        conf["heartbeat.interval.ms"] = HEARTBEAT_MS
        conf["partition.assignment.strategy"] = (
            "cooperative-sticky" if a.kind == "ck-cooperative" else "range"
        )
    if a.instance_id:
        conf["group.instance.id"] = a.instance_id
    c = Consumer(conf)
    c.subscribe([a.topic])
    last = None
    while not stop.is_set():
        c.poll(0.05)
        now = sorted(tp.partition for tp in c.assignment())
        if now != last:
            _emit(assignment=now)
            last = now
    c.close()


def _run_kafka_python(a: argparse.Namespace, stop: threading.Event) -> None:
    from kafka import KafkaConsumer
    from kafka.errors import KafkaConnectionError

    c = KafkaConsumer(
        bootstrap_servers=a.bootstrap,
        group_id=a.group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=a.session_timeout_ms,
        heartbeat_interval_ms=HEARTBEAT_MS,
        group_instance_id=a.instance_id,
        metadata_max_age_ms=1000,
    )
    c.subscribe([a.topic])
    last = None
    while not stop.is_set():
        # kafka-python 3.0.12 can lose a SyncGroup completion when poll() times out while the
        # request is in flight (seen as a member that never heartbeats again); a poll
        # timeout longer than a rebalance round trip keeps clear of that client race.
        try:
            c.poll(timeout_ms=1000)
        except KafkaConnectionError:
            # kafka-python 3.0.12 raises from poll() when a connection drops during its
            # ApiVersions handshake (a broker going down); an application polls again.
            continue
        now = sorted(tp.partition for tp in c.assignment())
        if now != last:
            _emit(assignment=now)
            last = now
    c.close()


def _run_aiokafka(a: argparse.Namespace, stop: threading.Event) -> None:
    from aiokafka import AIOKafkaConsumer

    async def main() -> None:
        c = AIOKafkaConsumer(
            a.topic,
            bootstrap_servers=a.bootstrap,
            group_id=a.group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=a.session_timeout_ms,
            heartbeat_interval_ms=HEARTBEAT_MS,
            group_instance_id=a.instance_id,
            metadata_max_age_ms=1000,
        )
        await c.start()
        last = None
        while not stop.is_set():
            await c.getmany(timeout_ms=50)
            now = sorted(tp.partition for tp in c.assignment())
            if now != last:
                _emit(assignment=now)
                last = now
        await c.stop()

    asyncio.run(main())


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--kind", choices=KINDS, required=True)
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--group", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--instance-id")
    p.add_argument("--session-timeout-ms", type=int, default=SESSION_TIMEOUT_MS)
    a = p.parse_args()
    if os.environ.get("GROUP_MEMBER_DEBUG"):
        import logging

        logging.basicConfig(
            level=logging.DEBUG, format="%(asctime)s %(threadName)s %(name)s %(message)s"
        )
    stop = _stdin_closed_flag()
    if a.kind.startswith("ck-"):
        _run_confluent(a, stop)
    elif a.kind == "kafka-python":
        _run_kafka_python(a, stop)
    else:
        _run_aiokafka(a, stop)
    _emit(closed=True)


if __name__ == "__main__":
    main()
