"""``EtcdProcess``: a real one-member etcd server as a child process, for tests and scripts.

It starts the ``etcd`` binary (Debian's ``etcd-server``; ``scripts/system-deps.sh`` installs it)
on two free ports of 127.0.0.1 (client and peer) with its data in a temporary directory, and
waits until the member answers ``/health``: a condition, polled, never a fixed sleep.
``stop()`` (SIGTERM), ``kill()`` (SIGKILL), ``pause()`` / ``resume()`` (SIGSTOP / SIGCONT) act
on the process; ``restart()`` keeps the data directory and ports, so the data survives.

Like ``process.py`` it imports nothing of the broker.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from gregor.launch.child import ChildProcess, stop_all
from gregor.launch.ports import free_port

__all__ = ["EtcdCluster", "EtcdProcess", "EtcdStartError", "etcd_binary", "free_port"]


class EtcdStartError(RuntimeError):
    pass


def etcd_binary() -> str | None:
    """The path of the ``etcd`` server binary, or None when it is not installed."""
    return shutil.which("etcd")


class EtcdProcess(ChildProcess):
    """One etcd member on 127.0.0.1; ``endpoint`` is ``127.0.0.1:<client port>``."""

    def __init__(
        self,
        data_dir: str | Path | None = None,
        name: str = "gregor-test-etcd",
        start_timeout: float | None = 60.0,
        initial_cluster: str | None = None,
    ) -> None:
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if data_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="gregor-etcd-")
            data_dir = self._tmp.name
        self.data_dir = Path(data_dir)
        self.name = name
        self.start_timeout = start_timeout
        self.client_port = 0
        self.peer_port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = self.data_dir / "etcd.log"
        #: ``name=peer-url,...`` of every member when this one is part of a cluster
        #: (``EtcdCluster``); None for a one-member etcd.
        self.initial_cluster = initial_cluster

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.client_port}"

    @property
    def url(self) -> str:
        """The ``metadata.store`` value naming this etcd (add ``/prefix`` for a key prefix)."""
        return f"etcd://{self.endpoint}"

    def start(self) -> EtcdProcess:
        self.launch()
        self._wait_healthy()
        return self

    def launch(self) -> None:
        """Start the process without waiting for it to be healthy (a cluster member is
        healthy only once a quorum runs)."""
        if self.running:
            raise EtcdStartError("etcd already running")
        binary = etcd_binary()
        if binary is None:
            raise EtcdStartError("no etcd binary on PATH: apt-get install etcd-server")
        if not self.client_port:
            self.client_port, self.peer_port = free_port(), free_port()
        client = f"http://127.0.0.1:{self.client_port}"
        peer = f"http://127.0.0.1:{self.peer_port}"
        args = [
            binary,
            "--name",
            self.name,
            "--data-dir",
            str(self.data_dir / "member-data"),
            "--listen-client-urls",
            client,
            "--advertise-client-urls",
            client,
            "--listen-peer-urls",
            peer,
            "--initial-advertise-peer-urls",
            peer,
            "--initial-cluster",
            self.initial_cluster or f"{self.name}={peer}",
            "--initial-cluster-state",
            "new",
            # One member on loopback: a short raft tick lets etcd grant (and expire) leases of
            # 1 s (its smallest TTL is 1.5 election timeouts), for fast failover in tests.
            "--heartbeat-interval",
            "50",
            "--election-timeout",
            "500",
        ]
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self.initial_cluster is not None and (self.data_dir / "member-data").exists():
            # A member that comes back joins with its data, not as a new cluster.
            args[args.index("--initial-cluster-state") + 1] = "existing"
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://{self.endpoint}/health", timeout=1) as r:
                return bool(json.loads(r.read()).get("health") == "true")
        except (OSError, ValueError, urllib.error.URLError):
            return False

    def _wait_healthy(self) -> None:
        assert self.proc is not None
        deadline = None if self.start_timeout is None else time.monotonic() + self.start_timeout
        while deadline is None or time.monotonic() < deadline:
            if self.healthy():
                return
            if self.proc.poll() is not None:
                raise EtcdStartError(
                    f"etcd exited with {self.proc.returncode}:\n{self.read_log()[-4000:]}"
                )
            time.sleep(0.05)
        self.kill()
        raise EtcdStartError(
            f"etcd not healthy in {self.start_timeout}s:\n{self.read_log()[-4000:]}"
        )

    def read_log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""


class EtcdCluster:
    """``size`` etcd members on 127.0.0.1 forming one cluster (a quorum of ``size // 2 + 1``);
    ``url`` names every member, as a cluster's brokers would. ``kill(i)`` / ``restart(i)``
    act on member ``i`` (0-based)."""

    def __init__(self, size: int = 3) -> None:
        self.members = [EtcdProcess(name=f"gregor-etcd-{i}") for i in range(size)]

    @property
    def url(self) -> str:
        return "etcd://" + ",".join(m.endpoint for m in self.members)

    def start(self) -> EtcdCluster:
        for m in self.members:
            m.client_port, m.peer_port = free_port(), free_port()
        initial = ",".join(f"{m.name}=http://127.0.0.1:{m.peer_port}" for m in self.members)
        for m in self.members:
            m.initial_cluster = initial
            m.launch()
        for m in self.members:
            m._wait_healthy()
        return self

    def kill(self, index: int) -> None:
        self.members[index].kill()

    def restart(self, index: int) -> None:
        member = self.members[index]
        if member.running:
            member.stop()
        member.launch()
        member._wait_healthy()

    def close(self) -> None:
        stop_all(self.members)
        for m in self.members:
            m.close()

    def __enter__(self) -> EtcdCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
