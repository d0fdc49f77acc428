"""Classic group protocol: JoinGroup / SyncGroup / Heartbeat / LeaveGroup and their timers."""

from __future__ import annotations

from harness import PENDING, T0, Harness

from gregor.coordinator import CoordinatorConfig
from gregor.coordinator.group.classic import ClassicState
from gregor.coordinator.group.records import GroupMetadataKey
from gregor.protocol.errors import ErrorCode as E
from gregor.protocol.messages.leave_group import LeaveGroupRequest


def join_new(h: Harness, group: str, version: int = 4, **kw: object) -> str:
    """A v4+ member's first join: MEMBER_ID_REQUIRED, then the real join (left pending)."""
    r = h.result(h.join(group, version=version, **kw))
    assert r.error_code == E.MEMBER_ID_REQUIRED
    return r.member_id


def stable_pair(h: Harness, group: str = "g", session: int = 10000) -> tuple[str, str, int]:
    """Members a and b in a Stable group; returns (a, b, generation)."""
    ta = h.join(group, version=3, session=session, client_id="a")
    h.advance(0)
    ra = h.result(ta)
    a = ra.member_id
    assert (ra.error_code, ra.generation_id, ra.leader) == (0, 1, a)
    assert h.result(h.sync(group, a, 1, {a: b"A1"})).assignment == b"A1"
    tb = h.join(group, version=3, session=session, client_id="b")
    assert h.result(tb) is PENDING
    assert h.heartbeat(group, a, 1) == E.REBALANCE_IN_PROGRESS
    ta = h.join(group, a, version=3, session=session)
    ra, rb = h.result(ta), h.result(tb)
    b = rb.member_id
    assert (ra.generation_id, rb.generation_id, ra.leader, rb.leader) == (2, 2, a, a)
    tsb = h.sync(group, b, 2)
    assert h.result(tsb) is PENDING
    assert h.result(h.sync(group, a, 2, {a: b"A", b: b"B"})).assignment == b"A"
    assert h.result(tsb).assignment == b"B"
    return a, b, 2


def test_member_id_required_then_first_generation() -> None:
    h = Harness()
    mid = join_new(h, "g")
    assert mid.startswith("c-")
    t = h.join("g", mid, version=4)
    assert h.result(t) is PENDING  # the initial delay (0 ms) runs on the next tick
    h.advance(0)
    r = h.result(t)
    assert (r.error_code, r.generation_id, r.leader, r.member_id, r.protocol_name) == (
        0,
        1,
        mid,
        mid,
        "range",
    )
    assert [(m.member_id, bytes(m.metadata)) for m in r.members] == [(mid, b"meta-" + mid.encode())]
    s = h.result(h.sync("g", mid, 1, {mid: b"ASSIGN"}))
    assert (s.error_code, s.assignment) == (0, b"ASSIGN")
    assert h.coord.groups["g"].state is ClassicState.STABLE
    # The stored assignment is in __consumer_offsets, under the group's partition.
    recs = h.records(h.partition_of("g"))
    assert [type(k).__name__ for k, _ in recs] == ["GroupMetadataKey"]
    value = recs[0][1]
    assert (value.generation, value.protocol, value.leader) == (1, "range", mid)
    assert [(m.member_id, m.assignment, m.subscription) for m in value.members] == [
        (mid, b"ASSIGN", b"meta-" + mid.encode())
    ]


def test_pending_member_expires_after_session_timeout() -> None:
    h = Harness()
    mid = join_new(h, "g")
    assert h.coord.groups["g"].pending_members == {mid}
    h.advance(10000)
    assert h.coord.groups["g"].pending_members == set()
    r = h.result(h.join("g", mid, version=4))
    assert r.error_code == E.UNKNOWN_MEMBER_ID


def test_second_member_triggers_rebalance_and_both_get_assignments() -> None:
    h = Harness()
    a, b, gen = stable_pair(h)
    assert h.heartbeat("g", a, gen) == 0
    assert h.heartbeat("g", b, gen) == 0
    assert h.heartbeat("g", b, gen - 1) == E.ILLEGAL_GENERATION
    group = h.coord.groups["g"]
    assert (group.state, group.generation_id, group.leader_id) == (ClassicState.STABLE, 2, a)
    assert {m.member_id: m.assignment for m in group.members.values()} == {a: b"A", b: b"B"}


