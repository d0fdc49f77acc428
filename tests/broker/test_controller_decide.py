"""The controller's election rule (``decide``) and the follower's batch trimming, as pure functions."""

from __future__ import annotations

import uuid

from gregor.broker.controller.controller import PartitionChange, decide, imbalanced
from gregor.broker.replication.replica_fetcher import complete_batches
from gregor.cluster.image import BrokerRegistration, MetadataImage, PartitionImage, TopicImage


def part(
    leader: int, isr: tuple[int, ...], replicas: tuple[int, ...] = (1, 2, 3), epoch: int = 4
) -> PartitionImage:
    return PartitionImage(0, leader, epoch, 9, replicas, isr)


def test_a_live_leader_with_a_full_isr_is_left_alone() -> None:
    assert decide(part(1, (1, 2, 3)), {1, 2, 3}, unclean=False) is None


def test_dead_isr_members_leave_the_isr_without_a_new_epoch() -> None:
    assert decide(part(1, (1, 2, 3)), {1, 3}, unclean=False) == PartitionChange(1, 4, (1, 3))


def test_a_dead_leader_is_replaced_by_the_first_live_isr_member_in_replica_order() -> None:
    assert decide(part(1, (3, 2, 1), replicas=(1, 2, 3)), {2, 3}, unclean=False) == PartitionChange(
        2, 5, (3, 2)
    )


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


def image_of(*partitions: PartitionImage, live: tuple[int, ...] = (1, 2, 3)) -> MetadataImage:
    topic = TopicImage("t", uuid.uuid4(), partitions, {}, False)
    brokers = {n: BrokerRegistration(n, (), None) for n in live}
    return MetadataImage(1, "c", 1, {"t": topic}, {topic.topic_id: topic}, brokers, 0)


def test_leadership_imbalance_is_found_per_preferred_broker() -> None:
    parts = [
        PartitionImage(0, 2, 1, 1, (1, 2, 3), (1, 2, 3)),  # broker 1 preferred, 2 leads
        PartitionImage(1, 1, 0, 0, (1, 3, 2), (1, 3, 2)),  # balanced
        PartitionImage(2, 3, 1, 1, (2, 3, 1), (3, 1)),  # broker 2 preferred but out of the ISR
        PartitionImage(3, 3, 0, 0, (3, 1, 2), (3, 1, 2)),
    ]
    image = image_of(*parts)
    # broker 1: 1 of 2 led elsewhere (50%): movable; broker 2: 1 of 1, not in the ISR: not
    # movable; broker 3: balanced.
    assert imbalanced(image, 10) == [("t", 0)]
    assert imbalanced(image, 50) == []  # 50% is not above 50%
    assert imbalanced(image_of(*parts, live=(2, 3)), 10) == []  # broker 1 is not alive
