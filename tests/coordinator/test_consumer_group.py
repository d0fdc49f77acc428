"""KIP-848 consumer groups: epochs, server-side assignment, incremental reconciliation."""

from __future__ import annotations

from harness import Harness

from gregor.coordinator.group.consumer_group import MemberState
from gregor.coordinator.group.records import (
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
    CONSUMER_GROUP_MEMBER_METADATA,
    CONSUMER_GROUP_METADATA,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA,
    ConsumerGroupKey,
    ConsumerGroupMetadataValue,
    ConsumerMemberKey,
    CurrentMemberAssignmentValue,
    TargetAssignmentMetadataValue,
)
from gregor.protocol.errors import ErrorCode as E
from gregor.protocol.messages.consumer_group_describe import ConsumerGroupDescribeRequest

ALL = {"t": [0, 1, 2, 3, 4, 5]}


def join(h: Harness, group: str = "cg", **kw: object) -> object:
    kw.setdefault("topics", ["t"])
    kw.setdefault("rebalance", 30000)
    r = h.cgh(group, **kw)
    assert r.error_code == 0, (r.error_code, r.error_message)
    return r


def two_members_converged(h: Harness) -> tuple[str, str]:
    """Members a and b sharing topic t, both Stable at epoch 2; returns their ids."""
    ra = join(h)
    a = ra.member_id
    rb = join(h)
    b = rb.member_id
    ra = h.cgh("cg", a, 1)
    assert h.assignment_of(ra) == {"t": [0, 1, 2]}
    ra = h.cgh("cg", a, 1, owned={"t": [0, 1, 2]})
    assert ra.member_epoch == 2
    rb = h.cgh("cg", b, 2)
    assert (rb.member_epoch, h.assignment_of(rb)) == (2, {"t": [3, 4, 5]})
    return a, b


def test_first_member_gets_everything() -> None:
    h = Harness()
    r = join(h)
    assert (r.member_epoch, r.heartbeat_interval_ms, len(r.member_id)) == (1, 5000, 22)
    assert h.assignment_of(r) == ALL
    g = h.coord.groups["cg"]
    assert (g.group_epoch, g.assignment_epoch, g.describe_state(), g.assignor_name) == (
        1,
        1,
        "Stable",
        "uniform",
    )
    recs = h.records(h.partition_of("cg"))
    kinds = [(getattr(k, "type", None)) for k, _ in recs]
    assert kinds == [
        CONSUMER_GROUP_MEMBER_METADATA,
        CONSUMER_GROUP_METADATA,
        CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
        CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA,
        CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
    ]
    tid = h.topics.topic_id("t")
    assert recs[1] == (
        ConsumerGroupKey(CONSUMER_GROUP_METADATA, "cg"),
        ConsumerGroupMetadataValue(1),
    )
    assert recs[3][1] == TargetAssignmentMetadataValue(1)
    assert recs[4] == (
        ConsumerMemberKey(CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, "cg", r.member_id),
        CurrentMemberAssignmentValue(1, 0, 0, {tid: [0, 1, 2, 3, 4, 5]}, {}),
    )
    # A steady heartbeat changes nothing and writes nothing.
    n = len(h.records())
    r2 = h.cgh("cg", r.member_id, 1)
    assert (r2.error_code, r2.member_epoch, r2.assignment) == (0, 1, None)
    assert len(h.records()) == n


def test_partitions_move_only_after_revocation() -> None:
    h = Harness()
    a = join(h).member_id
    rb = join(h)
    b = rb.member_id
    # b is at the new epoch but its partitions are still a's: nothing yet.
    assert (rb.member_epoch, h.assignment_of(rb)) == (2, {})
    assert h.coord.groups["cg"].members[b].state is MemberState.UNRELEASED_PARTITIONS
    ra = h.cgh("cg", a, 1)
    assert (ra.member_epoch, h.assignment_of(ra)) == (1, {"t": [0, 1, 2]})
    assert h.coord.groups["cg"].members[a].state is MemberState.UNREVOKED_PARTITIONS
    assert h.coord.groups["cg"].describe_state() == "Reconciling"
    # a has not said it gave them up: b still waits, a stays at epoch 1.
    assert h.assignment_of(h.cgh("cg", b, 2)) is None
    assert h.cgh("cg", a, 1, owned={"t": [0, 1, 2, 3, 4, 5]}).member_epoch == 1
    ra = h.cgh("cg", a, 1, owned={"t": [0, 1, 2]})
    assert (ra.member_epoch, ra.assignment) == (2, None)
    rb = h.cgh("cg", b, 2)
    assert h.assignment_of(rb) == {"t": [3, 4, 5]}
    assert h.coord.groups["cg"].describe_state() == "Stable"


