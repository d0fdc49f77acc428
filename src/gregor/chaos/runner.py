"""A chaos run: cluster, workload, nemesis, heal, final read, check.

1. Start a ``ChaosCluster`` (3 brokers, etcd, proxies; an injected bug and libfaketime when
   asked) and create the keys' topics (replication factor 3, ``min.insync.replicas=2``).
2. One controller thread per slot drives a worker process (``worker``) with the workload's
   operations, paced to ``rate`` operations a second in all, writing each invocation and
   completion to the history. An operation with no answer within ``op_timeout`` is ``info``;
   its worker is killed and replaced (a new logical process). A ``crash`` kills the worker.
3. The nemesis injects faults for ``time_limit`` seconds, then heals everything; the workload
   goes on for ``recovery`` seconds more (the liveness figures come from this window).
4. The workers stop; a fresh consumer reads every key from the beginning to its end
   (``read_committed``: the final catch-up read) and the groups' committed offsets are fetched.
5. The checker runs over the history; the report (``report.json``) and the history
   (``history.jsonl``) stay in ``out``, beside the brokers' logs.
"""

from __future__ import annotations

import json
import multiprocessing
import random
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from gregor.chaos.checker import Report, check
from gregor.chaos.cluster import ChaosCluster
from gregor.chaos.history import HistoryWriter, Op
from gregor.chaos.nemesis import Nemesis, wait_for
from gregor.chaos.observations import NO_ANSWER
from gregor.chaos.worker import serve
from gregor.chaos.workload import PARTITIONS, Slot, Workload, key_of, topic_partition, topics

__all__ = ["Result", "RunConfig", "run"]

ALL_CLIENTS = ["confluent", "kafka-python", "aiokafka", "gregor"]


@dataclass
class RunConfig:
    time_limit: float = 60.0
    nemesis: list[str] = field(default_factory=lambda: ["kill", "pause", "partition", "clock"])
    seed: int = 0
    clients: list[str] = field(default_factory=lambda: list(ALL_CLIENTS))
    slots: int = 8
    keys: int = 8
    rate: float = 15.0
    etcd_members: int = 3
    bug: str | None = None
    out: str | None = None
    recovery: float = 15.0
    op_timeout: float = 30.0
    final_timeout: float = 90.0
    crash_rate: float = 0.02
    interval: tuple[float, float] = (2.0, 6.0)
    duration: tuple[float, float] = (3.0, 10.0)
    #: After ``time_limit``, keep the workload and the faults going until this holds of the
    #: history so far (checked once a second), at most ``until_cap`` seconds more: a run whose
    #: point needs certain operations (a test's) gets them however busy the machine is.
    until: Callable[[list[Op]], bool] | None = None
    until_cap: float = 300.0


@dataclass
class Result:
    config: RunConfig
    report: Report
    out: Path
    faults: int

    @property
    def operations(self) -> int:
        return int(self.report.stats.get("operations", 0))


