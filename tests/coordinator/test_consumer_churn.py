"""KIP-848 subscription churn: what a member is handed while it revokes, leaves and rejoins.

The sequences replay, heartbeat by heartbeat, what librdkafka sent in its regression test
0045_subscribe_many_updates (issue 40): a member changes its subscription and, before it has
confirmed the revocation that change asks for, unsubscribes (leaves with epoch -1); a
heartbeat of its old incarnation may arrive after it left or after it joined again.
"""

from __future__ import annotations

from harness import Harness, Topics

from gregor.coordinator.group.consumer_group import MemberState
from gregor.protocol.errors import ErrorCode as E

FOUR = [0, 1, 2, 3]


def churn_harness() -> Harness:
    return Harness(topics=Topics(a=4, b=4, c=4, d=4, e=4, f=4, g=4))


def joined(h: Harness, member: str, topics: list[str]) -> int:
    """``member`` joins with its own id (v1, as librdkafka does), acknowledges; its epoch."""
    r = h.cgh("cg", member, 0, topics=topics, rebalance=60000, version=1)
    assert r.error_code == 0, (r.error_code, r.error_message)
    assert h.assignment_of(r) == dict.fromkeys(topics, FOUR)
    ack = h.cgh("cg", member, r.member_epoch, owned=dict.fromkeys(topics, FOUR), version=1)
    assert (ack.error_code, ack.member_epoch, ack.assignment) == (0, r.member_epoch, None)
    return int(r.member_epoch)


def test_a_member_revoking_partitions_is_not_handed_new_ones_in_the_same_answer() -> None:
    h = churn_harness()
    epoch = joined(h, "m", ["a", "b", "c", "d", "e"])
    # The sliding window moves by one topic: a goes, f comes. librdkafka sends the new
    # subscription without its owned partitions (they did not change).
    r = h.cgh("cg", "m", epoch, topics=["b", "c", "d", "e", "f"], version=1)
    assert r.error_code == 0
    # It keeps its epoch and is told only what it keeps; f waits until a is given up.
    assert r.member_epoch == epoch
    assert h.assignment_of(r) == dict.fromkeys(["b", "c", "d", "e"], FOUR)
    m = h.coord.groups["cg"].members["m"]
    assert m.state is MemberState.UNREVOKED_PARTITIONS
    assert m.pending_revocation == {h.topics.topic_id("a"): set(FOUR)}
    # Once it confirms, it moves to the group's epoch and gets f.
    r = h.cgh("cg", "m", epoch, owned=dict.fromkeys(["b", "c", "d", "e"], FOUR), version=1)
    assert r.member_epoch == h.coord.groups["cg"].assignment_epoch > epoch
    assert h.assignment_of(r) == dict.fromkeys(["b", "c", "d", "e", "f"], FOUR)
    assert m.state is MemberState.STABLE


def test_unsubscribing_before_confirming_a_revocation_leaves_the_member_with_nothing() -> None:
    """The exact exchange of librdkafka's failing run: subscribe (window moved), then
    unsubscribe at once; the answer to the first heartbeat must not carry new partitions,
    and after the leave the member's old incarnation is fenced."""
    h = churn_harness()
    epoch = joined(h, "m", ["a", "b", "c", "d", "e"])
    other = joined(h, "x", ["g"])
    r = h.cgh("cg", "m", epoch, topics=["b", "c", "d", "e", "f"], version=1)
    assert set(h.assignment_of(r) or {}) == {"b", "c", "d", "e"}
    # The client revokes everything it holds and leaves.
    left = h.cgh("cg", "m", -1, version=1)
    assert (left.error_code, left.member_id, left.member_epoch, left.assignment) == (
        0,
        "m",
        -1,
        None,
    )
    g = h.coord.groups["cg"]
    assert "m" not in g.members
    assert all(owner == "x" for owner in g.owners.values())
    # A heartbeat of the member that left (sent before the leave, or retried) is fenced
    # with UNKNOWN_MEMBER_ID, whatever it carries: it gets no assignment.
    for stale in (
        h.cgh("cg", "m", epoch, topics=["b", "c", "d", "e", "f"], version=1),
        h.cgh("cg", "m", epoch, owned=dict.fromkeys(["b", "c", "d", "e"], FOUR), version=1),
        h.cgh("cg", "m", epoch + 1, version=1),
    ):
        assert (stale.error_code, stale.assignment) == (E.UNKNOWN_MEMBER_ID, None)
    assert "m" not in g.members
    # The other member goes on alone with what it had.
    rx = h.cgh("cg", "x", other, version=1)
    assert rx.error_code == 0
    assert h.assignment_of(rx) in (None, {"g": FOUR})