def test_leave_hands_partitions_to_the_others() -> None:
    h = Harness()
    a, b = two_members_converged(h)
    r = h.cgh("cg", a, -1)
    assert (r.error_code, r.member_id, r.member_epoch) == (0, a, -1)
    rb = h.cgh("cg", b, 2)
    assert (rb.member_epoch, h.assignment_of(rb)) == (3, ALL)
    assert h.cgh("cg", a, 2).error_code == E.UNKNOWN_MEMBER_ID
    tombstones = [k for k, v in h.records() if v is None]
    assert [getattr(k, "type", None) for k in tombstones] == [
        CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
        CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
        CONSUMER_GROUP_MEMBER_METADATA,
    ]


def test_session_timeout_fences_a_silent_member() -> None:
    h = Harness()
    a, b = two_members_converged(h)
    for _ in range(2):
        h.advance(20000)
        assert h.cgh("cg", b, 2).error_code == 0
    h.advance(4999)
    assert a in h.coord.groups["cg"].members
    h.advance(1)  # 45 s (group.consumer.session.timeout.ms) since a's last heartbeat
    assert a not in h.coord.groups["cg"].members
    assert h.coord.groups["cg"].group_epoch == 3
    rb = h.cgh("cg", b, 2)
    assert (rb.member_epoch, h.assignment_of(rb)) == (3, ALL)


def test_revocation_timeout_fences_a_member_that_keeps_its_partitions() -> None:
    h = Harness()
    a = join(h, rebalance=10000).member_id
    b = join(h).member_id
    h.cgh("cg", a, 1)  # told to give up 3, 4, 5
    h.advance(9999)
    assert h.cgh("cg", a, 1, owned=ALL).error_code == 0
    h.advance(1)
    assert a not in h.coord.groups["cg"].members
    rb = h.cgh("cg", b, 2)
    assert (rb.member_epoch, h.assignment_of(rb)) == (3, ALL)


def test_member_epoch_fencing() -> None:
    h = Harness()
    a, b = two_members_converged(h)
    assert h.cgh("cg", a, 5).error_code == E.FENCED_MEMBER_EPOCH
    # The previous epoch is fine when the member owns no more than its assignment
    # (the response carrying the new epoch may have been lost).
    r = h.cgh("cg", a, 1, owned={"t": [0, 1, 2]})
    assert (r.error_code, r.member_epoch) == (0, 2)
    assert h.cgh("cg", a, 1, owned={"t": [0, 1, 2, 3]}).error_code == E.FENCED_MEMBER_EPOCH
    assert h.cgh("cg", b, 0 + 1).error_code == E.FENCED_MEMBER_EPOCH  # b never was at epoch 1
    assert h.cgh("cg", "ghost", 2).error_code == E.UNKNOWN_MEMBER_ID
    assert h.cgh("nogroup", "ghost", 2).error_code == E.GROUP_ID_NOT_FOUND


def test_static_member_restart_keeps_assignment_without_new_epoch() -> None:
    h = Harness()
    ra = join(h, instance="s1")
    a = ra.member_id
    b = join(h).member_id
    h.cgh("cg", a, 1)
    h.cgh("cg", a, 1, owned={"t": [0, 1, 2]})
    h.cgh("cg", b, 2)
    dup = h.cgh("cg", topics=["t"], rebalance=30000, instance="s1")
    assert dup.error_code == E.UNRELEASED_INSTANCE_ID
    r = h.cgh("cg", a, -2, instance="s1")
    assert (r.error_code, r.member_epoch) == (0, -2)
    epoch = h.coord.groups["cg"].group_epoch
    r = join(h, instance="s1")
    assert r.member_id != a
    assert (r.member_epoch, h.assignment_of(r)) == (2, {"t": [0, 1, 2]})
    assert h.coord.groups["cg"].group_epoch == epoch
    assert h.assignment_of(h.cgh("cg", b, 2)) is None  # b saw no change


def test_static_member_that_never_returns_is_removed_after_its_session() -> None:
    h = Harness()
    a = join(h, instance="s1").member_id
    h.cgh("cg", a, -2, instance="s1")
    h.advance(45000)
    assert h.coord.groups["cg"].members == {}
    assert h.coord.groups["cg"].describe_state() == "Empty"


def test_new_partitions_trigger_a_new_assignment() -> None:
    h = Harness()
    a = join(h).member_id
    h.topics.add("t", 8)
    r = h.cgh("cg", a, 1)
    assert (r.member_epoch, h.assignment_of(r)) == (2, {"t": list(range(8))})


