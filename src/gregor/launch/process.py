"""``BrokerProcess``: a real broker as a child process (``python -m gregor serve``).

It imports nothing of the broker itself, so applications that are clients of a broker (the
pipelines) start their embedded broker with it, and the test harness (``gregor.testing``) its
broker processes. By default each broker is a new interpreter; after :func:`use_fork_server`
(the test run) it is a fork of a template that imported the broker already
(:mod:`gregor.launch.forkserver`), unless its environment differs where start-up reads it.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from gregor.launch import forkserver
from gregor.launch.child import ChildProcess
from gregor.launch.forkserver import ForkServer
from gregor.launch.ports import free_port

_STARTED = re.compile(r"event=broker\.started .*listeners=(\S+)")
_METRICS = re.compile(r"event=broker\.started .*metrics=(\S+)")
_REGISTRY = re.compile(r"event=schema_registry\.started .*url=(\S+)")


_IN_USE = "address already in use"  # how the broker's failed bind reads in its log
_PORT_ATTEMPTS = 5


class BrokerStartError(RuntimeError):
    pass


#: What a broker process imports before it reads its config: a fork server for brokers loads
#: these (``gregor serve`` and the companions it may start beside the broker).
BROKER_PRELOAD = (
    "gregor.cli.main",
    "gregor.broker.common.events",
    "gregor.broker.config.broker_config",
    "gregor.broker.main",
    "gregor.cli.schema_registry",
    "gregor.cli.console",
)

#: What a broker process reads from its environment at import rather than when it runs (the
#: records' compiled twins): a broker whose environment sets it otherwise starts afresh.
BROKER_START_TIME_ENV = ("GREGOR_NO_EXTENSIONS",)

_fork_server: ForkServer | None = None


def use_fork_server(server: ForkServer | None) -> ForkServer | None:
    """Start every ``BrokerProcess`` from now on as a fork of ``server``'s template (None: with
    ``subprocess``, the default); returns the server used until now. The test run does this:
    it starts hundreds of brokers, each about half a CPU-second quicker so. A broker whose
    environment differs from the template's where an interpreter or an import reads it
    (``ForkServer.differs_at_start``) still starts with ``subprocess``."""
    global _fork_server
    previous, _fork_server = _fork_server, server
    return previous


def level_number(name: str) -> int:
    """The ``logging`` level number of a level name (``--log-level`` of ``gregor serve``)."""
    n = logging.getLevelName(name.upper())
    if not isinstance(n, int):
        raise ValueError(f"unknown log level {name!r}")
    return n


class BrokerProcess(ChildProcess):
    def __init__(
        self,
        config: Mapping[str, object] | None = None,
        data_dir: str | Path | None = None,
        port: int = 0,
        start_timeout: float | None = None,
        log_level: str = "INFO",
    ) -> None:
        self.config = {str(k): str(v) for k, v in (config or {}).items()}
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if data_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="gregor-test-")
            data_dir = self._tmp.name
        self.data_dir = Path(data_dir)
        self.port = port
        self.start_timeout = start_timeout
        if level_number(log_level) > level_number("INFO"):
            # The port is learned from the INFO line ``broker.started``; a quieter level would
            # hide it and start() would wait for a line that never comes.
            raise ValueError(
                f"log_level {log_level!r} hides the broker.started line; use INFO or DEBUG"
            )
        self.log_level = log_level
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = self.data_dir / "broker.log"
        self._log_offset = 0
        #: Bound port of every listener by name (several listeners: SSL, SASL_SSL, ...).
        self.listener_ports: dict[str, int] = {}
        #: ``http://host:port/metrics`` when the broker serves metrics (``metrics.listener``).
        self.metrics_url: str | None = None
        #: The URL of the schema registry beside the broker (``schema.registry.listener``): its
        #: bound port, known once :meth:`wait_schema_registry` has seen it listen.
        self.schema_registry_url: str | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def host(self) -> str:
        return "127.0.0.1"

    def bootstrap(self, listener: str) -> str:
        """``host:port`` of the listener named ``listener`` (its bound port)."""
        return f"127.0.0.1:{self.listener_ports[listener]}"

    def start(self) -> BrokerProcess:
        """Start the broker and wait for it to listen. Without a port given (and no
        ``listeners`` in the config) it gets one below the ephemeral range (see
        ``gregor.launch.ports``) and keeps it across restarts; when another test took that port first,
        it tries another."""
        if self.proc is not None and self.proc.poll() is None:
            raise BrokerStartError("broker already running")
        if self.port or "listeners" in self.config:
            return self._start()
        attempts = 0
        while True:
            self.port = free_port()
            try:
                return self._start()
            except BrokerStartError as e:
                attempts += 1
                if _IN_USE not in str(e) or attempts == _PORT_ATTEMPTS:
                    self.port = 0
                    raise

    def _start(self) -> BrokerProcess:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        props = {
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": str(self.data_dir / "logs"),
            "group.initial.rebalance.delay.ms": "0",
        }
        props.update(self.config)
        args = [sys.executable, "-m", "gregor", "serve", "--log-level", self.log_level]
        for k, v in props.items():
            args += ["--override", f"{k}={v}"]
        env = dict(os.environ)
        env.setdefault("PYTHONUNBUFFERED", "1")
        self._spawn(args, env)
        self._wait_started()
        return self

    def _spawn(self, args: list[str], env: dict[str, str]) -> None:
        """Start ``args`` (``[sys.executable, "-m", module, ...]``) with its output appended
        to the log: a fork of the fork server's template when one is set and ``env`` allows it
        (:func:`use_fork_server`), else a new interpreter."""
        if _fork_server is not None and not _fork_server.differs_at_start(env):
            try:
                self._log_offset = self.log_path.stat().st_size
            except FileNotFoundError:
                self._log_offset = 0
            self.proc = forkserver.request_fork(
                args[1:], env, os.getcwd(), str(self.log_path), _fork_server
            )
            return
        log = open(self.log_path, "ab")
        self._log_offset = log.tell()
        try:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env)
        finally:
            log.close()

    def _wait_started(self) -> None:
        """Wait for the ``broker.started`` line for as long as the process lives (recovery after
        a SIGKILL takes a while on a busy machine), or ``start_timeout`` seconds if given."""
        assert self.proc is not None
        deadline = None if self.start_timeout is None else time.monotonic() + self.start_timeout
        while deadline is None or time.monotonic() < deadline:
            text = self.read_log()
            m = _STARTED.search(text)
            if m:
                self.schema_registry_url = None
                bound = m.group(1).split(",")
                self.listener_ports = {
                    b.split("://", 1)[0]: int(b.rsplit(":", 1)[1]) for b in bound if "://" in b
                }
                self.port = int(bound[0].rsplit(":", 1)[1])
                metrics = _METRICS.search(text)
                self.metrics_url = metrics.group(1) if metrics else None
                return
            if self.proc.poll() is not None:
                raise BrokerStartError(
                    f"broker exited with {self.proc.returncode}:\n{text[-4000:]}"
                )
            time.sleep(0.05)
        self.kill()
        raise BrokerStartError(
            f"broker did not start in {self.start_timeout}s:\n{self.read_log()[-4000:]}"
        )

    def wait_schema_registry(self) -> str:
        """The URL of the schema registry beside the started broker (``schema.registry.listener``)
        once it listens: it starts after the broker and first reads its topic (in a cluster, once
        enough brokers run to create it). Waits as long as the process lives."""
        if not self.config.get("schema.registry.listener"):
            raise BrokerStartError(
                "the broker serves no schema registry (schema.registry.listener)"
            )
        while self.schema_registry_url is None:
            assert self.proc is not None
            m = _REGISTRY.search(self.read_log())
            if m:
                self.schema_registry_url = m.group(1)
            elif self.proc.poll() is not None:
                raise BrokerStartError(
                    f"broker exited with {self.proc.returncode}:\n{self.read_log()[-4000:]}"
                )
            else:
                time.sleep(0.05)
        return self.schema_registry_url

    def read_log(self, since_start: bool = True) -> str:
        try:
            with open(self.log_path, "rb") as f:
                if since_start:
                    f.seek(self._log_offset)
                return f.read().decode(errors="replace")
        except FileNotFoundError:
            return ""