def test_initial_rebalance_delay_waits_for_more_members() -> None:
    h = Harness(
        config=CoordinatorConfig(
            num_partitions=4, initial_rebalance_delay_ms=3000, min_session_timeout_ms=1000
        )
    )
    t1 = h.join("g", version=3, client_id="one")
    h.advance(1000)
    t2 = h.join("g", version=3, client_id="two")
    h.advance(1999)
    assert h.result(t1) is PENDING
    h.advance(1)  # 3000 ms: a member arrived during the delay, so wait another 3000 ms
    assert h.result(t1) is PENDING
    h.advance(2999)
    assert h.result(t1) is PENDING
    h.advance(1)
    r1, r2 = h.result(t1), h.result(t2)
    assert (r1.generation_id, r2.generation_id) == (1, 1)
    assert len(r1.members) == 2 and r2.members == []
    assert h.clock.now - T0 == 6000


def test_session_expiry_removes_member_and_rebalances() -> None:
    h = Harness()
    a, b, gen = stable_pair(h)
    h.advance(5000)
    assert h.heartbeat("g", a, gen) == 0
    h.advance(5000)  # b's session (10 s) ends now
    assert b not in h.coord.groups["g"].members
    assert h.heartbeat("g", a, gen) == E.REBALANCE_IN_PROGRESS
    r = h.result(h.join("g", a, version=3))
    assert (r.error_code, r.generation_id, [m.member_id for m in r.members]) == (0, 3, [a])
    assert h.heartbeat("g", b, gen) == E.UNKNOWN_MEMBER_ID


def test_rebalance_timeout_drops_members_that_do_not_rejoin() -> None:
    h = Harness()
    a, b, gen = stable_pair(h, session=30000)
    tc = h.join("g", version=3, session=30000, client_id="c")
    ta = h.join("g", a, version=3, session=30000)
    h.advance(19999)
    assert h.result(ta) is PENDING
    h.advance(1)  # rebalance timeout (20 s): b never rejoined
    ra, rc = h.result(ta), h.result(tc)
    assert (ra.generation_id, rc.generation_id) == (3, 3)
    assert sorted(m.member_id for m in ra.members) == sorted([a, rc.member_id])
    assert h.heartbeat("g", b, gen) == E.UNKNOWN_MEMBER_ID


def test_pending_sync_expiry_removes_members_that_never_sync() -> None:
    h = Harness()
    ta = h.join("g", version=3, client_id="a")
    h.advance(0)
    a = h.result(ta).member_id
    h.result(h.sync("g", a, 1, {a: b"x"}))
    tb = h.join("g", version=3, client_id="b")
    ta = h.join("g", a, version=3)
    b = h.result(tb).member_id
    assert h.result(ta).generation_id == 2
    assert h.result(h.sync("g", a, 2, {a: b"A", b: b"B"})).assignment == b"A"
    for _ in range(3):  # b heartbeats (so its session lives) but never sends SyncGroup
        h.advance(5000)
        assert (h.heartbeat("g", a, 2), h.heartbeat("g", b, 2)) == (0, 0)
    h.advance(4999)
    assert b in h.coord.groups["g"].members
    h.advance(1)  # rebalance timeout after the join: b never sent SyncGroup
    assert b not in h.coord.groups["g"].members
    assert h.heartbeat("g", a, 2) == E.REBALANCE_IN_PROGRESS


def test_leave_group_batched_and_single() -> None:
    h = Harness()
    a, b, gen = stable_pair(h)
    req = LeaveGroupRequest(
        group_id="g",
        members=[
            LeaveGroupRequest.Members(member_id=a),
            LeaveGroupRequest.Members(member_id="nobody"),
        ],
    )
    r = h.call("leave_group", req, 3)
    assert r.error_code == 0
    assert [(m.member_id, m.error_code) for m in r.members] == [
        (a, 0),
        ("nobody", E.UNKNOWN_MEMBER_ID),
    ]
    assert h.heartbeat("g", b, gen) == E.REBALANCE_IN_PROGRESS
    # v0-v2: one member, its error at the top level.
    r0 = h.call("leave_group", LeaveGroupRequest(group_id="g", member_id="nobody"), 0)
    assert r0.error_code == E.UNKNOWN_MEMBER_ID
    r1 = h.call("leave_group", LeaveGroupRequest(group_id="g", member_id=b), 1)
    assert r1.error_code == 0
    assert h.coord.groups["g"].members == {}
    r2 = h.call("leave_group", LeaveGroupRequest(group_id="missing", member_id=b), 2)
    assert r2.error_code == E.UNKNOWN_MEMBER_ID


