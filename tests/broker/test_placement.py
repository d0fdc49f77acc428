"""Replica placement: round-robin over the live brokers, rack-alternated when every broker has a rack."""

from __future__ import annotations

from gregor.broker.common.topics import assign_replicas, rack_alternated


def test_round_robin_without_racks() -> None:
    assert assign_replicas(4, 2, [1, 2, 3]) == [[1, 2], [2, 3], [3, 1], [1, 2]]
    assert assign_replicas(2, 3, [1, 2, 3], start=1) == [[2, 3, 1], [3, 1, 2]]


def test_rack_alternated_order() -> None:
    racks = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c"}
    assert rack_alternated([1, 2, 3, 4, 5], racks) == [1, 3, 5, 2, 4]


def test_every_partition_spans_two_racks() -> None:
    racks = {1: "a", 2: "a", 3: "b", 4: "b"}
    layout = assign_replicas(8, 2, [1, 2, 3, 4], racks=racks)
    assert all(len({racks[b] for b in replicas}) == 2 for replicas in layout)
    leaders = [replicas[0] for replicas in layout]
    assert sorted(leaders) == [1, 1, 2, 2, 3, 3, 4, 4]  # leadership still evenly spread


def test_a_broker_without_a_rack_means_no_rack_awareness() -> None:
    assert assign_replicas(2, 2, [1, 2, 3], racks={1: "a", 2: None, 3: "b"}) == [[1, 2], [2, 3]]
