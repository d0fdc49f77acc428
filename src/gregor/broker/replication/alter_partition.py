"""A leader's ISR changes, sent to the controller as AlterPartition (Kafka's
AlterPartitionManager).

Theory of operation. A leader that wants a follower in or out of the ISR calls
``AlterPartitionManager.submit`` (the partition's ``alter_isr`` hook). The request goes to the
controller (``send``: over the inter-broker listener, or in process when this broker is the
controller) as AlterPartition v3 with this broker's epoch, the leader epoch and partition
epoch the leader last saw, and the broker epoch of each ISR member, so the controller can
refuse a stale leader (FENCED_LEADER_EPOCH), a partition changed meanwhile
(INVALID_UPDATE_VERSION) or a member that restarted or is shutting down (INELIGIBLE_REPLICA).
A refused or failed request drops the pending change and the leader decides again from the
newer image. Success comes back as a new image through the metadata publisher, like any
other change; the ISR the partition acts on is always the one in the image.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from gregor.broker.common.events import log_event
from gregor.broker.replication.partition import Partition
from gregor.cluster.image import MetadataImage
from gregor.protocol.errors import ErrorCode
from gregor.protocol.messages.alter_partition import AlterPartitionRequest, AlterPartitionResponse

log = logging.getLogger("gregor.broker.replication")

#: The AlterPartition version a leader sends (topic ids, ISR members with broker epochs).
ALTER_PARTITION_VERSION = 3

Send = Callable[[AlterPartitionRequest], Awaitable[AlterPartitionResponse]]


class AlterPartitionManager:
    def __init__(self, node_id: int, image: Callable[[], MetadataImage], send: Send) -> None:
        self.node_id = node_id
        self._image = image
        self._send = send
        self._tasks: set[asyncio.Task[None]] = set()
        self.isr_shrinks = 0
        self.isr_expands = 0

    def submit(self, partition: Partition, isr: tuple[int, ...]) -> None:
        task = asyncio.create_task(self._alter(partition, isr))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def request_for(self, p: Partition, isr: tuple[int, ...]) -> AlterPartitionRequest:
        brokers = self._image().brokers

        def epoch(node: int) -> int:
            reg = brokers.get(node)
            return reg.epoch if reg is not None else -1

        member = AlterPartitionRequest.Topics.Partitions.NewIsrWithEpochs
        return AlterPartitionRequest(
            broker_id=self.node_id,
            broker_epoch=epoch(self.node_id),
            topics=[
                AlterPartitionRequest.Topics(
                    topic_id=p.topic_id,
                    topic_name=p.topic,
                    partitions=[
                        AlterPartitionRequest.Topics.Partitions(
                            partition_index=p.index,
                            leader_epoch=p.leader_epoch,
                            partition_epoch=p.partition_epoch,
                            new_isr=list(isr),
                            new_isr_with_epochs=[
                                member(broker_id=r, broker_epoch=epoch(r)) for r in isr
                            ],
                        ),
                    ],
                )
            ],
        )

    async def _alter(self, p: Partition, isr: tuple[int, ...]) -> None:
        before = p.isr
        try:
            resp = await self._send(self.request_for(p, isr))
            code = resp.error_code or next(
                (q.error_code for t in resp.topics for q in t.partitions),
                ErrorCode.UNKNOWN_SERVER_ERROR,
            )
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - no controller answered (stopping, cut off): decide again later
            log.info("%s-%d: ISR change to %s not sent: %r", p.topic, p.index, list(isr), e)
            code = ErrorCode.REQUEST_TIMED_OUT
        if code:
            log.info("%s-%d: ISR change to %s refused: error %d", p.topic, p.index, list(isr), code)
            if p.pending_isr == isr:
                p.pending_isr = None
            return
        if len(isr) < len(before):
            self.isr_shrinks += 1
        else:
            self.isr_expands += 1
        log_event(
            log,
            "partition.isr_changed",
            topic=p.topic,
            partition=p.index,
            isr=",".join(map(str, isr)),
        )

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