def test_regex_subscription_and_client_member_id_v1() -> None:
    h = Harness()
    r = h.cgh("cg", "my-own-id", 0, topics=[], regex="t|u", rebalance=30000, version=1)
    assert (r.error_code, r.member_id, r.member_epoch) == (0, "my-own-id", 1)
    # As in Kafka, a regex new to the group is resolved off the heartbeat path: its matches
    # come with a later heartbeat, in a new group epoch.
    assert h.assignment_of(r) == {}
    h.advance(0)
    r = h.cgh("cg", "my-own-id", 1, version=1)
    assert r.member_epoch == 2
    assert h.assignment_of(r) == {"t": [0, 1, 2, 3, 4, 5], "u": [0, 1]}
    h.topics.add("tu", 1)  # does not match the whole pattern
    h.topics.add("u", 3)
    r = h.cgh("cg", "my-own-id", 2, version=1)
    assert h.assignment_of(r) == {"t": [0, 1, 2, 3, 4, 5], "u": [0, 1, 2]}
    # A regex that does not compile: INVALID_REGULAR_EXPRESSION, as Kafka answers it (its text
    # then gives RE2/J's reason, here Python's).
    bad = h.cgh("cg2", "x", 0, topics=None, regex="(", rebalance=30000, version=1)
    assert (bad.error_code, bad.error_message) == (
        E.INVALID_REGULAR_EXPRESSION,
        "SubscribedTopicRegex `(` is not a valid regular expression: missing ), unterminated subpattern.",
    )
    assert "cg2" not in h.coord.groups


def test_regex_known_to_the_group_resolves_at_once_and_literal_topics_come_first() -> None:
    h = Harness()
    h.topics.add("lit", 2)
    r = h.cgh("cg", "a", 0, topics=["lit"], regex="t|u", rebalance=30000, version=1)
    assert h.assignment_of(r) == {"lit": [0, 1]}
    h.advance(0)
    r = h.cgh("cg", "a", 1, version=1)
    assert h.assignment_of(r) == {"lit": [0, 1], "t": [0, 1, 2, 3, 4, 5], "u": [0, 1]}
    # A second member with the same regex: already resolved, it counts at its first heartbeat.
    b = h.cgh("cg", "b", 0, topics=[], regex="t|u", rebalance=30000, version=1)
    g = h.coord.groups["cg"]
    tid = h.topics.topic_id("t")
    assert tid in g.target["b"]
    # Everyone with the regex leaves: the group forgets it, and a new subscriber waits again.
    h.cgh("cg", "a", -1, version=1)
    h.cgh("cg", "b", -1, version=1)
    assert g.resolved_regexes == set()
    c = h.cgh("cg", "c", 0, topics=["lit"], regex="t|u", rebalance=30000, version=1)
    assert h.assignment_of(c) == {"lit": [0, 1]}
    del b


def test_range_assignor() -> None:
    h = Harness()
    h.cgh("cg", "m2", 0, topics=["t", "u"], rebalance=30000, assignor="range", version=1)
    r1 = h.cgh("cg", "m1", 0, topics=["t", "u"], rebalance=30000, assignor="range", version=1)
    g = h.coord.groups["cg"]
    assert g.assignor_name == "range"
    tid, uid = h.topics.topic_id("t"), h.topics.topic_id("u")
    assert g.target == {"m1": {tid: {0, 1, 2}, uid: {0}}, "m2": {tid: {3, 4, 5}, uid: {1}}}
    assert r1.member_epoch == 2


def test_request_validation() -> None:
    h = Harness()
    assert h.cgh("", topics=["t"], rebalance=1).error_code == E.INVALID_REQUEST
    assert h.cgh("cg", topics=["t"]).error_code == E.INVALID_REQUEST  # no rebalance timeout
    assert h.cgh("cg", rebalance=1).error_code == E.INVALID_REQUEST  # no subscription
    assert h.cgh("cg", topics=["t"], rebalance=1, owned={"t": [0]}).error_code == E.INVALID_REQUEST
    assert h.cgh("cg", "", 3).error_code == E.INVALID_REQUEST
    assert h.cgh("cg", "m", -3).error_code == E.INVALID_REQUEST
    r = h.cgh("cg", topics=["t"], rebalance=1, assignor="sticky")
    assert (r.error_code, r.error_message) == (
        E.UNSUPPORTED_ASSIGNOR,
        "ServerAssignor sticky is not supported. Supported assignors: uniform, range.",
    )


