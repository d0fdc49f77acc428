"""Chaos runs against a real cluster (three brokers on a three-member etcd, every link through
the harness's proxies): a short seeded run under faults must find no anomaly, and brokers with
a bug patched in must fail theirs, each by the anomaly the bug causes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from gregor.chaos.checker import check
from gregor.chaos.history import Op, read_history
from gregor.chaos.runner import ALL_CLIENTS, RunConfig, run
from gregor.testing.etcd import etcd_binary

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(900),  # a run goes on until its condition holds, 300 s at most more
    pytest.mark.skipif(etcd_binary() is None, reason="no etcd binary (scripts/system-deps.sh)"),
]


def short_run(tmp_path: Path, time_limit: float = 20.0, **kw: object) -> tuple[RunConfig, object]:
    cfg = RunConfig(
        time_limit=time_limit,
        recovery=5.0,
        seed=7,
        out=str(tmp_path / "run"),
        interval=(1.0, 3.0),
        duration=(2.0, 5.0),
        **kw,  # type: ignore[arg-type]
    )
    return cfg, run(cfg, log=lambda *_: None)


def every_client_acknowledged(clients: list[str]) -> Callable[[list[Op]], bool]:
    def until(history: list[Op]) -> bool:
        faults = any(e.get("process") == "nemesis" and e.get("f") != "start" for e in history)
        acked = {
            e["client"] for e in history if e["type"] == "ok" and e.get("f") in ("send", "txn")
        }
        return faults and acked == set(clients)

    return until


def test_a_short_seeded_run_under_faults_finds_no_anomaly(tmp_path: Path) -> None:
    # (on a busy machine 20 s may pass before every client has started: the run goes on until
    # each has an acknowledged send and a fault has been injected)
    cfg, result = short_run(
        tmp_path,
        nemesis=["kill", "pause", "partition", "clock"],
        until=every_client_acknowledged(list(ALL_CLIENTS)),
    )
    report = result.report  # type: ignore[attr-defined]
    assert report.anomalies == {}, report.table(examples=2)
    # The run did real work: faults injected, every client library acknowledged sends, and
    # the final read reached the end of every key.
    assert result.faults >= 1  # type: ignore[attr-defined]
    history = read_history(Path(cfg.out or "") / "history.jsonl")
    acked = {e["client"] for e in history if e["type"] == "ok" and e.get("f") in ("send", "txn")}
    assert acked == set(cfg.clients)
    final = [e for e in history if e.get("f") == "final-poll" and e["type"] == "ok"]
    assert len(final) == 1 and final[0]["complete"] == list(range(cfg.keys))
    assert report.stats["acknowledged_sends"] > 0
    assert report.liveness["stuck after heal"] == "none"


@pytest.mark.parametrize(
    ("bug", "anomalies"),
    [
        ("read-committed-past-lso", {"aborted-read", "precommitted-read"}),
        ("offsets-outside-txn", {"aborted-offset-commit"}),
    ],
)
def test_a_broker_with_a_bug_fails_its_run(tmp_path: Path, bug: str, anomalies: set[str]) -> None:
    # The run goes on until the history so far shows the bug's anomaly (the operations that
    # expose it, e.g. an aborted transaction that sent offsets, may take longer than 20 s on a
    # busy machine), at most 300 s more; the verdict is the final check's.
    def shows_the_bug(history: list[Op]) -> bool:
        return bool(set(check(history).anomalies) & anomalies)

    # (no faults to wait for: the run's own length is only a floor, so it is short)
    _cfg, result = short_run(tmp_path, 5.0, nemesis=[], bug=bug, until=shows_the_bug)
    found = set(result.report.anomalies)  # type: ignore[attr-defined]
    assert found & anomalies, result.report.table(examples=2)  # type: ignore[attr-defined]
