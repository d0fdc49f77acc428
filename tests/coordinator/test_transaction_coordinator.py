"""The transaction coordinator state machine, driven directly: a fake clock, an in-memory
``__transaction_state`` log and in-memory partitions that record the markers they receive."""

from __future__ import annotations

import struct

import pytest
from harness import T0
from txn_harness import TIMEOUT, TxnHarness

from gregor.coordinator import Token
from gregor.coordinator.txn.coordinator import (
    InitProducerIdResult,
    TxnCoordinatorConfig,
    TxnDescription,
    TxnListing,
)
from gregor.coordinator.txn.records import (
    TxnLogValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from gregor.coordinator.txn.state import TxnState
from gregor.protocol.errors import ErrorCode as E
from gregor.protocol.records.batch import decode_batch

# --- records -----------------------------------------------------------------------------


def test_record_layouts_are_kafkas() -> None:
    assert encode_key("tx") == b"\x00\x00" + b"\x00\x02tx"
    v = TxnLogValue(7, 3, 60000, int(TxnState.ONGOING), [("b", 1), ("a", 2), ("a", 0)], T0 + 5, T0)
    expected = (
        struct.pack(">hqhib", 0, 7, 3, 60000, 1)
        + struct.pack(">i", 2)
        + struct.pack(">h", 1)
        + b"a"
        + struct.pack(">iii", 2, 0, 2)
        + struct.pack(">h", 1)
        + b"b"
        + struct.pack(">ii", 1, 1)
        + struct.pack(">qq", T0 + 5, T0)
    )
    assert encode_value(v) == expected
    back = decode_value(expected)
    assert back == TxnLogValue(7, 3, 60000, 1, [("a", 0), ("a", 2), ("b", 1)], T0 + 5, T0)
    assert decode_value(None) is None
    assert decode_key(b"\x00\x05\x00\x01x") is None  # an unknown key version is skipped


def test_flexible_value_version_1_with_tagged_fields() -> None:
    body = (
        struct.pack(">hqhib", 1, 9, 0, 1000, 4)
        + bytes([2])  # compact array: one topic
        + bytes([2])
        + b"t"
        + bytes([2])
        + struct.pack(">i", 5)
        + b"\x00"
        + struct.pack(">qq", T0, T0 - 1)
        + bytes([2])
        + bytes([0, 8])
        + struct.pack(">q", 8)
        + bytes([2, 2])
        + struct.pack(">h", 2)
    )
    v = decode_value(body)
    assert v == TxnLogValue(
        9,
        0,
        1000,
        4,
        [("t", 5)],
        T0,
        T0 - 1,
        previous_producer_id=8,
        next_producer_id=-1,
        client_transaction_version=2,
    )


# --- InitProducerId ----------------------------------------------------------------------


def test_init_allocates_a_producer_and_bumps_the_epoch_each_time() -> None:
    h = TxnHarness()
    assert h.init("tx") == InitProducerIdResult(0, 1000, 0)
    assert h.init("tx") == InitProducerIdResult(0, 1000, 1)
    assert h.init("other") == InitProducerIdResult(0, 1001, 0)
    assert h.records_of("tx") == [
        TxnLogValue(1000, 0, TIMEOUT, 0, [], T0, -1),
        TxnLogValue(1000, 1, TIMEOUT, 0, [], T0, -1),
    ]
    assert h.records_of("other") == [TxnLogValue(1001, 0, TIMEOUT, 0, [], T0, -1)]
    # every record of an id is in the id's own partition
    p = h.coord.partition_for("tx")
    assert [decode_key(decode_batch(b).records[0].key) for b in h.log[p]].count("tx") == 2


def test_init_rejects_bad_requests() -> None:
    h = TxnHarness(config=TxnCoordinatorConfig(num_partitions=3, max_timeout_ms=5000))
    assert h.init("tx", timeout=0).error_code == E.INVALID_TRANSACTION_TIMEOUT
    assert h.init("tx", timeout=5001).error_code == E.INVALID_TRANSACTION_TIMEOUT
    assert h.init("", timeout=1000).error_code == E.INVALID_REQUEST
    assert h.init("tx", timeout=1000, pid=5, epoch=-1).error_code == E.INVALID_REQUEST
    assert h.init("tx", timeout=5000) == InitProducerIdResult(0, 1000, 0)


def test_kip360_retry_and_recovery() -> None:
    h = TxnHarness()
    h.init("tx")  # epoch 0
    # A producer recovering with its current id and epoch gets the next epoch...
    assert h.init("tx", pid=1000, epoch=0) == InitProducerIdResult(0, 1000, 1)
    # ... and a retry of that call (its answer lost) gets the same epoch again.
    assert h.init("tx", pid=1000, epoch=0) == InitProducerIdResult(0, 1000, 1)
    # A stale epoch, or another producer id, is fenced.
    h.init("tx", pid=1000, epoch=1)  # epoch 2, last epoch 1
    assert h.init("tx", pid=1000, epoch=0).error_code == E.PRODUCER_FENCED
    assert h.init("tx", pid=77, epoch=2).error_code == E.PRODUCER_FENCED
    # A plain InitProducerId (a new producer) forgets the last epoch.
    assert h.init("tx") == InitProducerIdResult(0, 1000, 3)
    assert h.init("tx", pid=1000, epoch=2).error_code == E.PRODUCER_FENCED


def test_exhausted_epoch_rotates_the_producer_id() -> None:
    h = TxnHarness()
    h.init("tx")
    h.coord.txns["tx"].producer_epoch = 0x7FFE
    r = h.init("tx")
    assert r == InitProducerIdResult(0, 1001, 0)
    md = h.coord.txns["tx"]
    assert (md.last_producer_id, md.last_producer_epoch) == (1000, -1)
    # The old producer retrying with its exhausted epoch is recognised (KIP-360).
    h.coord.txns["tx"].producer_epoch = 0x7FFE
    h.coord.txns["tx"].producer_id = 1001
    assert h.init("tx", pid=1001, epoch=0x7FFE) == InitProducerIdResult(0, 1002, 0)
    assert h.coord.txns["tx"].last_producer_epoch == 0x7FFE
    assert h.init("tx", pid=1001, epoch=0x7FFE) == InitProducerIdResult(0, 1002, 0)


# --- a transaction -----------------------------------------------------------------------


def test_commit_writes_prepare_markers_then_complete() -> None:
    h = TxnHarness()
    pid, epoch = h.init("tx")[1:]
    h.clock.now += 10
    assert h.add("tx", pid, epoch, ("t", 0), ("t", 1)) == 0
    assert h.state("tx") is TxnState.ONGOING
    h.clock.now += 10
    assert h.add("tx", pid, epoch, ("t", 1)) == 0  # already in: nothing written
    assert h.add("tx", pid, epoch, ("u", 0)) == 0
    h.clock.now += 10
    assert h.end("tx", pid, epoch, True) == 0
    assert h.markers == [
        ("t", 0, pid, 0, True, 4),
        ("t", 1, pid, 0, True, 4),
        ("u", 0, pid, 0, True, 4),
    ]
    assert h.state("tx") is TxnState.COMPLETE_COMMIT
    assert [
        (v.state, v.partitions, v.start_timestamp_ms, v.last_update_timestamp_ms)
        for v in h.records_of("tx")
    ] == [
        (0, [], -1, T0),
        (1, [("t", 0), ("t", 1)], T0 + 10, T0 + 10),
        (1, [("t", 0), ("t", 1), ("u", 0)], T0 + 10, T0 + 20),
        (2, [("t", 0), ("t", 1), ("u", 0)], T0 + 10, T0 + 30),
        (4, [], T0 + 10, T0 + 30),
    ]
    # A retried commit is fine; an abort of a committed transaction is not.
    assert h.end("tx", pid, epoch, True) == 0
    assert h.end("tx", pid, epoch, False) == E.INVALID_TXN_STATE
    # The next transaction starts from no partitions.
    assert h.add("tx", pid, epoch, ("u", 0)) == 0
    assert h.coord.txns["tx"].partitions == {("u", 0)}
    assert h.end("tx", pid, epoch, False) == 0
    assert h.markers[-1] == ("u", 0, pid, 0, False, 4)
    assert h.state("tx") is TxnState.COMPLETE_ABORT
    assert h.end("tx", pid, epoch, True) == E.INVALID_TXN_STATE


def test_requests_with_the_wrong_producer_or_state() -> None:
    h = TxnHarness()
    assert h.add("nobody", 1, 0, ("t", 0)) == E.INVALID_PRODUCER_ID_MAPPING
    assert h.end("nobody", 1, 0, True) == E.INVALID_PRODUCER_ID_MAPPING
    pid, epoch = h.init("tx")[1:]
    assert h.end("tx", pid, epoch, True) == E.INVALID_TXN_STATE  # nothing to commit
    assert h.add("tx", pid + 1, epoch, ("t", 0)) == E.INVALID_PRODUCER_ID_MAPPING
    assert h.add("tx", pid, epoch + 1, ("t", 0)) == E.PRODUCER_FENCED
    assert h.add("", pid, epoch, ("t", 0)) == E.INVALID_REQUEST


def test_pending_write_answers_concurrent_transactions() -> None:
    h = TxnHarness()
    pid, epoch = h.init("tx")[1:]
    h.hold_writes = True
    n = next(h.tokens)
    token = Token(n, lambda code: h.replies.__setitem__(n, code))
    h.coord.add_partitions(token, "tx", pid, epoch, [("t", 0)])
    h.pump()
    assert n not in h.replies
    assert h.add("tx", pid, epoch, ("t", 1)) == E.CONCURRENT_TRANSACTIONS
    assert h.end("tx", pid, epoch, True) == E.CONCURRENT_TRANSACTIONS
    assert h.init("tx").error_code == E.CONCURRENT_TRANSACTIONS
    h.hold_writes = False
    h.release()
    assert h.replies.pop(n) == 0
    assert h.state("tx") is TxnState.ONGOING


def test_failed_state_write_changes_nothing() -> None:
    h = TxnHarness()
    pid, epoch = h.init("tx")[1:]
    h.fail_writes = E.NOT_ENOUGH_REPLICAS
    assert h.add("tx", pid, epoch, ("t", 0)) == E.COORDINATOR_NOT_AVAILABLE
    h.fail_writes = E.NOT_LEADER_OR_FOLLOWER
    assert h.add("tx", pid, epoch, ("t", 0)) == E.NOT_COORDINATOR
    assert h.state("tx") is TxnState.EMPTY and h.coord.txns["tx"].pending is None
    h.fail_writes = 0
    assert h.add("tx", pid, epoch, ("t", 0)) == 0


# --- fencing and timeouts ----------------------------------------------------------------


def test_new_producer_fences_an_ongoing_transaction() -> None:
    h = TxnHarness()
    pid, epoch = h.init("tx")[1:]
    h.add("tx", pid, epoch, ("t", 0), ("t", 2))
    # The new producer is told to retry while the old transaction is aborted with epoch 1.
    assert h.init("tx").error_code == E.CONCURRENT_TRANSACTIONS
    assert h.markers == [("t", 0, pid, 1, False, 4), ("t", 2, pid, 1, False, 4)]
    assert h.state("tx") is TxnState.COMPLETE_ABORT
    assert h.init("tx") == InitProducerIdResult(0, pid, 2)
    # The zombie is fenced everywhere.
    assert h.add("tx", pid, epoch, ("t", 1)) == E.PRODUCER_FENCED
    assert h.end("tx", pid, epoch, True) == E.PRODUCER_FENCED
    assert h.coord.verify("tx", pid, epoch, [("t", 0)]) == {("t", 0): E.PRODUCER_FENCED}


def test_transaction_timeout_aborts_with_a_bumped_epoch() -> None:
    h = TxnHarness()
    pid, epoch = h.init("tx", timeout=1000)[1:]
    h.add("tx", pid, epoch, ("t", 0))
    h.advance(999)
    assert h.state("tx") is TxnState.ONGOING and h.markers == []
    h.advance(1)
    assert h.markers == [("t", 0, pid, 1, False, 4)]
    assert h.state("tx") is TxnState.COMPLETE_ABORT
    assert h.coord.txns["tx"].producer_epoch == 1
    assert h.end("tx", pid, epoch, True) == E.PRODUCER_FENCED
    # A transaction ended in time is not aborted later.
    pid, epoch = h.init("tx", timeout=1000)[1:]
    h.add("tx", pid, epoch, ("t", 0))
    h.advance(500)
    assert h.end("tx", pid, epoch, True) == 0
    h.advance(5000)
    assert h.markers[-1] == ("t", 0, pid, epoch, True, 4)
    assert h.state("tx") is TxnState.COMPLETE_COMMIT


def test_marker_failures_are_retried_and_missing_partitions_skipped() -> None:
    h = TxnHarness(config=TxnCoordinatorConfig(num_partitions=3, retry_backoff_ms=50))
    pid, epoch = h.init("tx")[1:]
    h.add("tx", pid, epoch, ("t", 0), ("t", 1), ("gone", 0))
    h.marker_errors = {
        ("t", 1): [E.NOT_LEADER_OR_FOLLOWER, E.KAFKA_STORAGE_ERROR],
        ("gone", 0): [E.UNKNOWN_TOPIC_OR_PARTITION],
    }
    assert h.end("tx", pid, epoch, True) == 0
    assert h.markers == [("t", 0, pid, 0, True, 4)]
    assert h.state("tx") is TxnState.PREPARE_COMMIT
    assert h.coord.txns["tx"].partitions == {("t", 1)}
    assert h.add("tx", pid, epoch, ("t", 0)) == E.CONCURRENT_TRANSACTIONS
    assert h.end("tx", pid, epoch, True) == E.CONCURRENT_TRANSACTIONS
    h.advance(49)
    assert len(h.markers) == 1
    h.advance(1)  # second attempt fails too
    assert len(h.markers) == 1 and h.state("tx") is TxnState.PREPARE_COMMIT
    h.advance(50)
    assert h.markers[1:] == [("t", 1, pid, 0, True, 4)]
    assert h.state("tx") is TxnState.COMPLETE_COMMIT


# --- restart -----------------------------------------------------------------------------


def test_restart_resends_markers_of_prepared_transactions() -> None:
    h = TxnHarness()
    pid, epoch = h.init("tx")[1:]
    h.add("tx", pid, epoch, ("t", 0), ("t", 1))
    h.marker_errors = {("t", 0): [E.NOT_LEADER_OR_FOLLOWER], ("t", 1): [E.NOT_LEADER_OR_FOLLOWER]}
    assert h.end("tx", pid, epoch, False) == 0
    assert h.markers == [] and h.state("tx") is TxnState.PREPARE_ABORT
    h.restart()  # the broker stops before the retry
    # Loading finds PrepareAbort and completes it, with the new coordinator epoch.
    assert h.markers == [("t", 0, pid, 0, False, 5), ("t", 1, pid, 0, False, 5)]
    assert h.state("tx") is TxnState.COMPLETE_ABORT
    assert h.init("tx") == InitProducerIdResult(0, pid, 1)


def test_restart_keeps_ongoing_transactions_until_their_timeout() -> None:
    h = TxnHarness()
    pid, epoch = h.init("tx", timeout=10000)[1:]
    h.add("tx", pid, epoch, ("t", 0))
    other = h.init("other", timeout=10000)
    h.add("other", other.producer_id, 0, ("t", 1))
    h.advance(4000)
    h.restart()
    assert h.state("tx") is TxnState.ONGOING
    # The producer may still finish its transaction after the restart ...
    assert h.end("tx", pid, epoch, True) == 0
    assert h.markers == [("t", 0, pid, 0, True, 5)]
    # ... and one that does not is aborted when its timeout passes.
    h.advance(5999)
    assert len(h.markers) == 1
    h.advance(1)
    assert h.markers[1:] == [("t", 1, other.producer_id, 1, False, 5)]


def test_loading_and_unknown_partitions() -> None:
    h = TxnHarness()
    h.init("tx")
    p = h.coord.partition_for("tx")
    h.coord.begin_load(p)
    assert h.init("tx").error_code == E.COORDINATOR_LOAD_IN_PROGRESS
    assert h.coord.list_transactions([], [])[0] == E.COORDINATOR_LOAD_IN_PROGRESS
    h.coord.unload(p)
    assert h.init("tx").error_code == E.NOT_COORDINATOR
    assert h.coord.describe(["tx"]) == [TxnDescription("tx", E.NOT_COORDINATOR)]


# --- queries -----------------------------------------------------------------------------


def test_verify_partitions() -> None:
    h = TxnHarness()
    pid, epoch = h.init("tx")[1:]
    assert h.coord.verify("tx", pid, epoch, [("t", 0)]) == {("t", 0): E.INVALID_TXN_STATE}
    h.add("tx", pid, epoch, ("t", 0))
    assert h.coord.verify("tx", pid, epoch, [("t", 0), ("t", 1)]) == {
        ("t", 0): 0,
        ("t", 1): E.INVALID_TXN_STATE,
    }
    assert h.coord.verify("tx", pid + 5, epoch, [("t", 0)]) == {
        ("t", 0): E.INVALID_PRODUCER_ID_MAPPING
    }
    assert h.coord.verify("nobody", pid, epoch, [("t", 0)]) == {
        ("t", 0): E.INVALID_PRODUCER_ID_MAPPING
    }
    h.end("tx", pid, epoch, True)
    assert h.coord.verify("tx", pid, epoch, [("t", 0)]) == {("t", 0): E.INVALID_TXN_STATE}


def test_describe_and_list() -> None:
    h = TxnHarness()
    a = h.init("a")
    b = h.init("b")
    h.add("b", b.producer_id, 0, ("t", 1), ("t", 0))
    h.clock.now += 100
    assert h.coord.describe(["b", "a", "zz"]) == [
        TxnDescription("b", 0, "Ongoing", TIMEOUT, T0, b.producer_id, 0, (("t", 0), ("t", 1))),
        TxnDescription("a", 0, "Empty", TIMEOUT, -1, a.producer_id, 0, ()),
        TxnDescription("zz", E.TRANSACTIONAL_ID_NOT_FOUND),
    ]
    assert h.coord.list_transactions([], []) == (
        0,
        [],
        [
            TxnListing("a", a.producer_id, "Empty"),
            TxnListing("b", b.producer_id, "Ongoing"),
        ],
    )
    assert h.coord.list_transactions(["Ongoing", "Bogus"], []) == (
        0,
        ["Bogus"],
        [TxnListing("b", b.producer_id, "Ongoing")],
    )
    assert h.coord.list_transactions([], [a.producer_id]) == (
        0,
        [],
        [TxnListing("a", a.producer_id, "Empty")],
    )
    # duration: only transactions running longer than the filter
    assert h.coord.list_transactions(["Ongoing"], [], 99)[2] == [
        TxnListing("b", b.producer_id, "Ongoing")
    ]
    assert h.coord.list_transactions(["Ongoing"], [], 100)[2] == []


def test_idle_transactional_ids_expire() -> None:
    cfg = TxnCoordinatorConfig(
        num_partitions=3, id_expiration_ms=10000, id_expiration_check_interval_ms=1000
    )
    h = TxnHarness(config=cfg)
    h.init("idle")
    busy = h.init("busy")
    h.advance(5000)
    h.add("busy", busy.producer_id, 0, ("t", 0))  # an ongoing transaction never expires
    h.advance(5000)
    assert set(h.coord.txns) == {"busy"}
    assert h.records_of("idle")[-1] is None
    assert h.coord.describe(["idle"])[0].error_code == E.TRANSACTIONAL_ID_NOT_FOUND
    h.restart()
    assert set(h.coord.txns) == {"busy"}
    # A fresh init for the expired id starts over with a new producer id.
    assert h.init("idle") == InitProducerIdResult(0, 1002, 0)


@pytest.mark.parametrize("commit", [True, False])
def test_end_txn_retries_after_completion(commit: bool) -> None:
    h = TxnHarness()
    pid, epoch = h.init("tx")[1:]
    h.add("tx", pid, epoch, ("t", 0))
    assert h.end("tx", pid, epoch, commit) == 0
    assert h.end("tx", pid, epoch, commit) == 0
    assert len(h.markers) == 1
