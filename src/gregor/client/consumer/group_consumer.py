"""Group membership with KIP-848's consumer protocol (the classic one is in ``group``).

Theory of operation. :class:`ConsumerProtocolMember` sends ConsumerGroupHeartbeat: the broker
computes the target assignment; the member revokes what it no longer owns, takes what is new
(topic ids mapped to names through metadata), and acknowledges by reporting what it owns in the
next heartbeat. The member epoch plays the classic protocol's generation; committing, offset
fetches and the rebalance listener come from :class:`~gregor.client.consumer.group.GroupBase`.
"""

from __future__ import annotations

import asyncio
import logging
import uuid

from gregor.client.consumer.fetcher import SubscriptionState
from gregor.client.consumer.group import GroupBase
from gregor.client.core.client import KafkaClient, spawn
from gregor.client.core.config import Config
from gregor.client.core.errors import error_for_code
from gregor.client.core.metadata import TopicPartition
from gregor.protocol.errors import ErrorCode, KafkaError
from gregor.protocol.messages import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse

log = logging.getLogger("gregor.client.group")


class ConsumerProtocolMember(GroupBase):
    """KIP-848: the broker assigns; the member reconciles and heartbeats."""

    def __init__(self, client: KafkaClient, config: Config, subs: SubscriptionState) -> None:
        super().__init__(client, config, subs)
        self.member_epoch = 0
        self.interval = config["heartbeat.interval.ms"] / 1000
        self.rebalance_timeout = config["max.poll.interval.ms"]
        self.server_assignor = config["group.remote.assignor"]
        self._topics: set[str] = set()
        self._task: asyncio.Task[None] | None = None
        self._joined = asyncio.Event()
        self._lock = asyncio.Lock()
        self._pending: dict[uuid.UUID, list[int]] | None = None

    @property
    def generation_id(self) -> int:
        return self.member_epoch

    async def ensure_active(self, topics: set[str]) -> None:
        if topics != self._topics:
            self._topics = set(topics)
            self.rejoin_needed = True
        if self._task is None or self._task.done():
            self._task = spawn(self._loop())
        if self.rejoin_needed or self.member_epoch <= 0:
            await self._heartbeat()
        if self._pending is not None:
            await self._reconcile()

    async def _loop(self) -> None:
        while not self.closed:
            await asyncio.sleep(self.interval)
            try:
                await self._heartbeat()
                if self._pending is not None:
                    await self._reconcile()
            except KafkaError as e:
                log.debug("consumer group heartbeat failed: %s", e)

    async def _heartbeat(self, leaving: bool = False) -> None:
        async with self._lock:
            cluster = self.client.cluster
            owned: dict[uuid.UUID, list[int]] = {}
            for tp in self.subs.assignment:
                tid = cluster.topic_id(tp.topic)
                if tid is not None:
                    owned.setdefault(tid, []).append(tp.partition)
            req = ConsumerGroupHeartbeatRequest(
                group_id=self.group_id,
                member_id=self.member_id,
                member_epoch=(-2 if self.instance_id else -1) if leaving else self.member_epoch,
                instance_id=self.instance_id,
                rack_id=self.config["client.rack"] or None,
                rebalance_timeout_ms=self.rebalance_timeout,
                subscribed_topic_names=sorted(self._topics),
                server_assignor=self.server_assignor,
                topic_partitions=[
                    ConsumerGroupHeartbeatRequest.TopicPartitions(topic_id=t, partitions=sorted(ps))
                    for t, ps in owned.items()
                ],
            )
            # v0: the coordinator names the member. From v1 (KIP-1082) a member must bring its
            # own id, which Kafka 4 brokers enforce and this client does not do yet.
            resp = await self._send(req, ConsumerGroupHeartbeatResponse, max_version=0)
            code = resp.error_code
            if leaving:
                return
            if code in (ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID):
                lost = set(self.subs.assignment)
                self.subs.assign([])
                self.member_epoch = 0
                if code == ErrorCode.UNKNOWN_MEMBER_ID:
                    self.member_id = ""
                await self._lost(lost)
                self.rejoin_needed = True
                return
            if code:
                self._handle_error(code)
                raise error_for_code(code)(resp.error_message)
            self.rejoin_needed = False
            if resp.member_id:
                self.member_id = resp.member_id
            self.member_epoch = resp.member_epoch
            self.generation = resp.member_epoch
            if resp.heartbeat_interval_ms > 0:
                self.interval = resp.heartbeat_interval_ms / 1000
            if resp.assignment is not None:
                self._pending = {
                    tp.topic_id: list(tp.partitions) for tp in resp.assignment.topic_partitions
                }

    async def _reconcile(self) -> None:
        target_ids = self._pending
        if target_ids is None:
            return
        cluster = self.client.cluster
        if any(tid not in cluster.topic_names for tid in target_ids):
            self.client.add_topics(self._topics)
            await self.client.refresh_metadata()
            if any(tid not in cluster.topic_names for tid in target_ids):
                return  # try again after the next metadata refresh
        target = {
            TopicPartition(cluster.topic_names[tid], p)
            for tid, ps in target_ids.items()
            for p in ps
        }
        self._pending = None
        owned = set(self.subs.assignment)
        revoked = owned - target
        added = target - owned
        if revoked:
            await self._revoked(revoked)
            self.subs.remove(revoked)
        if added:
            self.subs.add(added)
            await self._assigned(added)
        if revoked or added:
            await self._heartbeat()  # acknowledge promptly

    async def leave(self) -> None:
        if not self.member_id:
            return
        try:
            await self._heartbeat(leaving=True)
        except KafkaError as e:
            log.debug("leaving the group failed: %s", e)
        self.member_epoch = 0

    async def close(self) -> None:
        self.closed = True
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except BaseException:
                pass
