"""Committed offsets read while the group's coordinator is loading or has moved (the chaos
run's "committed offsets read back as empty"), with aiokafka on a real in-process broker.

aiokafka 0.14 sends OffsetFetch v3 and reads only the partition entries of the answer: a
group-level COORDINATOR_LOAD_IN_PROGRESS or NOT_COORDINATOR with no partitions (Kafka's v2+
shape) reads to it as "no committed offset", and the consumer restarts from its reset policy.
Gregor carries the group error on each requested partition too (v2-7); aiokafka then retries
until the coordinator answers, and reads the offset that was committed.

The coordinator's partition is put into the state a coordinator move leaves it in (loading,
or not led here) through the broker's own coordinator runtime, then loaded again, as the
metadata publisher does when this broker leads it (again).
"""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.structs import OffsetAndMetadata
from interop_helpers import topic_name

from gregor.protocol.errors import ErrorCode
from gregor.protocol.messages.offset_fetch import OffsetFetchRequest
from gregor.testing.inprocess import InProcessBroker


async def _until(cond: object) -> None:
    while not cond():  # type: ignore[operator]
        await asyncio.sleep(0.01)


async def _committed_across(state: str) -> object:
    async with InProcessBroker(
        config={"num.partitions": 1, "offsets.topic.num.partitions": 3}
    ) as server:
        broker = server.broker
        assert broker is not None
        topic, group = topic_name("offload"), "offload-group"
        tp = TopicPartition(topic, 0)
        producer = AIOKafkaProducer(bootstrap_servers=server.bootstrap_servers)
        await producer.start()
        try:
            await producer.send_and_wait(topic, b"created")  # the topic, auto-created
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            bootstrap_servers=server.bootstrap_servers,
            group_id=group,
            enable_auto_commit=False,
            retry_backoff_ms=20,
        )
        await consumer.start()
        try:
            consumer.assign([tp])
            await consumer.commit({tp: OffsetAndMetadata(3, "")})
            assert await consumer.committed(tp) == 3
            groups = broker.groups
            p = groups.partition_for(group)
            epoch = groups.loaded_epoch(p)
            assert epoch is not None
            answered = (OffsetFetchRequest.API_KEY, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
            if state == "loading":
                groups.coordinator.begin_load(p)
            else:
                groups.unload([p])  # what the old coordinator does when the partition moves away
                answered = (OffsetFetchRequest.API_KEY, ErrorCode.NOT_COORDINATOR)
            before = broker.metrics.errors.get(answered, 0)
            fetch = asyncio.create_task(consumer.committed(tp))
            await _until(lambda: broker.metrics.errors.get(answered, 0) > before or fetch.done())
            if state == "loading":
                groups.coordinator.complete_load(p)
                groups.pump()
            else:
                groups.load({p: epoch + 1})  # led here again, at a new leader epoch: replayed
            return await fetch
        finally:
            await consumer.stop()


@pytest.mark.parametrize("state", ["loading", "moved"])
def test_aiokafka_reads_the_committed_offset_after_a_coordinator_load(state: str) -> None:
    assert asyncio.run(_committed_across(state)) == 3
