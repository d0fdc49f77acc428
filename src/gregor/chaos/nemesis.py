"""The nemesis: faults injected into a ``ChaosCluster`` on a seeded schedule, then healed.

Kinds (``--nemesis``, comma-separated):

- ``kill``: SIGKILL a broker, start it again later (recovery runs on its data);
- ``pause``: SIGSTOP a broker, SIGCONT later (its connections stay open, unanswered);
- ``etcd``: kill or pause one etcd member (of three: the quorum survives), then bring it back;
- ``partition``: cut a broker off from etcd and the other brokers (clients may still reach it:
  a stale leader), or cut clients off from a broker, or slow or blackhole its links;
- ``isolate``: cut a key's leader off from etcd and the other brokers while clients still
  reach it (the one partition that makes a stale leader, every time);
- ``hold``: hold-and-release: keep back the next Produce (at a key's leader) or EndTxn (at a
  transaction coordinator) while the client times out and retries, then deliver it late;
- ``clock``: skew a broker's wall clock (libfaketime) by up to two minutes either way;
- ``crash`` (clients): the workload kills client processes (see ``workload``).

Targets are chosen among the brokers with a bias toward the interesting ones: the leader of a
key, the controller, the broker coordinating a group or a transactional id (from the Kafka
metadata, asked through the proxies; a random broker when that fails). One fault at a time:
apply, wait, heal, wait. Each step is an entry in the history (``process: "nemesis"``);
released requests carry the broker's late answer. ``heal_all`` ends every fault (the run then
measures recovery).
"""

from __future__ import annotations

import random
import threading
import time
from typing import Any

from gregor.chaos.cluster import ChaosCluster
from gregor.chaos.history import HistoryWriter
from gregor.chaos.workload import topic_partition

__all__ = ["KINDS", "Nemesis", "java_partition"]

KINDS = ("kill", "pause", "etcd", "partition", "isolate", "hold", "clock", "crash")
PRODUCE, END_TXN = 0, 26


def java_partition(key: str, partitions: int) -> int:
    """Kafka's ``Utils.abs(key.hashCode()) % partitions`` (coordinator placement)."""
    data = key.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    signed = h - (1 << 32) if h & 0x80000000 else h
    return 0 if signed == -(1 << 31) else abs(signed) % partitions


