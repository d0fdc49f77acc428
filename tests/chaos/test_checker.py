"""The checker on bad histories: each anomaly planted in an otherwise clean history is reported
by its name (and nothing else is), and Kafka's allowances are reported apart, never as
anomalies. Histories are written as a run writes them (invoke, then completion)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gregor.chaos.checker import ANOMALIES, check
from gregor.chaos.history import HistoryWriter, read_history
from gregor.chaos.observations import ABORTED_ON_PURPOSE


class H:
    """Builds a history; each ``op`` is an invocation at ``t`` and a completion at ``t_done``."""

    def __init__(self) -> None:
        self.entries: list[dict[str, Any]] = []
        self.t = 0.0

    def op(
        self,
        process: Any,
        f: str,
        value: Any,
        type_: str = "ok",
        done: Any = None,
        t: float | None = None,
        t_done: float | None = None,
        **extra: Any,
    ) -> None:
        self.t += 1
        t0 = self.t if t is None else t
        t1 = t0 + 0.5 if t_done is None else t_done
        self.entries.append(
            {"type": "invoke", "process": process, "f": f, "value": value, "time": t0}
        )
        self.entries.append(
            {
                "type": type_,
                "process": process,
                "f": f,
                "time": t1,
                "value": value if done is None else done,
                **extra,
            }
        )

    def send(self, process: Any, key: int, value: int, offset: int, **kw: Any) -> None:
        self.op(
            process, "send", [["send", key, value, None]], done=[["send", key, value, offset]], **kw
        )

    def poll(
        self, process: Any, reads: list[tuple[int, int, int]], epoch: int = 0, **kw: Any
    ) -> None:
        self.op(
            process,
            "poll",
            [["poll", []]],
            done=[["poll", [list(r) for r in reads]]],
            epoch=epoch,
            **kw,
        )

    def final(self, reads: list[tuple[int, int, int]], keys: list[int]) -> None:
        self.op(
            "final",
            "final-poll",
            [["poll", []]],
            done=[["poll", [list(r) for r in reads]]],
            complete=keys,
        )

    def history(self) -> list[dict[str, Any]]:
        return [{"index": i, **e} for i, e in enumerate(self.entries)]


def clean() -> H:
    """Two keys, two producers, an assigned consumer; everything read; nothing wrong."""
    h = H()
    h.op(1, "assign", [0, 1])
    h.send(0, 0, 1, 0)
    h.send(0, 0, 2, 1)
    h.send(2, 1, 3, 0)
    h.poll(1, [(0, 0, 1), (0, 1, 2), (1, 0, 3)])
    return h


def finish(h: H, extra: list[tuple[int, int, int]] | None = None) -> list[dict[str, Any]]:
    h.final([(0, 0, 1), (0, 1, 2), (1, 0, 3), *(extra or [])], [0, 1])
    return h.history()


def names(history: list[dict[str, Any]]) -> set[str]:
    return set(check(history).anomalies)


def test_a_clean_history_is_valid() -> None:
    report = check(finish(clean()))
    assert report.anomalies == {}
    assert report.valid
    assert report.stats["acknowledged_sends"] == 3


def test_lost_write() -> None:
    h = clean()
    h.send(0, 0, 4, 2)  # acknowledged at 2, never read, although offset 3 was
    h.send(0, 0, 5, 3)
    h.poll(1, [(0, 3, 5)])
    report = check(finish(h, [(0, 3, 5)]))
    assert set(report.anomalies) == {"lost-write"}
    assert report.anomalies["lost-write"][0]["value"] == 4


def test_unseen() -> None:
    h = clean()
    h.send(0, 1, 9, 1)  # acknowledged past every read, and the final read ended before it
    report = check(finish(h))
    assert set(report.anomalies) == {"unseen"}
    assert report.anomalies["unseen"][0]["final_read_complete"] is True


def test_duplicate() -> None:
    h = clean()
    h.poll(3, [(0, 0, 1), (0, 1, 2), (0, 2, 1)])  # value 1 again at offset 2
    assert names(finish(h, [(0, 2, 1)])) == {"duplicate"}


def test_inconsistent_offsets() -> None:
    h = clean()
    h.poll(3, [(0, 0, 1), (0, 1, 7)])  # offset 1 holds 2 for one reader, 7 for another
    h.send(4, 0, 7, 5)
    assert "inconsistent-offsets" in names(finish(h))


def test_aborted_read() -> None:
    h = clean()
    h.op(5, "txn", [["send", 1, 7, None]], type_="fail", done=[["send", 1, 7, 1]])
    h.poll(1, [(1, 1, 7)])
    assert names(finish(h, [(1, 1, 7)])) == {"aborted-read"}


def test_precommitted_read() -> None:
    h = clean()
    # The transaction runs 20..30 and asks to commit at 29; a poll done at 25 saw its send.
    h.op(
        5, "txn", [["send", 1, 7, None]], done=[["send", 1, 7, 1]], t=20, t_done=30, commit_start=29
    )
    h.poll(1, [(1, 1, 7)], t=24, t_done=25)
    assert names(finish(h, [(1, 1, 7)])) == {"precommitted-read"}


def test_a_read_after_the_commit_began_is_not_precommitted() -> None:
    h = clean()
    h.op(
        5, "txn", [["send", 1, 7, None]], done=[["send", 1, 7, 1]], t=20, t_done=30, commit_start=24
    )
    h.poll(1, [(1, 1, 7)], t=24, t_done=25)
    assert names(finish(h, [(1, 1, 7)])) == set()


def test_torn_transaction() -> None:
    h = clean()
    h.op(5, "txn", [["send", 0, 10, None], ["send", 1, 11, None]], type_="info", done=None)
    h.entries.pop()  # no completion: outcome unknown
    h.poll(1, [(0, 2, 10)])
    report = check(finish(h, [(0, 2, 10)]))  # 11 never in key 1's complete log
    assert set(report.anomalies) == {"torn-transaction"}
    assert report.anomalies["torn-transaction"][0]["absent"] == [(1, 11)]


def test_poll_skip() -> None:
    h = H()
    h.op(1, "assign", [0])
    for v in range(3):
        h.send(0, 0, v + 1, v)
    h.poll(2, [(0, 0, 1), (0, 1, 2), (0, 2, 3)])
    h.poll(1, [(0, 0, 1)], epoch=1)
    h.poll(1, [(0, 2, 3)], epoch=1)  # jumps over offset 1
    h.final([(0, 0, 1), (0, 1, 2), (0, 2, 3)], [0])
    report = check(h.history())
    assert set(report.anomalies) == {"poll-skip"}
    assert report.anomalies["poll-skip"][0]["skipped"] == [(1, 2)]


def test_nonmonotonic_poll() -> None:
    h = clean()
    h.poll(1, [(0, 0, 1)])  # process 1 read offset 1 before, in the same epoch
    assert names(finish(h)) == {"nonmonotonic-poll"}


def test_a_new_assignment_may_start_anywhere() -> None:
    h = clean()
    h.op(1, "assign", [0])
    h.poll(1, [(0, 0, 1)], epoch=1)
    assert names(finish(h)) == set()


def test_nonmonotonic_send() -> None:
    h = clean()
    h.send(0, 0, 4, 0)  # the same producer got offset 1 before
    assert "nonmonotonic-send" in names(finish(h, [(0, 0, 4)]))


def test_committed_offset_regression() -> None:
    h = clean()
    h.op(1, "poll", [["poll", []]], done=[["poll", []]], group="g", commit=[[0, 1]])
    h.op(6, "poll", [["poll", []]], done=[["poll", []]], group="g", commit=[[0, 2]])
    h.op(7, "committed", [0], done=[[0, 1]], group="g")  # 2 overwrote 1 before this fetch began
    report = check(finish(h))
    assert set(report.anomalies) == {"committed-offset-regression"}
    assert report.anomalies["committed-offset-regression"][0]["overwritten_by"] == 2


def test_a_fetch_of_no_committed_offset_after_a_commit_is_a_regression() -> None:
    h = clean()
    h.op(1, "poll", [["poll", []]], done=[["poll", []]], group="g", commit=[[0, 2]])
    h.op(6, "committed", [0], done=[[0, None]], group="g")
    assert names(finish(h)) == {"committed-offset-regression"}


def test_concurrent_commits_may_land_in_either_order() -> None:
    h = clean()
    # Two members commit at once (an unfenced zombie's transactional commit, say): the fetch
    # may see either; the lower one landing last is no regression of the store.
    h.op(
        1, "poll", [["poll", []]], done=[["poll", []]], group="g", commit=[[0, 2]], t=20, t_done=22
    )
    h.op(
        6,
        "txn",
        [["poll", []]],
        done=[["poll", []]],
        group="g",
        commit=[[0, 1]],
        t=21,
        t_done=23,
        commit_start=22,
    )
    h.op(7, "committed", [0], done=[[0, 1]], group="g", t=24, t_done=25)
    assert names(finish(h)) == set()


def test_aborted_offset_commit() -> None:
    h = clean()
    h.op(
        1,
        "txn",
        [["poll", []]],
        type_="fail",
        done=[["poll", [[0, 0, 1], [0, 1, 2]]]],
        group="g",
        commit=[[0, 2]],
        epoch=1,
    )
    h.op(1, "committed", [0], done=[[0, 2]], group="g")  # the aborted transaction's offset
    report = check(finish(h))
    assert "aborted-offset-commit" in report.anomalies
    assert report.anomalies["aborted-offset-commit"][0]["offset"] == 2


def test_g1c_write_read_cycle() -> None:
    h = clean()
    # T1 sends 10 to key 0 and reads T2's 11; T2 sends 11 to key 1 and reads T1's 10.
    h.op(
        5,
        "txn",
        [["send", 0, 10, None], ["poll", []]],
        done=[["send", 0, 10, 2], ["poll", [[1, 1, 11]]]],
        t=20,
        t_done=30,
        commit_start=21,
    )
    h.op(
        6,
        "txn",
        [["send", 1, 11, None], ["poll", []]],
        done=[["send", 1, 11, 1], ["poll", [[0, 2, 10]]]],
        t=20,
        t_done=30,
        commit_start=21,
    )
    report = check(finish(h, [(0, 2, 10), (1, 1, 11)]))
    assert set(report.anomalies) == {"G1c"}
    labels = {label for _a, label, _b in report.anomalies["G1c"][0]["cycle"]}
    assert labels == {"wr:k0", "wr:k1"}


def test_g1c_with_an_ordered_write_write_edge() -> None:
    h = clean()
    # T1 (done at 11) writes key 0 before T2 (begun at 12) does, yet T1 read T2's write.
    h.op(
        5,
        "txn",
        [["send", 0, 10, None], ["poll", []]],
        done=[["send", 0, 10, 2], ["poll", [[1, 1, 11]]]],
        t=10,
        t_done=11,
        commit_start=10.5,
    )
    h.op(
        6,
        "txn",
        [["send", 0, 12, None], ["send", 1, 11, None]],
        done=[["send", 0, 12, 3], ["send", 1, 11, 1]],
        t=12,
        t_done=13,
        commit_start=12.5,
    )
    names_ = names(finish(h, [(0, 2, 10), (0, 3, 12), (1, 1, 11)]))
    assert "G1c" in names_


def test_write_write_interleaving_is_allowed_g0() -> None:
    h = clean()
    # Concurrent transactions whose sends land in opposite orders on two keys: G0, allowed.
    h.op(
        5,
        "txn",
        [["send", 0, 10, None], ["send", 1, 11, None]],
        done=[["send", 0, 10, 2], ["send", 1, 11, 2]],
        t=20,
        t_done=30,
        commit_start=29,
    )
    h.op(
        6,
        "txn",
        [["send", 0, 12, None], ["send", 1, 13, None]],
        done=[["send", 0, 12, 3], ["send", 1, 13, 1]],
        t=20,
        t_done=30,
        commit_start=29,
    )
    report = check(finish(h, [(0, 2, 10), (0, 3, 12), (1, 1, 13), (1, 2, 11)]))
    assert report.anomalies == {}
    assert "G0" in report.allowed


def test_an_unordered_write_write_edge_with_a_read_is_no_cycle() -> None:
    h = clean()
    # T1 writes key 0 before the concurrent T2 does, and reads T2's committed key-1 value:
    # Kafka's transactions do not isolate writes, so this is allowed.
    h.op(
        5,
        "txn",
        [["send", 0, 10, None], ["poll", []]],
        done=[["send", 0, 10, 2], ["poll", [[1, 1, 11]]]],
        t=10,
        t_done=20,
        commit_start=19,
    )
    h.op(
        6,
        "txn",
        [["send", 0, 12, None], ["send", 1, 11, None]],
        done=[["send", 0, 12, 3], ["send", 1, 11, 1]],
        t=11,
        t_done=13,
        commit_start=12.5,
    )
    assert names(finish(h, [(0, 2, 10), (0, 3, 12), (1, 1, 11)])) == set()


def test_int_send_skip_is_allowed() -> None:
    h = clean()
    h.op(
        5,
        "txn",
        [["send", 0, 10, None], ["send", 0, 11, None]],
        done=[["send", 0, 10, 2], ["send", 0, 11, 4]],
        t=20,
        t_done=30,
        commit_start=29,
    )
    h.send(6, 0, 12, 3, t=21, t_done=22)
    report = check(finish(h, [(0, 2, 10), (0, 3, 12), (0, 4, 11)]))
    assert report.anomalies == {}
    assert "int-send-skip" in report.allowed


def test_a_skip_across_a_rebalance_is_allowed_for_subscribers() -> None:
    h = H()
    h.op(1, "subscribe", [0])
    for v in range(3):
        h.send(0, 0, v + 1, v)
    h.poll(1, [(0, 0, 1)], epoch=1)
    h.poll(1, [(0, 2, 3)], epoch=2)  # another member had offset 1 in between
    h.poll(2, [(0, 1, 2)])
    h.final([(0, 0, 1), (0, 1, 2), (0, 2, 3)], [0])
    report = check(h.history())
    assert report.anomalies == {}
    assert "rebalance-skip" in report.allowed


def late_end_txn(h: H, client_id: str, t: float, api_version: int = 1) -> None:
    """A nemesis heal that released a held EndTxn the coordinator accepted (error 0)."""
    h.entries.append(
        {
            "type": "info",
            "process": "nemesis",
            "f": "heal-network",
            "value": None,
            "time": t,
            "released": [
                {
                    "proxy": "client->2",
                    "api_key": 26,
                    "api_version": api_version,
                    "correlation_id": 9,
                    "client_id": client_id,
                    "held_s": 5.0,
                    "error_code": 0,
                }
            ],
        }
    )


def test_a_producers_own_late_end_txn_of_version_1_is_attributed() -> None:
    # Process 5's EndTxn of an earlier transaction, held, is released at 22 while its next
    # transaction (20..30, aborted on purpose) is open: transaction version 1 lets it commit
    # that one (Kafka too, before KIP-890 part 2), so the aborted read is the allowance.
    h = clean()
    h.op(5, "txn", [["send", 1, 7, None]], type_="fail", done=[["send", 1, 7, 1]], t=20, t_done=30)
    late_end_txn(h, "chaos-p5", 22)
    h.poll(1, [(1, 1, 7)], t=23, t_done=24)
    h.t = 40  # the final read comes last
    report = check(finish(h, [(1, 1, 7)]))
    assert report.anomalies == {}
    (allowed,) = report.allowed["late-end-txn"][:1]
    assert allowed["anomaly"] == "aborted-read"
    assert allowed["held"]["client_id"] == "chaos-p5"
    assert allowed["held"]["released_at"] == 22


def test_a_transaction_a_late_end_txn_of_its_own_producer_cut_in_two_is_attributed() -> None:
    # Process 5 sent 7 (key 1), its own held EndTxn(commit) was released at 22 and committed
    # that much; its send of 8 (key 0) went into the next transaction, which failed.
    h = clean()
    h.op(
        5,
        "txn",
        [["send", 1, 7, None], ["send", 0, 8, None]],
        type_="info",
        done=[["send", 1, 7, 1], ["send", 0, 8, 2]],
        t=20,
        t_done=30,
        commit_start=29,
    )
    late_end_txn(h, "chaos-p5", 22)
    h.t = 40
    report = check(finish(h, [(1, 1, 7)]))
    assert report.anomalies == {}
    (torn,) = [e for e in report.allowed["late-end-txn"] if e["anomaly"] == "torn-transaction"]
    assert (torn["present"], torn["absent"]) == ([(1, 7)], [(0, 8)])


def test_a_torn_transaction_without_a_late_end_txn_is_an_anomaly() -> None:
    h = clean()
    h.op(
        5,
        "txn",
        [["send", 1, 7, None], ["send", 0, 8, None]],
        type_="info",
        done=[["send", 1, 7, 1], ["send", 0, 8, 2]],
        t=20,
        t_done=30,
        commit_start=29,
    )
    late_end_txn(h, "chaos-p6", 22)  # another producer's
    h.t = 40
    assert names(finish(h, [(1, 1, 7)])) == {"torn-transaction"}


@pytest.mark.parametrize(
    ("error", "anomaly"),
    [
        # its worker was killed for want of an answer: it may have asked to commit (campaign 4,
        # seed 108: kafka-python's commit reached the coordinator, which wrote the COMMIT
        # markers 89 ms after the sends, and the client never returned)
        ("no answer: worker killed", False),
        # its client said the commit was never asked for (the abort failed)
        ("KafkaTimeoutError; abort: KafkaTimeoutError", True),
    ],
)
def test_a_transaction_without_an_answer_may_have_committed(error: str, anomaly: bool) -> None:
    h = clean()
    h.op(
        5,
        "txn",
        [["send", 1, 7, None]],
        type_="info",
        done=[["send", 1, 7, None]],
        t=20,
        t_done=50,
        error=error,
    )
    h.poll(1, [(1, 1, 7)], t=23, t_done=24)
    h.t = 60  # the final read comes last
    report = check(finish(h, [(1, 1, 7)]))
    assert set(report.anomalies) == ({"precommitted-read"} if anomaly else set())


@pytest.mark.parametrize(
    ("client_id", "at", "allowed"),
    [
        ("chaos-p5", 22, True),  # its own held EndTxn committed the send before the poll
        ("chaos-p6", 22, False),  # another producer's EndTxn cannot commit this one
        (None, 0, False),  # nothing released: reading its own uncommitted send
    ],
)
def test_a_transaction_reading_its_own_send_needs_its_own_late_end_txn(
    client_id: str | None, at: float, allowed: bool
) -> None:
    # Process 5 sends 7 to key 1 and then polls key 1 in the same transaction (consume,
    # transform, produce, with read_committed); its EndTxn of the transaction before, held,
    # is released at 22: transaction version 1 commits what this transaction sent so far, and
    # its consumer reads it (chaos campaign 4, seed 112).
    h = clean()
    h.op(
        5,
        "txn",
        [["send", 1, 7, None], ["poll", []]],
        done=[["send", 1, 7, 1], ["poll", [[1, 1, 7]]]],
        t=20,
        t_done=30,
        commit_start=29,
    )
    if client_id is not None:
        late_end_txn(h, client_id, at)
    h.t = 40  # the final read comes last
    report = check(finish(h, [(1, 1, 7)]))
    if allowed:
        assert report.anomalies == {}
        (pre,) = report.allowed["late-end-txn"]
        assert (pre["anomaly"], pre["held"]["released_at"]) == ("precommitted-read", 22)
    else:
        assert set(report.anomalies) == {"precommitted-read"}
        assert "late-end-txn" not in report.allowed


@pytest.mark.parametrize(
    ("client_id", "at", "api_version"),
    [
        ("chaos-p6", 22, 1),  # another producer's (a zombie's) EndTxn: the coordinator's bug
        ("chaos-p5", 31, 1),  # released after the transaction ended
        ("chaos-p5", 22, 5),  # transaction version 2 bumps the epoch: it cannot end the next
    ],
)
def test_a_late_end_txn_that_cannot_explain_the_read_is_no_excuse(
    client_id: str, at: float, api_version: int
) -> None:
    h = clean()
    h.op(
        5, "txn", [["send", 1, 7, None]], done=[["send", 1, 7, 1]], t=20, t_done=30, commit_start=29
    )
    late_end_txn(h, client_id, at, api_version)
    h.poll(1, [(1, 1, 7)], t=23, t_done=25)
    h.t = 40  # the final read comes last
    report = check(finish(h, [(1, 1, 7)]))
    assert set(report.anomalies) == {"precommitted-read"}
    assert "late-end-txn" not in report.allowed


def test_liveness_figures_after_the_heal() -> None:
    h = clean()
    h.entries.append({"type": "info", "process": "nemesis", "f": "heal-all", "time": 50.0})
    h.send(0, 0, 4, 2, t=52, t_done=53)
    h.poll(1, [(0, 2, 4)], t=54, t_done=55.5)
    h.op(
        7,
        "send",
        [["send", 1, 20, None]],
        type_="info",
        done=[["send", 1, 20, None]],
        t=51,
        t_done=60,
        error="timed out",
    )
    # process 8 only aborted a transaction after the heal, as its workload told it to: not stuck
    h.op(
        8,
        "txn",
        [["send", 2, 30, None]],
        type_="fail",
        done=[["send", 2, 30, 0]],
        t=56,
        t_done=57,
        error=ABORTED_ON_PURPOSE,
    )
    h.t = 100  # the final read comes last
    report = check(finish(h, [(0, 2, 4)]))
    live = report.liveness
    assert live["recovery: first send (s)"] == "3.00"
    assert live["recovery: first poll (s)"] == "5.50"
    assert live["stuck after heal"].startswith("7(") and "8(" not in live["stuck after heal"]
    assert (
        live["worst lag (s)"] == "3.00 (key 0, value 1)"
    )  # acknowledged at 2.5, first read at 5.5


@pytest.mark.parametrize("name", ANOMALIES)
def test_every_anomaly_has_a_planted_history(name: str) -> None:
    # Each named anomaly above is planted by some test here (a guard against adding a name
    # the checker reports but no history proves).
    source = Path(__file__).read_text()
    planted = {
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
    }
    assert name in planted
    assert f'"{name}"' in source


def test_unexplained_committed_offset() -> None:
    h = clean()
    h.op(1, "committed", [0], done=[[0, 9]], group="g")  # no commit ever wrote 9
    assert names(finish(h)) == {"unexplained-committed-offset"}


def test_the_history_file_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    w = HistoryWriter(path)
    for e in finish(clean()):
        w.append({k: v for k, v in e.items() if k != "index"})
    w.close()
    back = read_history(path)
    assert back == finish(clean())
    assert check(back).valid


def test_each_poll_carries_its_own_epoch() -> None:
    h = clean()
    h.op(8, "subscribe", [0, 1])
    # One transaction polls twice; a rebalance between the polls rewinds key 0 (allowed), but
    # a rewind with no rebalance between is not.
    h.op(
        8,
        "txn",
        [["poll", []], ["poll", []]],
        done=[["poll", [[0, 0, 1], [0, 1, 2]], 1], ["poll", [[0, 0, 1]], 2]],
        commit_start=0,
    )
    report = check(finish(h))
    assert report.anomalies == {}
    assert "rebalance-rewind" in report.allowed
    h.op(
        8,
        "txn",
        [["poll", []], ["poll", []]],
        done=[["poll", [[0, 1, 2]], 2], ["poll", [[0, 0, 1]], 2]],
        commit_start=0,
    )
    assert names(finish(h)) == {"nonmonotonic-poll"}


def test_a_read_of_a_transaction_never_asked_to_commit_is_precommitted() -> None:
    h = clean()
    # The client aborted (the abort failed: outcome unknown) and never asked to commit, yet
    # the value is read: a late request from an earlier transaction committed it.
    h.op(
        5,
        "txn",
        [["send", 1, 7, None]],
        type_="info",
        done=[["send", 1, 7, 1]],
        abort=True,
        error="abort failed",
    )
    h.poll(1, [(1, 1, 7)])
    report = check(finish(h, [(1, 1, 7)]))
    assert set(report.anomalies) == {"precommitted-read"}
