"""The seam between the coordinators and the broker's runtime (issue 36): one outbox type for
the group, transaction and share coordinators, requests answered through typed tokens, one
append-error mapping with its documented variants, and coordinator modules of a readable
size."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from harness import Harness
from txn_harness import TxnHarness

import gregor.coordinator
from gregor.coordinator import GroupCoordinator, Output, Token
from gregor.coordinator.common.append_errors import (
    GROUP_APPEND_ERRORS,
    OFFSET_COMMIT_APPEND_ERRORS,
    SHARE_STATE_APPEND_ERRORS,
    TXN_LOG_APPEND_ERRORS,
)
from gregor.coordinator.common.outbox import Outbox, Write
from gregor.coordinator.share.coordinator import ReadResult, ShareCoordinator
from gregor.coordinator.txn.coordinator import TransactionCoordinator, TxnCoordinatorConfig
from gregor.protocol.errors import ErrorCode as E

COORDINATOR_SRC = Path(gregor.coordinator.__file__).parent


def test_the_three_coordinators_drain_into_the_one_outbox_type() -> None:
    group = Harness().coord
    txn = TransactionCoordinator(TxnCoordinatorConfig(num_partitions=1), lambda: 1, lambda: 0)
    share = ShareCoordinator(1, lambda: 0)
    outputs = [group.take(), txn.take(), share.take()]
    assert [type(o) for o in outputs] == [Output, Output, Output]
    assert [(o.writes, o.replies, o.effects) for o in outputs] == [([], [], [])] * 3


def test_a_reply_reaches_its_token_with_its_answer() -> None:
    share = ShareCoordinator(1, lambda: 0)
    got: list[ReadResult] = []
    share.read(Token(7, got.append), ("g", uuid.uuid4(), 0), 0)  # partition not led here
    out = share.take()
    assert [r.token_id for r in out.replies] == [7] and got == []
    for r in out.replies:
        r.deliver()
    assert got == [ReadResult(E.NOT_COORDINATOR)]


def test_the_outbox_keeps_writes_with_their_callbacks_and_replies_in_order() -> None:
    box: Outbox[str] = Outbox()
    done: list[tuple[int, int]] = []
    answers: list[int] = []
    w1 = box.write(3, b"a", lambda code, offset: done.append((code, offset)))
    box.effect("markers")
    box.reply(Token(1, answers.append), 10)
    w2 = box.write(4, b"b")
    assert box.has_output
    out = box.take()
    assert not box.has_output
    assert out.writes == [Write(w1, 3, b"a"), Write(w2, 4, b"b")]
    assert out.effects == ["markers"]
    assert [r.response for r in out.replies] == [10]
    box.write_complete(w1, 0, 42)
    box.write_complete(w1, 0, 43)  # a second completion of the same write is ignored
    box.write_complete(w2, E.NOT_LEADER_OR_FOLLOWER)
    assert done == [(0, 42)]


# Each variant over the same inputs: the partition not ready, led elsewhere, a batch too
# large, and one error of no family (INVALID_PRODUCER_EPOCH: a fenced transactional commit).
CODES = [
    0,
    E.UNKNOWN_TOPIC_OR_PARTITION,
    E.NOT_ENOUGH_REPLICAS,
    E.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    E.REQUEST_TIMED_OUT,
    E.NOT_LEADER_OR_FOLLOWER,
    E.KAFKA_STORAGE_ERROR,
    E.NOT_COORDINATOR,
    E.MESSAGE_TOO_LARGE,
    E.RECORD_LIST_TOO_LARGE,
    E.INVALID_FETCH_SIZE,
    E.INVALID_PRODUCER_EPOCH,
]
NA, NC = E.COORDINATOR_NOT_AVAILABLE, E.NOT_COORDINATOR


@pytest.mark.parametrize(
    ("variant", "too_large", "other"),
    [
        (GROUP_APPEND_ERRORS, E.UNKNOWN_SERVER_ERROR, E.INVALID_PRODUCER_EPOCH),
        (OFFSET_COMMIT_APPEND_ERRORS, E.INVALID_COMMIT_OFFSET_SIZE, E.INVALID_PRODUCER_EPOCH),
        (TXN_LOG_APPEND_ERRORS, E.UNKNOWN_SERVER_ERROR, E.UNKNOWN_SERVER_ERROR),
        (SHARE_STATE_APPEND_ERRORS, NA, NA),
    ],
    ids=["group", "offset-commit", "txn-log", "share-state"],
)
def test_the_append_error_mapping(variant: Any, too_large: int, other: int) -> None:
    expected = [0, NA, NA, NA, NA, NC, NC, NC, too_large, too_large, too_large, other]
    assert [variant(c) for c in CODES] == expected


def test_each_coordinator_answers_a_failed_append_with_its_variant() -> None:
    # A group's own record (a new member's join) and an offset commit, led elsewhere and too
    # large; a transaction's state record; a share partition's state.
    for code, join_error, commit_error in [
        (E.NOT_LEADER_OR_FOLLOWER, NC, NC),
        (E.MESSAGE_TOO_LARGE, E.UNKNOWN_SERVER_ERROR, E.INVALID_COMMIT_OFFSET_SIZE),
    ]:
        h = Harness(fail_writes=code)
        h.config.initial_rebalance_delay_ms = 0
        t = h.join("g", version=3)
        h.advance(1)
        member = h.result(t).member_id
        assert h.result(h.sync("g", member, 1, {member: b"A"})).error_code == join_error
        assert set(h.commit_errors(h.commit("simple", {("t", 0): 5})).values()) == {commit_error}
    th = TxnHarness(fail_writes=E.MESSAGE_TOO_LARGE)
    assert th.init("tx").error_code == E.UNKNOWN_SERVER_ERROR
    share = ShareCoordinator(1, lambda: 0)
    share.begin_load(0)
    share.complete_load(0)
    answers: list[int] = []
    share.initialize(Token(1, answers.append), ("g", uuid.uuid4(), 0), 0, 0)
    for w in share.take().writes:
        share.write_complete(w.id, E.MESSAGE_TOO_LARGE)
    for r in share.take().replies:
        r.deliver()
    assert answers == [NA]


def test_the_group_coordinator_composes_its_managers() -> None:
    c = Harness().coord
    assert GroupCoordinator.__mro__ == (GroupCoordinator, object)
    assert [
        type(m).__name__ for m in (c.classic, c.consumer, c.offsets, c.admin, c.txn_offsets)
    ] == [
        "ClassicGroups",
        "ConsumerGroups",
        "Offsets",
        "GroupAdmin",
        "TxnOffsets",
    ]
    assert c.offsets.classic is c.classic and c.admin.offsets is c.offsets


def test_no_coordinator_module_is_over_600_lines() -> None:
    sizes = {
        str(p.relative_to(COORDINATOR_SRC)): len(p.read_text().splitlines())
        for p in COORDINATOR_SRC.rglob("*.py")
    }
    assert {name: n for name, n in sizes.items() if n > 600} == {}
