"""Two brokers cannot share a data directory (issue 42): the second start is refused in one
line, the first broker's log is untouched, and ``meta.properties`` keeps the directory's node.

With real broker processes (``gregor serve``, as a user starts them) and in this process.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gregor.client import Consumer, Producer, TopicPartition
from gregor.storage.checkpoint import CLEAN_SHUTDOWN_FILE
from gregor.storage.log_dirs import LogDirectoryError
from gregor.testing import BrokerProcess, InProcessBroker

pytestmark = pytest.mark.timeout(180)


def serve(*overrides: str) -> subprocess.CompletedProcess[str]:
    """``gregor serve`` that is expected to stop at start (a broker that starts would run on)."""
    args = [sys.executable, "-m", "gregor", "serve", "-o", "listeners=PLAINTEXT://127.0.0.1:0"]
    for o in overrides:
        args += ["-o", o]
    return subprocess.run(args, capture_output=True, text=True, timeout=120, env=dict(os.environ))


def error_lines(r: subprocess.CompletedProcess[str]) -> list[str]:
    return [
        ln for ln in r.stderr.splitlines() if not ln.startswith("ts=")
    ]  # not the broker's log lines


def read_all(bootstrap: str, topic: str, partition: int = 0) -> list[tuple[int, bytes | None]]:
    with Consumer({"bootstrap.servers": bootstrap}) as c:
        tp = TopicPartition(topic, partition)
        end = c.end_offsets([tp])[tp]
        c.assign([tp])
        c.seek(tp, 0)
        got: list[tuple[int, bytes | None]] = []
        while len(got) < end:
            got += [(r.offset, r.value) for r in c.poll(500)]
        return got


def test_a_second_broker_process_on_the_same_directory_is_refused(tmp_path: Path) -> None:
    with BrokerProcess(data_dir=tmp_path) as first:
        logs = tmp_path / "logs"
        with Producer({"bootstrap.servers": first.bootstrap_servers}) as p:
            for v in (b"a", b"b", b"c"):
                p.send("shared", v, partition=0).result(30)
        for node_id in ("1", "2"):  # the same node.id or another: the directory is taken either way
            r = serve(f"log.dirs={logs}", f"node.id={node_id}")
            assert r.returncode == 1, r.stderr
            assert error_lines(r) == [
                f"Error: failed to acquire lock on file .lock in {logs}: a broker in another "
                "process or thread is using this directory"
            ]
            assert "recover" not in r.stderr and "loaded" not in r.stderr  # it never opened a log
        # the refused starts wrote nothing: no clean-shutdown marker while the first broker runs,
        # and its log holds each record once
        assert not (logs / CLEAN_SHUTDOWN_FILE).exists()
        with Producer({"bootstrap.servers": first.bootstrap_servers}) as p:
            p.send("shared", b"d", partition=0).result(30)
        assert read_all(first.bootstrap_servers, "shared") == [
            (0, b"a"),
            (1, b"b"),
            (2, b"c"),
            (3, b"d"),
        ]
        meta = (logs / "meta.properties").read_text()
        assert "node.id=1\n" in meta and "version=1\n" in meta
    # once the first broker stopped, the directory is free again (for its own node id)
    with BrokerProcess(data_dir=tmp_path) as again:
        assert read_all(again.bootstrap_servers, "shared") == [
            (0, b"a"),
            (1, b"b"),
            (2, b"c"),
            (3, b"d"),
        ]


def test_a_directory_of_another_node_is_refused(tmp_path: Path) -> None:
    with BrokerProcess(data_dir=tmp_path, config={"node.id": 1}):
        pass
    r = serve(f"log.dirs={tmp_path / 'logs'}", "node.id=2")
    assert r.returncode == 1
    assert error_lines(r) == [
        f"Error: {tmp_path / 'logs' / 'meta.properties'} says node.id=1, but this broker is node.id=2: the directory "
        "belongs to another broker (if you moved the data, set node.id=1; a new broker needs empty log directories)"
    ]


def test_a_data_directory_from_before_meta_properties_starts(tmp_path: Path) -> None:
    with (
        BrokerProcess(data_dir=tmp_path) as b,
        Producer({"bootstrap.servers": b.bootstrap_servers}) as p,
    ):
        p.send("old", b"kept", partition=0).result(30)
    # as a broker of an earlier version left it
    (tmp_path / "logs" / "meta.properties").unlink()
    (tmp_path / "logs" / ".lock").unlink()
    with BrokerProcess(data_dir=tmp_path) as b:
        assert read_all(b.bootstrap_servers, "old") == [(0, b"kept")]
        meta = (tmp_path / "logs" / "meta.properties").read_text()
        cluster = next(ln for ln in meta.splitlines() if ln.startswith("cluster.id="))
        assert cluster.split("=", 1)[1] in (tmp_path / "logs" / "cluster-metadata.json").read_text()


def test_two_in_process_brokers_on_one_directory(tmp_path: Path) -> None:
    async def main() -> None:
        async with InProcessBroker(data_dir=tmp_path):
            second = InProcessBroker(data_dir=tmp_path)
            with pytest.raises(LogDirectoryError, match="failed to acquire lock on file .lock"):
                await second.start_async()
        # stopped: the directory is free, and a restart in this process takes it again
        async with InProcessBroker(data_dir=tmp_path) as again:
            assert again.running

    asyncio.run(main())
