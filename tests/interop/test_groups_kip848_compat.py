"""KIP-848 consumers (confluent-kafka, ``group.protocol=consumer``) in the corners Kafka 4.0
allows: offsets committed by a consumer that uses ``assign()`` (no membership) to a group that
does not exist yet, and read back; a consumer that unsubscribes (leaves) and subscribes again.

Kafka's rules (OffsetCommit v9+): a commit with member epoch -1 to an unknown group creates an
empty "simple" classic group and is accepted, whatever member id it carries; to a group with
no members it is accepted too; a commit with epoch >= 0 to an unknown group is
GROUP_ID_NOT_FOUND.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient
from interop_helpers import create_topic, topic_name

from gregor.testing import BrokerProcess

BUDGET_S = 30.0


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    with BrokerProcess(config={"offsets.topic.num.partitions": 3}) as b:
        yield b
        assert "event=request.failed" not in b.read_log(), b.read_log()[-4000:]


def assigned_consumer(bs: str, group: str, protocol: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": group,
            "group.protocol": protocol,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )


@pytest.mark.parametrize("protocol", ["consumer", "classic"])
def test_assign_commit_creates_a_simple_group(broker: BrokerProcess, protocol: str) -> None:
    bs = broker.bootstrap_servers
    topic = topic_name(f"simple-{protocol}")
    create_topic(bs, topic, 2)
    group = f"simple-{protocol}-{uuid.uuid4().hex[:8]}"
    c = assigned_consumer(bs, group, protocol)
    try:
        c.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        done = c.commit(
            offsets=[TopicPartition(topic, 0, 7), TopicPartition(topic, 1, 3)], asynchronous=False
        )
        assert [(tp.partition, tp.offset, tp.error) for tp in done] == [(0, 7, None), (1, 3, None)]
        # Committed again (the group exists now), then read back by the same consumer.
        c.commit(offsets=[TopicPartition(topic, 0, 9)], asynchronous=False)
        got = c.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=BUDGET_S)
        assert [(tp.partition, tp.offset) for tp in got] == [(0, 9), (1, 3)]
    finally:
        c.close()
    # Another consumer of the group sees the same offsets.
    other = assigned_consumer(bs, group, "consumer")
    try:
        got = other.committed(
            [TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=BUDGET_S
        )
        assert [(tp.partition, tp.offset) for tp in got] == [(0, 9), (1, 3)]
    finally:
        other.close()
    # The group is a simple (classic, empty) group, as in Kafka.
    admin = AdminClient({"bootstrap.servers": bs})
    desc = admin.describe_consumer_groups([group])[group].result(BUDGET_S)
    assert (str(desc.type), str(desc.state), desc.members) == (
        "ConsumerGroupType.CLASSIC",
        "ConsumerGroupState.EMPTY",
        [],
    )


def test_regex_matches_come_after_literal_topics(broker: BrokerProcess) -> None:
    """Kafka resolves a regex new to the group asynchronously: the first assignment holds the
    literal topic's partitions, a later one adds the regex's matches."""
    bs = broker.bootstrap_servers
    tag = uuid.uuid4().hex[:8]
    literal, m1, m2 = f"lit-{tag}", f"rx-{tag}-1", f"rx-{tag}-2"
    create_topic(bs, literal, 2)
    create_topic(bs, m1, 3)
    create_topic(bs, m2, 1)
    assigned: list[list[tuple[str, int]]] = []
    c = Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": f"rx-{tag}",
            "group.protocol": "consumer",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        c.subscribe(
            [f"^rx-{tag}-.*", literal],
            on_assign=lambda _c, tps: assigned.append(
                sorted((tp.topic, tp.partition) for tp in tps)
            ),
        )
        while sum(len(a) for a in assigned) < 6:
            c.poll(0.2)
        assert assigned[0] == [(literal, 0), (literal, 1)]
        everything = sorted(tp for a in assigned for tp in a)
        assert everything == sorted(
            [(literal, 0), (literal, 1), (m1, 0), (m1, 1), (m1, 2), (m2, 0)]
        )
        assert sorted((tp.topic, tp.partition) for tp in c.assignment()) == everything
    finally:
        c.close()


def test_a_consumer_that_left_joins_again(broker: BrokerProcess) -> None:
    """unsubscribe() sends the leave heartbeat (epoch -1); a later subscribe() joins again with
    the same member id and epoch 0 and gets the new subscription's partitions. (librdkafka
    v2.15.0 loses that rejoin when it unsubscribed while a revocation the coordinator asked
    for was still waiting for its rebalance callback - see test_groups_kip848_churn; here the
    leave completes first, as the test waits.)"""
    bs = broker.bootstrap_servers
    tag = uuid.uuid4().hex[:8]
    first, second = f"left-a-{tag}", f"left-b-{tag}"
    create_topic(bs, first, 2)
    create_topic(bs, second, 3)
    group = f"left-{tag}"
    admin = AdminClient({"bootstrap.servers": bs})

    def members() -> list[str]:
        desc = admin.describe_consumer_groups([group])[group].result(BUDGET_S)
        return [m.member_id for m in desc.members]

    def assignment(c: Consumer) -> list[tuple[str, int]]:
        return sorted((tp.topic, tp.partition) for tp in c.assignment())

    c = assigned_consumer(bs, group, "consumer")
    try:
        c.subscribe([first])
        while assignment(c) != [(first, 0), (first, 1)]:
            c.poll(0.2)
        member_id = c.memberid()
        assert members() == [member_id]
        c.unsubscribe()
        while members():
            c.poll(0.2)
        assert assignment(c) == []
        c.subscribe([second])
        while assignment(c) != [(second, 0), (second, 1), (second, 2)]:
            c.poll(0.2)
        assert members() == [member_id]
    finally:
        c.close()
