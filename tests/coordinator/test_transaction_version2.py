"""Transaction version 2 (KIP-890 part 2) in the transaction coordinator, driven directly.

A version 2 client's EndTxn (v5) bumps the producer epoch; the markers carry the bumped epoch
and the answer hands it to the client. A late request of an ended transaction then carries an
old epoch and is fenced instead of ending the next one (the hold-and-release anomaly of
Kafka's version 1 protocol, which version 1 clients keep, as in Kafka).
"""

from __future__ import annotations

import struct

import pytest
from harness import T0
from txn_harness import TIMEOUT, TxnHarness

from gregor.coordinator.txn.coordinator import EndTxnResult, InitProducerIdResult
from gregor.coordinator.txn.records import TxnLogValue, encode_key, encode_value
from gregor.coordinator.txn.state import MAX_EPOCH, TxnState
from gregor.protocol.errors import ErrorCode as E
from gregor.protocol.records.batch import RecordBatchBuilder, decode_batch


def v2(transaction_version: int = 2) -> tuple[TxnHarness, int, int]:
    h = TxnHarness(transaction_version=transaction_version)
    r = h.init("tx")
    return h, r.producer_id, r.producer_epoch


def test_an_end_bumps_the_epoch_and_the_markers_carry_it() -> None:
    h, pid, epoch = v2()
    assert h.add2("tx", pid, epoch, ("t", 0), ("t", 1)) == 0
    assert h.coord.txns["tx"].client_transaction_version == 2
    assert h.end2("tx", pid, epoch, True) == EndTxnResult(0, pid, epoch + 1)
    assert h.markers == [("t", 0, pid, epoch + 1, True, 4), ("t", 1, pid, epoch + 1, True, 4)]
    assert h.state("tx") is TxnState.COMPLETE_COMMIT
    # The next transaction runs at the bumped epoch; the old one is fenced everywhere.
    assert h.add2("tx", pid, epoch, ("t", 0)) == E.PRODUCER_FENCED
    assert h.add2("tx", pid, epoch + 1, ("t", 2)) == 0
    assert h.end2("tx", pid, epoch + 1, False) == EndTxnResult(0, pid, epoch + 2)
    assert h.markers[-1] == ("t", 2, pid, epoch + 2, False, 4)
    # The PrepareCommit record already holds the bumped epoch and the client's version.
    prepare = [
        v for v in h.records_of("tx") if v is not None and v.state == TxnState.PREPARE_COMMIT
    ]
    assert [(v.producer_epoch, v.client_transaction_version) for v in prepare] == [(epoch + 1, 2)]


def test_a_late_end_of_the_same_epoch_is_fenced_and_leaves_the_next_transaction_open() -> None:
    h, pid, epoch = v2()
    h.add2("tx", pid, epoch, ("t", 0))
    assert h.end2("tx", pid, epoch, True) == EndTxnResult(
        0, pid, epoch + 1
    )  # T1, retried by the client
    assert h.add2("tx", pid, epoch + 1, ("t", 1)) == 0  # T2 begins
    markers = list(h.markers)
    # T1's first EndTxn, held back by the network, arrives now.
    assert h.end2("tx", pid, epoch, True) == EndTxnResult(E.PRODUCER_FENCED)
    assert h.end2("tx", pid, epoch, False) == EndTxnResult(E.PRODUCER_FENCED)
    md = h.coord.txns["tx"]
    assert (md.state, md.partitions, md.producer_epoch) == (TxnState.ONGOING, {("t", 1)}, epoch + 1)
    assert h.markers == markers
    # T2 ends as its producer says.
    assert h.end2("tx", pid, epoch + 1, False) == EndTxnResult(0, pid, epoch + 2)
    assert h.markers[-1] == ("t", 1, pid, epoch + 2, False, 4)


def test_a_version_1_client_keeps_the_epoch_on_a_version_2_cluster() -> None:
    # EndTxn below v5 is a version 1 client's whatever the cluster finalized (as in Kafka),
    # with version 1's weakness: a late EndTxn of the same epoch ends the next transaction.
    h, pid, epoch = v2()
    h.add("tx", pid, epoch, ("t", 0))
    assert h.end("tx", pid, epoch, True) == 0
    assert h.markers == [("t", 0, pid, epoch, True, 4)]
    assert h.coord.txns["tx"].producer_epoch == epoch
    h.add("tx", pid, epoch, ("t", 1))
    assert h.end("tx", pid, epoch, True) == 0  # the late one commits T2
    assert h.markers[-1] == ("t", 1, pid, epoch, True, 4)


