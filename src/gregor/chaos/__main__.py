"""``python -m gregor.chaos``: run the harness, or check a history file.

    python -m gregor.chaos --time-limit 300 --nemesis kill,pause,partition,clock --seed 7
    python -m gregor.chaos --time-limit 60 --bug ack-before-isr --seed 1
    python -m gregor.chaos check chaos-runs/<run>/history.jsonl
    python -m gregor.chaos bugs

Exit status: 0 when the checker found no anomaly, 1 when it found some.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys

from gregor.chaos.bugs import BUGS
from gregor.chaos.checker import check
from gregor.chaos.history import read_history
from gregor.chaos.nemesis import KINDS
from gregor.chaos.runner import ALL_CLIENTS, RunConfig, run


def _list(text: str) -> list[str]:
    return [x for x in text.split(",") if x]


def _pair(text: str) -> tuple[float, float]:
    lo, hi = (float(x) for x in text.split(","))
    return lo, hi


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["check"]:
        report = check(read_history(argv[1]))
        print(report.table(examples=2))
        return 0 if report.valid else 1
    if argv[:1] == ["bugs"]:
        for name, what in BUGS.items():
            mod = importlib.import_module(f"gregor.chaos.bugs.{name.replace('-', '_')}")
            print(f"{name:<26} nemesis={','.join(mod.NEMESIS) or 'none':<22} {what}")
        return 0
    if argv[:1] == ["scenario"]:
        return scenario(argv[1:])
    p = argparse.ArgumentParser(
        prog="python -m gregor.chaos",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--time-limit", type=float, default=60.0, help="seconds of faults (default 60)")
    p.add_argument(
        "--nemesis",
        type=_list,
        default=None,
        help=f"comma-separated, of {','.join(KINDS)} (default kill,pause,partition,clock; "
        "with --bug, the bug's own)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--clients", type=_list, default=list(ALL_CLIENTS), help=f"of {','.join(ALL_CLIENTS)}"
    )
    p.add_argument("--slots", type=int, default=8, help="client processes at once (default 8)")
    p.add_argument("--keys", type=int, default=8, help="keys, i.e. topic-partitions (default 8)")
    p.add_argument(
        "--rate", type=float, default=15.0, help="operations a second, in all (default 15)"
    )
    p.add_argument("--etcd-members", type=int, default=3)
    p.add_argument("--recovery", type=float, default=15.0, help="seconds of workload after healing")
    p.add_argument(
        "--interval", type=_pair, default=(2.0, 6.0), help="seconds between faults: MIN,MAX"
    )
    p.add_argument(
        "--duration", type=_pair, default=(3.0, 10.0), help="seconds a fault lasts: MIN,MAX"
    )
    p.add_argument("--bug", choices=sorted(BUGS), help="start the brokers with this bug patched in")
    p.add_argument("--out", help="run directory (default ./chaos-runs/<time>-seed<N>)")
    args = p.parse_args(argv)
    nemesis = args.nemesis
    if nemesis is None:
        if args.bug:
            nemesis = list(
                importlib.import_module(f"gregor.chaos.bugs.{args.bug.replace('-', '_')}").NEMESIS
            )
        else:
            nemesis = ["kill", "pause", "partition", "clock"]
    unknown = set(nemesis) - set(KINDS)
    if unknown:
        p.error(f"unknown nemesis {','.join(sorted(unknown))}")
    cfg = RunConfig(
        time_limit=args.time_limit,
        nemesis=nemesis,
        seed=args.seed,
        clients=args.clients,
        slots=args.slots,
        keys=args.keys,
        rate=args.rate,
        etcd_members=args.etcd_members,
        bug=args.bug,
        out=args.out,
        recovery=args.recovery,
        interval=args.interval,
        duration=args.duration,
    )
    result = run(cfg)
    rep = result.report
    print(
        f"\nseed {cfg.seed}  nemesis {','.join(cfg.nemesis)}  clients {','.join(cfg.clients)}"
        f"  bug {cfg.bug or '-'}  time {cfg.time_limit:g}s  faults {result.faults}"
        f"  operations {result.operations}"
    )
    print(json.dumps(rep.stats.get("by_type", {})))
    print(rep.table(examples=1))
    print(f"\nhistory: {result.out / 'history.jsonl'}\nreport:  {result.out / 'report.json'}")
    print("VALID" if rep.valid else "INVALID: " + ", ".join(sorted(rep.anomalies)))
    return 0 if rep.valid else 1


def scenario(argv: list[str]) -> int:
    from gregor.chaos.cluster import ChaosCluster
    from gregor.chaos.history import HistoryWriter
    from gregor.chaos.runner import create_topics
    from gregor.chaos.scenarios import KEYS, SCENARIOS, run_scenario

    p = argparse.ArgumentParser(prog="python -m gregor.chaos scenario")
    p.add_argument("name", choices=SCENARIOS)
    p.add_argument("--client", default="confluent", choices=ALL_CLIENTS)
    p.add_argument("--bug", choices=sorted(BUGS))
    p.add_argument("--etcd-members", type=int, default=1)
    p.add_argument("--history", help="write the scenario's history here")
    args = p.parse_args(argv)
    with ChaosCluster(3, etcd_members=args.etcd_members, bug=args.bug) as cluster:
        create_topics(cluster, KEYS)
        history = HistoryWriter(args.history)
        out = run_scenario(cluster, args.name, history, client=args.client)
        history.close()
    report = out.pop("report")
    for k, v in out.items():
        print(f"{k:<34} {v}")
    print(report.table(examples=1))
    return 0 if report.valid else 1


if __name__ == "__main__":
    raise SystemExit(main())
