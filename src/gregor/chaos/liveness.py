"""The liveness figures of a run (``checker``): the worst lag between a send's acknowledgement
and its first read, the time from the last heal to the first acknowledged send and the first
poll that returned records, the clients stuck after it; and the operation counts."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from gregor.chaos.history import Op
from gregor.chaos.observations import ABORTED_ON_PURPOSE, WRITERS, Operation, Read, Report, Write


def liveness(
    report: Report,
    ops: Sequence[Operation],
    nemesis: list[Op],
    writes: list[Write],
    read_values: dict[int, list[Read]],
) -> None:
    first_read = {
        v: min(r.op.t_done for r in rs if r.op.f != "final-poll")
        for v, rs in read_values.items()
        if any(r.op.f != "final-poll" for r in rs)
    }
    worst: tuple[float, Write] | None = None
    for w in writes:
        if w.op.type != "ok" or w.value not in first_read:
            continue
        lag = max(0.0, first_read[w.value] - w.op.t_done)
        if worst is None or lag > worst[0]:
            worst = (lag, w)
    live = report.liveness
    if worst is not None:
        live["worst lag (s)"] = f"{worst[0]:.2f} (key {worst[1].key}, value {worst[1].value})"
    heals = [float(e["time"]) for e in nemesis if e.get("f") == "heal-all"]
    if not heals:
        return
    t_heal = heals[-1]
    finals = [op.t_invoke for op in ops if op.f == "final-poll"]
    t_end = min(finals) if finals else math.inf
    first_send = min(
        (op.t_done for op in ops if op.f in WRITERS and op.type == "ok" and op.t_invoke >= t_heal),
        default=None,
    )
    first_poll = min(
        (
            op.t_done
            for op in ops
            if op.f in ("poll", "txn")
            and op.type == "ok"
            and op.t_invoke >= t_heal
            and any(m[0] == "poll" and m[1] for m in op.value)
        ),
        default=None,
    )
    live["recovery: first send (s)"] = (
        "never" if first_send is None else f"{first_send - t_heal:.2f}"
    )
    live["recovery: first poll (s)"] = (
        "never" if first_poll is None else f"{first_poll - t_heal:.2f}"
    )
    tried: dict[Any, Operation] = {}
    done_ok: set[Any] = set()
    for op in ops:
        if op.f in ("poll", "txn", "send") and t_heal <= op.t_invoke < t_end:
            tried[op.process] = op
            if op.type == "ok" or op.get("error") == ABORTED_ON_PURPOSE:
                # a transaction the workload told the client to abort ended as asked
                done_ok.add(op.process)
    stuck = sorted((p for p in tried if p not in done_ok), key=str)
    live["stuck after heal"] = (
        ", ".join(
            f"{p}({tried[p].invoke.get('client')}:{tried[p].f}:{(tried[p].get('error') or '')[:60]})"
            for p in stuck
        )
        or "none"
    )
    if stuck:
        report.stats["stuck"] = [tried[p].brief() for p in stuck]


def stats(ops: Sequence[Operation], writes: list[Write], reads: list[Read]) -> dict[str, Any]:
    counts: dict[str, int] = defaultdict(int)
    for op in ops:
        counts[f"{op.f}:{op.type}"] += 1
    return {
        "operations": len(ops),
        "by_type": dict(sorted(counts.items())),
        "sends": len(writes),
        "acknowledged_sends": sum(1 for w in writes if w.op.type == "ok"),
        "reads": len(reads),
    }