def test_a_retry_of_the_end_that_bumped_the_epoch_gets_the_same_answer() -> None:
    h, pid, epoch = v2()
    h.add2("tx", pid, epoch, ("t", 0))
    h.marker_errors = {("t", 0): [E.NOT_LEADER_OR_FOLLOWER]}
    assert h.end2("tx", pid, epoch, True) == EndTxnResult(0, pid, epoch + 1)
    assert h.state("tx") is TxnState.PREPARE_COMMIT
    # While the markers are being written: the same end is in progress, the other is wrong.
    assert h.end2("tx", pid, epoch, True) == EndTxnResult(E.CONCURRENT_TRANSACTIONS)
    assert h.end2("tx", pid, epoch, False) == EndTxnResult(E.INVALID_TXN_STATE)
    # The client already at the new epoch is told to wait, not fenced.
    assert h.add2("tx", pid, epoch + 1, ("t", 1)) == E.CONCURRENT_TRANSACTIONS
    assert h.end2("tx", pid, epoch + 1, True) == EndTxnResult(E.PRODUCER_FENCED)
    h.advance(h.config.retry_backoff_ms)
    assert h.state("tx") is TxnState.COMPLETE_COMMIT
    assert h.end2("tx", pid, epoch, True) == EndTxnResult(0, pid, epoch + 1)
    assert h.end2("tx", pid, epoch, False) == EndTxnResult(E.INVALID_TXN_STATE)
    assert len(h.markers) == 1


@pytest.mark.parametrize(
    ("state", "which", "commit", "expected"),
    [
        # Kafka's table for the idle states: a retry has the epoch below, current the epoch.
        ("empty", "retry", False, E.PRODUCER_FENCED),
        ("empty", "current", False, "bump"),
        ("empty", "retry", True, E.PRODUCER_FENCED),
        ("empty", "current", True, E.INVALID_TXN_STATE),
        ("abort", "retry", False, 0),
        ("abort", "current", False, "bump"),
        ("abort", "retry", True, E.INVALID_TXN_STATE),
        ("abort", "current", True, E.INVALID_TXN_STATE),
        ("commit", "retry", False, E.INVALID_TXN_STATE),
        ("commit", "current", False, "bump"),
        ("commit", "retry", True, 0),
        ("commit", "current", True, E.INVALID_TXN_STATE),
        # Anything older or newer is fenced.
        ("commit", "older", True, E.PRODUCER_FENCED),
        ("abort", "newer", False, E.PRODUCER_FENCED),
    ],
)
def test_ends_of_an_idle_transaction(
    state: str, which: str, commit: bool, expected: object
) -> None:
    h = TxnHarness(transaction_version=2)
    h.init("tx")
    pid, current = h.init("tx")[1:]  # epoch 1, Empty
    if state != "empty":
        assert h.add2("tx", pid, current, ("t", 0)) == 0
        assert h.end2("tx", pid, current, state == "commit") == EndTxnResult(0, pid, current + 1)
        assert h.state("tx") is (
            TxnState.COMPLETE_COMMIT if state == "commit" else TxnState.COMPLETE_ABORT
        )
        current += 1
    epoch = {"retry": current - 1, "current": current, "older": current - 2, "newer": current + 1}[
        which
    ]
    markers = len(h.markers)
    got = h.end2("tx", pid, epoch, commit)
    if expected == "bump":
        assert got == EndTxnResult(0, pid, current + 1)
        md = h.coord.txns["tx"]
        assert (md.state, md.producer_epoch, md.start_ms) == (
            TxnState.COMPLETE_ABORT,
            current + 1,
            T0,
        )
        assert len(h.markers) == markers  # nothing was added: no markers
    elif expected == 0:
        assert got == EndTxnResult(0, pid, current)
        assert h.coord.txns["tx"].producer_epoch == current
    else:
        assert got == EndTxnResult(expected)  # type: ignore[arg-type]
        assert h.coord.txns["tx"].producer_epoch == current


def _load_state(h: TxnHarness, tid: str, value: TxnLogValue) -> None:
    """Put ``value`` in the log as the id's latest record and load it (a restart)."""
    b = RecordBatchBuilder()
    b.append(T0, encode_key(tid), encode_value(value, 1))
    h.log[h.coord.partition_for(tid)].append(b.build())
    h.restart()


