"""What the checker reasons about (``checker``): the history's operations, each invocation
paired with its completion (:func:`pair`), the values they wrote and read
(:func:`writes_and_reads`), and the :class:`Report` of anomalies, Kafka's allowances, liveness
figures and counts that a check fills in."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gregor.chaos.history import Op

__all__ = [
    "ALLOWED",
    "ANOMALIES",
    "READERS",
    "WRITERS",
    "Operation",
    "Read",
    "Report",
    "Write",
    "pair",
    "writes_and_reads",
]

ANOMALIES = (
    "lost-write",
    "unseen",
    "duplicate",
    "inconsistent-offsets",
    "aborted-read",
    "precommitted-read",
    "torn-transaction",
    "poll-skip",
    "nonmonotonic-poll",
    "nonmonotonic-send",
    "committed-offset-regression",
    "aborted-offset-commit",
    "unexplained-committed-offset",
    "G1c",
)
ALLOWED = (
    "G0",
    "int-send-skip",
    "rebalance-skip",
    "rebalance-rewind",
    "late-commit",
    "late-end-txn",
)

READERS = ("poll", "txn", "final-poll")
WRITERS = ("send", "txn")
# the error of a transaction the workload told its client to abort (``op["abort"]``): an outcome
# the run asked for, not a failure
ABORTED_ON_PURPOSE = "aborted on purpose"
#: The start of the error of an operation the runner recorded because its worker did not
#: answer in time (it killed the worker): what the operation did before is unknown.
NO_ANSWER = "no answer"


@dataclass
class Operation:
    """An invocation with its completion (None: it never completed, as good as ``info``)."""

    invoke: Op
    done: Op | None

    @property
    def index(self) -> int:
        return int(self.invoke["index"])

    @property
    def process(self) -> Any:
        return self.invoke["process"]

    @property
    def f(self) -> str:
        return str(self.invoke["f"])

    @property
    def type(self) -> str:
        return "info" if self.done is None else str(self.done["type"])

    @property
    def t_invoke(self) -> float:
        return float(self.invoke["time"])

    @property
    def t_done(self) -> float:
        return math.inf if self.done is None else float(self.done["time"])

    @property
    def value(self) -> list[Any]:
        src = (
            self.done
            if self.done is not None and self.done.get("value") is not None
            else self.invoke
        )
        return list(src.get("value") or [])

    def get(self, name: str, default: Any = None) -> Any:
        return default if self.done is None else self.done.get(name, default)

    @property
    def answered(self) -> bool:
        """The client's own account of the operation is in the history (it completed, and
        not because its worker was killed for want of an answer)."""
        return self.done is not None and not str(self.done.get("error") or "").startswith(NO_ANSWER)

    def brief(self) -> dict[str, Any]:
        return {
            "op": self.index,
            "process": self.process,
            "f": self.f,
            "type": self.type,
            "client": self.invoke.get("client"),
            "time": [self.t_invoke, self.t_done],
        }


@dataclass
class Write:
    key: int
    value: int
    offset: int | None
    op: Operation


@dataclass
class Read:
    key: int
    offset: int
    value: int
    op: Operation


@dataclass
class Report:
    anomalies: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    allowed: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    liveness: dict[str, Any] = field(default_factory=dict)
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def valid(self) -> bool:
        return not self.anomalies

    def add(self, name: str, example: dict[str, Any]) -> None:
        (self.allowed if name in ALLOWED else self.anomalies).setdefault(name, []).append(example)

    def table(self, examples: int = 1) -> str:
        rows = [f"{'anomaly':<30} {'count':>7}  example"]
        for name in ANOMALIES:
            found = self.anomalies.get(name, [])
            ex = "; ".join(_short(e) for e in found[:examples]) if found else ""
            rows.append(f"{name:<30} {len(found):>7}  {ex}")
        rows.append("")
        rows.append(f"{'allowed by Kafka':<30} {'count':>7}  example")
        for name in ALLOWED:
            found = self.allowed.get(name, [])
            ex = _short(found[0]) if found else ""
            rows.append(f"{name:<30} {len(found):>7}  {ex}")
        rows.append("")
        for k, v in self.liveness.items():
            rows.append(f"{k:<30} {v}")
        return "\n".join(rows)

    def to_json(self, examples: int = 5) -> dict[str, Any]:
        return {
            "valid": self.valid,
            "anomalies": {
                k: {"count": len(v), "examples": v[:examples]} for k, v in self.anomalies.items()
            },
            "allowed": {
                k: {"count": len(v), "examples": v[:examples]} for k, v in self.allowed.items()
            },
            "liveness": self.liveness,
            "stats": self.stats,
        }


def _short(example: dict[str, Any], limit: int = 160) -> str:
    text = ", ".join(f"{k}={v}" for k, v in example.items())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def pair(history: Iterable[Op]) -> tuple[list[Operation], list[Op]]:
    """Operations (invocation with completion) in invocation order, and the nemesis events."""
    ops: list[Operation] = []
    open_: dict[Any, Operation] = {}
    nemesis: list[Op] = []
    for e in history:
        if e.get("process") == "nemesis":
            nemesis.append(e)
        elif e["type"] == "invoke":
            op = Operation(e, None)
            open_[e["process"]] = op
            ops.append(op)
        else:
            op_ = open_.pop(e["process"], None)
            if op_ is not None:
                op_.done = e
    return ops, nemesis


def writes_and_reads(ops: Sequence[Operation]) -> tuple[list[Write], list[Read]]:
    writes: list[Write] = []
    reads: list[Read] = []
    for op in ops:
        if op.f in WRITERS:
            for mop in op.value:
                if mop[0] == "send":
                    offset = mop[3] if len(mop) > 3 and op.done is not None else None
                    writes.append(
                        Write(int(mop[1]), int(mop[2]), None if offset is None else int(offset), op)
                    )
        if op.f in READERS and op.type in ("ok", "fail") and op.done is not None:
            for mop in op.done.get("value") or []:
                if mop[0] == "poll":
                    for k, o, v in mop[1]:
                        reads.append(Read(int(k), int(o), int(v), op))
    return writes, reads
