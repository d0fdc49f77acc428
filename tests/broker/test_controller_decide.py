"""The controller's election rule (``decide``) and the follower's batch trimming, as pure functions."""

from __future__ import annotations

from gregor.broker.controller import PartitionChange, decide
from gregor.broker.replica_fetcher import complete_batches
from gregor.cluster.image import PartitionImage


def part(leader: int, isr: tuple[int, ...], replicas: tuple[int, ...] = (1, 2, 3), epoch: int = 4) -> PartitionImage:
    return PartitionImage(0, leader, epoch, 9, replicas, isr)


def test_a_live_leader_with_a_full_isr_is_left_alone() -> None:
    assert decide(part(1, (1, 2, 3)), {1, 2, 3}, unclean=False) is None


def test_dead_isr_members_leave_the_isr_without_a_new_epoch() -> None:
    assert decide(part(1, (1, 2, 3)), {1, 3}, unclean=False) == PartitionChange(1, 4, (1, 3))


def test_a_dead_leader_is_replaced_by_the_first_live_isr_member_in_replica_order() -> None:
    assert decide(part(1, (3, 2, 1), replicas=(1, 2, 3)), {2, 3}, unclean=False) == PartitionChange(2, 5, (3, 2))


def test_a_live_replica_outside_the_isr_is_not_elected_unless_unclean() -> None:
    offline = decide(part(1, (1,)), {2, 3}, unclean=False)
    assert offline == PartitionChange(-1, 5, (1,))  # offline; the last ISR is kept
    assert decide(part(-1, (1,), epoch=5), {2, 3}, unclean=False) is None
    assert decide(part(-1, (1,), epoch=5), {2, 3}, unclean=True) == PartitionChange(2, 6, (2,))


def test_the_last_isr_member_is_elected_when_it_comes_back() -> None:
    assert decide(part(-1, (1,), epoch=5), {1}, unclean=False) == PartitionChange(1, 6, (1,))


def batch(length: int) -> bytes:
    return bytes(8) + (length - 12).to_bytes(4, "big") + bytes(length - 12)


def test_complete_batches_drops_a_partial_tail_only() -> None:
    whole = batch(70) + batch(100)
    assert complete_batches(whole) == whole
    assert bytes(complete_batches(whole + batch(90)[:50])) == whole
    assert bytes(complete_batches(batch(90)[:50])) == b""