def test_the_end_that_exhausts_the_epoch_moves_to_a_new_producer_id() -> None:
    h = TxnHarness(transaction_version=2)
    _load_state(
        h, "tx", TxnLogValue(900, MAX_EPOCH - 1, TIMEOUT, int(TxnState.COMPLETE_COMMIT), [], T0, T0)
    )
    assert h.add2("tx", 900, MAX_EPOCH - 1, ("t", 0)) == 0
    h.marker_errors = {("t", 0): [E.NOT_LEADER_OR_FOLLOWER]}
    # The answer is the new id at epoch 0; the markers carry the last epoch of the old one.
    assert h.end2("tx", 900, MAX_EPOCH - 1, True) == EndTxnResult(0, 1000, 0)
    md = h.coord.txns["tx"]
    assert (md.producer_id, md.producer_epoch, md.next_producer_id) == (900, MAX_EPOCH, 1000)
    # The client starting its next transaction with the new id is told to wait, not fenced.
    assert h.add2("tx", 1000, 0, ("t", 1)) == E.CONCURRENT_TRANSACTIONS
    # The move survives a restart in the middle (the Prepare record holds the next id).
    h.restart()
    assert h.markers == [("t", 0, 900, MAX_EPOCH, True, 5)]
    md = h.coord.txns["tx"]
    assert (md.state, md.producer_id, md.producer_epoch, md.last_producer_id) == (
        TxnState.COMPLETE_COMMIT,
        1000,
        0,
        900,
    )
    # A retry of that end, with the old id and its last epoch, is recognised.
    assert h.end2("tx", 900, MAX_EPOCH - 1, True) == EndTxnResult(0, 1000, 0)
    assert h.end2("tx", 900, MAX_EPOCH - 1, False) == EndTxnResult(E.INVALID_TXN_STATE)
    assert h.end2("tx", 900, MAX_EPOCH - 2, True) == EndTxnResult(E.INVALID_PRODUCER_ID_MAPPING)
    assert h.add2("tx", 1000, 0, ("t", 1)) == 0
    assert h.end2("tx", 1000, 0, True) == EndTxnResult(0, 1000, 1)


def test_fences_bump_the_epoch_once_more_on_a_version_2_cluster() -> None:
    h, pid, epoch = v2()
    h.add2("tx", pid, epoch, ("t", 0))
    # A new producer: the fence epoch, then the abort's own bump.
    assert h.init("tx").error_code == E.CONCURRENT_TRANSACTIONS
    assert h.markers == [("t", 0, pid, epoch + 2, False, 4)]
    assert h.init("tx") == InitProducerIdResult(0, pid, epoch + 3)
    assert h.end2("tx", pid, epoch, True) == EndTxnResult(E.PRODUCER_FENCED)
    # A timeout does the same.
    epoch += 3
    h.add2("tx", pid, epoch, ("t", 1))
    h.advance(TIMEOUT)
    assert h.markers[-1] == ("t", 1, pid, epoch + 2, False, 4)
    assert h.end2("tx", pid, epoch, False) == EndTxnResult(E.PRODUCER_FENCED)


def test_a_version_1_clients_transaction_is_fenced_as_on_a_version_1_cluster() -> None:
    """As Kafka 4.1.1 does it: the abort a fence or a timeout starts takes the version 2 path
    only for a version 2 client's transaction; a version 1 client's (AddPartitionsToTxn v3,
    EndTxn v4 and below) is aborted with the fence epoch, as on a version 1 cluster."""
    h, pid, epoch = v2()
    h.add("tx", pid, epoch, ("t", 0))
    assert h.init("tx").error_code == E.CONCURRENT_TRANSACTIONS
    assert h.markers == [("t", 0, pid, epoch + 1, False, 4)]
    assert h.init("tx") == InitProducerIdResult(0, pid, epoch + 2)
    # A timeout: the abort carries the fence epoch, and it stays.
    epoch += 2
    h.add("tx", pid, epoch, ("t", 1))
    h.advance(TIMEOUT)
    assert h.markers[-1] == ("t", 1, pid, epoch + 1, False, 4)
    assert h.end("tx", pid, epoch, False) == E.PRODUCER_FENCED


def test_a_fence_at_the_last_epoch_does_not_overflow() -> None:
    h = TxnHarness(transaction_version=2)
    _load_state(
        h, "tx", TxnLogValue(900, MAX_EPOCH - 1, TIMEOUT, int(TxnState.ONGOING), [("t", 0)], T0, T0)
    )
    assert h.init("tx").error_code == E.CONCURRENT_TRANSACTIONS
    assert h.markers == [("t", 0, 900, MAX_EPOCH, False, 5)]
    assert h.init("tx") == InitProducerIdResult(0, 1000, 0)  # the exhausted id is rotated


def test_records_are_flexible_from_level_1_and_carry_the_version_2_fields() -> None:
    h0, pid, epoch = v2(0)
    h0.add2("tx", pid, epoch, ("t", 0))
    h0.end2("tx", pid, epoch, True)
    h1, pid, epoch = v2(1)
    h1.add2("tx", pid, epoch, ("t", 0))
    h1.end2("tx", pid, epoch, True)

    def versions(h: TxnHarness) -> list[int]:
        return [
            struct.unpack(">h", bytes(rec.value[:2]))[0]
            for b in h.log[h.coord.partition_for("tx")]
            for rec in decode_batch(b).records
        ]

    assert set(versions(h0)) == {0}
    assert set(versions(h1)) == {1}
    # Level 0 cannot keep the client's version; level 1 does, and a restart reads it back.
    assert {v.client_transaction_version for v in h0.records_of("tx") if v} == {0}
    assert [v.client_transaction_version for v in h1.records_of("tx") if v] == [0, 2, 2, 2]
    h1.restart()
    assert h1.coord.txns["tx"].client_transaction_version == 2
