"""The group coordinator as a typed service for the handlers.

``GroupService`` runs ``GroupCoordinator`` (``gregor.coordinator``) on the shared
``CoordinatorRuntime``; its state lives in ``__consumer_offsets``. Each request API is one
typed async method: handlers never see the runtime, tokens or the coordinator itself. A
COMMIT/ABORT marker written to a ``__consumer_offsets`` partition (by the transaction
coordinator, through the replica manager) turns that producer's pending transactional
offsets there into committed ones, or drops them.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable

from gregor.broker.common.topics import OFFSETS_TOPIC
from gregor.broker.coordination.coordinator_runtime import (
    CoordinatorRuntime,
    InternalTopic,
    PartitionWriter,
    TopicCreator,
    wall_clock_ms,
)
from gregor.cluster.image import MetadataImage
from gregor.coordinator import CoordinatorConfig, GroupCoordinator
from gregor.protocol.errors import ErrorCode
from gregor.protocol.messages.consumer_group_describe import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
)
from gregor.protocol.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from gregor.protocol.messages.delete_groups import DeleteGroupsRequest, DeleteGroupsResponse
from gregor.protocol.messages.describe_groups import DescribeGroupsRequest, DescribeGroupsResponse
from gregor.protocol.messages.heartbeat import HeartbeatRequest, HeartbeatResponse
from gregor.protocol.messages.join_group import JoinGroupRequest, JoinGroupResponse
from gregor.protocol.messages.leave_group import LeaveGroupRequest, LeaveGroupResponse
from gregor.protocol.messages.list_groups import ListGroupsRequest, ListGroupsResponse
from gregor.protocol.messages.offset_commit import OffsetCommitRequest, OffsetCommitResponse
from gregor.protocol.messages.offset_delete import OffsetDeleteRequest, OffsetDeleteResponse
from gregor.protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchResponse
from gregor.protocol.messages.sync_group import SyncGroupRequest, SyncGroupResponse
from gregor.protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)
from gregor.storage.producer_state import AppendOrigin

OFFSETS_TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    "segment.bytes": "104857600",
    "compression.type": "producer",
}


class ImageTopics:
    """The coordinator's view of the topics (``TopicsView``), read from the metadata image."""

    def __init__(self, image: Callable[[], MetadataImage]) -> None:
        self._image = image

    def partition_count(self, topic: str) -> int | None:
        t = self._image().topic(topic)
        return None if t is None else len(t.partitions)

    def topic_id(self, topic: str) -> uuid.UUID | None:
        t = self._image().topic(topic)
        return None if t is None else t.topic_id

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        t = self._image().topic_by_id(topic_id)
        return None if t is None else t.name

    def topic_names(self) -> Iterable[str]:
        return [name for name, t in self._image().topics.items() if not t.internal]


class GroupService(CoordinatorRuntime):
    def __init__(
        self,
        config: CoordinatorConfig,
        replication_factor: int,
        image: Callable[[], MetadataImage],
        writer: PartitionWriter,
        creator: TopicCreator,
        clock: Callable[[], int] = wall_clock_ms,
        session_confirmed: Callable[[], bool] = lambda: True,
    ) -> None:
        self.coordinator = GroupCoordinator(config, ImageTopics(image), clock, session_confirmed)
        self.config = config
        topic = InternalTopic(
            OFFSETS_TOPIC,
            config.num_partitions,
            replication_factor,
            OFFSETS_TOPIC_CONFIGS,
            AppendOrigin.COORDINATOR,
        )
        # COORDINATOR origin: transactional offset commits (TxnOffsetCommit) carry the
        # producer's id and epoch but no sequence of their own; the epoch is still checked.
        super().__init__("groups", self.coordinator, topic, writer, creator, clock)

    def set_partition_count(self, count: int) -> None:
        """Groups hash over the partitions ``__consumer_offsets`` has, whatever the config
        says now."""
        self.config.num_partitions = count

    def on_txn_marker(self, topic: str, partition: int, producer_id: int, commit: bool) -> None:
        if topic == OFFSETS_TOPIC:
            self.coordinator.complete_txn_offsets(partition, producer_id, commit)
            self.pump()

    def release_waiting(self) -> None:
        """Answer held JoinGroup/SyncGroup requests so shutdown need not wait for them."""
        self.coordinator.release_waiting()
        self.pump()

    # --- lookups ---

    def committed_offsets(self) -> dict[str, dict[tuple[str, int], int]]:
        """group id -> (topic, partition) -> committed offset, for the groups coordinated here
        (the metrics' consumer-group lag)."""
        return {
            gid: {tp: oam.offset for tp, oam in group.offsets.committed.items()}
            for gid, group in self.coordinator.groups.items()
            if group.offsets.committed
        }

    def partition_for(self, group_id: str) -> int:
        return self.coordinator.partition_for(group_id)

    async def coordinator_error(self, group_id: str) -> ErrorCode:
        """FindCoordinator: NONE if this broker serves ``group_id`` now, else the error."""
        await self.ensure_topic()
        return ErrorCode(self.coordinator.partition_error(group_id))

    # --- requests ---

    async def join_group(
        self, req: JoinGroupRequest, version: int, client_id: str | None, client_host: str
    ) -> JoinGroupResponse:
        c = self.coordinator
        return await self.call(c.join_group, req, version, client_id, client_host)

    async def sync_group(self, req: SyncGroupRequest, version: int) -> SyncGroupResponse:
        return await self.call(self.coordinator.sync_group, req, version)

    async def heartbeat(self, req: HeartbeatRequest, version: int) -> HeartbeatResponse:
        return await self.call(self.coordinator.heartbeat, req, version)

    async def leave_group(self, req: LeaveGroupRequest, version: int) -> LeaveGroupResponse:
        return await self.call(self.coordinator.leave_group, req, version)

    async def offset_commit(self, req: OffsetCommitRequest, version: int) -> OffsetCommitResponse:
        return await self.call(self.coordinator.offset_commit, req, version)

    async def offset_fetch(self, req: OffsetFetchRequest, version: int) -> OffsetFetchResponse:
        return await self.call(self.coordinator.offset_fetch, req, version)

    async def offset_delete(self, req: OffsetDeleteRequest, version: int) -> OffsetDeleteResponse:
        return await self.call(self.coordinator.offset_delete, req, version)

    async def txn_offset_commit(
        self, req: TxnOffsetCommitRequest, version: int
    ) -> TxnOffsetCommitResponse:
        c = self.coordinator
        return await self.call(c.txn_offset_commit, req, version)

    async def describe_groups(
        self, req: DescribeGroupsRequest, version: int
    ) -> DescribeGroupsResponse:
        c = self.coordinator
        return await self.call(c.describe_groups, req, version)

    async def list_groups(self, req: ListGroupsRequest, version: int) -> ListGroupsResponse:
        return await self.call(self.coordinator.list_groups, req, version)

    async def delete_groups(self, req: DeleteGroupsRequest, version: int) -> DeleteGroupsResponse:
        c = self.coordinator
        return await self.call(c.delete_groups, req, version)

    async def consumer_group_heartbeat(
        self,
        req: ConsumerGroupHeartbeatRequest,
        version: int,
        client_id: str | None,
        client_host: str,
    ) -> ConsumerGroupHeartbeatResponse:
        c = self.coordinator
        return await self.call(c.consumer_group_heartbeat, req, version, client_id, client_host)

    async def consumer_group_describe(
        self, req: ConsumerGroupDescribeRequest, version: int
    ) -> ConsumerGroupDescribeResponse:
        c = self.coordinator
        return await self.call(c.consumer_group_describe, req, version)