def test_a_member_that_rejoins_starts_afresh_and_its_old_epoch_is_fenced() -> None:
    h = churn_harness()
    epoch = joined(h, "m", ["a", "b"])
    h.cgh("cg", "m", epoch, topics=["b", "c"], version=1)  # revoking a
    assert h.cgh("cg", "m", -1, version=1).error_code == 0
    # The same client subscribes again: a new member with the same id, at epoch 0.
    r = h.cgh("cg", "m", 0, topics=["c", "d"], rebalance=60000, owned={}, version=1)
    assert r.error_code == 0
    new_epoch = r.member_epoch
    assert new_epoch == h.coord.groups["cg"].group_epoch > epoch
    assert h.assignment_of(r) == {"c": FOUR, "d": FOUR}
    m = h.coord.groups["cg"].members["m"]
    assert (m.previous_member_epoch, m.state, m.pending_revocation) == (0, MemberState.STABLE, {})
    # Heartbeats of the old incarnation, still in flight, are fenced and change nothing.
    old = h.cgh("cg", "m", epoch, owned={"b": FOUR}, version=1)
    assert (old.error_code, old.assignment) == (E.FENCED_MEMBER_EPOCH, None)
    old = h.cgh("cg", "m", epoch, topics=["b", "c"], version=1)
    assert (old.error_code, old.assignment) == (E.FENCED_MEMBER_EPOCH, None)
    assert (m.member_epoch, h.coord.groups["cg"].members["m"].assigned) == (
        new_epoch,
        {h.topics.topic_id("c"): set(FOUR), h.topics.topic_id("d"): set(FOUR)},
    )


def test_a_revocation_already_done_by_the_client_is_not_asked_for_again() -> None:
    h = churn_harness()
    epoch = joined(h, "m", ["a", "b"])
    # The member reports it no longer owns a (it let go of it itself): nothing to wait for.
    r = h.cgh("cg", "m", epoch, topics=["b", "c"], rebalance=60000, owned={"b": FOUR}, version=1)
    assert r.member_epoch == h.coord.groups["cg"].assignment_epoch > epoch
    assert h.assignment_of(r) == {"b": FOUR, "c": FOUR}
    assert h.coord.groups["cg"].members["m"].state is MemberState.STABLE


def test_a_further_revocation_keeps_the_member_epoch() -> None:
    """UNREVOKED -> UNREVOKED does not bump the member epoch (KAFKA-19974): a partition is
    owned by one member at any one epoch."""
    h = churn_harness()
    epoch = joined(h, "m", ["a", "b", "c"])
    h.cgh("cg", "m", epoch, topics=["b", "c", "d"], version=1)  # revoke a
    # Before confirming, the window moves again: b goes too.
    r = h.cgh("cg", "m", epoch, topics=["c", "d", "e"], owned={"b": FOUR, "c": FOUR}, version=1)
    assert (r.error_code, r.member_epoch) == (0, epoch)
    assert h.assignment_of(r) == {"c": FOUR}
    m = h.coord.groups["cg"].members["m"]
    assert m.state is MemberState.UNREVOKED_PARTITIONS
    r = h.cgh("cg", "m", epoch, owned={"c": FOUR}, version=1)
    assert r.member_epoch == h.coord.groups["cg"].assignment_epoch
    assert h.assignment_of(r) == {"c": FOUR, "d": FOUR, "e": FOUR}


def test_the_previous_epoch_is_accepted_only_with_owned_partitions_within_the_assignment() -> None:
    h = churn_harness()
    epoch = joined(h, "m", ["a"])
    h.cgh("cg", "m", epoch, topics=["a", "b"], version=1)
    r = h.cgh("cg", "m", epoch, owned={"a": FOUR}, version=1)
    assert r.member_epoch == epoch + 1
    # The answer with the new epoch was lost: a retry at the old epoch that says what the
    # member owns is answered; one that does not say (Kafka's isSubset(null) is false) is fenced.
    assert h.cgh("cg", "m", epoch, owned={"a": FOUR}, version=1).error_code == 0
    assert h.cgh("cg", "m", epoch, version=1).error_code == E.FENCED_MEMBER_EPOCH


