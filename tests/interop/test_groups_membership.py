"""Consumer group membership with real clients: sharing, leaving, crashing, static members.

For each client flavour (confluent-kafka eager / cooperative-sticky / group.protocol=consumer,
kafka-python, aiokafka), members run in their own processes (see ``test_groups_support``):

* three members of a six-partition topic end with disjoint assignments covering every
  partition; one closes and the other two take its partitions; one is killed with SIGKILL and,
  after its session timeout, the last one holds everything;
* a static member (group.instance.id) that restarts gets its old assignment back and the
  group does not rebalance: the coordinator logs no new generation / epoch and the other
  member's assignment never changes.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator

import pytest
from conftest import INTEROP_BROKER
from interop_helpers import create_topic, topic_name
from kafka_tap import KafkaTap
from test_groups_support import BROKER_CONFIG, KINDS, Member, splits_evenly, wait_for

from gregor.testing import BrokerProcess

PARTITIONS = 6


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    with BrokerProcess(config=BROKER_CONFIG) as b:
        yield b
        assert b.running, b.read_log()[-4000:]
        assert "event=request.failed" not in b.read_log(), b.read_log()[-4000:]


def _setup(broker: BrokerProcess, kind: str) -> tuple[str, str]:
    topic = topic_name(f"grp-{kind}")
    create_topic(broker.bootstrap_servers, topic, PARTITIONS)
    return topic, f"group-{kind}-{uuid.uuid4().hex[:8]}"


def _rebalances(broker: BrokerProcess, group: str) -> int:
    """New generations (classic) or group epochs (KIP-848) the coordinator logged."""
    pattern = re.compile(rf"event=group\.(generation|epoch) group={re.escape(group)} ")
    return len(pattern.findall(broker.read_log()))


@pytest.mark.parametrize("kind", KINDS)
def test_members_share_then_leave_then_crash(broker: BrokerProcess, kind: str) -> None:
    topic, group = _setup(broker, kind)
    bs = broker.bootstrap_servers
    with (
        Member(kind, bs, group, topic) as m0,
        Member(kind, bs, group, topic) as m1,
        Member(kind, bs, group, topic) as m2,
    ):
        wait_for(
            lambda: splits_evenly([m0, m1, m2], PARTITIONS), "three members to split the topic"
        )
        assert sorted(len(m.state()[0]) for m in (m0, m1, m2)) == [2, 2, 2]
        m0.close()
        wait_for(
            lambda: splits_evenly([m1, m2], PARTITIONS),
            "two members to take over the leaver's partitions",
        )
        m1.kill()
        wait_for(
            lambda: m2.state()[0] == frozenset(range(PARTITIONS)),
            "the last member to hold everything",
        )
        m2.close()
    if INTEROP_BROKER == "gregor":  # Gregor's own log line (Kafka's differ)
        log = broker.read_log()
        assert re.search(
            rf"event=group\.member_removed group={re.escape(group)} member=\S+ reason=\"session timeout\"",
            log,
        )


@pytest.mark.parametrize("kind", KINDS)
def test_static_member_restart_keeps_its_assignment(broker: BrokerProcess, kind: str) -> None:
    topic, group = _setup(broker, kind)
    bs = broker.bootstrap_servers
    with (
        Member(kind, bs, group, topic, "static-a", 10000) as a,
        Member(kind, bs, group, topic, "static-b", 10000) as b,
    ):
        wait_for(lambda: splits_evenly([a, b], PARTITIONS), "two static members to split the topic")
        a_parts = a.state()[0]
        b_before = b.state()
        rebalances = _rebalances(broker, group)
        a.close()  # a static member does not leave the group when it stops
        with Member(kind, bs, group, topic, "static-a", 10000) as a2:
            wait_for(
                lambda: a2.state()[0] == a_parts, "the restarted member to get its old partitions"
            )
            assert b.state() == b_before
            assert _rebalances(broker, group) == rebalances
            a2.close()
        b.close()


def test_consumer_protocol_regex_subscription_follows_new_topics(broker: BrokerProcess) -> None:
    """librdkafka sends a regex subscription as ConsumerGroupHeartbeat v1's
    subscribed_topic_regex; the coordinator resolves it, also against topics created later."""
    from confluent_kafka import Consumer
    from interop_helpers import RawClient

    from gregor.protocol.messages.consumer_group_describe import ConsumerGroupDescribeRequest

    bs = broker.bootstrap_servers
    prefix = f"rx{uuid.uuid4().hex[:6]}"
    create_topic(bs, f"{prefix}-a", 2)
    create_topic(bs, f"{prefix}-b", 3)
    create_topic(bs, f"other{prefix}", 1)
    group = f"regex-{prefix}"
    c = Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": group,
            "group.protocol": "consumer",
            "topic.metadata.refresh.interval.ms": 500,
        }
    )
    try:
        c.subscribe([f"^{prefix}-.*"])

        def assigned() -> list[tuple[str, int]]:
            c.poll(0.05)
            return sorted((tp.topic, tp.partition) for tp in c.assignment())

        want = [
            (f"{prefix}-a", 0),
            (f"{prefix}-a", 1),
            (f"{prefix}-b", 0),
            (f"{prefix}-b", 1),
            (f"{prefix}-b", 2),
        ]
        wait_for(lambda: assigned() == want, "the regex's topics to be assigned")
        with RawClient(bs) as raw:
            d = raw.request(ConsumerGroupDescribeRequest(group_ids=[group]), 0).groups[0]
        # librdkafka joins its regex subscriptions into one alternation group.
        assert [m.subscribed_topic_regex for m in d.members] == [f"(^{prefix}-.*)"]
        create_topic(bs, f"{prefix}-c", 1)
        wait_for(
            lambda: assigned() == sorted([*want, (f"{prefix}-c", 0)]),
            "a new matching topic to be assigned",
        )
    finally:
        c.close()


#: Sessions that outlast a broker restart on a busy machine: with both cores loaded a SIGKILLed
#: broker takes over 10 s to come back, and the clients' reconnect backoff (librdkafka's
#: reconnect.backoff.max.ms is 10 s) comes on top. Nothing here waits for a session to expire.
RESTART_SESSION_MS = 120_000


@pytest.mark.parametrize("kind", KINDS)
def test_live_members_carry_on_across_a_broker_restart(kind: str) -> None:
    """SIGKILL the broker under a stable group: the coordinator reloads the group from
    __consumer_offsets and the members' heartbeats are accepted (same member ids, same
    generation or epochs), so nobody rejoins and nothing is reassigned.

    A broker of its own, reached through a ``KafkaTap`` that counts the heartbeats it answers:
    the test waits until the restarted broker has answered each member's heartbeats."""
    with (
        KafkaTap() as tap,
        BrokerProcess(
            config={
                **BROKER_CONFIG,
                "group.consumer.session.timeout.ms": RESTART_SESSION_MS,
                "group.consumer.max.session.timeout.ms": RESTART_SESSION_MS,
                "advertised.listeners": f"PLAINTEXT://127.0.0.1:{tap.port}",
            }
        ) as broker,
    ):
        tap.upstream_port = broker.port
        topic, group = _setup(broker, kind)
        bs = tap.bootstrap_servers
        with (
            Member(kind, bs, group, topic, session_timeout_ms=RESTART_SESSION_MS) as a,
            Member(kind, bs, group, topic, session_timeout_ms=RESTART_SESSION_MS) as b,
        ):
            wait_for(lambda: splits_evenly([a, b], PARTITIONS), "two members to split the topic")
            wait_for(
                lambda: len(tap.answered(group)) == 2, "both members' heartbeats to be answered"
            )
            members = set(tap.answered(group))
            before = (a.state(), b.state())
            broker.kill()
            answered = tap.answered(group)
            broker.start()
            # A member has at most one heartbeat in flight, so two more answered ones mean the
            # restarted broker answered one: its coordinator knows that member. A member it had
            # forgotten would get errors and rejoin instead.
            wait_for(
                lambda: all(tap.answered(group)[m] >= answered[m] + 2 for m in members),
                "the restarted broker to answer both members' heartbeats",
            )
            assert (a.state(), b.state()) == before
            assert _rebalances(broker, group) == 0  # read_log() covers the new process only
            a.close()
            b.close()
        assert broker.running, broker.read_log()[-4000:]
        assert "event=request.failed" not in broker.read_log(), broker.read_log()[-4000:]