def test_static_member_restart_gets_old_assignment_without_rebalance() -> None:
    h = Harness()
    ta = h.join("g", version=5, instance="i1")
    h.advance(0)
    a = h.result(ta).member_id
    assert a.startswith("i1-")
    h.result(h.sync("g", a, 1, {a: b"x"}, version=3, instance="i1"))
    tb = h.join("g", version=5, instance="i2")
    ta = h.join("g", a, version=5, instance="i1")
    b = h.result(tb).member_id
    assert h.result(ta).generation_id == 2
    h.result(h.sync("g", b, 2, instance="i2"))  # pending until the leader syncs
    h.result(h.sync("g", a, 2, {a: b"A", b: b"B"}, instance="i1"))
    before = len(h.records())
    # b restarts: same instance id, no member id.
    r = h.result(h.join("g", version=5, instance="i2"))
    b2 = r.member_id
    assert (r.error_code, r.generation_id, r.leader, r.members) == (0, 2, a, [])
    assert b2 != b and b2.startswith("i2-")
    s = h.result(h.sync("g", b2, 2, instance="i2"))
    assert (s.error_code, s.assignment) == (0, b"B")
    assert h.coord.groups["g"].state is ClassicState.STABLE
    assert h.heartbeat("g", a, 2, instance="i1") == 0
    # The old incarnation is fenced; the new member id was persisted.
    assert h.heartbeat("g", b, 2, instance="i2") == E.FENCED_INSTANCE_ID
    new = h.records()[before:]
    assert [type(k).__name__ for k, _ in new] == ["GroupMetadataKey"]
    assert sorted(m.member_id for m in new[0][1].members) == sorted([a, b2])


def test_static_leader_restart_skips_assignment_from_v9() -> None:
    h = Harness()
    ta = h.join("g", version=5, instance="lead")
    h.advance(0)
    a = h.result(ta).member_id
    h.result(h.sync("g", a, 1, {a: b"A"}, instance="lead"))
    r = h.result(h.join("g", version=9, instance="lead"))
    a2 = r.member_id
    assert (r.generation_id, r.leader, r.skip_assignment) == (1, a2, True)
    assert [m.member_id for m in r.members] == [a2]
    # Before v9 the restarted leader is told the old id leads, so it does not assign.
    r = h.result(h.join("g", version=5, instance="lead"))
    assert (r.generation_id, r.leader, r.skip_assignment, r.members) == (1, a2, False, [])


def test_static_member_replaced_while_waiting_is_fenced() -> None:
    h = Harness()
    a, b, gen = stable_pair(h)
    h.join("g", version=5, instance="i1")  # a new static member starts a rebalance
    t_a = h.join("g", a, version=5)
    assert h.result(t_a) is PENDING  # waiting for b
    t_i1 = h.join("g", version=5, instance="i1")  # i1 restarts before the rebalance ends
    h.join("g", b, version=5)
    rs = {t: h.result(t) for t in (t_a, t_i1)}
    assert rs[t_a].generation_id == 3
    assert rs[t_i1].generation_id == 3
    members = h.coord.groups["g"].members
    assert len(members) == 3 and h.coord.groups["g"].static_members["i1"] == rs[t_i1].member_id


def test_static_member_waiting_in_join_is_fenced_by_a_new_instance() -> None:
    h = Harness()
    a, b, gen = stable_pair(h)
    t_s = h.join("g", version=5, instance="s")  # starts a rebalance; waits for a and b
    assert h.result(t_s) is PENDING
    s_id = h.coord.groups["g"].static_members["s"]
    t_s2 = h.join("g", version=5, instance="s")
    old = h.result(t_s)
    assert (old.error_code, old.member_id) == (E.FENCED_INSTANCE_ID, s_id)
    h.join("g", a, version=5)
    h.join("g", b, version=5)
    new = h.result(t_s2)
    assert (new.error_code, new.generation_id) == (0, 3)
    assert new.member_id != s_id and new.member_id in h.coord.groups["g"].members


def test_protocol_selection_prefers_most_voted_common_protocol() -> None:
    h = Harness(
        config=CoordinatorConfig(
            num_partitions=4, initial_rebalance_delay_ms=1000, min_session_timeout_ms=1000
        )
    )
    t1 = h.join("g", version=3, protocols=[("range", b"1"), ("roundrobin", b"1"), ("sticky", b"1")])
    t2 = h.join("g", version=3, protocols=[("roundrobin", b"2"), ("range", b"2")])
    t3 = h.join("g", version=3, protocols=[("roundrobin", b"3"), ("range", b"3")])
    h.advance(1000)  # others joined during the delay: one more delay
    h.advance(1000)
    rs = [h.result(t) for t in (t1, t2, t3)]
    assert {r.protocol_name for r in rs} == {"roundrobin"}
    leader = next(r for r in rs if r.members)
    assert sorted(bytes(m.metadata) for m in leader.members) == [b"1", b"2", b"3"]
    bad = h.result(h.join("g", version=3, protocols=[("sticky", b"4")]))
    assert bad.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    bad = h.result(h.join("g", version=3, protocol_type="connect"))
    assert bad.error_code == E.INCONSISTENT_GROUP_PROTOCOL


