"""When the coordinators (re)load a partition of their internal topic, on a real in-process
broker with Gregor's transactional producer.

The metadata publisher asks the runtime to load every changed partition this broker leads,
an ISR change too. A load at the epoch already loaded must change nothing: replaying
``__consumer_offsets`` on top of the live state applied the records twice, so the COMMIT
marker of an earlier transaction committed the offsets a later, still open transaction of the
same producer had written; when that one aborted, its offsets stayed committed. A replay that
an unload overtook (the partition moved away before the replay ran) must not make the
coordinator serve the partition again.
"""

from __future__ import annotations

import asyncio
from typing import Any

from gregor.broker.common.topics import OFFSETS_TOPIC
from gregor.client import AIOProducer, TopicPartition
from gregor.protocol.errors import ErrorCode
from gregor.protocol.messages.offset_fetch import OffsetFetchRequest
from gregor.testing.inprocess import InProcessBroker

GROUP = "loads-group"
TOPIC = "loads"


async def _committed(broker: Any, partitions: list[int]) -> dict[int, int]:
    req = OffsetFetchRequest(
        require_stable=False,
        groups=[
            OffsetFetchRequest.Groups(
                group_id=GROUP,
                topics=[OffsetFetchRequest.Groups.Topics(name=TOPIC, partition_indexes=partitions)],
            )
        ],
    )
    resp = await broker.groups.offset_fetch(req, 8)
    g = resp.groups[0]
    assert g.error_code == 0, ErrorCode(g.error_code).name
    return {p.partition_index: p.committed_offset for t in g.topics for p in t.partitions}


async def _until(cond: Any) -> None:
    while not cond():
        await asyncio.sleep(0.01)


async def _reload_with_an_open_transaction() -> dict[int, int]:
    async with InProcessBroker(
        config={"num.partitions": 2, "offsets.topic.num.partitions": 3}
    ) as server:
        broker = server.broker
        conf = {"bootstrap.servers": server.bootstrap_servers, "transactional.id": "loads-txn"}
        async with AIOProducer(conf) as p:
            await p.init_transactions()
            p.begin_transaction()
            await p.send(TOPIC, b"t1", partition=0)
            await p.send_offsets_to_transaction({TopicPartition(TOPIC, 0): 5}, GROUP)
            await p.commit_transaction()
            p.begin_transaction()
            await p.send(TOPIC, b"t2", partition=1)
            await p.send_offsets_to_transaction(
                {TopicPartition(TOPIC, 1): 7}, GROUP
            )  # waits for its marker
            groups = broker.groups
            index = groups.partition_for(GROUP)
            image = broker.image.partition(OFFSETS_TOPIC, index)
            groups.load(
                {index: image.leader_epoch}
            )  # an ISR change: the same leader, the same epoch
            await _until(lambda: groups.coordinator.partition_error(GROUP) == 0)
            await p.abort_transaction()
        return await _committed(broker, [0, 1])


def test_a_load_at_the_loaded_epoch_changes_nothing() -> None:
    assert asyncio.run(_reload_with_an_open_transaction()) == {0: 5, 1: -1}


async def _unload_before_the_replay_runs() -> tuple[int, int]:
    async with InProcessBroker(
        config={"num.partitions": 1, "offsets.topic.num.partitions": 3}
    ) as server:
        broker = server.broker
        conf = {"bootstrap.servers": server.bootstrap_servers, "transactional.id": "loads-txn-2"}
        async with AIOProducer(conf) as p:
            await p.init_transactions()
            p.begin_transaction()
            await p.send(TOPIC, b"t", partition=0)
            await p.send_offsets_to_transaction({TopicPartition(TOPIC, 0): 3}, GROUP)
            await p.commit_transaction()
        groups = broker.groups
        index = groups.partition_for(GROUP)
        epoch = broker.image.partition(OFFSETS_TOPIC, index).leader_epoch
        groups.load({index: epoch + 1})  # a new leader epoch: the replay is scheduled ...
        groups.unload([index])  # ... and the partition moves away before it runs
        await asyncio.gather(*groups._load_tasks)  # the scheduled replay has run
        moved = groups.coordinator.partition_error(GROUP)
        groups.load({index: epoch + 2})  # led here again
        await _until(
            lambda: (
                groups.coordinator.partition_error(GROUP) != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
            )
        )
        return moved, (await _committed(broker, [0]))[0]


def test_a_replay_overtaken_by_an_unload_does_not_serve_the_partition() -> None:
    assert asyncio.run(_unload_before_the_replay_runs()) == (ErrorCode.NOT_COORDINATOR, 3)
