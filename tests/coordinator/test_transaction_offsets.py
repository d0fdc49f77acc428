"""TxnOffsetCommit on the group coordinator: transactional batches, pending offsets, markers."""

from __future__ import annotations

from typing import Any

from harness import T0, Harness
from test_offsets import _append_raw

from gregor.coordinator.group.records import OffsetCommitKey, OffsetCommitValue
from gregor.protocol.errors import ErrorCode as E
from gregor.protocol.messages.txn_offset_commit import TxnOffsetCommitRequest
from gregor.protocol.records.control import build_control_batch
from gregor.protocol.records.header import read_header

PID = 4000


def _txn_commit(
    h: Harness,
    group: str,
    offsets: dict[tuple[str, int], int],
    *,
    epoch: int = 0,
    version: int = 3,
    generation: int = -1,
    member_id: str = "",
) -> dict[tuple[str, int], int]:
    topics: dict[str, list[Any]] = {}
    for (t, p), off in offsets.items():
        topics.setdefault(t, []).append(
            TxnOffsetCommitRequest.Topics.Partitions(
                partition_index=p,
                committed_offset=off,
                committed_leader_epoch=3,
                committed_metadata="md",
            )
        )
    req = TxnOffsetCommitRequest(
        transactional_id="tx",
        group_id=group,
        producer_id=PID,
        producer_epoch=epoch,
        generation_id=generation,
        member_id=member_id,
        topics=[TxnOffsetCommitRequest.Topics(name=t, partitions=ps) for t, ps in topics.items()],
    )
    resp = h.call("txn_offset_commit", req, version)
    return {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}


def test_offsets_wait_for_the_commit_marker() -> None:
    h = Harness()
    h.commit("g", {("t", 0): 1})
    assert _txn_commit(h, "g", {("t", 0): 10, ("t", 1): 11}) == {("t", 0): 0, ("t", 1): 0}
    p = h.partition_of("g")
    batch = h.log[p][-1]
    hdr = read_header(batch)
    assert (hdr.producer_id, hdr.producer_epoch, hdr.is_transactional, hdr.base_sequence) == (
        PID,
        0,
        True,
        0,
    )
    assert h.records(p)[-2:] == [
        (OffsetCommitKey("g", "t", 0), OffsetCommitValue(10, "md", T0, 3)),
        (OffsetCommitKey("g", "t", 1), OffsetCommitValue(11, "md", T0, 3)),
    ]
    # Not visible before the marker; unstable for readers that ask for stable offsets.
    assert h.fetch("g", {"t": [0, 1]})[1] == {("t", 0): (1, -1, "m", 0), ("t", 1): (-1, -1, "", 0)}
    assert h.fetch("g", {"t": [0]}, require_stable=True)[1] == {
        ("t", 0): (-1, -1, "", E.UNSTABLE_OFFSET_COMMIT)
    }
    h.coord.complete_txn_offsets(p, PID, True)
    assert h.fetch("g", {"t": [0, 1]}, require_stable=True)[1] == {
        ("t", 0): (10, 3, "md", 0),
        ("t", 1): (11, 3, "md", 0),
    }


def test_abort_marker_drops_the_offsets() -> None:
    h = Harness()
    h.commit("g", {("t", 0): 1})
    _txn_commit(h, "g", {("t", 0): 10})
    h.coord.complete_txn_offsets(h.partition_of("g"), PID, False)
    assert h.fetch("g", {"t": [0]}, require_stable=True)[1] == {("t", 0): (1, -1, "m", 0)}


def test_markers_in_the_log_replay_after_restart() -> None:
    h = Harness()
    _txn_commit(h, "g", {("t", 0): 10})
    _append_raw(h, "g", build_control_batch(PID, 0, True, 0))
    _txn_commit(h, "g", {("t", 0): 20})
    h.restart()
    assert h.fetch("g", {"t": [0]})[1] == {("t", 0): (10, 3, "md", 0)}
    assert h.fetch("g", {"t": [0]}, require_stable=True)[1] == {
        ("t", 0): (-1, -1, "", E.UNSTABLE_OFFSET_COMMIT)
    }
    _append_raw(h, "g", build_control_batch(PID, 0, False, 0))
    h.restart()
    assert h.fetch("g", {"t": [0]}, require_stable=True)[1] == {("t", 0): (10, 3, "md", 0)}


def test_a_later_plain_commit_wins_over_an_earlier_transactional_one() -> None:
    h = Harness()
    _txn_commit(h, "g", {("t", 0): 10})
    h.commit("g", {("t", 0): 30})
    h.coord.complete_txn_offsets(h.partition_of("g"), PID, True)
    assert h.fetch("g", {"t": [0]})[1] == {("t", 0): (30, -1, "m", 0)}


def test_validation() -> None:
    h = Harness()
    # an unknown group with a generation, an unknown partition
    assert _txn_commit(h, "new", {("t", 0): 1}, generation=3) == {("t", 0): E.ILLEGAL_GENERATION}
    assert _txn_commit(h, "new", {("t", 99): 1}) == {("t", 99): E.UNKNOWN_TOPIC_OR_PARTITION}
    # a member of a classic group: member id and generation must match when given
    t = h.join("cg", version=3)
    h.advance(0)
    mid = h.result(t).member_id
    h.result(h.sync("cg", mid, 1, {mid: b""}))
    assert _txn_commit(h, "cg", {("t", 0): 5}, generation=1, member_id="stranger") == {
        ("t", 0): E.UNKNOWN_MEMBER_ID
    }
    assert _txn_commit(h, "cg", {("t", 0): 5}, generation=2, member_id=mid) == {
        ("t", 0): E.ILLEGAL_GENERATION
    }
    assert _txn_commit(h, "cg", {("t", 0): 5}, generation=1, member_id=mid) == {("t", 0): 0}
    # without group fields (v0-2 clients) a transactional commit is accepted for a live group
    assert _txn_commit(h, "cg", {("t", 0): 6}, version=2) == {("t", 0): 0}


def test_fenced_epoch_from_the_log_is_reported() -> None:
    h = Harness()
    h.fail_writes = E.INVALID_PRODUCER_EPOCH
    assert _txn_commit(h, "g", {("t", 0): 1}) == {("t", 0): E.INVALID_PRODUCER_EPOCH}
    h.fail_writes = E.NOT_ENOUGH_REPLICAS
    assert _txn_commit(h, "g", {("t", 0): 1}) == {("t", 0): E.COORDINATOR_NOT_AVAILABLE}
    assert h.coord.groups["g"].offsets.pending_txn == {}
