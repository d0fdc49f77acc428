"""Consumer groups: the classic protocol with each assignor, commits, mixed groups with
confluent-kafka, and KIP-848's consumer protocol (where the broker implements it)."""

from __future__ import annotations

import asyncio
import threading

import pytest
from client_helpers import BrokerInfo, create_topic

from gregor.client import AIOConsumer, AIOProducer, Consumer, Producer, TopicPartition

FIND_COORDINATOR, JOIN_GROUP, SYNC_GROUP, HEARTBEAT, LEAVE_GROUP = 10, 11, 14, 12, 13
OFFSET_COMMIT, OFFSET_FETCH = 8, 9
CONSUMER_GROUP_HEARTBEAT = 68
CLASSIC = (
    FIND_COORDINATOR,
    JOIN_GROUP,
    SYNC_GROUP,
    HEARTBEAT,
    LEAVE_GROUP,
    OFFSET_COMMIT,
    OFFSET_FETCH,
)


def _cfg(b: BrokerInfo, group: str, **extra: object) -> dict:
    return {
        "bootstrap.servers": b.bootstrap_servers,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 300,
        "max.poll.interval.ms": 15000,
        **extra,
    }


async def _produce(b: BrokerInfo, topic: str, partitions: int, per_partition: int) -> set[bytes]:
    values = set()
    async with AIOProducer({"bootstrap.servers": b.bootstrap_servers}) as p:
        for part in range(partitions):
            for i in range(per_partition):
                v = b"%d-%d" % (part, i)
                values.add(v)
                await p.send(topic, v, partition=part)
        await p.flush()
    return values


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, frozenset[TopicPartition]]] = []

    def on_partitions_revoked(self, tps: set[TopicPartition]) -> None:
        self.events.append(("revoked", frozenset(tps)))

    def on_partitions_assigned(self, tps: set[TopicPartition]) -> None:
        self.events.append(("assigned", frozenset(tps)))


class Poller:
    """Polls one consumer in its own task, as an application would."""

    def __init__(self, consumer: AIOConsumer) -> None:
        self.consumer = consumer
        self.records: list = []
        self._stop = False
        self.task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while not self._stop:
            self.records += await self.consumer.poll(100)

    async def stop(self) -> None:
        self._stop = True
        await self.task


async def _wait_for(cond) -> bool:  # noqa: ANN001
    """Until ``cond()`` holds, however long that takes (the test's timeout is the backstop)."""
    while not cond():
        await asyncio.sleep(0.05)
    return True


@pytest.mark.slow
@pytest.mark.parametrize("assignor", ["range", "roundrobin", "cooperative-sticky"])
def test_two_members_share_partitions(broker: BrokerInfo, topic_name: str, assignor: str) -> None:
    broker.require(*CLASSIC)
    create_topic(broker, topic_name, 4)
    group = f"g-{topic_name}"

    async def run() -> None:
        values = await _produce(broker, topic_name, 4, 10)
        cfg = _cfg(broker, group, **{"partition.assignment.strategy": assignor})
        c1, c2 = AIOConsumer(cfg), AIOConsumer(cfg)
        await c1.start()
        await c2.start()
        try:
            c1.subscribe([topic_name])
            c2.subscribe([topic_name])
            p1, p2 = Poller(c1), Poller(c2)
            # both own two partitions (cooperative needs a follow-up round) and all is read
            await _wait_for(
                lambda: (
                    len(c1.assignment()) == len(c2.assignment()) == 2
                    and len(p1.records) + len(p2.records) >= 40
                )
            )
            await asyncio.sleep(0.5)  # nothing more arrives
            await p1.stop()
            await p2.stop()
            seen = [p1.records, p2.records]
            a1, a2 = c1.assignment(), c2.assignment()
            assert a1.isdisjoint(a2)
            assert a1 | a2 == {TopicPartition(topic_name, p) for p in range(4)}
            assert len(a1) == len(a2) == 2
            got = [r.value for s in seen for r in s]
            assert sorted(got) == sorted(values)  # each record once
        finally:
            await asyncio.gather(c1.close(), c2.close())

    asyncio.run(run())


@pytest.mark.slow
def test_cooperative_rebalance_revokes_only_what_moves(broker: BrokerInfo, topic_name: str) -> None:
    broker.require(*CLASSIC)
    create_topic(broker, topic_name, 4)
    group = f"g-{topic_name}"

    async def run() -> None:
        await _produce(broker, topic_name, 4, 2)
        cfg = _cfg(broker, group, **{"partition.assignment.strategy": "cooperative-sticky"})
        r1 = Recorder()
        c1 = await AIOConsumer(cfg).start()
        c2 = await AIOConsumer(cfg).start()
        try:
            c1.subscribe([topic_name], listener=r1)
            p1 = Poller(c1)
            assert await _wait_for(lambda: len(c1.assignment()) == 4)
            c2.subscribe([topic_name])
            p2 = Poller(c2)
            await _wait_for(lambda: len(c1.assignment()) == len(c2.assignment()) == 2)
            await p1.stop()
            await p2.stop()
            assert len(c1.assignment()) == len(c2.assignment()) == 2
            revoked = [tps for kind, tps in r1.events if kind == "revoked"]
            # c1 never gave up everything: exactly the two partitions that moved to c2
            assert len(revoked) == 1 and revoked[0] == frozenset(c2.assignment())
        finally:
            await asyncio.gather(c1.close(), c2.close())

    asyncio.run(run())


