"""Server-side assignors: balance, stickiness, heterogeneous subscriptions, ranges."""

from __future__ import annotations

import uuid

import pytest

from gregor.coordinator.group.assignors import MemberSpec, UnknownAssignorError, assign

T = uuid.UUID(int=1)
U = uuid.UUID(int=2)


def counts(result: dict[str, dict[uuid.UUID, set[int]]]) -> dict[str, int]:
    return {m: sum(len(ps) for ps in a.values()) for m, a in result.items()}


def all_partitions(result: dict[str, dict[uuid.UUID, set[int]]]) -> list[tuple[uuid.UUID, int]]:
    return sorted(
        ((t, p) for a in result.values() for t, ps in a.items() for p in ps),
        key=lambda x: (x[0].int, x[1]),
    )


def test_uniform_spreads_evenly_and_covers_everything() -> None:
    members = {f"m{i}": MemberSpec(f"m{i}", {T, U}) for i in range(3)}
    out = assign("uniform", members, {T: 6, U: 2})
    assert sorted(counts(out).values()) == [2, 3, 3]
    assert all_partitions(out) == [(T, p) for p in range(6)] + [(U, 0), (U, 1)]


def test_uniform_is_sticky_when_a_member_joins() -> None:
    before = assign("uniform", {"a": MemberSpec("a", {T}), "b": MemberSpec("b", {T})}, {T: 6})
    members = {m: MemberSpec(m, {T}, before[m]) for m in ("a", "b")}
    members["c"] = MemberSpec("c", {T})
    after = assign("uniform", members, {T: 6})
    assert counts(after) == {"a": 2, "b": 2, "c": 2}
    # a and b only lose partitions; every partition c gets came from one of them.
    assert after["a"][T] <= before["a"][T] and after["b"][T] <= before["b"][T]
    assert all_partitions(after) == [(T, p) for p in range(6)]


def test_uniform_is_sticky_when_a_member_leaves() -> None:
    three = assign("uniform", {m: MemberSpec(m, {T}) for m in "abc"}, {T: 9})
    after = assign("uniform", {m: MemberSpec(m, {T}, three[m]) for m in "ab"}, {T: 9})
    assert counts(after) in ({"a": 5, "b": 4}, {"a": 4, "b": 5})
    assert three["a"][T] <= after["a"][T] and three["b"][T] <= after["b"][T]


def test_uniform_heterogeneous_subscriptions() -> None:
    members = {"a": MemberSpec("a", {T}), "b": MemberSpec("b", {T, U}), "c": MemberSpec("c", {U})}
    out = assign("uniform", members, {T: 4, U: 4})
    assert sorted(counts(out).values()) == [2, 3, 3]
    assert set(out["a"]) <= {T} and set(out["c"]) <= {U}
    assert all_partitions(out) == [(T, p) for p in range(4)] + [(U, p) for p in range(4)]


def test_uniform_more_members_than_partitions() -> None:
    out = assign("uniform", {m: MemberSpec(m, {T}) for m in "abcd"}, {T: 2})
    assert sorted(counts(out).values()) == [0, 0, 1, 1]
    assert all_partitions(out) == [(T, 0), (T, 1)]


def test_uniform_ignores_unknown_topics() -> None:
    out = assign("uniform", {"a": MemberSpec("a", {T, U})}, {T: 2})
    assert out == {"a": {T: {0, 1}}}


def test_range_gives_contiguous_ranges_per_topic() -> None:
    members = {
        "m2": MemberSpec("m2", {T, U}),
        "m1": MemberSpec("m1", {T, U}),
        "m3": MemberSpec("m3", {T}),
    }
    out = assign("range", members, {T: 7, U: 3})
    assert out == {
        "m1": {T: {0, 1, 2}, U: {0, 1}},
        "m2": {T: {3, 4}, U: {2}},
        "m3": {T: {5, 6}},
    }


def test_unknown_assignor() -> None:
    with pytest.raises(UnknownAssignorError):
        assign("sticky", {}, {})
