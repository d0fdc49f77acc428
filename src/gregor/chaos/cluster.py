"""``ChaosCluster``: etcd and three brokers whose every link crosses a ``KafkaProxy``.

Broker ``n`` listens on 127.0.0.1 (a client listener and a REPLICATION listener for the
inter-broker traffic) and advertises both through proxies on its own address ``127.0.0.<10+n>``,
so every client's and every other broker's connection to it crosses a proxy the nemesis can
cut, delay, blackhole or hold. It reaches each etcd member through one more proxy of its own.
Cutting broker ``n`` off (``isolate``) cuts its etcd proxies and its REPLICATION proxy, and
tells the other brokers' REPLICATION proxies to drop ``n``'s fetches (they carry its node id in
their client id), while clients may still reach it: a stale leader, as in a real partition.

Brokers are started by ``python -m gregor.chaos.launch`` (which may patch an injected bug in
first, see ``bugs``), and, when the clock nemesis runs, under Debian's libfaketime with a
per-broker offset file (``skew``). etcd is one member or (``etcd_members=3``) a three-member
cluster (``gregor.testing.etcd.EtcdCluster``); the nemesis may kill or pause one member.

Nothing of the broker is imported: the cluster is driven as an operator would, through
processes, signals, sockets and Kafka clients.
"""

from __future__ import annotations

import glob
import os
import sys
import tempfile
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from gregor.chaos.proxy import KafkaProxy, ProxyLoop
from gregor.launch.ports import free_port
from gregor.launch.process import BrokerProcess, BrokerStartError
from gregor.testing.etcd import EtcdCluster, EtcdProcess

__all__ = ["BROKER_CONFIG", "ChaosBroker", "ChaosCluster", "faketime_library"]

#: Settings for fast failure detection and fully replicated internal topics.
BROKER_CONFIG: dict[str, object] = {
    "replica.lag.time.max.ms": 3000,
    "replica.fetch.backoff.ms": 200,
    "broker.session.timeout.ms": 3000,
    "offsets.topic.replication.factor": 3,
    "offsets.topic.num.partitions": 3,
    "transaction.state.log.replication.factor": 3,
    "transaction.state.log.num.partitions": 3,
    "transaction.state.log.min.isr": 2,
    "share.coordinator.state.topic.replication.factor": 3,
    "share.coordinator.state.topic.num.partitions": 1,
    "default.replication.factor": 3,
    "min.insync.replicas": 2,
    "unclean.leader.election.enable": "false",
    "group.initial.rebalance.delay.ms": 0,
    "transaction.max.timeout.ms": 60000,
}


def faketime_library() -> str | None:
    """Debian's libfaketime (multi-threaded build), or None when ``faketime`` is not installed."""
    found = sorted(glob.glob("/usr/lib/*/faketime/libfaketimeMT.so.1")) + sorted(
        glob.glob("/usr/lib/faketime/libfaketimeMT.so.1")
    )
    return found[0] if found else None


class ChaosBroker(BrokerProcess):
    """A ``BrokerProcess`` started through ``gregor.chaos.launch`` (with an injected bug, if
    any) and, when ``faketime_file`` is set, under libfaketime reading its offset from it."""

    def __init__(
        self,
        config: Mapping[str, object],
        *,
        bug: str | None = None,
        faketime_file: Path | None = None,
        data_dir: Path | None = None,
    ) -> None:
        super().__init__(config, data_dir=data_dir)
        self.bug = bug
        self.faketime_file = faketime_file

    def _start(self) -> BrokerProcess:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        props = {"log.dirs": str(self.data_dir / "logs"), "group.initial.rebalance.delay.ms": "0"}
        props.update(self.config)
        args = [sys.executable, "-m", "gregor.chaos.launch"]
        if self.bug:
            args += ["--bug", self.bug]
        args += ["serve", "--log-level", self.log_level]
        for k, v in props.items():
            args += ["--override", f"{k}={v}"]
        env = dict(os.environ)
        env.setdefault("PYTHONUNBUFFERED", "1")
        if self.faketime_file is not None:
            lib = faketime_library()
            if lib is None:
                raise RuntimeError(
                    "the clock nemesis needs Debian's faketime (scripts/system-deps.sh)"
                )
            # Monotonic time is faked too (libfaketime 0.9.10 breaks sleeps otherwise); the
            # offset changes only forward while a broker runs, and at its restart otherwise.
            env.update(
                {
                    "LD_PRELOAD": lib,
                    "FAKETIME_TIMESTAMP_FILE": str(self.faketime_file),
                    "FAKETIME_CACHE_DURATION": "1",
                }
            )
        self._spawn(args, env)  # under libfaketime (LD_PRELOAD): a new interpreter
        self._wait_started()
        return self