class SlotRunner(threading.Thread):
    def __init__(self, run: _Run, slot: Slot) -> None:
        super().__init__(name=f"slot-{slot.index}", daemon=True)
        self.r = run
        self.slot = slot
        self.rng = random.Random(run.cfg.seed * 1000 + slot.index)
        self.proc: Any = None
        self.conn: Connection | None = None
        self.process: int = -1
        self.pending: list[dict[str, Any]] = []
        self.stop = threading.Event()

    # --- the worker process ---

    def spawn(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        parent, child = ctx.Pipe()
        self.proc = ctx.Process(
            target=serve, args=(child,), name=f"chaos-worker-{self.slot.index}", daemon=True
        )
        self.proc.start()
        child.close()
        self.conn = parent
        self.open()

    def open(self) -> None:
        while not self.stop.is_set():
            self.process = self.r.new_process()
            assert self.conn is not None
            self.conn.send(
                {
                    "cmd": "open",
                    "client": self.slot.client,
                    "bootstrap": self.r.cluster.bootstrap_servers,
                    "txn_id": self.slot.transactional_id,
                    "group": self.slot.group,
                    "keys": self.r.cfg.keys,
                    "process": self.process,
                    "t0": self.r.history.t0,
                }
            )
            if self.conn.poll(60):
                reply = self.conn.recv()
                if reply["type"] == "ok":
                    self.slot.needs_binding = True
                    return
                self.r.history.append(
                    {
                        "type": "info",
                        "process": self.process,
                        "f": "open-failed",
                        "client": self.slot.client,
                        "error": reply.get("error"),
                    }
                )
                self.stop.wait(1.0)
            else:
                self.kill()
                self.spawn()
                return

    def kill(self) -> None:
        if self.proc is not None and self.proc.is_alive():
            self.proc.kill()
            self.proc.join(10)
        if self.conn is not None:
            self.conn.close()
        self.proc, self.conn = None, None

    def close(self) -> None:
        if self.conn is not None and self.proc is not None and self.proc.is_alive():
            try:
                self.conn.send({"cmd": "stop"})
                self.conn.poll(15)
            except (OSError, EOFError):
                pass
        self.kill()

    # --- operations ---

    def run(self) -> None:
        try:
            self.spawn()
            while not self.stop.is_set():
                op = self.pending.pop(0) if self.pending else self.r.workload.next_op(self.slot)
                self.stop.wait(self.rng.expovariate(self.r.cfg.rate / len(self.r.slots)))
                if self.stop.is_set():
                    break
                self.one(op)
        except Exception as e:  # keep the run going; the history says what happened
            self.r.history.append(
                {
                    "type": "info",
                    "process": self.process,
                    "f": "slot-error",
                    "error": f"{type(e).__name__}: {e}"[:300],
                }
            )
        finally:
            self.close()

    def one(self, op: dict[str, Any]) -> None:
        h = self.r.history
        base = {
            "process": self.process,
            "f": op["f"],
            "client": self.slot.client,
            "slot": self.slot.index,
        }
        invoke: dict[str, Any] = {"type": "invoke", **base, "value": op.get("value")}
        if op.get("abort"):
            invoke["abort"] = True
        if self.slot.mode:
            invoke["group"] = self.slot.group
        h.append(invoke)
        if op["f"] == "crash":
            self.kill()
            h.append({"type": "info", **base, "value": None, "error": "killed (SIGKILL)"})
            self.r.workload.completed(self.slot, op, {"type": "info"})
            self.spawn()
            return
        assert self.conn is not None
        try:
            self.conn.send({"cmd": "op", **op})
            answered = self.conn.poll(self.r.cfg.op_timeout)
            reply = self.conn.recv() if answered else None
        except (OSError, EOFError):
            reply = None
        if reply is None:
            h.append(
                {
                    "type": "info",
                    **base,
                    "value": op.get("value"),
                    "error": f"{NO_ANSWER}: worker killed",
                }
            )
            self.r.workload.completed(self.slot, op, {"type": "info"})
            self.kill()
            self.spawn()
            return
        reply.pop("trace", None)
        done = {**base, **reply}
        done.setdefault("value", op.get("value"))
        h.append(done)
        self.r.workload.completed(self.slot, op, done)
        if reply["type"] == "info":
            self.open()
        elif op["f"] == "txn" and reply["type"] == "fail":
            read = sorted(
                {k for m in done.get("value") or [] if m[0] == "poll" for k, _o, _v in m[1]}
            )
            if read:
                self.pending.append({"f": "committed", "value": read})


class _Run:
    def __init__(self, cfg: RunConfig, out: Path) -> None:
        self.cfg = cfg
        self.out = out
        self._pid = 0
        self._pid_lock = threading.Lock()
        self.history = HistoryWriter(out / "history.jsonl")
        self.cluster = ChaosCluster(
            3,
            etcd_members=cfg.etcd_members,
            bug=cfg.bug,
            clock="clock" in cfg.nemesis,
            workdir=out / "cluster",
        )
        crash = cfg.crash_rate if "crash" in cfg.nemesis else 0.0
        self.workload = Workload(cfg.seed, cfg.keys, cfg.clients, cfg.slots, crash_rate=crash)
        self.slots: list[SlotRunner] = []

    def new_process(self) -> int:
        with self._pid_lock:
            self._pid += 1
            return self._pid


def run(cfg: RunConfig, log: Any = print) -> Result:
    out = (
        Path(cfg.out)
        if cfg.out
        else Path.cwd() / "chaos-runs" / f"{time.strftime('%Y%m%d-%H%M%S')}-seed{cfg.seed}"
    )
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(asdict(cfg), indent=1, default=repr))
    r = _Run(cfg, out)
    nemesis: Nemesis | None = None
    try:
        log(
            f"starting etcd ({cfg.etcd_members}) and 3 brokers{' with bug ' + cfg.bug if cfg.bug else ''} in {out}"
        )
        r.cluster.start()
        create_topics(r.cluster, cfg.keys)
        r.slots = [SlotRunner(r, s) for s in r.workload.slots]
        log(
            "slots: "
            + ", ".join(
                f"{s.index}:{s.client}/{'txn' if s.transactional else 'idem'}/{s.mode}"
                for s in r.workload.slots
            )
        )
        for s in r.slots:
            s.start()
        nemesis = Nemesis(
            r.cluster,
            set(cfg.nemesis),
            cfg.seed,
            r.history,
            keys=cfg.keys,
            txn_ids=[s.transactional_id for s in r.workload.slots if s.transactional_id],
            groups=sorted({s.group for s in r.workload.slots}),
            interval=cfg.interval,
            duration=cfg.duration,
        )
        nemesis.start()
        time.sleep(cfg.time_limit)
        if cfg.until is not None:
            cap = time.monotonic() + cfg.until_cap
            while not cfg.until(list(r.history.entries)) and time.monotonic() < cap:
                time.sleep(1.0)
        nemesis.halt()
        log("healing")
        nemesis.heal_all()
        time.sleep(cfg.recovery)
        for s in r.slots:
            s.stop.set()
        for s in r.slots:
            s.join(cfg.op_timeout + 30)
        log("final read")
        final_read(r)
    finally:
        if nemesis is not None:
            nemesis.halt()
        for s in r.slots:
            s.stop.set()
            s.kill()
        r.history.close()
        r.cluster.close()
    report = check(r.history.entries)
    (out / "report.json").write_text(json.dumps(report.to_json(), indent=1, default=str))
    return Result(cfg, report, out, nemesis.faults if nemesis is not None else 0)


