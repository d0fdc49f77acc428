"""The share coordinator as a service: ``ShareCoordinator`` (``gregor.coordinator``) on the
shared ``CoordinatorRuntime``, its state in ``__share_group_state`` (compacted).

The share-group state APIs (Initialize/Read/Write/Delete/ReadSummary ShareGroupState) call it
on the broker leading the key's partition; ``SharePersister`` is how a share-partition leader
reaches it: a local call when this broker coordinates the key, else the same API sent to the
coordinating broker over the inter-broker channels, found and retried as a client finds and
retries a coordinator (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, unreachable).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from gregor.broker.channels.broker_channels import BrokerChannels
from gregor.broker.common.topics import SHARE_STATE_TOPIC
from gregor.broker.coordination.coordinator_runtime import (
    CoordinatorRuntime,
    InternalTopic,
    PartitionWriter,
    TopicCreator,
    wall_clock_ms,
)
from gregor.cluster.image import MetadataImage
from gregor.coordinator.share.coordinator import ReadResult, ShareCoordinator, share_key_text
from gregor.coordinator.share.state import ShareKey, StateBatch
from gregor.protocol.errors import ErrorCode, KafkaError
from gregor.protocol.messages.delete_share_group_state import DeleteShareGroupStateRequest
from gregor.protocol.messages.initialize_share_group_state import InitializeShareGroupStateRequest
from gregor.protocol.messages.read_share_group_state import ReadShareGroupStateRequest
from gregor.protocol.messages.read_share_group_state_summary import (
    ReadShareGroupStateSummaryRequest,
)
from gregor.protocol.messages.write_share_group_state import WriteShareGroupStateRequest
from gregor.storage.producer_state import AppendOrigin

SHARE_STATE_CONFIGS = {
    "cleanup.policy": "compact",
    "segment.bytes": "104857600",
    "compression.type": "uncompressed",
}
_RETRY = frozenset(
    {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
    }
)
RETRY_S = 0.05
R = TypeVar("R")
ATTEMPTS = (
    40  # about 2 s of coordinator moves before a read or write is given up (the client retries)
)


class ShareService(CoordinatorRuntime):
    def __init__(
        self,
        num_partitions: int,
        replication_factor: int,
        writer: PartitionWriter,
        creator: TopicCreator,
        clock: Callable[[], int] = wall_clock_ms,
        session_confirmed: Callable[[], bool] = lambda: True,
    ) -> None:
        self.coordinator = ShareCoordinator(num_partitions, clock, session_confirmed)
        topic = InternalTopic(
            SHARE_STATE_TOPIC,
            num_partitions,
            replication_factor,
            SHARE_STATE_CONFIGS,
            AppendOrigin.CLIENT,
        )
        super().__init__("share", self.coordinator, topic, writer, creator, clock)

    # --- the state APIs ---

    async def initialize(self, key: ShareKey, state_epoch: int, start_offset: int) -> int:
        return await self.call(self.coordinator.initialize, key, state_epoch, start_offset)

    async def read(self, key: ShareKey, leader_epoch: int, summary: bool = False) -> ReadResult:
        return await self.call(self.coordinator.read, key, leader_epoch, summary)

    async def write(
        self,
        key: ShareKey,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        batches: Sequence[StateBatch],
    ) -> int:
        return await self.call(
            self.coordinator.write, key, state_epoch, leader_epoch, start_offset, list(batches)
        )

    async def delete(self, key: ShareKey) -> int:
        return await self.call(self.coordinator.delete, key)


class SharePersister:
    """Reads and writes share-partition state through whichever broker coordinates it."""

    def __init__(
        self,
        node_id: int,
        service: ShareService,
        image: Callable[[], MetadataImage],
        channels: BrokerChannels | None,
    ) -> None:
        self.node_id = node_id
        self.service = service
        self.image = image
        self.channels = channels

    async def _call(
        self,
        key: ShareKey,
        local: Callable[[], Awaitable[R]],
        remote: Callable[[BrokerChannels, int], Awaitable[R]],
        error_of: Callable[[R], int],
        unavailable: R,
    ) -> R:
        """``local()`` when this broker coordinates ``key``, else ``remote(channels, node)``;
        again while the coordinator moves or loads (about 2 s), then the last answer."""
        result = unavailable
        for _ in range(ATTEMPTS):
            await self.service.ensure_topic()
            node = self.service.coordinator_node(share_key_text(key), self.image())
            if node == self.node_id or self.channels is None:
                result = await local()
            elif node >= 0:
                try:
                    result = await remote(self.channels, node)
                except (KafkaError, OSError):
                    result = unavailable
            if error_of(result) not in _RETRY:
                return result
            await asyncio.sleep(RETRY_S)
        return result

    async def read(self, key: ShareKey, leader_epoch: int, summary: bool = False) -> ReadResult:
        """The state (``summary``: start offset and epochs only, without recording the leader
        epoch, as ReadShareGroupStateSummary)."""

        async def remote(channels: BrokerChannels, node: int) -> ReadResult:
            if summary:
                sreq = ReadShareGroupStateSummaryRequest(
                    group_id=key[0],
                    topics=[
                        ReadShareGroupStateSummaryRequest.Topics(
                            topic_id=key[1],
                            partitions=[
                                ReadShareGroupStateSummaryRequest.Topics.Partitions(
                                    partition=key[2], leader_epoch=leader_epoch
                                )
                            ],
                        )
                    ],
                )
                sp = (await channels.request(node, sreq, 0)).results[0].partitions[0]
                return (
                    ReadResult(sp.error_code)
                    if sp.error_code
                    else ReadResult(0, sp.state_epoch, -1, sp.start_offset)
                )
            req = ReadShareGroupStateRequest(
                group_id=key[0],
                topics=[
                    ReadShareGroupStateRequest.Topics(
                        topic_id=key[1],
                        partitions=[
                            ReadShareGroupStateRequest.Topics.Partitions(
                                partition=key[2], leader_epoch=leader_epoch
                            )
                        ],
                    )
                ],
            )
            p = (await channels.request(node, req, 0)).results[0].partitions[0]
            if p.error_code:
                return ReadResult(p.error_code)
            return ReadResult(
                0,
                p.state_epoch,
                leader_epoch,
                p.start_offset,
                tuple(
                    StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                    for b in p.state_batches
                ),
            )

        return await self._call(
            key,
            lambda: self.service.read(key, leader_epoch, summary),
            remote,
            lambda r: r.error,
            ReadResult(ErrorCode.COORDINATOR_NOT_AVAILABLE),
        )

    async def write(
        self,
        key: ShareKey,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        batches: Sequence[StateBatch],
    ) -> int:
        async def remote(channels: BrokerChannels, node: int) -> int:
            Part = WriteShareGroupStateRequest.Topics.Partitions
            req = WriteShareGroupStateRequest(
                group_id=key[0],
                topics=[
                    WriteShareGroupStateRequest.Topics(
                        topic_id=key[1],
                        partitions=[
                            Part(
                                partition=key[2],
                                state_epoch=state_epoch,
                                leader_epoch=leader_epoch,
                                start_offset=start_offset,
                                state_batches=[
                                    Part.StateBatches(
                                        first_offset=b.first_offset,
                                        last_offset=b.last_offset,
                                        delivery_state=b.delivery_state,
                                        delivery_count=b.delivery_count,
                                    )
                                    for b in batches
                                ],
                            )
                        ],
                    )
                ],
            )
            return int((await channels.request(node, req, 0)).results[0].partitions[0].error_code)

        return await self._call(
            key,
            lambda: self.service.write(key, state_epoch, leader_epoch, start_offset, batches),
            remote,
            lambda e: e,
            int(ErrorCode.COORDINATOR_NOT_AVAILABLE),
        )

    async def initialize(self, key: ShareKey, state_epoch: int, start_offset: int) -> int:
        """A new state epoch at ``start_offset`` (an admin's reset): the leader's state is fenced."""

        async def remote(channels: BrokerChannels, node: int) -> int:
            req = InitializeShareGroupStateRequest(
                group_id=key[0],
                topics=[
                    InitializeShareGroupStateRequest.Topics(
                        topic_id=key[1],
                        partitions=[
                            InitializeShareGroupStateRequest.Topics.Partitions(
                                partition=key[2], state_epoch=state_epoch, start_offset=start_offset
                            )
                        ],
                    )
                ],
            )
            return int((await channels.request(node, req, 0)).results[0].partitions[0].error_code)

        return await self._call(
            key,
            lambda: self.service.initialize(key, state_epoch, start_offset),
            remote,
            lambda e: e,
            int(ErrorCode.COORDINATOR_NOT_AVAILABLE),
        )

    async def delete(self, key: ShareKey) -> int:
        async def remote(channels: BrokerChannels, node: int) -> int:
            req = DeleteShareGroupStateRequest(
                group_id=key[0],
                topics=[
                    DeleteShareGroupStateRequest.Topics(
                        topic_id=key[1],
                        partitions=[
                            DeleteShareGroupStateRequest.Topics.Partitions(partition=key[2])
                        ],
                    )
                ],
            )
            return int((await channels.request(node, req, 0)).results[0].partitions[0].error_code)

        return await self._call(
            key,
            lambda: self.service.delete(key),
            remote,
            lambda e: e,
            int(ErrorCode.COORDINATOR_NOT_AVAILABLE),
        )


__all__ = ["SharePersister", "ShareService"]
