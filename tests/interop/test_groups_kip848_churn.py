"""KIP-848 subscription churn with confluent-kafka (``group.protocol=consumer``), issue 40.

A consumer slides its subscription over many topics without waiting, and now and then
unsubscribes while the coordinator is still waiting for it to revoke partitions its last
subscription change dropped. That is what librdkafka's own 0045_subscribe_many_updates does;
there Gregor handed the member the new topic's partitions in the same answer that asked it to
revoke the old one, so after revoking and leaving the client took them up anyway and held them
with no membership behind them (with another member in the group, two owners of a partition).

Kafka's rule (CurrentAssignmentBuilder): a member that must revoke partitions is sent only
what it keeps, at its current epoch; new partitions come once it has confirmed the revocation.

The unsubscribe is issued from the rebalance callback that delivers the coordinator's
revocation, so the interleaving is the racing one every time, not by chance.

librdkafka (v2.15.0, and v2.16 under confluent-kafka) does not recover from that interleaving
by itself, whatever the broker: the leave is sent from its "steady" join state, so a
subscribe() that comes before the leave is never applied, and one that comes after it sends a
ConsumerGroupHeartbeat with epoch 0 and null owned partitions, which Kafka (and Gregor) refuse
with INVALID_REQUEST, fatal to the client. So each such leave here ends that consumer.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient
from interop_helpers import create_topic

from gregor.testing import BrokerProcess

PARTITIONS = 4
WINDOW = 3
BUDGET_S = 30.0


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    with BrokerProcess(config={"offsets.topic.num.partitions": 3}) as b:
        yield b
        assert "event=request.failed" not in b.read_log(), b.read_log()[-4000:]


def partitions_of(topics: list[str]) -> list[tuple[str, int]]:
    return sorted((t, p) for t in topics for p in range(PARTITIONS))


class ChurningConsumer:
    """A KIP-848 consumer with rebalance callbacks that records every callback and can be
    armed to unsubscribe from inside the next revocation the coordinator asks for."""

    def __init__(self, bootstrap: str, group: str) -> None:
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "group.protocol": "consumer",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )
        self.events: list[tuple[str, list[tuple[str, int]]]] = []
        self.unsubscribe_on_revoke = False

    def _on_assign(self, _c: Any, parts: list[TopicPartition]) -> None:
        self.events.append(("assign", sorted((tp.topic, tp.partition) for tp in parts)))

    def _on_revoke(self, c: Any, parts: list[TopicPartition]) -> None:
        self.events.append(("revoke", sorted((tp.topic, tp.partition) for tp in parts)))
        if self.unsubscribe_on_revoke:
            self.unsubscribe_on_revoke = False
            c.unsubscribe()

    def subscribe(self, topics: list[str]) -> None:
        self.consumer.subscribe(topics, on_assign=self._on_assign, on_revoke=self._on_revoke)

    def assignment(self) -> list[tuple[str, int]]:
        return sorted((tp.topic, tp.partition) for tp in self.consumer.assignment())

    def wait_for_assignment(self, expected: list[tuple[str, int]]) -> None:
        while self.assignment() != expected:
            self.consumer.poll(0.1)

    def close(self) -> None:
        self.consumer.close()


def group_members(admin: AdminClient, group: str) -> list[str]:
    desc = admin.describe_consumer_groups([group])[group].result(BUDGET_S)
    return [m.member_id for m in desc.members]


def unsubscribe_during_revocation(
    c: ChurningConsumer, admin: AdminClient, group: str, topics: list[str]
) -> int:
    """Subscribe to ``topics`` (one topic of the current window dropped, one added), unsubscribe
    from inside the revocation callback, and poll until the member has left the group.
    Returns where in ``c.events`` this step began."""
    mark = len(c.events)
    c.unsubscribe_on_revoke = True
    c.subscribe(topics)
    while c.unsubscribe_on_revoke or group_members(admin, group):
        c.consumer.poll(0.1)
    return mark


def test_unsubscribing_while_revoking_leaves_the_consumer_with_no_partitions(
    broker: BrokerProcess,
) -> None:
    bs = broker.bootstrap_servers
    tag = uuid.uuid4().hex[:8]
    a, b, c_, new = (f"churn1-{n}-{tag}" for n in ("a", "b", "c", "new"))
    for t in (a, b, c_, new):
        create_topic(bs, t, PARTITIONS)
    group = f"churn1-{tag}"
    admin = AdminClient({"bootstrap.servers": bs})
    c = ChurningConsumer(bs, group)
    other: Consumer | None = None
    try:
        c.subscribe([a, b, c_])
        c.wait_for_assignment(partitions_of([a, b, c_]))
        mark = unsubscribe_during_revocation(c, admin, group, [b, c_, new])
        # The member left; the client must hold nothing, and must never have been handed
        # the new topic (the coordinator asked it to revoke a first).
        assert c.assignment() == []
        since = c.events[mark:]
        assert since[0] == ("revoke", partitions_of([a])), since
        assert [e for e in since if e[0] == "assign" and e[1]] == [], since
        # Another member now takes the new topic; nobody else holds any of it.
        other = Consumer(
            {
                "bootstrap.servers": bs,
                "group.id": group,
                "group.protocol": "consumer",
                "enable.auto.commit": False,
            }
        )
        other.subscribe([new])
        while sorted((tp.topic, tp.partition) for tp in other.assignment()) != partitions_of([new]):
            other.poll(0.1)
        assert c.assignment() == []
        assert len(group_members(admin, group)) == 1
    finally:
        if other is not None:
            other.close()
        c.close()


def test_subscription_churn_with_unsubscribes_ends_each_round_with_the_expected_assignment(
    broker: BrokerProcess,
) -> None:
    """The shape of librdkafka's 0045_subscribe_many_updates: a window of WINDOW topics slides
    over many topics, several subscription changes back to back without waiting; then the
    exact assignment is awaited; then one more change and an unsubscribe while its revocation
    is pending, and an empty assignment is expected. Each round is a new consumer of the same
    group (see the module docstring for why the client cannot go on after such a leave)."""
    bs = broker.bootstrap_servers
    tag = uuid.uuid4().hex[:8]
    rounds, slides = 6, 4
    topics = [f"churn2-{i:02d}-{tag}" for i in range(rounds * (slides + 1) + WINDOW)]
    for t in topics:
        create_topic(bs, t, PARTITIONS)
    group = f"churn2-{tag}"
    admin = AdminClient({"bootstrap.servers": bs})
    i = 0
    for r in range(rounds):
        c = ChurningConsumer(bs, group)
        try:
            for _ in range(slides):
                c.subscribe(topics[i : i + WINDOW])
                i += 1
            window = topics[i - 1 : i - 1 + WINDOW]
            c.wait_for_assignment(partitions_of(window))
            assert group_members(admin, group) == [c.consumer.memberid()], r
            added = topics[i - 1 + WINDOW]
            mark = unsubscribe_during_revocation(c, admin, group, topics[i : i + WINDOW])
            i += 1
            since = c.events[mark:]
            assert c.assignment() == [], (r, since)
            assert since[0] == ("revoke", partitions_of([window[0]])), (r, since)
            assert not any(
                tp[0] == added for kind, tps in since if kind == "assign" for tp in tps
            ), (r, since)
        finally:
            c.close()