#: How a broker's failed bind reads in its log, and how often a start picks new ports for it.
IN_USE = "address already in use"
PORT_ATTEMPTS = 5


class ChaosCluster:
    def __init__(
        self,
        size: int = 3,
        *,
        etcd_members: int = 3,
        bug: str | None = None,
        clock: bool = False,
        config: Mapping[str, object] | None = None,
        workdir: str | Path | None = None,
    ) -> None:
        self.size = size
        self.etcd_members = etcd_members
        self.bug = bug
        self.clock = clock
        self.config = {**BROKER_CONFIG, **(config or {})}
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if workdir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="gregor-chaos-")
            workdir = self._tmp.name
        self.workdir = Path(workdir)
        self.loop = ProxyLoop()
        self.etcd: EtcdProcess | EtcdCluster = (
            EtcdCluster(etcd_members) if etcd_members > 1 else EtcdProcess()
        )
        self.brokers: dict[int, ChaosBroker] = {}
        self.client_proxy: dict[int, KafkaProxy] = {}
        self.repl_proxy: dict[int, KafkaProxy] = {}
        self.etcd_proxy: dict[int, list[KafkaProxy]] = {}
        self.skews: dict[int, float] = {}
        self.isolated: set[int] = set()
        self._closed = False

    # --- life cycle ---

    def start(self) -> ChaosCluster:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.etcd.start()
        members = self.etcd.members if isinstance(self.etcd, EtcdCluster) else [self.etcd]
        prefix = f"gregor-chaos-{uuid.uuid4().hex[:10]}"
        try:
            for n in range(1, self.size + 1):
                host = self.host(n)
                client_port, repl_port = free_port(), free_port()
                self.client_proxy[n] = KafkaProxy(
                    self.loop, host, 0, ("127.0.0.1", client_port), name=f"client->{n}"
                )
                self.repl_proxy[n] = KafkaProxy(
                    self.loop, host, 0, ("127.0.0.1", repl_port), name=f"replication->{n}"
                )
                self.etcd_proxy[n] = [
                    KafkaProxy(
                        self.loop,
                        host,
                        0,
                        _member_address(m),
                        kafka=False,
                        name=f"{n}->etcd{i}",
                    )
                    for i, m in enumerate(members)
                ]
                store = "etcd://" + ",".join(p.address for p in self.etcd_proxy[n]) + f"/{prefix}"
                props: dict[str, object] = {
                    **self.config,
                    "node.id": n,
                    "metadata.store": store,
                    "listeners": f"PLAINTEXT://127.0.0.1:{client_port},REPLICATION://127.0.0.1:{repl_port}",
                    "advertised.listeners": (
                        f"PLAINTEXT://{self.client_proxy[n].address},"
                        f"REPLICATION://{self.repl_proxy[n].address}"
                    ),
                    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,REPLICATION:PLAINTEXT",
                    "inter.broker.listener.name": "REPLICATION",
                }
                clock_file = None
                if self.clock:
                    clock_file = self.workdir / f"faketime-{n}"
                    clock_file.write_text("+0.000\n")
                    self.skews[n] = 0.0
                for attempt in range(1, PORT_ATTEMPTS + 1):
                    self.brokers[n] = ChaosBroker(
                        props,
                        bug=self.bug,
                        faketime_file=clock_file,
                        data_dir=self.workdir / f"broker-{n}",
                    )
                    try:
                        self.brokers[n].start()
                        break
                    except BrokerStartError as e:
                        # another test's process took a port between free_port() and the
                        # broker's bind: new ports, the proxies pointed at them, again
                        if IN_USE not in str(e) or attempt == PORT_ATTEMPTS:
                            raise
                    client_port, repl_port = free_port(), free_port()
                    self.client_proxy[n].target = ("127.0.0.1", client_port)
                    self.repl_proxy[n].target = ("127.0.0.1", repl_port)
                    props = {
                        **props,
                        "listeners": f"PLAINTEXT://127.0.0.1:{client_port},"
                        f"REPLICATION://127.0.0.1:{repl_port}",
                    }
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for b in self.brokers.values():
            b.close()
        for p in self.proxies():
            p.close()
        self.etcd.close()
        self.loop.close()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> ChaosCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- addresses ---

    @staticmethod
    def host(n: int) -> str:
        return f"127.0.0.{10 + n}"

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(self.client_proxy[n].address for n in sorted(self.client_proxy))

    def proxies(self) -> list[KafkaProxy]:
        out = [*self.client_proxy.values(), *self.repl_proxy.values()]
        for ps in self.etcd_proxy.values():
            out += ps
        return out

    def etcd_member_list(self) -> list[EtcdProcess]:
        return list(self.etcd.members) if isinstance(self.etcd, EtcdCluster) else [self.etcd]

    # --- process faults ---

    def kill(self, n: int) -> None:
        self.brokers[n].kill()

    def pause(self, n: int) -> None:
        self.brokers[n].pause()

    def resume(self, n: int) -> None:
        self.brokers[n].resume()

    def start_broker(self, n: int) -> None:
        b = self.brokers[n]
        if not b.running:
            b.start()

    def etcd_kill(self, i: int) -> None:
        self.etcd_member_list()[i].kill()

    def etcd_pause(self, i: int) -> None:
        self.etcd_member_list()[i].pause()

    def etcd_resume(self, i: int) -> None:
        self.etcd_member_list()[i].resume()

    def etcd_start(self, i: int) -> None:
        m = self.etcd_member_list()[i]
        if m.running:
            m.resume()
            return
        if isinstance(self.etcd, EtcdCluster):
            self.etcd.restart(i)
        else:
            m.start()

    # --- network faults ---

    def isolate(self, n: int, clients_too: bool = False) -> None:
        """Cut broker ``n`` off from etcd and the other brokers (and from clients too)."""
        self.isolated.add(n)
        for p in self.etcd_proxy[n]:
            p.cut()
        self.repl_proxy[n].cut()
        suffixes = tuple(f"-{m}" for m in self.isolated)
        for m, p in self.repl_proxy.items():
            if m != n:
                p.block_client_ids(suffixes)
        if clients_too:
            self.client_proxy[n].cut()

    def heal_network(self) -> list[dict[str, Any]]:
        """Every proxy forwards again; held requests are delivered (late) and returned."""
        self.isolated.clear()
        released: list[dict[str, Any]] = []
        for p in self.proxies():
            p.heal()
            released += [{"proxy": p.name, **(h.released or {})} for h in p.release()]
        return released

    # --- clocks ---

    def skew(self, n: int, seconds: float) -> str:
        """Set broker ``n``'s clock ``seconds`` off (forward at once; backward by a restart,
        since a running process's monotonic clock must not go back)."""
        if not self.clock:
            raise RuntimeError("the cluster was started without the clock nemesis")
        b = self.brokers[n]
        assert b.faketime_file is not None
        b.faketime_file.write_text(f"{seconds:+.3f}\n")
        before = self.skews.get(n, 0.0)
        self.skews[n] = seconds
        if seconds < before and b.running:
            b.stop(timeout=5.0)
            b.start()
            return "restarted"
        return "bumped"


def _member_address(member: EtcdProcess) -> Callable[[], tuple[str, int]]:
    """Where an etcd member listens now (its port is known only once it has started)."""
    return lambda: ("127.0.0.1", member.client_port)
