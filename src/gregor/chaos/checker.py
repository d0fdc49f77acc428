"""The checker: every anomaly a run's history shows, by name, each with examples.

Theory of operation. Each key is one topic-partition, a log. The history (see ``history``) says
what every client sent (values, globally unique, with the offsets the broker acknowledged) and
what every poll returned (key, offset, value, in order). From it the checker rebuilds, per key,
the log as clients saw it (offset -> value from reads and acknowledgements) and its *version
order* (the values reads returned, by offset), then looks for what Kafka's semantics forbid:

==============================  ================================================================
lost-write                      an acknowledged send (its operation ``ok``) never read, although
                                some read reached an offset at or past it
unseen                          an acknowledged send never read, past every offset read: after the
                                final catch-up read, still missing
duplicate                       one value at two offsets
inconsistent-offsets            two values at one offset (reads or acknowledgements disagree)
aborted-read                    a read of a value whose transaction certainly aborted (``fail``)
precommitted-read               a read that completed before the writing transaction asked to
                                commit (or before the write began)
torn-transaction                a transaction some of whose sends are in the log and some absent
                                from a complete final read
poll-skip                       a consumer's successive reads of a key, within one assignment
                                epoch, jump over values that other reads show are there
nonmonotonic-poll               a consumer's successive reads of a key, within one epoch, go back
                                or repeat an offset
nonmonotonic-send               a producer's acknowledged sends to a key get offsets that go back
committed-offset-regression     a group's committed offset for a key goes down: an acknowledged
                                commit (or a fetch of the committed offsets) lower than one
                                acknowledged before it began
aborted-offset-commit           a group's committed offset, as fetched, that only an aborted
                                transaction wrote (unexplained-committed-offset: none wrote it)
G1c                             a cycle of write-read edges (T1 wrote what T2 read) and *ordered*
                                write-write edges (T1's value right before T2's in a key's log,
                                and T1 completed before T2 began or both are one client)
==============================  ================================================================

Kafka's own allowances are reported apart, never as anomalies: transactions do not isolate
writes, so write-write orders may disagree between keys (``G0``: a cycle of write-write edges
alone) and a transaction's sends to one key may have others' values between them
(``int-send-skip``); a subscribed consumer may skip or go back across a rebalance
(``rebalance-skip``, ``rebalance-rewind``); a fetched committed offset may come from a commit of
unknown outcome (``late-commit``); and under transaction version 1 (EndTxn below v5, e.g.
librdkafka) a producer's own EndTxn held back by the proxy and released while its next
transaction is open ends that transaction (``late-end-txn``: the aborted or precommitted read
or the torn transaction it causes, with the released request as evidence; KIP-890 part 2 is Kafka's fix, and it needs
the client). Write-write edges between concurrent transactions are left
out of the G1c graph for the same reason (Kafka allows them in any order), which keeps every
cycle found a real one: an ordered write-write edge and a write-read edge both go forward in
real time, so a cycle of them is impossible without an anomaly.

The operations, the values they wrote and read, and the report are ``observations``'s.
Liveness figures (``liveness``): the worst lag between a send's acknowledgement and its first read, the
clients that completed nothing after the last heal (stuck), and the time from that heal to the
first acknowledged send and the first poll that returned records.
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

import networkx as nx

from gregor.chaos.history import Op
from gregor.chaos.liveness import liveness, stats
from gregor.chaos.observations import (
    ALLOWED,
    ANOMALIES,
    READERS,
    WRITERS,
    Operation,
    Read,
    Report,
    Write,
    pair,
    writes_and_reads,
)

__all__ = ["ALLOWED", "ANOMALIES", "Report", "check"]


def check(history: Iterable[Op]) -> Report:
    ops, nemesis = pair(history)
    report = Report()
    writes, reads = writes_and_reads(ops)
    by_value: dict[int, Write] = {}
    for w in writes:
        by_value.setdefault(w.value, w)
    read_values: dict[int, list[Read]] = defaultdict(list)
    for r in reads:
        read_values[r.value].append(r)

    # The log as seen: offset -> values and value -> offsets, from reads and acknowledgements.
    at_offset: dict[int, dict[int, set[int]]] = defaultdict(lambda: defaultdict(set))
    offsets_of: dict[tuple[int, int], set[int]] = defaultdict(set)
    for r in reads:
        at_offset[r.key][r.offset].add(r.value)
        offsets_of[(r.key, r.value)].add(r.offset)
    for w in writes:
        if w.offset is not None and w.op.type in ("ok", "fail"):
            at_offset[w.key][w.offset].add(w.value)
            offsets_of[(w.key, w.value)].add(w.offset)
    for key, offsets in sorted(at_offset.items()):
        for offset, values in sorted(offsets.items()):
            if len(values) > 1:
                report.add(
                    "inconsistent-offsets", {"key": key, "offset": offset, "values": sorted(values)}
                )
    for (key, value), offs in sorted(offsets_of.items()):
        if len(offs) > 1:
            report.add("duplicate", {"key": key, "value": value, "offsets": sorted(offs)})

    # Version order per key: what reads returned, by offset.
    order: dict[int, tuple[list[int], list[int]]] = {}
    read_by_key: dict[int, dict[int, int]] = defaultdict(dict)
    for r in reads:
        read_by_key[r.key].setdefault(r.offset, r.value)
    for key, m in read_by_key.items():
        key_offsets = sorted(m)
        order[key] = (key_offsets, [m[o] for o in key_offsets])
    max_read = {k: offs[-1] for k, (offs, _) in order.items() if offs}

    complete: set[int] = set()
    for op in ops:
        if op.f == "final-poll" and op.type == "ok":
            complete.update(int(k) for k in op.get("complete", []))

    _check_writes(report, writes, read_values, max_read, complete)
    _check_reads(report, ops, reads, by_value, _late_end_txns(nemesis))
    _check_txns(report, ops, by_value, read_values, complete, _late_end_txns(nemesis))
    _check_polls(report, ops, order)
    _check_sends(report, ops, at_offset)
    _check_commits(report, ops)
    _check_cycles(report, ops, writes, reads, by_value, at_offset)
    liveness(report, ops, nemesis, writes, read_values)
    report.stats = stats(ops, writes, reads)
    return report


def _check_writes(
    report: Report,
    writes: list[Write],
    read_values: dict[int, list[Read]],
    max_read: dict[int, int],
    complete: set[int],
) -> None:
    for w in writes:
        if w.op.type != "ok" or w.value in read_values:
            continue
        example = {"key": w.key, "value": w.value, "offset": w.offset, **w.op.brief()}
        if w.offset is not None and w.key in max_read and w.offset <= max_read[w.key]:
            report.add("lost-write", {**example, "highest_read_offset": max_read[w.key]})
        else:
            report.add("unseen", {**example, "final_read_complete": w.key in complete})


#: How a worker's client names itself (``worker``); a scenario records ``client_id`` itself.
def _client_id(op: Operation) -> str:
    return str(op.invoke.get("client_id") or f"chaos-p{op.process}")


def _late_end_txns(nemesis: Sequence[Op]) -> list[tuple[float, dict[str, Any]]]:
    """Held EndTxn requests of transaction version 1 (EndTxn below v5: no epoch bump) that the
    coordinator accepted when they were released late: (release time, what was released)."""
    out = []
    for e in nemesis:
        released = e.get("released") if e.get("f") != "release" else e.get("value")
        for r in released or []:
            if (
                isinstance(r, dict)
                and r.get("api_key") == 26
                and int(r.get("api_version", 5)) < 5
                and r.get("error_code") == 0
                and r.get("client_id")
            ):
                out.append((float(e["time"]), r))
    return out


def _late_end_txn(
    late: Sequence[tuple[float, dict[str, Any]]],
    writer: Operation,
    reader: Operation | None = None,
) -> dict[str, Any] | None:
    """The held EndTxn of the writer's own producer released while the writer's transaction
    was open (and before the read ended), if any: Kafka's transaction version 1 lets it end
    that transaction (KIP-890 part 2 fences it with an epoch bump per transaction)."""
    for t, r in late:
        if (
            r["client_id"] == _client_id(writer)
            and writer.t_invoke <= t <= writer.t_done
            and (reader is None or t <= reader.t_done)
        ):
            return {"released_at": t, **r}
    return None


def _check_reads(
    report: Report,
    ops: Sequence[Operation],
    reads: list[Read],
    by_value: dict[int, Write],
    late: Sequence[tuple[float, dict[str, Any]]] = (),
) -> None:
    del ops
    for r in reads:
        w = by_value.get(r.value)
        if w is None:
            continue
        example = {
            "key": r.key,
            "offset": r.offset,
            "value": r.value,
            "writer": w.op.brief(),
            "reader": r.op.brief(),
        }
        if w.op.type == "fail":
            held = _late_end_txn(late, w.op, r.op) if w.op.f == "txn" else None
            if held is not None:
                report.add("late-end-txn", {"anomaly": "aborted-read", **example, "held": held})
            else:
                report.add("aborted-read", example)
        if r.op.f == "final-poll":
            continue
        if w.op.f == "txn":
            start = w.op.get("commit_start")
            own = r.op is w.op
            # A transaction that ended without its client asking to commit (an abort that
            # failed, or an error before the commit) was never to be read, whoever ended it
            # (one whose abort succeeded is an aborted read, above). Its client must have said
            # so: a worker killed for want of an answer may have asked to commit at any time.
            never = w.op.answered and start is None and w.op.type == "info"
            early = never or r.op.t_done < (start if start is not None else w.op.t_invoke)
            if own or early:
                pre = {**example, "commit_start": start}
                # (its own read too: the late EndTxn committed what the transaction had sent
                # so far, which its consumer may then read before the transaction's own commit)
                held = _late_end_txn(late, w.op, r.op)
                if held is not None:
                    report.add(
                        "late-end-txn", {"anomaly": "precommitted-read", **pre, "held": held}
                    )
                else:
                    report.add("precommitted-read", pre)
        elif r.op.t_done < w.op.t_invoke:
            report.add("precommitted-read", example)


def _check_txns(
    report: Report,
    ops: Sequence[Operation],
    by_value: dict[int, Write],
    read_values: dict[int, list[Read]],
    complete: set[int],
    late: Sequence[tuple[float, dict[str, Any]]] = (),
) -> None:
    del by_value
    for op in ops:
        if op.f != "txn":
            continue
        sends = [(int(m[1]), int(m[2])) for m in op.value if m[0] == "send"]
        if len(sends) < 2:
            continue
        present = [(k, v) for k, v in sends if v in read_values]
        absent = [(k, v) for k, v in sends if v not in read_values and k in complete]
        if present and absent:
            example = {"present": present, "absent": absent, **op.brief()}
            held = _late_end_txn(late, op)
            if held is not None:  # the late EndTxn ended the transaction part way
                report.add("late-end-txn", {"anomaly": "torn-transaction", **example, "held": held})
            else:
                report.add("torn-transaction", example)


def _check_polls(
    report: Report, ops: Sequence[Operation], order: dict[int, tuple[list[int], list[int]]]
) -> None:
    mode: dict[Any, str] = {}
    last: dict[tuple[Any, int], tuple[int, int, int, Operation]] = {}
    for op in ops:
        if op.f in ("assign", "subscribe"):
            mode[op.process] = op.f
        if op.f not in READERS or op.type not in ("ok", "fail") or op.done is None:
            continue
        for mop in op.done.get("value") or []:
            if mop[0] != "poll":
                continue
            epoch = int(mop[2] if len(mop) > 2 else op.done.get("epoch", 0))
            for k, o, v in mop[1]:
                k, o, v = int(k), int(o), int(v)
                prev = last.get((op.process, k))
                last[(op.process, k)] = (epoch, o, v, op)
                if prev is None:
                    continue
                p_epoch, p_off, p_val, p_op = prev
                same = p_epoch == epoch
                example = {
                    "key": k,
                    "process": op.process,
                    "from": [p_off, p_val],
                    "to": [o, v],
                    "ops": [p_op.index, op.index],
                    "client": op.invoke.get("client"),
                }
                if o <= p_off:
                    if same:
                        report.add("nonmonotonic-poll", example)
                    elif mode.get(op.process) == "subscribe":
                        report.add("rebalance-rewind", example)
                    continue
                offs, vals = order.get(k, ([], []))
                lo = bisect.bisect_right(offs, p_off)
                hi = bisect.bisect_left(offs, o)
                if hi > lo:
                    skipped = list(zip(offs[lo:hi], vals[lo:hi], strict=True))
                    if same:
                        report.add(
                            "poll-skip",
                            {**example, "skipped": skipped[:10], "skipped_count": len(skipped)},
                        )
                    elif mode.get(op.process) == "subscribe":
                        report.add("rebalance-skip", {**example, "skipped_count": len(skipped)})


def _check_sends(
    report: Report, ops: Sequence[Operation], at_offset: dict[int, dict[int, set[int]]]
) -> None:
    last: dict[tuple[Any, int], tuple[int, int, Operation]] = {}
    sorted_offsets = {k: sorted(m) for k, m in at_offset.items()}
    for op in ops:
        if op.f not in WRITERS or op.type not in ("ok", "fail"):
            continue
        in_op: dict[int, int] = {}
        for mop in op.value:
            if mop[0] != "send" or len(mop) < 4 or mop[3] is None:
                continue
            k, v, o = int(mop[1]), int(mop[2]), int(mop[3])
            prev = last.get((op.process, k))
            if prev is not None and o <= prev[0]:
                report.add(
                    "nonmonotonic-send",
                    {
                        "key": k,
                        "process": op.process,
                        "from": [prev[0], prev[1]],
                        "to": [o, v],
                        "ops": [prev[2].index, op.index],
                        "client": op.invoke.get("client"),
                    },
                )
            if k in in_op and o > in_op[k]:
                offs = sorted_offsets.get(k, [])
                between = offs[bisect.bisect_right(offs, in_op[k]) : bisect.bisect_left(offs, o)]
                if between:
                    report.add(
                        "int-send-skip",
                        {
                            "key": k,
                            "op": op.index,
                            "from": in_op[k],
                            "to": o,
                            "between": between[:5],
                        },
                    )
            in_op[k] = o
            last[(op.process, k)] = (o, v, op)


def _check_commits(report: Report, ops: Sequence[Operation]) -> None:
    """A group's committed offset for a key is a register: each fetch (``committed``) must
    return a value some commit wrote (``aborted-offset-commit`` when only an aborted
    transaction wrote it, ``unexplained-committed-offset`` when none did) and that no later
    acknowledged commit had overwritten before the fetch began (``committed-offset-regression``:
    the store went back). Commits of unknown outcome may land any time (``late-commit``)."""
    # (group, key) -> commits as (offset, t_invoke, t_done); info commits have t_done inf
    written: dict[tuple[str, int], list[tuple[int, float, float, Operation]]] = defaultdict(list)
    failed: dict[tuple[str, int], set[int]] = defaultdict(set)
    unknown_info: dict[str, list[float]] = defaultdict(list)  # group -> invoke times
    observed: list[tuple[str, int, int | None, Operation]] = []
    group_of: dict[Any, str] = {}
    for op in ops:
        group = op.get("group") or op.invoke.get("group")
        if group is not None:
            group_of[op.process] = group
        if op.f == "committed" and op.type == "ok":
            for k, o in op.get("value") or []:
                observed.append((str(group), int(k), None if o is None else int(o), op))
            continue
        if op.f not in ("poll", "txn"):
            continue
        if op.done is None:
            g = group_of.get(op.process)
            if g is not None:
                unknown_info[g].append(op.t_invoke)
            continue
        for k, o in op.done.get("commit") or []:
            gk = (str(group), int(k))
            if op.type == "fail":
                failed[gk].add(int(o))
            else:
                written[gk].append(
                    (int(o), op.t_invoke, op.t_done if op.type == "ok" else math.inf, op)
                )
        for k, o in op.done.get("commit_info") or []:  # a commit that raised: it may land
            written[(str(group), int(k))].append((int(o), op.t_invoke, math.inf, op))

    for group, k, o, r in observed:
        gk = (group, k)
        late = any(t < r.t_done for t in unknown_info.get(group, []))
        example = {"group": group, "key": k, "offset": o, "op": r.index, "process": r.process}
        acked_before = [w for w in written.get(gk, []) if w[2] < r.t_invoke]
        if o is None:
            if acked_before and not late:
                top = max(acked_before, key=lambda w: w[2])
                report.add(
                    "committed-offset-regression",
                    {**example, "overwrites": top[0], "lost_op": top[3].index},
                )
            continue
        writers = [w for w in written.get(gk, []) if w[0] == o and w[1] < r.t_done]
        if not writers:
            if late:
                report.add("late-commit", example)
            elif o in failed.get(gk, set()):
                report.add("aborted-offset-commit", example)
            else:
                report.add("unexplained-committed-offset", example)
            continue
        # Stale: every writer of o was followed by an acknowledged commit of another value that
        # began after it completed and completed before this fetch began.
        newer = None
        for w in writers:
            over = [x for x in acked_before if x[0] != o and x[1] > w[2]]
            if not over:
                newer = None
                break
            newer = max(over, key=lambda x: x[2])
        if newer is not None:
            name = "late-commit" if late else "committed-offset-regression"
            report.add(name, {**example, "overwritten_by": newer[0], "newer_op": newer[3].index})


def _check_cycles(
    report: Report,
    ops: Sequence[Operation],
    writes: list[Write],
    reads: list[Read],
    by_value: dict[int, Write],
    at_offset: dict[int, dict[int, set[int]]],
) -> None:
    del ops, writes
    g: nx.DiGraph = nx.DiGraph()
    g0: nx.DiGraph = nx.DiGraph()
    node: dict[int, Operation] = {}
    for r in reads:
        w = by_value.get(r.value)
        if (
            w is None
            or w.op is r.op
            or w.op.type == "fail"
            or r.op.f == "final-poll"
            or r.op.type != "ok"
        ):
            continue
        node[w.op.index], node[r.op.index] = w.op, r.op
        _edge(g, w.op.index, r.op.index, "wr", r.key)
    for key, offsets in at_offset.items():
        chain = [next(iter(vs)) for _o, vs in sorted(offsets.items()) if len(vs) == 1]
        prev: Write | None = None
        seen: set[int] = set()
        for v in chain:
            w = by_value.get(v)
            if w is None or w.op.type == "fail" or v in seen:
                continue  # a duplicate is reported as such; its first offset orders it
            seen.add(v)
            if prev is not None and prev.op is not w.op:
                a, b = prev.op, w.op
                node[a.index], node[b.index] = a, b
                _edge(g0, a.index, b.index, "ww", key)
                if a.t_done < b.t_invoke or a.process == b.process:
                    _edge(g, a.index, b.index, "ww", key)
            prev = w
    for scc in nx.strongly_connected_components(g):
        if len(scc) < 2:
            continue
        cycle = nx.find_cycle(g.subgraph(scc))
        report.add(
            "G1c",
            {
                "cycle": [
                    (node[a].brief()["op"], g.edges[a, b]["label"], node[b].brief()["op"])
                    for a, b in cycle
                ],
                "ops": [node[a].brief() for a, _ in cycle],
            },
        )
    for scc in nx.strongly_connected_components(g0):
        if len(scc) >= 2:
            cycle = nx.find_cycle(g0.subgraph(scc))
            report.add("G0", {"cycle": [(a, g0.edges[a, b]["label"], b) for a, b in cycle]})


def _edge(g: nx.DiGraph, a: int, b: int, kind: str, key: int) -> None:
    if g.has_edge(a, b):
        return
    g.add_edge(a, b, label=f"{kind}:k{key}")
