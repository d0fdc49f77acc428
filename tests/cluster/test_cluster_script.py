"""``scripts/cluster.sh`` says where each member's log and data are and what stopping does
with them (issue 42), and does what it says: deletes them, or keeps them with ``--keep``. A
terminal's Ctrl-C (SIGINT to the whole process group) stops etcd and every broker cleanly and
leaves no process behind, not even a zombie (issue 36)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from gregor.client import AdminClient
from gregor.testing import process_group

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.process, pytest.mark.slow, pytest.mark.timeout(240)]
BROKER_LINE = re.compile(r"^broker (\d+): (\S+)  log: (\S+)  data: (\S+)$")


def start(*args: str, process_group: int | None = None) -> tuple[subprocess.Popen[str], list[str]]:
    proc = subprocess.Popen(
        ["bash", str(ROOT / "scripts" / "cluster.sh"), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        process_group=process_group,
    )
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:  # until the last line it prints before waiting for Ctrl-C
        lines.append(line.rstrip("\n"))
        if line.startswith("Ctrl-C"):
            break
    else:
        raise AssertionError("cluster.sh ended early:\n" + "\n".join(lines))
    return proc, lines


def stop(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGINT)  # Ctrl-C
    assert proc.wait(120) == 0


def members(lines: list[str]) -> dict[int, tuple[str, Path, Path]]:
    found = {}
    for ln in lines:
        m = BROKER_LINE.match(ln)
        if m:
            found[int(m.group(1))] = (m.group(2), Path(m.group(3)), Path(m.group(4)))
    return found


def test_it_prints_where_logs_and_data_are_and_deletes_them_at_the_stop() -> None:
    proc, lines = start("2")
    try:
        brokers = members(lines)
        assert sorted(brokers) == [1, 2]
        assert lines[-1] == (
            "Ctrl-C stops etcd and the brokers and deletes their logs and data "
            "(scripts/cluster.sh --keep keeps them)."
        )
        bootstrap = next(ln.split("=", 1)[1] for ln in lines if ln.startswith("bootstrap.servers="))
        assert bootstrap == ",".join(addr for addr, _, _ in brokers.values())
        for node_id, (_, log, data) in brokers.items():
            assert "event=broker.started" in log.read_text()
            assert f"node.id={node_id}\n" in (data / "meta.properties").read_text()
        with AdminClient({"bootstrap.servers": bootstrap}) as admin:
            assert sorted(b[0] for b in admin.describe_cluster().brokers) == [1, 2]
    finally:
        stop(proc)
    for _, log, data in brokers.values():
        assert not log.exists() and not data.exists()


def test_keep_keeps_them(tmp_path: Path) -> None:
    proc, lines = start("1", "--data-dir", str(tmp_path / "kept"))
    try:
        brokers = members(lines)
        assert (
            lines[-1]
            == f"Ctrl-C stops etcd and the brokers; their logs and data stay in {tmp_path / 'kept'}."
        )
        etcd = next(ln for ln in lines if ln.startswith("  log: "))
        assert (
            etcd
            == f"  log: {tmp_path / 'kept' / 'etcd' / 'etcd.log'}  data: {tmp_path / 'kept' / 'etcd'}"
        )
    finally:
        stop(proc)
    ((_, log, data),) = brokers.values()
    assert log == tmp_path / "kept" / "broker-1" / "broker.log"
    assert "event=broker.stopped" in log.read_text()
    assert (data / "meta.properties").exists()
    shutil.rmtree(tmp_path / "kept")


def test_ctrl_c_to_the_process_group_stops_everything_cleanly(tmp_path: Path) -> None:
    """As a terminal's Ctrl-C: SIGINT reaches the launcher, etcd and the three brokers at once.
    Each broker still stops cleanly (its log ends with ``broker.stopped``: nothing had to be
    killed), the launcher exits 0, and when it has exited no process of its group is left, not
    even a zombie (it waited for all of its children)."""
    data = tmp_path / "kept"
    proc, lines = start(
        "3", "--data-dir", str(data), process_group=0
    )  # its own group, as a shell job
    pgid = proc.pid
    try:
        brokers = members(lines)
        assert sorted(brokers) == [1, 2, 3]
        group = process_group.members(pgid)
        assert len(group) == 5, group  # the launcher, etcd and three brokers
        os.killpg(pgid, signal.SIGINT)
        assert proc.wait() == 0  # pytest-timeout ends a launcher that hangs
        assert process_group.members(pgid) == {}
    finally:
        if proc.poll() is None:
            os.killpg(pgid, signal.SIGKILL)
            proc.wait()
    for node_id, (_, log, _) in brokers.items():
        text = log.read_text()
        assert f"event=broker.stopped node_id={node_id} clean=True" in text, text[-3000:]
    shutil.rmtree(data)
