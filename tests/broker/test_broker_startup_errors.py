"""A broker that cannot start says why in one line (issue 42), as ``gregor serve`` prints it:
a port in use, an address the host does not have, a log directory that cannot be created or
written, a bad ``--log-level`` or setting. The broker's own log lines (``ts=...``) may come
before it; no traceback, exit 1 (2 for a command typed wrong)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(180)


def serve(*args: str) -> subprocess.CompletedProcess[str]:
    # the command as a shell runs it (its name in the usage hint is gregor's)
    gregor = Path(sys.executable).with_name("gregor")
    return subprocess.run(
        [str(gregor), "serve", *args], capture_output=True, text=True, timeout=120
    )


def outcome(r: subprocess.CompletedProcess[str]) -> tuple[int, list[str]]:
    """The exit status and what was printed besides the broker's log lines."""
    assert "Traceback" not in r.stderr, r.stderr
    return r.returncode, [ln for ln in r.stderr.splitlines() if not ln.startswith("ts=")]


@pytest.fixture
def logs(tmp_path: Path) -> str:
    return f"log.dirs={tmp_path / 'logs'}"


def test_a_port_in_use(logs: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        r = serve("-o", f"listeners=PLAINTEXT://127.0.0.1:{port}", "-o", logs)
    assert outcome(r) == (
        1,
        [
            f"Error: cannot listen on 127.0.0.1:{port}: address already in use; another process is "
            "listening there"
        ],
    )


def test_an_address_the_host_does_not_have(logs: str) -> None:
    # 192.0.2.1 is TEST-NET-1 (RFC 5737): documentation only, on no host's interfaces
    r = serve("-o", "listeners=PLAINTEXT://192.0.2.1:9092", "-o", logs)
    assert outcome(r) == (
        1,
        [
            "Error: cannot listen on 192.0.2.1:9092: cannot assign requested address; this host has "
            "no such address (listeners must name one of its own addresses, or 0.0.0.0 for all)"
        ],
    )
    r = serve("-o", "listeners=PLAINTEXT://no-such-host.invalid:9092", "-o", logs)
    code, lines = outcome(r)
    assert code == 1 and len(lines) == 1
    assert lines[0].startswith("Error: cannot resolve a listener's host (")
    assert lines[0].endswith("): listeners=PLAINTEXT://no-such-host.invalid:9092")


def test_a_log_directory_that_cannot_be_created(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    r = serve(
        "-o", "listeners=PLAINTEXT://127.0.0.1:0", "-o", f"log.dirs={tmp_path / 'a-file' / 'logs'}"
    )
    assert outcome(r) == (
        1,
        [f"Error: log directory {tmp_path / 'a-file' / 'logs'} cannot be created: Not a directory"],
    )


@pytest.fixture
def read_only_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory the broker may read but not write. Root may write anywhere a mode allows
    nothing, so as root the directory is made immutable (``chattr +i``) instead."""
    ro = tmp_path / "logs"
    ro.mkdir()
    if os.geteuid() != 0:
        ro.chmod(0o555)
        yield ro
        ro.chmod(0o755)
        return
    if subprocess.run(["chattr", "+i", str(ro)], capture_output=True).returncode != 0:
        pytest.skip(
            "as root only an immutable directory is unwritable, and chattr +i is not permitted here"
        )
    try:
        yield ro
    finally:
        subprocess.run(["chattr", "-i", str(ro)], check=True)


def test_a_log_directory_that_cannot_be_written(read_only_dir: Path) -> None:
    r = serve("-o", "listeners=PLAINTEXT://127.0.0.1:0", "-o", f"log.dirs={read_only_dir}")
    assert outcome(r) == (1, [f"Error: log directory {read_only_dir} is not writable"])


def test_a_bad_log_level_and_bad_settings(logs: str) -> None:
    r = serve("--log-level", "loud", "-o", logs)
    assert outcome(r) == (
        2,
        [
            "Error: Invalid value for '--log-level': 'loud' is not one of 'debug', 'info', "
            "'warning', 'error', 'critical'. (see 'gregor serve --help')"
        ],
    )
    r = serve("-o", "listeners=PLAINTEXT://127.0.0.1:99999", "-o", logs)
    assert outcome(r) == (
        2,
        [
            "Error: listener 'PLAINTEXT://127.0.0.1:99999' has an invalid port "
            "(see 'gregor serve --help')"
        ],
    )
    r = serve("-o", "log.segment.bytes=-5", "-o", logs)
    assert outcome(r) == (
        2,
        ["Error: log.segment.bytes=-5 is below the minimum 14 (see 'gregor serve --help')"],
    )
    # As Kafka refuses it at start (GroupCoordinatorConfig), in its words.
    r = serve("-o", "group.consumer.session.timeout.ms=3000", "-o", logs)
    assert outcome(r) == (
        2,
        [
            "Error: group.consumer.session.timeout.ms must be greater than or equal to "
            "group.consumer.min.session.timeout.ms (see 'gregor serve --help')"
        ],
    )


def test_an_unreachable_metadata_store(logs: str) -> None:
    pytest.importorskip("aetcd")  # the cluster extra
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = serve(
        "-o",
        "listeners=PLAINTEXT://127.0.0.1:0",
        "-o",
        logs,
        "-o",
        f"metadata.store=etcd://127.0.0.1:{port}/g",
    )
    code, lines = outcome(r)
    assert code == 1 and len(lines) == 1
    assert lines[0].startswith(
        f"Error: metadata.store=etcd://127.0.0.1:{port}/g: no etcd endpoint answered"
    )