@pytest.mark.slow
def test_commit_and_resume(broker: BrokerInfo, topic_name: str) -> None:
    broker.require(*CLASSIC)
    create_topic(broker, topic_name, 1)
    group = f"g-{topic_name}"
    tp = TopicPartition(topic_name, 0)
    with Producer({"bootstrap.servers": broker.bootstrap_servers}) as p:
        for i in range(10):
            p.send(topic_name, b"%d" % i, partition=0)
        p.flush()
    with Consumer(_cfg(broker, group, **{"enable.auto.commit": False})) as c:
        c.subscribe([topic_name])
        got: list = []
        while len(got) < 4:
            got += c.poll(300, max_records=4 - len(got))
        assert [r.offset for r in got] == [0, 1, 2, 3]
        c.commit()
        assert c.committed([tp])[tp].offset == 4
    with Consumer(_cfg(broker, group)) as c:
        c.subscribe([topic_name])
        got = []
        while len(got) < 6:
            got += c.poll(300)
        assert [r.offset for r in got] == [4, 5, 6, 7, 8, 9]
    # auto-commit on close stored the position
    with Consumer(_cfg(broker, group)) as c:
        assert c.committed([tp])[tp].offset == 10


@pytest.mark.slow
def test_mixed_group_with_confluent_kafka(broker: BrokerInfo, topic_name: str) -> None:
    broker.require(*CLASSIC)
    from confluent_kafka import Consumer as CKConsumer

    create_topic(broker, topic_name, 4)
    group = f"g-{topic_name}"
    values = asyncio.run(_produce(broker, topic_name, 4, 25))
    ck_seen: list[bytes] = []
    ck_assignment: list = []
    stop = threading.Event()

    def run_ck() -> None:
        ck = CKConsumer(
            {
                "bootstrap.servers": broker.bootstrap_servers,
                "group.id": group,
                "auto.offset.reset": "earliest",
                "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 300,
                "partition.assignment.strategy": "range",
                "enable.auto.commit": False,
            }
        )
        ck.subscribe([topic_name])
        try:
            while not stop.is_set():
                m = ck.poll(0.2)
                if m is not None and not m.error():
                    ck_seen.append(m.value())
                ck_assignment[:] = [(tp.topic, tp.partition) for tp in ck.assignment()]
        finally:
            ck.close()

    t = threading.Thread(target=run_ck, daemon=True)
    t.start()

    async def run_ours() -> tuple[list[bytes], set[TopicPartition]]:
        c = await AIOConsumer(
            _cfg(broker, group, **{"partition.assignment.strategy": "range"})
        ).start()
        seen: list[bytes] = []
        try:
            c.subscribe([topic_name])
            while True:
                seen += [r.value for r in await c.poll(200)]
                if (
                    len(seen) + len(ck_seen) >= 100
                    and len(c.assignment()) == 2
                    and len(ck_assignment) == 2
                ):
                    break
            return seen, c.assignment()
        finally:
            stop.set()
            await c.close()

    ours, our_assignment = asyncio.run(run_ours())
    t.join()
    assert len(our_assignment) == 2 and len(ck_assignment) == 2
    assert {(tp.topic, tp.partition) for tp in our_assignment}.isdisjoint(ck_assignment)
    # before the group settled one member may have read a partition the other then took over
    # (no commits), so records can be seen twice; none may be missing, and each member read
    # every record of the partitions it ended with.
    assert set(ours) | set(ck_seen) == values
    for part, _ in [(tp.partition, 0) for tp in our_assignment]:
        assert {b"%d-%d" % (part, i) for i in range(25)} <= set(ours)


@pytest.mark.slow
def test_consumer_protocol_kip848(broker: BrokerInfo, topic_name: str) -> None:
    broker.require(CONSUMER_GROUP_HEARTBEAT, FIND_COORDINATOR, OFFSET_COMMIT, OFFSET_FETCH)
    create_topic(broker, topic_name, 4)
    group = f"g848-{topic_name}"

    async def run() -> None:
        values = await _produce(broker, topic_name, 4, 5)
        cfg = _cfg(broker, group, **{"group.protocol": "consumer"})
        cfg.pop("session.timeout.ms")
        c1, c2 = await AIOConsumer(cfg).start(), await AIOConsumer(cfg).start()
        try:
            c1.subscribe([topic_name])
            c2.subscribe([topic_name])
            p1, p2 = Poller(c1), Poller(c2)
            await _wait_for(
                lambda: (
                    len(c1.assignment()) == len(c2.assignment()) == 2
                    and len(p1.records) + len(p2.records) >= 20
                )
            )
            await p1.stop()
            await p2.stop()
            seen = [p1.records, p2.records]
            assert c1.assignment().isdisjoint(c2.assignment())
            assert len(c1.assignment()) == len(c2.assignment()) == 2
            assert {r.value for s in seen for r in s} == values
        finally:
            await asyncio.gather(c1.close(), c2.close())

    asyncio.run(run())
