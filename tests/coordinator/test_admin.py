"""DescribeGroups, ListGroups, DeleteGroups."""

from __future__ import annotations

from harness import Harness
from test_classic import stable_pair
from test_consumer_group import two_members_converged

from gregor.coordinator.group.consumer_protocol import decode_assignment, subscribed_topics
from gregor.coordinator.group.records import GroupMetadataKey, OffsetCommitKey
from gregor.protocol.errors import ErrorCode as E
from gregor.protocol.messages.delete_groups import DeleteGroupsRequest
from gregor.protocol.messages.describe_groups import DescribeGroupsRequest
from gregor.protocol.messages.leave_group import LeaveGroupRequest
from gregor.protocol.messages.list_groups import ListGroupsRequest


def listing(
    h: Harness, version: int = 5, states: list[str] | None = None, types: list[str] | None = None
) -> list[tuple[str, str, str, str]]:
    r = h.call(
        "list_groups",
        ListGroupsRequest(states_filter=states or [], types_filter=types or []),
        version,
    )
    assert r.error_code == 0
    return sorted((g.group_id, g.protocol_type, g.group_state, g.group_type) for g in r.groups)


def setup_groups(h: Harness) -> tuple[str, str, str, str]:
    a, b, _ = stable_pair(h, "classic")
    ca, cb = two_members_converged(h)
    h.commit("simple", {("t", 0): 1})
    return a, b, ca, cb


def test_list_groups_with_filters() -> None:
    h = Harness()
    setup_groups(h)
    assert listing(h) == [
        ("cg", "consumer", "Stable", "consumer"),
        ("classic", "consumer", "Stable", "classic"),
        ("simple", "", "Empty", "classic"),
    ]
    assert listing(h, states=["empty"]) == [("simple", "", "Empty", "classic")]
    assert listing(h, states=["STABLE"], types=["consumer"]) == [
        ("cg", "consumer", "Stable", "consumer")
    ]
    assert listing(h, types=["classic"]) == [
        ("classic", "consumer", "Stable", "classic"),
        ("simple", "", "Empty", "classic"),
    ]
    # v3 has no filters.
    assert [g[0] for g in listing(h, version=3, states=["empty"])] == ["cg", "classic", "simple"]


def test_list_groups_reports_loading() -> None:
    h = Harness()
    h.coord.begin_load(3)
    r = h.call("list_groups", ListGroupsRequest(), 4)
    assert r.error_code == E.COORDINATOR_LOAD_IN_PROGRESS


def test_describe_groups() -> None:
    h = Harness()
    a, b, ca, cb = setup_groups(h)
    r = h.call(
        "describe_groups",
        DescribeGroupsRequest(
            groups=["classic", "cg", "simple", "none"], include_authorized_operations=True
        ),
        5,
    )
    classic, cg, simple, none = r.groups
    assert (
        classic.error_code,
        classic.group_state,
        classic.protocol_type,
        classic.protocol_data,
    ) == (0, "Stable", "consumer", "range")
    assert {
        m.member_id: (m.client_id, m.client_host, bytes(m.member_assignment))
        for m in classic.members
    } == {a: ("a", "/127.0.0.1", b"A"), b: ("b", "/127.0.0.1", b"B")}
    assert classic.authorized_operations == 328
    assert (cg.group_state, cg.protocol_type, cg.protocol_data) == ("Stable", "consumer", "uniform")
    cg_members = {
        m.member_id: (subscribed_topics(m.member_metadata), decode_assignment(m.member_assignment))
        for m in cg.members
    }
    assert cg_members == {ca: (["t"], {"t": [0, 1, 2]}), cb: (["t"], {"t": [3, 4, 5]})}
    assert (simple.group_state, simple.protocol_type, simple.members) == ("Empty", "", [])
    assert (none.error_code, none.group_state) == (0, "Dead")


def test_describe_groups_hides_metadata_while_rebalancing() -> None:
    h = Harness()
    a, b, gen = stable_pair(h)
    h.join("g", version=3, client_id="c")
    r = h.call("describe_groups", DescribeGroupsRequest(groups=["g"]), 0)
    g = r.groups[0]
    assert (g.group_state, g.protocol_data) == ("PreparingRebalance", "")
    assert {bytes(m.member_assignment) for m in g.members} == {b""}


def test_delete_groups() -> None:
    h = Harness()
    a, b, ca, cb = setup_groups(h)
    h.commit("classic", {("t", 1): 4}, 2, a)
    r = h.call(
        "delete_groups", DeleteGroupsRequest(groups_names=["classic", "cg", "simple", "none"]), 2
    )
    assert [(x.group_id, x.error_code) for x in r.results] == [
        ("classic", E.NON_EMPTY_GROUP),
        ("cg", E.NON_EMPTY_GROUP),
        ("simple", 0),
        ("none", E.GROUP_ID_NOT_FOUND),
    ]
    assert "simple" not in h.coord.groups
    assert h.records(h.partition_of("simple"))[-2:] == [
        (OffsetCommitKey("simple", "t", 0), None),
        (GroupMetadataKey("simple"), None),
    ]
    h.call(
        "leave_group",
        LeaveGroupRequest(
            group_id="classic",
            members=[
                LeaveGroupRequest.Members(member_id=a),
                LeaveGroupRequest.Members(member_id=b),
            ],
        ),
        3,
    )
    h.cgh("cg", ca, -1)
    h.cgh("cg", cb, -1)
    r = h.call("delete_groups", DeleteGroupsRequest(groups_names=["classic", "cg"]), 0)
    assert [(x.group_id, x.error_code) for x in r.results] == [("classic", 0), ("cg", 0)]
    assert set(h.coord.groups) == set()
    assert h.fetch("classic", None)[1] == {}
    # After a restart the deleted groups stay deleted.
    h.restart()
    assert set(h.coord.groups) == set()