def test_join_validation_errors() -> None:
    h = Harness()
    assert h.result(h.join("", version=3)).error_code == E.INVALID_GROUP_ID
    assert h.result(h.join("g", version=3, session=999)).error_code == E.INVALID_SESSION_TIMEOUT
    assert h.result(h.join("g", version=3, session=1800001)).error_code == E.INVALID_SESSION_TIMEOUT
    assert h.result(h.join("g", "ghost", version=3)).error_code == E.UNKNOWN_MEMBER_ID
    assert (
        h.result(h.join("g", version=3, protocols=[])).error_code == E.INCONSISTENT_GROUP_PROTOCOL
    )


def test_join_response_fields_by_version() -> None:
    h = Harness()
    t = h.join("g", join_new(h, "g", version=7), version=7)
    h.advance(0)
    r7 = h.result(t)
    assert (r7.protocol_type, r7.protocol_name) == ("consumer", "range")
    fail6 = h.result(h.join("g", "ghost", version=6))
    assert (fail6.protocol_type, fail6.protocol_name, fail6.generation_id) == (None, "", -1)
    fail7 = h.result(h.join("g", "ghost", version=7))
    assert fail7.protocol_name is None


def test_sync_group_errors() -> None:
    h = Harness()
    a, b, gen = stable_pair(h)
    assert h.result(h.sync("g", a, gen + 1)).error_code == E.ILLEGAL_GENERATION
    assert h.result(h.sync("g", "ghost", gen)).error_code == E.UNKNOWN_MEMBER_ID
    assert h.result(h.sync("nope", a, gen)).error_code == E.UNKNOWN_MEMBER_ID
    from gregor.protocol.messages.sync_group import SyncGroupRequest

    wrong = SyncGroupRequest(
        group_id="g",
        generation_id=gen,
        member_id=a,
        protocol_type="consumer",
        protocol_name="roundrobin",
    )
    assert h.call("sync_group", wrong, 5).error_code == E.INCONSISTENT_GROUP_PROTOCOL
    ok = SyncGroupRequest(
        group_id="g",
        generation_id=gen,
        member_id=a,
        protocol_type="consumer",
        protocol_name="range",
    )
    r = h.call("sync_group", ok, 5)
    assert (r.error_code, r.assignment, r.protocol_type, r.protocol_name) == (
        0,
        b"A",
        "consumer",
        "range",
    )
    h.join("g", version=3, client_id="c")  # rebalance starts
    assert h.result(h.sync("g", a, gen)).error_code == E.REBALANCE_IN_PROGRESS


def test_failed_assignment_write_fails_sync_and_rebalances() -> None:
    h = Harness()
    ta = h.join("g", version=3)
    h.advance(0)
    a = h.result(ta).member_id
    h.fail_writes = E.NOT_LEADER_OR_FOLLOWER
    s = h.result(h.sync("g", a, 1, {a: b"A"}))
    assert s.error_code == E.NOT_COORDINATOR
    assert h.coord.groups["g"].state is ClassicState.PREPARING_REBALANCE
    assert h.records() == []


def test_group_becomes_empty_and_is_stored() -> None:
    h = Harness()
    a, b, gen = stable_pair(h)
    req = LeaveGroupRequest(
        group_id="g",
        members=[LeaveGroupRequest.Members(member_id=a), LeaveGroupRequest.Members(member_id=b)],
    )
    h.call("leave_group", req, 4)
    group = h.coord.groups["g"]
    assert (group.state, group.generation_id, group.protocol_name) == (ClassicState.EMPTY, 3, None)
    key, value = h.records()[-1]
    assert key == GroupMetadataKey("g")
    assert (value.generation, value.members, value.protocol) == (3, [], None)


def test_release_waiting_answers_held_requests_not_coordinator() -> None:
    h = Harness()
    a, b, gen = stable_pair(h)
    tc = h.join("g", version=3, client_id="c")  # held: a and b have not rejoined
    ta = h.join("g", a, version=3)
    assert (h.result(tc), h.result(ta)) == (PENDING, PENDING)
    h.coord.release_waiting()
    h.pump()
    assert {h.result(t).error_code for t in (tc, ta)} == {E.NOT_COORDINATOR}
