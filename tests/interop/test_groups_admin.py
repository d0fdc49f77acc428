"""Describe, list and delete groups with each client's admin API: real members, assignments,
states and types, as the members themselves report them."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import pytest
from interop_helpers import create_topic, topic_name
from test_groups_support import BROKER_CONFIG, Member, splits_evenly, wait_for

from gregor.testing import BrokerProcess

PARTITIONS = 6


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    with BrokerProcess(config=BROKER_CONFIG) as b:
        yield b
        assert "event=request.failed" not in b.read_log(), b.read_log()[-4000:]


def _two_members(broker: BrokerProcess, kind: str) -> tuple[str, str, Member, Member]:
    bs = broker.bootstrap_servers
    topic = topic_name(f"admin-{kind}")
    create_topic(bs, topic, PARTITIONS)
    group = f"admin-{kind}-{uuid.uuid4().hex[:8]}"
    a, b = Member(kind, bs, group, topic), Member(kind, bs, group, topic)
    wait_for(lambda: splits_evenly([a, b], PARTITIONS), "two members to split the topic")
    return topic, group, a, b


@pytest.mark.parametrize(
    ("kind", "group_type", "assignor"),
    [
        ("ck-eager", "CLASSIC", "range"),
        ("ck-consumer", "CONSUMER", "uniform"),
    ],
)
def test_confluent_admin(broker: BrokerProcess, kind: str, group_type: str, assignor: str) -> None:
    from confluent_kafka import (
        ConsumerGroupState,
        ConsumerGroupTopicPartitions,
        ConsumerGroupType,
        TopicPartition,
    )
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    topic, group, a, b = _two_members(broker, kind)
    with a, b:
        listed = admin.list_consumer_groups(
            states={ConsumerGroupState.STABLE}, types={getattr(ConsumerGroupType, group_type)}
        ).result()
        rows = {g.group_id: g for g in listed.valid}
        assert group in rows
        assert (rows[group].state, rows[group].type) == (
            ConsumerGroupState.STABLE,
            getattr(ConsumerGroupType, group_type),
        )
        desc = admin.describe_consumer_groups([group])[group].result()
        assert (desc.state, desc.partition_assignor, desc.is_simple_consumer_group) == (
            ConsumerGroupState.STABLE,
            assignor,
            False,
        )
        described = sorted(
            sorted(tp.partition for tp in m.assignment.topic_partitions) for m in desc.members
        )
        assert described == sorted(sorted(m.state()[0]) for m in (a, b))
        assert {tp.topic for m in desc.members for tp in m.assignment.topic_partitions} == {topic}
        assert {m.host for m in desc.members} == {"/127.0.0.1"}
        busy = admin.delete_consumer_groups([group])[group]
        with pytest.raises(Exception, match="NON_EMPTY_GROUP|not empty"):
            busy.result()
        a.close()
        b.close()
    # Empty now: offsets can be set from outside, listed, and the group deleted.
    tps = [TopicPartition(topic, p, 100 + p) for p in range(PARTITIONS)]
    admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, tps)])[group].result()
    got = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result()
    assert sorted((tp.partition, tp.offset) for tp in got.topic_partitions) == [
        (p, 100 + p) for p in range(PARTITIONS)
    ]
    desc = admin.describe_consumer_groups([group])[group].result()
    assert (desc.state, desc.members) == (ConsumerGroupState.EMPTY, [])
    admin.delete_consumer_groups([group])[group].result()
    listed = admin.list_consumer_groups().result()
    assert group not in {g.group_id for g in listed.valid}


def test_kafka_python_admin(broker: BrokerProcess) -> None:
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        topic, group, a, b = _two_members(broker, "kafka-python")
        with a, b:
            rows = {g["group_id"]: g for g in admin.list_groups()}
            assert rows[group]["protocol_type"] == "consumer"
            stable = {
                g["group_id"]
                for g in admin.list_groups(states_filter=["Stable"], types_filter=["classic"])
            }
            assert group in stable
            desc = admin.describe_groups([group])[group]
            assert (desc["error"], desc["group_state"], desc["protocol_type"]) == (
                None,
                "Stable",
                "consumer",
            )
            assert desc["protocol_data"] in ("range", "roundrobin")
            members = desc["members"]
            assigned = sorted(
                sorted(
                    p
                    for tp in m["member_assignment"]["assigned_partitions"]
                    for p in tp["partitions"]
                )
                for m in members
            )
            assert assigned == sorted(sorted(m.state()[0]) for m in (a, b))
            assert {t for m in members for t in m["member_metadata"]["topics"]} == {topic}
            assert {m["client_host"] for m in members} == {"/127.0.0.1"}
            assert admin.delete_groups([group]) == {group: "NonEmptyGroupError"}
            a.close()
            b.close()
        assert admin.describe_groups([group])[group]["group_state"] == "Empty"
        assert admin.delete_groups([group]) == {group: "OK"}
        assert group not in {g["group_id"] for g in admin.list_groups()}
        assert admin.describe_groups([group])[group]["group_state"] == "Dead"
    finally:
        admin.close()


def test_aiokafka_admin(broker: BrokerProcess) -> None:
    """aiokafka's admin client lists and describes groups (it has no group deletion)."""
    from aiokafka.admin import AIOKafkaAdminClient
    from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment

    topic, group, a, b = _two_members(broker, "aiokafka")

    async def describe() -> tuple[list[tuple[str, str]], tuple]:
        admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
        await admin.start()
        try:
            listed = await admin.list_consumer_groups()
            (resp,) = await admin.describe_consumer_groups([group])
            return [(g[0], g[1]) for g in listed], resp.groups[0]
        finally:
            await admin.close()

    with a, b:
        listed, (error, group_id, state, protocol_type, protocol, members) = asyncio.run(describe())
        assert (group, "consumer") in listed
        assert (error, group_id, state, protocol_type, protocol) == (
            0,
            group,
            "Stable",
            "consumer",
            "roundrobin",
        )
        assigned = []
        for _member_id, _client_id, client_host, _metadata, assignment in members:
            decoded = ConsumerProtocolAssignment.decode(assignment)
            assert client_host == "/127.0.0.1"
            assert [t for t, _ in decoded.assigned_partitions] == [topic]
            assigned.append(sorted(p for _, ps in decoded.assigned_partitions for p in ps))
        assert sorted(assigned) == sorted(sorted(m.state()[0]) for m in (a, b))
        a.close()
        b.close()
    _, (error, _, state, _, _, members) = asyncio.run(describe())
    assert (error, state, members) == (0, "Empty", [])