def test_a_static_member_stepping_out_releases_what_it_was_revoking() -> None:
    h = churn_harness()
    r = h.cgh("cg", "s", 0, topics=["a", "b"], rebalance=60000, instance="i1", version=1)
    epoch = r.member_epoch
    h.cgh("cg", "s", epoch, owned={"a": FOUR, "b": FOUR}, instance="i1", version=1)
    h.cgh("cg", "s", epoch, topics=["b"], instance="i1", version=1)  # revoking a
    g = h.coord.groups["cg"]
    a = h.topics.topic_id("a")
    assert all(g.owners[(a, p)] == "s" for p in FOUR)
    assert h.cgh("cg", "s", -2, instance="i1", version=1).error_code == 0
    assert not any(tid == a for tid, _ in g.owners)
    # Another member subscribing to a gets it at once.
    rx = h.cgh("cg", "x", 0, topics=["a"], rebalance=60000, version=1)
    assert h.assignment_of(rx) == {"a": FOUR}


def test_a_commit_from_before_the_member_left_and_rejoined_is_stale() -> None:
    """KIP-1251: a commit at an older member epoch is accepted only for partitions the member
    has held since that epoch. After a leave and a rejoin (same member id, new epoch) the
    old incarnation's commit must not land, even though the partition is the member's again:
    in between it may have been another member's, whose progress it would overwrite."""
    h = churn_harness()
    old = joined(h, "m", ["a"])
    assert h.commit_errors(h.commit("cg", {("a", 0): 5}, old, "m", version=9)) == {("a", 0): 0}
    assert h.cgh("cg", "m", -1, version=1).error_code == 0
    # Meanwhile x consumes a and commits.
    x = joined(h, "x", ["a"])
    assert h.commit_errors(h.commit("cg", {("a", 0): 40}, x, "x", version=9)) == {("a", 0): 0}
    assert h.cgh("cg", "x", -1, version=1).error_code == 0
    new = joined(h, "m", ["a"])
    assert new > old
    # The old incarnation's late commit at its old epoch: stale.
    stale = h.commit_errors(h.commit("cg", {("a", 0): 6}, old, "m", version=9))
    assert stale == {("a", 0): E.STALE_MEMBER_EPOCH}
    assert h.fetch("cg", {"a": [0]})[1] == {("a", 0): (40, -1, "m", 0)}
    # The new incarnation commits at its epoch.
    assert h.commit_errors(h.commit("cg", {("a", 0): 41}, new, "m", version=9)) == {("a", 0): 0}


def test_an_older_epoch_commits_only_partitions_held_since_then() -> None:
    h = churn_harness()
    e1 = joined(h, "m", ["a"])
    # The subscription grows: b comes at a later epoch, a stays.
    h.cgh("cg", "m", e1, topics=["a", "b"], version=1)
    e2 = h.cgh("cg", "m", e1, owned={"a": FOUR}, version=1).member_epoch
    assert e2 > e1
    assert h.commit_errors(h.commit("cg", {("a", 1): 3}, e1, "m", version=9)) == {("a", 1): 0}
    assert h.commit_errors(h.commit("cg", {("b", 1): 3}, e1, "m", version=9)) == {
        ("b", 1): E.STALE_MEMBER_EPOCH
    }
    assert h.commit_errors(h.commit("cg", {("b", 1): 3}, e2, "m", version=9)) == {("b", 1): 0}
    # After a restart the epochs are not known any more: partitions count from the epoch the
    # member is at (as Kafka does for records without them), so older commits are stale.
    h.restart()
    assert h.commit_errors(h.commit("cg", {("a", 1): 4}, e1, "m", version=9)) == {
        ("a", 1): E.STALE_MEMBER_EPOCH
    }
    assert h.commit_errors(h.commit("cg", {("a", 1): 4}, e2, "m", version=9)) == {("a", 1): 0}