def test_describe() -> None:
    h = Harness()
    a, b = two_members_converged(h)
    h.call("join_group", *_classic_join("classic"))
    req = ConsumerGroupDescribeRequest(
        group_ids=["cg", "classic", "none"], include_authorized_operations=True
    )
    r = h.call("consumer_group_describe", req, 0)
    g, classic, none = r.groups
    assert (g.error_code, g.group_state, g.group_epoch, g.assignment_epoch, g.assignor_name) == (
        0,
        "Stable",
        2,
        2,
        "uniform",
    )
    assert g.authorized_operations == (1 << 3) | (1 << 6) | (1 << 8)
    members = {m.member_id: m for m in g.members}
    assert set(members) == {a, b}
    ma = members[a]
    assert (ma.member_epoch, ma.client_id, ma.client_host, ma.subscribed_topic_names) == (
        2,
        "client",
        "/10.0.0.1",
        ["t"],
    )
    assert [(tp.topic_name, tp.partitions) for tp in ma.assignment.topic_partitions] == [
        ("t", [0, 1, 2])
    ]
    assert [(tp.topic_name, tp.partitions) for tp in ma.target_assignment.topic_partitions] == [
        ("t", [0, 1, 2])
    ]
    assert (classic.error_code, classic.error_message) == (
        E.GROUP_ID_NOT_FOUND,
        "Group classic is not a consumer group.",
    )
    assert none.error_code == E.GROUP_ID_NOT_FOUND


def _classic_join(group: str) -> tuple[object, int, str, str]:
    from gregor.protocol.messages.join_group import JoinGroupRequest

    req = JoinGroupRequest(
        group_id=group,
        session_timeout_ms=10000,
        member_id="",
        protocol_type="consumer",
        protocols=[JoinGroupRequest.Protocols(name="range", metadata=b"")],
    )
    return req, 3, "c", "/h"


def test_restart_keeps_members_epochs_and_assignments() -> None:
    h = Harness()
    a, b = two_members_converged(h)
    h.restart()
    g = h.coord.groups["cg"]
    assert (g.group_epoch, g.assignment_epoch, g.describe_state()) == (2, 2, "Stable")
    ra, rb = h.cgh("cg", a, 2), h.cgh("cg", b, 2)
    assert (ra.error_code, ra.member_epoch, ra.assignment, rb.member_epoch, rb.assignment) == (
        0,
        2,
        None,
        2,
        None,
    )
    full = h.cgh("cg", a, 2, topics=["t"], rebalance=30000, owned={"t": [0, 1, 2]})
    assert h.assignment_of(full) == {"t": [0, 1, 2]}


def test_offset_commit_and_fetch_check_member_epochs() -> None:
    h = Harness()
    a, b = two_members_converged(h)
    assert h.commit_errors(h.commit("cg", {("t", 0): 5}, 2, a, version=9)) == {("t", 0): 0}
    assert h.commit_errors(h.commit("cg", {("t", 0): 5}, 3, a, version=9)) == {
        ("t", 0): E.STALE_MEMBER_EPOCH
    }
    # An older epoch may still commit partitions the member owns, not others.
    assert h.commit_errors(h.commit("cg", {("t", 1): 6}, 1, a, version=9)) == {("t", 1): 0}
    assert h.commit_errors(h.commit("cg", {("t", 3): 6}, 1, a, version=9)) == {
        ("t", 3): E.STALE_MEMBER_EPOCH
    }
    assert h.commit_errors(h.commit("cg", {("t", 3): 6}, 2, "ghost", version=9)) == {
        ("t", 3): E.UNKNOWN_MEMBER_ID
    }
    assert h.commit_errors(h.commit("cg", {("t", 3): 6}, version=9)) == {
        ("t", 3): E.UNKNOWN_MEMBER_ID
    }
    assert h.fetch("cg", {"t": [0]}, version=9, member_id=a, member_epoch=2) == (
        0,
        {("t", 0): (5, -1, "m", 0)},
    )
    assert h.fetch("cg", {"t": [0]}, version=9, member_id=a, member_epoch=1) == (
        E.STALE_MEMBER_EPOCH,
        {},
    )
    assert h.fetch("cg", {"t": [0]}, version=9, member_id="ghost", member_epoch=1) == (
        E.UNKNOWN_MEMBER_ID,
        {},
    )


def test_group_types_do_not_mix_but_empty_groups_convert() -> None:
    h = Harness()
    join(h)
    assert h.call("join_group", *_classic_join("cg")).error_code == E.INCONSISTENT_GROUP_PROTOCOL
    t = h.send("join_group", *_classic_join("classic"))
    h.advance(0)
    assert h.result(t).error_code == 0
    assert h.cgh("classic", topics=["t"], rebalance=1).error_code == E.GROUP_ID_NOT_FOUND
    # A group holding only offsets becomes a consumer group, offsets kept.
    h.commit("simple", {("t", 0): 9})
    assert join(h, "simple").member_epoch == 1
    assert h.fetch("simple", None)[1] == {("t", 0): (9, -1, "m", 0)}
