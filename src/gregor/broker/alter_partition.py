"""A leader's ISR changes, written to the metadata store (Kafka's AlterPartitionManager).

Theory of operation. A leader that wants a follower in or out of the ISR calls
``AlterPartitionManager.submit`` (the partition's ``alter_isr`` hook). The request becomes a
compare-and-set on the partition epoch the leader last saw (``MetadataStore.alter_partition``
with the same leader and leader epoch): if anything changed the partition meanwhile (a new
leader, the controller shrinking the ISR) the write is refused, the pending request is
dropped, and the leader decides again from the newer image. Success comes back as a new
image, through the metadata publisher, like any other change; the ISR the partition acts on
is always the one in the image.
"""

from __future__ import annotations

import asyncio
import logging

from gregor.broker.events import log_event
from gregor.broker.partition import Partition
from gregor.cluster.store import MetadataStore
from gregor.protocol.errors import KafkaError

log = logging.getLogger("gregor.broker.replication")


class AlterPartitionManager:
    def __init__(self, store: MetadataStore) -> None:
        self.store = store
        self._tasks: set[asyncio.Task[None]] = set()
        self.isr_shrinks = 0
        self.isr_expands = 0

    def submit(self, partition: Partition, isr: tuple[int, ...]) -> None:
        task = asyncio.create_task(self._alter(partition, isr))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _alter(self, p: Partition, isr: tuple[int, ...]) -> None:
        before = p.isr
        try:
            await self.store.alter_partition(
                p.topic, p.index, leader=p.local_id, leader_epoch=p.leader_epoch, isr=isr,
                expected_partition_epoch=p.partition_epoch,
            )
        except (KafkaError, OSError, ConnectionError) as e:
            log.info("%s-%d: ISR change to %s refused: %s", p.topic, p.index, list(isr), e)
            if p.pending_isr == isr:
                p.pending_isr = None
            return
        except Exception:  # noqa: BLE001 - the store went away (stopping): decide again later
            log.exception("%s-%d: ISR change to %s failed", p.topic, p.index, list(isr))
            if p.pending_isr == isr:
                p.pending_isr = None
            return
        if len(isr) < len(before):
            self.isr_shrinks += 1
        else:
            self.isr_expands += 1
        log_event(log, "partition.isr_changed", topic=p.topic, partition=p.index, isr=",".join(map(str, isr)))

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