def create_topics(cluster: ChaosCluster, keys: int) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    wait_for(lambda: len(admin.list_topics(timeout=10).brokers) == 3, 120)
    new = [NewTopic(t, PARTITIONS, 3, config={"min.insync.replicas": "2"}) for t in topics(keys)]
    for fut in admin.create_topics(new).values():
        try:
            fut.result(60)
        except KafkaException as e:
            if "TOPIC_ALREADY_EXISTS" not in str(e):
                raise

    def ready() -> bool:
        md = admin.list_topics(timeout=10)
        for k in range(keys):
            t, p = topic_partition(k)
            tm = md.topics.get(t)
            if tm is None or p not in tm.partitions:
                return False
            pm = tm.partitions[p]
            if pm.leader < 0 or len(pm.isrs) < 3:
                return False
        return True

    if not wait_for(ready, 120, 0.5):
        raise RuntimeError("the chaos topics did not get leaders and full ISRs in 120 s")


def final_read(r: _Run) -> None:
    """Read every key from its beginning to its end (read_committed), then each group's
    committed offsets; both go to the history."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    keys = r.cfg.keys
    h = r.history
    tps = [TopicPartition(*topic_partition(k)) for k in range(keys)]
    c = Consumer(
        {
            "bootstrap.servers": r.cluster.bootstrap_servers,
            "group.id": f"chaos-final-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "log_level": 4,
        }
    )
    h.append({"type": "invoke", "process": "final", "f": "final-poll", "value": [["poll", []]]})
    reads: list[list[int]] = []
    complete: set[int] = set()
    deadline = time.monotonic() + r.cfg.final_timeout
    try:
        c.assign([TopicPartition(tp.topic, tp.partition, OFFSET_BEGINNING) for tp in tps])
        while time.monotonic() < deadline and len(complete) < keys:
            for m in c.consume(500, 1.0):
                if m.error() is None:
                    reads.append(
                        [
                            key_of(str(m.topic()), int(m.partition() or 0)),
                            int(m.offset() or 0),
                            int(m.value() or b"-1"),
                        ]
                    )
            positions = c.position(tps)
            for k, tp in enumerate(positions):
                if k in complete:
                    continue
                try:
                    _low, high = c.get_watermark_offsets(tps[k], timeout=5)
                except Exception:
                    continue
                if tp.offset >= 0 and tp.offset >= high:
                    complete.add(k)
        h.append(
            {
                "type": "ok",
                "process": "final",
                "f": "final-poll",
                "value": [["poll", reads]],
                "complete": sorted(complete),
                "epoch": 0,
            }
        )
    except Exception as e:
        h.append(
            {
                "type": "info",
                "process": "final",
                "f": "final-poll",
                "value": [["poll", reads]],
                "error": f"{type(e).__name__}: {e}"[:300],
            }
        )
    finally:
        c.close()
    for group in sorted({s.group for s in r.workload.slots}):
        gc = Consumer(
            {
                "bootstrap.servers": r.cluster.bootstrap_servers,
                "group.id": group,
                "enable.auto.commit": False,
                "log_level": 4,
            }
        )
        proc = f"final-{group}"
        h.append(
            {
                "type": "invoke",
                "process": proc,
                "f": "committed",
                "value": list(range(keys)),
                "group": group,
            }
        )
        try:
            got = gc.committed(tps, timeout=20)
            h.append(
                {
                    "type": "ok",
                    "process": proc,
                    "f": "committed",
                    "group": group,
                    "value": [
                        [k, tp.offset if tp.offset >= 0 else None] for k, tp in enumerate(got)
                    ],
                }
            )
        except Exception as e:
            h.append(
                {
                    "type": "info",
                    "process": proc,
                    "f": "committed",
                    "group": group,
                    "error": f"{type(e).__name__}: {e}"[:300],
                }
            )
        finally:
            gc.close()
