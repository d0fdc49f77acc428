"""The coordinators' session fence: while the broker cannot confirm its metadata session
(``session_confirmed()`` False: an etcd store cut off past its lease's deadline), each
coordinator answers as one that is not (any longer) the coordinator, reads included, and
serves again from the same state once the session is confirmed.

The session is an input of the state machine, like its clock: a flag the test sets.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from harness import Harness
from txn_harness import TxnHarness

from gregor.coordinator import GroupCoordinator, Token
from gregor.coordinator.share.coordinator import ReadResult, ShareCoordinator
from gregor.coordinator.txn.coordinator import TransactionCoordinator, TxnDescription
from gregor.protocol.errors import ErrorCode as E
from gregor.protocol.messages.describe_groups import DescribeGroupsRequest
from gregor.protocol.messages.list_groups import ListGroupsRequest


@dataclass
class SessionHarness(Harness):
    confirmed: bool = True

    def _new_coordinator(self) -> GroupCoordinator:
        return GroupCoordinator(self.config, self.topics, self.clock, lambda: self.confirmed)


@dataclass
class SessionTxnHarness(TxnHarness):
    confirmed: bool = True

    def _new(self) -> TransactionCoordinator:
        return TransactionCoordinator(
            self.config,
            lambda: next(self.pids),
            self.clock,
            lambda: self.transaction_version,
            lambda: self.confirmed,
        )


def test_group_reads_and_writes_answer_not_coordinator_while_the_session_is_unconfirmed() -> None:
    h = SessionHarness()
    assert set(h.commit_errors(h.commit("g", {("t", 0): 5})).values()) == {0}
    assert h.fetch("g", {"t": [0]}) == (0, {("t", 0): (5, -1, "m", 0)})

    h.confirmed = False
    assert h.fetch("g", {"t": [0]}) == (E.NOT_COORDINATOR, {})  # v8+: the group's error
    assert h.fetch("g", {"t": [0]}, version=7) == (
        E.NOT_COORDINATOR,
        {("t", 0): (-1, -1, "", E.NOT_COORDINATOR)},  # v2-7: on each partition too
    )
    described = h.call("describe_groups", DescribeGroupsRequest(groups=["g"]), 5)
    assert [(g.group_id, g.error_code) for g in described.groups] == [("g", E.NOT_COORDINATOR)]
    listed = h.call("list_groups", ListGroupsRequest(), 4)
    assert (listed.error_code, listed.groups) == (E.COORDINATOR_NOT_AVAILABLE, [])
    assert set(h.commit_errors(h.commit("g", {("t", 0): 9})).values()) == {E.NOT_COORDINATOR}
    assert h.coord.partition_error("g") == E.NOT_COORDINATOR

    h.confirmed = True  # the same state serves again; the refused commit left no trace
    assert h.fetch("g", {"t": [0]}) == (0, {("t", 0): (5, -1, "m", 0)})
    listed = h.call("list_groups", ListGroupsRequest(), 4)
    assert (listed.error_code, [g.group_id for g in listed.groups]) == (0, ["g"])


def test_transaction_queries_and_requests_answer_not_coordinator_while_unconfirmed() -> None:
    h = SessionTxnHarness()
    a = h.init("a")
    assert a.error_code == 0

    h.confirmed = False
    assert h.coord.describe(["a"]) == [TxnDescription("a", E.NOT_COORDINATOR)]
    assert h.coord.list_transactions([], []) == (E.COORDINATOR_NOT_AVAILABLE, [], [])
    assert h.init("a").error_code == E.NOT_COORDINATOR
    assert h.coord.partition_error("a") == E.NOT_COORDINATOR

    h.confirmed = True
    assert [d.state for d in h.coord.describe(["a"])] == ["Empty"]
    assert h.coord.list_transactions([], [])[0] == 0


def test_share_state_reads_answer_not_coordinator_while_unconfirmed() -> None:
    confirmed = [True]
    share = ShareCoordinator(1, lambda: 0, lambda: confirmed[0])
    share.begin_load(0)
    share.complete_load(0)
    key = ("g", uuid.uuid4(), 0)
    got: list[ReadResult] = []

    def read() -> ReadResult:
        share.read(Token(len(got), got.append), key, 0)
        for r in share.take().replies:
            r.deliver()
        return got[-1]

    assert read() == ReadResult(0)  # led here, not initialized
    confirmed[0] = False
    assert read() == ReadResult(E.NOT_COORDINATOR)
    confirmed[0] = True
    assert read() == ReadResult(0)
