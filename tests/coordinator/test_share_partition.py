"""A share partition's in-flight records (KIP-932), without a broker: acquisition, the four
acknowledgement types, lock expiry, the delivery count limit, SPSO, and the state batches the
share coordinator persists (and loading them back). The share coordinator's fencing and the
share group assignor too."""

from __future__ import annotations

import uuid
from typing import Any

from gregor.coordinator import Token
from gregor.coordinator.share.coordinator import ReadResult, ShareCoordinator
from gregor.coordinator.share.group import ShareGroups, assign
from gregor.coordinator.share.partition import ACCEPT, GAP, REJECT, RELEASE, SharePartition
from gregor.coordinator.share.state import (
    ACKNOWLEDGED,
    ARCHIVED,
    AVAILABLE,
    ShareSnapshot,
    StateBatch,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from gregor.protocol.errors import ErrorCode

LOCK = 1000


def sp(limit: int = 3, locks: int = 100) -> SharePartition:
    return SharePartition(0, limit, locks)


def test_acquire_hands_out_each_available_record_once() -> None:
    p = sp()
    assert p.acquire("a", [(0, 4), (5, 9)], 10, 3, 0, LOCK) == [(0, 2, 1)]
    assert p.acquire("b", [(0, 4), (5, 9)], 10, 100, 0, LOCK) == [(3, 9, 1)]
    assert p.acquire("c", [(0, 4), (5, 9)], 10, 100, 0, LOCK) == []
    assert (p.start_offset, p.end_offset, p.acquired_count) == (0, 10, 10)


def test_control_offsets_are_archived_on_the_way() -> None:
    p = sp()
    # offsets 3 and 7 are control records (transaction markers): not data, never delivered
    assert p.acquire("a", [(0, 2), (4, 6), (8, 9)], 10, 100, 0, LOCK) == [
        (0, 2, 1),
        (4, 6, 1),
        (8, 9, 1),
    ]
    assert p.acknowledge("a", 0, 2, [ACCEPT]) == 0
    assert p.start_offset == 4  # 3 was archived, so SPSO passes it
    assert (
        p.acknowledge("a", 4, 9, [ACCEPT] * 3 + [GAP] + [ACCEPT] * 2)
        == ErrorCode.INVALID_RECORD_STATE
    )  # 7 not held
    assert p.acknowledge("a", 4, 6, [ACCEPT]) == 0 and p.acknowledge("a", 8, 9, [ACCEPT]) == 0
    assert (p.start_offset, p.end_offset, p.records) == (10, 10, {})


def test_release_redelivers_with_a_higher_count_and_reject_never() -> None:
    p = sp()
    p.acquire("a", [(0, 3)], 4, 100, 0, LOCK)
    assert p.acknowledge("a", 0, 3, [RELEASE, REJECT, ACCEPT, RELEASE]) == 0
    assert [(o, r.state, r.delivery_count) for o, r in sorted(p.records.items())] == [
        (0, AVAILABLE, 1),
        (1, ARCHIVED, 1),
        (2, ACKNOWLEDGED, 1),
        (3, AVAILABLE, 1),
    ]
    assert p.acquire("b", [(0, 3)], 4, 100, 0, LOCK) == [(0, 0, 2), (3, 3, 2)]
    assert p.acknowledge("a", 0, 0, [ACCEPT]) == ErrorCode.INVALID_RECORD_STATE  # b holds it now
    assert p.acknowledge("b", 0, 0, [ACCEPT]) == 0 and p.acknowledge("b", 3, 3, [ACCEPT]) == 0
    assert p.start_offset == 4


def test_lock_expiry_and_the_delivery_limit() -> None:
    p = sp(limit=2)
    assert p.acquire("a", [(0, 1)], 2, 100, 0, LOCK) == [(0, 1, 1)]
    assert p.next_deadline() == LOCK
    assert p.expire(LOCK - 1) == 0
    assert p.expire(LOCK) == 2
    assert p.acquire("b", [(0, 1)], 2, 100, LOCK, LOCK) == [(0, 1, 2)]
    assert p.release_member("b") == 2  # the second delivery was the last: archived
    assert (p.start_offset, p.records) == (2, {})
    assert p.acquire("c", [(0, 1)], 2, 100, LOCK, LOCK) == []


def test_the_lock_limit_bounds_acquisition() -> None:
    p = sp(locks=3)
    assert p.acquire("a", [(0, 9)], 10, 100, 0, LOCK) == [(0, 2, 1)]
    assert p.acquire("b", [(0, 9)], 10, 100, 0, LOCK) == []
    p.acknowledge("a", 0, 0, [ACCEPT])
    assert p.acquire("b", [(0, 9)], 10, 100, 0, LOCK) == [(3, 3, 1)]


def test_bad_acknowledgements_change_nothing() -> None:
    p = sp()
    p.acquire("a", [(0, 3)], 4, 100, 0, LOCK)
    assert (
        p.acknowledge("a", 0, 3, [ACCEPT, ACCEPT]) == ErrorCode.INVALID_REQUEST
    )  # 2 types for 4 offsets
    assert p.acknowledge("a", 0, 3, [9]) == ErrorCode.INVALID_REQUEST
    assert p.acknowledge("a", 3, 0, [ACCEPT]) == ErrorCode.INVALID_REQUEST
    assert (
        p.acknowledge("a", 2, 5, [ACCEPT]) == ErrorCode.INVALID_RECORD_STATE
    )  # 4 and 5 not acquired
    assert p.acknowledge("x", 0, 0, [ACCEPT]) == ErrorCode.INVALID_RECORD_STATE
    assert p.acquired_count == 4 and p.start_offset == 0


def test_state_batches_round_trip_without_locks() -> None:
    p = sp()
    p.acquire("a", [(0, 5)], 6, 100, 0, LOCK)
    p.acknowledge("a", 1, 1, [ACCEPT])
    p.acknowledge("a", 2, 3, [REJECT])
    p.acknowledge("a", 4, 4, [RELEASE])
    batches = p.state_batches()
    assert batches == [
        StateBatch(0, 0, AVAILABLE, 1),
        StateBatch(1, 1, ACKNOWLEDGED, 1),
        StateBatch(2, 3, ARCHIVED, 1),
        StateBatch(4, 5, AVAILABLE, 1),
    ]  # 5 is still locked: persisted as available
    q = sp()
    q.load(0, batches)
    assert (q.start_offset, q.end_offset, q.acquired_count) == (0, 6, 0)
    assert q.acquire("b", [(0, 9)], 10, 100, 0, LOCK) == [(0, 0, 2), (4, 5, 2), (6, 9, 1)]
    q.move_start(8)  # retention deleted the log below 8
    assert q.start_offset == 8 and min(q.records) == 8


def test_share_state_records_round_trip() -> None:
    key = ("g", uuid.uuid4(), 3)
    snap = ShareSnapshot(
        2, 5, 40, (StateBatch(40, 41, ACKNOWLEDGED, 1), StateBatch(44, 44, AVAILABLE, 3)), 7
    )
    assert decode_key(encode_key(key)) == key
    assert decode_value(encode_value(snap)) == snap
    assert decode_value(None) is None


def drain(c: ShareCoordinator) -> list[object]:
    out = c.take()
    for w in out.writes:
        c.write_complete(w.id, 0)
    more = c.take()
    return [r.response for r in [*out.replies, *more.replies]]


def tok(n: int) -> Token[Any]:
    """A request's token (``drain`` reads the replies from the outbox)."""
    return Token(n, lambda _response: None)


def test_the_share_coordinator_fences_old_leaders_and_state_epochs() -> None:
    c = ShareCoordinator(4, lambda: 0)
    key = ("g", uuid.uuid4(), 0)
    part = c.partition_of(key)
    c.read(tok(0), key, 1)
    assert drain(c) == [ReadResult(ErrorCode.NOT_COORDINATOR)]
    c.begin_load(part)
    c.write(tok(1), key, 0, 1, 0, [])
    assert drain(c) == [ErrorCode.COORDINATOR_LOAD_IN_PROGRESS]
    c.complete_load(part)
    c.read(tok(2), key, 1)
    assert drain(c) == [ReadResult(0)]  # never initialized: start -1
    c.write(
        tok(3), key, 0, 1, 10, [StateBatch(10, 12, ACKNOWLEDGED, 1), StateBatch(8, 9, ARCHIVED, 1)]
    )
    assert drain(c) == [0]
    c.read(tok(4), key, 2)  # a new leader: its epoch is recorded
    assert drain(c) == [ReadResult(0, 0, 2, 10, (StateBatch(10, 12, ACKNOWLEDGED, 1),))]
    c.write(tok(5), key, 0, 1, 13, [])  # the old leader
    assert drain(c) == [ErrorCode.FENCED_LEADER_EPOCH]
    c.initialize(tok(6), key, 1, 0)  # an admin reset: state epoch 1
    assert drain(c) == [0]
    c.write(tok(7), key, 0, 2, 13, [])
    assert drain(c) == [ErrorCode.FENCED_STATE_EPOCH]
    c.delete(tok(8), key)
    assert drain(c) == [0] and key not in c.states


def test_share_group_assignment_shares_when_members_outnumber_partitions() -> None:
    t = uuid.uuid4()
    topics = {"t": (t, 2)}.get
    assert assign(["a", "b", "c"], {m: ["t"] for m in "abc"}, topics) == {
        "a": {t: [0]},
        "b": {t: [1]},
        "c": {t: [0]},
    }
    assert assign(["a"], {"a": ["t", "missing"]}, topics) == {"a": {t: [0, 1]}}
    now = [0]
    groups = ShareGroups(topics, 1000, 100, 2, lambda: now[0])
    r, _ = groups.heartbeat("g", "m1", 0, None, ["t"], "c1", "/h", 1)
    assert (r.error, r.member_epoch, r.assignment) == (0, 1, {t: [0, 1]})
    r2, _ = groups.heartbeat("g", "m2", 0, None, ["t"], "c2", "/h", 1)
    assert (r2.member_epoch, r2.assignment) == (2, {t: [1]})
    r, _ = groups.heartbeat("g", "m1", 1, None, None, "c1", "/h", 1)
    assert (r.member_epoch, r.assignment) == (2, {t: [0]})  # its new assignment, with the new epoch
    r, _ = groups.heartbeat("g", "m1", 2, None, None, "c1", "/h", 1)
    assert (r.member_epoch, r.assignment) == (2, None)  # nothing new: no assignment field
    assert (
        groups.heartbeat("g", "m1", 1, None, None, "c1", "/h", 1)[0].error
        == ErrorCode.FENCED_MEMBER_EPOCH
    )
    assert (
        groups.heartbeat("g", "m3", 0, None, ["t"], "c3", "/h", 1)[0].error
        == ErrorCode.GROUP_MAX_SIZE_REACHED
    )
    assert (
        groups.heartbeat("g", "", 0, None, ["t"], "c3", "/h", 1)[0].error
        == ErrorCode.INVALID_REQUEST
    )
    now[0] = 1500  # m2's session ran out; m1 heartbeats in time
    groups.groups["g"].members["m1"].deadline_ms = 2000
    r, gone = groups.heartbeat("g", "m1", 2, None, None, "c1", "/h", 1)
    assert gone == [("g", "m2")] and (r.member_epoch, r.assignment) == (3, {t: [0, 1]})
    assert (
        groups.heartbeat("g", "m1", -1, None, None, "c1", "/h", 1)[1] == []
    )  # it closes its own sessions
    assert groups.groups["g"].state == "Empty"