class Nemesis:
    def __init__(
        self,
        cluster: ChaosCluster,
        kinds: set[str],
        seed: int,
        history: HistoryWriter,
        *,
        keys: int,
        txn_ids: list[str],
        groups: list[str],
        interval: tuple[float, float] = (2.0, 6.0),
        duration: tuple[float, float] = (3.0, 10.0),
    ) -> None:
        self.cluster = cluster
        self.kinds = sorted(k for k in kinds if k != "crash")
        self.rng = random.Random(seed ^ 0x5EED)
        self.history = history
        self.keys = keys
        self.txn_ids = txn_ids
        self.groups = groups
        self.interval = interval
        self.duration = duration
        self.stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.faults = 0

    def log(self, f: str, value: Any = None, **extra: Any) -> None:
        self.history.append({"type": "info", "process": "nemesis", "f": f, "value": value, **extra})

    # --- targets ---

    def _metadata(self) -> Any:
        from confluent_kafka.admin import AdminClient

        admin = AdminClient(
            {"bootstrap.servers": self.cluster.bootstrap_servers, "socket.timeout.ms": 3000}
        )
        return admin.list_topics(timeout=3)

    def target(self, role: str | None = None) -> tuple[int, str]:
        brokers = sorted(self.cluster.brokers)
        role = role or self.rng.choice(
            ["random", "leader", "controller", "group-coordinator", "txn-coordinator"]
        )
        if role == "random":
            return self.rng.choice(brokers), "random"
        try:
            md = self._metadata()
            if role == "controller" and md.controller_id in brokers:
                return int(md.controller_id), "controller"
            if role == "leader":
                key = self.rng.randrange(self.keys)
                t, p = topic_partition(key)
                leader = md.topics[t].partitions[p].leader
                if leader in brokers:
                    return int(leader), f"leader of key {key}"
            internal = {
                "group-coordinator": ("__consumer_offsets", self.groups),
                "txn-coordinator": ("__transaction_state", self.txn_ids),
            }.get(role)
            if internal is not None and internal[1]:
                topic, ids = internal
                ident = self.rng.choice(ids)
                md = _admin_topic(self.cluster, topic)
                parts = md.topics[topic].partitions
                leader = parts[java_partition(ident, len(parts))].leader
                if leader in brokers:
                    return int(leader), f"coordinator of {ident}"
        except Exception:
            pass
        return self.rng.choice(brokers), "random"

    # --- the schedule ---

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="nemesis", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        if not self.kinds:
            return
        while not self.stop.wait(self.rng.uniform(*self.interval)):
            kind = self.rng.choice(self.kinds)
            try:
                heal = self.inject(kind)
            except Exception as e:
                self.log("nemesis-error", kind, error=f"{type(e).__name__}: {e}"[:300])
                continue
            self.faults += 1
            self.stop.wait(self.rng.uniform(*self.duration))
            try:
                heal()
            except Exception as e:
                self.log("nemesis-error", f"heal {kind}", error=f"{type(e).__name__}: {e}"[:300])

    def halt(self) -> None:
        self.stop.set()
        if self._thread is not None:
            self._thread.join(120)

    def inject(self, kind: str) -> Any:
        c, rng = self.cluster, self.rng
        if kind == "kill":
            n, why = self.target()
            c.kill(n)
            self.log("kill", n, target=why)

            def restart() -> None:
                c.start_broker(n)
                self.log("start", n)

            return restart
        if kind == "pause":
            n, why = self.target()
            c.pause(n)
            self.log("pause", n, target=why)

            def resume() -> None:
                c.resume(n)
                self.log("resume", n)

            return resume
        if kind == "etcd":
            i = rng.randrange(len(c.etcd_member_list()))
            if len(c.etcd_member_list()) > 1 and rng.random() < 0.5:
                c.etcd_kill(i)
                self.log("etcd-kill", i)
            else:
                c.etcd_pause(i)
                self.log("etcd-pause", i)

            def etcd_back() -> None:
                c.etcd_start(i)
                self.log("etcd-start", i)

            return etcd_back
        if kind == "partition":
            n, why = self.target()
            how = rng.choice(["isolate", "isolate-all", "clients", "delay", "blackhole"])
            if how == "isolate":
                c.isolate(n)
            elif how == "isolate-all":
                c.isolate(n, clients_too=True)
            elif how == "clients":
                c.client_proxy[n].cut()
            elif how == "delay":
                seconds = round(rng.uniform(0.1, 1.5), 2)
                for p in (c.client_proxy[n], c.repl_proxy[n]):
                    p.delay(seconds)
                how = f"delay {seconds}s"
            else:
                c.client_proxy[n].blackhole()
            self.log("partition", n, how=how, target=why)
            return lambda: self._heal_network()
        if kind == "isolate":
            n, why = self.target("leader")
            c.isolate(n)
            self.log("partition", n, how="isolate", target=why)
            return lambda: self._heal_network()
        if kind == "hold":
            api = rng.choice([PRODUCE, END_TXN])
            n, why = self.target("txn-coordinator" if api == END_TXN else "leader")
            count = rng.randint(1, 2)
            close_after = round(rng.uniform(0.0, 2.0), 2)
            c.client_proxy[n].hold([api], count=count, close_after=close_after)
            self.log(
                "hold",
                n,
                api={PRODUCE: "Produce", END_TXN: "EndTxn"}[api],
                count=count,
                close_after=close_after,
                target=why,
            )
            return lambda: self._heal_network()
        if kind == "clock":
            n, why = self.target()
            seconds = round(rng.uniform(-120, 120), 1)
            how = c.skew(n, seconds)
            self.log("clock", n, skew=seconds, how=how, target=why)

            def unskew() -> None:
                how = c.skew(n, 0.0)
                self.log("clock", n, skew=0.0, how=how)

            return unskew
        raise ValueError(f"unknown nemesis {kind!r}")

    def _heal_network(self) -> None:
        released = self.cluster.heal_network()
        self.log("heal-network", None, released=released)

    def heal_all(self) -> None:
        c = self.cluster
        for i, m in enumerate(c.etcd_member_list()):
            if not m.running:
                c.etcd_start(i)
            else:
                m.resume()
        for n, b in c.brokers.items():
            if b.running:
                b.resume()
            else:
                c.start_broker(n)
        released = c.heal_network()
        if c.clock:
            for n in c.brokers:
                if c.skews.get(n):
                    c.skew(n, 0.0)
        self.log("heal-all", None, released=released)


def _admin_topic(cluster: ChaosCluster, topic: str) -> Any:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "socket.timeout.ms": 3000})
    return admin.list_topics(topic, timeout=3)


def wait_for(condition: Any, timeout: float, step: float = 0.2) -> bool:
    """Poll ``condition`` until it holds or ``timeout`` passes (harness waits, not tests)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(step)
    return bool(condition())
