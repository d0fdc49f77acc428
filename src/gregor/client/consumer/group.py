"""Group membership for the consumer: the classic protocol and KIP-848's consumer protocol.

Both kinds share :class:`GroupBase`: finding the coordinator, committing and fetching offsets,
and calling the user's rebalance listener (``on_partitions_revoked`` /
``on_partitions_assigned`` / ``on_partitions_lost``, plain or async functions).

:class:`ClassicMember` runs JoinGroup/SyncGroup. The member whose id the coordinator names
leader runs the assignor the group agreed on over everyone's subscription. With an eager
assignor (range, roundrobin) a member gives up all partitions before joining; with
cooperative-sticky it keeps them, reports them in its subscription, gives up only what the new
assignment takes away, and rejoins at once if it gave anything up so the partition can be
placed. A heartbeat task keeps the membership alive and notices rebalances.

:class:`~gregor.client.consumer.group_consumer.ConsumerProtocolMember` (its own module) sends
ConsumerGroupHeartbeat.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

from gregor.client.consumer.assignors import (
    COOPERATIVE,
    Assignment,
    Assignor,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from gregor.client.consumer.fetcher import SubscriptionState
from gregor.client.core.client import KafkaClient, spawn
from gregor.client.core.config import Config
from gregor.client.core.conn import expect
from gregor.client.core.errors import KafkaConnectionError, error_for_code
from gregor.client.core.metadata import TopicPartition
from gregor.protocol import messages
from gregor.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger("gregor.client.group")

_COORDINATOR_ERRORS = (
    ErrorCode.NOT_COORDINATOR,
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
)


@dataclass(frozen=True)
class OffsetAndMetadata:
    offset: int
    metadata: str | None = None
    leader_epoch: int = -1


@dataclass(frozen=True)
class ConsumerGroupMetadata:
    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


R = TypeVar("R", bound=messages.Message)


class RebalanceListener:
    """Override any of these (plain or ``async def``: what they return is awaited when it is
    awaitable)."""

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> object: ...
    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> object: ...
    def on_partitions_lost(self, lost: set[TopicPartition]) -> object:
        return self.on_partitions_revoked(lost)


#: A rebalance listener's method, looked up by name on whatever object the user gave.
_ListenerCall = Callable[[set[TopicPartition]], object]


async def _call(fn: _ListenerCall | None, arg: set[TopicPartition]) -> None:
    if fn is None:
        return
    try:
        r = fn(arg)
        if inspect.isawaitable(r):
            await r
    except Exception:
        log.exception("rebalance listener failed")


class GroupBase:
    def __init__(self, client: KafkaClient, config: Config, subs: SubscriptionState) -> None:
        self.client = client
        self.config = config
        self.subs = subs
        self.group_id: str = config["group.id"] or ""
        self.instance_id: str | None = config["group.instance.id"]
        self.coordinator = -1
        self.generation = -1
        self.member_id = ""
        self.listener: object = None  # any object with some of RebalanceListener's methods
        self.before_revoke: Callable[[set[TopicPartition]], Awaitable[None]] | None = (
            None  # auto-commit hook
        )
        self.closed = False
        self.rejoin_needed = True

    # --- coordinator ---

    async def coordinator_node(self) -> int:
        if self.coordinator < 0:
            self.coordinator = await self.client.find_coordinator(self.group_id, 0)
        return self.coordinator

    def coordinator_dead(self) -> None:
        self.coordinator = -1

    async def _send(
        self,
        req: messages.Message,
        response: type[R],
        max_version: int | None = None,
        timeout: float | None = None,
    ) -> R:
        """Send ``req`` to the group coordinator; its ``response``."""
        node = await self.coordinator_node()
        try:
            conn = await self.client.connection(node)
            got = await conn.send(req, conn.version(req.API_KEY, max_version), timeout=timeout)
        except KafkaConnectionError:
            self.coordinator_dead()
            raise
        return expect(got, response)

    # --- listener helpers ---

    async def _revoked(self, tps: set[TopicPartition]) -> None:
        if not tps:
            return
        if self.before_revoke is not None:
            try:
                r = self.before_revoke(tps)
                if inspect.isawaitable(r):
                    await r
            except KafkaError as e:
                log.warning("commit before revoke failed: %s", e)
        await _call(getattr(self.listener, "on_partitions_revoked", None), tps)

    async def _assigned(self, tps: set[TopicPartition]) -> None:
        await _call(getattr(self.listener, "on_partitions_assigned", None), tps)

    async def _lost(self, tps: set[TopicPartition]) -> None:
        if tps:
            await _call(getattr(self.listener, "on_partitions_lost", None), tps)

    # --- offsets ---

    def group_metadata(self) -> ConsumerGroupMetadata:
        return ConsumerGroupMetadata(
            self.group_id, self.generation, self.member_id, self.instance_id
        )

    async def commit(
        self, offsets: dict[TopicPartition, OffsetAndMetadata], timeout: float | None = None
    ) -> None:
        if not offsets:
            return
        by_topic: dict[str, list[messages.OffsetCommitRequest.Topics.Partitions]] = {}
        for tp, om in offsets.items():
            by_topic.setdefault(tp.topic, []).append(
                messages.OffsetCommitRequest.Topics.Partitions(
                    partition_index=tp.partition,
                    committed_offset=om.offset,
                    committed_leader_epoch=om.leader_epoch,
                    committed_metadata=om.metadata,
                )
            )

        async def attempt() -> None:
            req = messages.OffsetCommitRequest(
                group_id=self.group_id,
                generation_id_or_member_epoch=self.generation,
                member_id=self.member_id,
                group_instance_id=self.instance_id,
                topics=[
                    messages.OffsetCommitRequest.Topics(name=t, partitions=ps)
                    for t, ps in by_topic.items()
                ],
            )
            resp = await self._send(req, messages.OffsetCommitResponse)
            for t in resp.topics:
                for p in t.partitions:
                    if p.error_code:
                        self._handle_error(p.error_code)
                        raise error_for_code(p.error_code)(f"commit {t.name}[{p.partition_index}]")

        await self.client.with_retries(attempt, timeout=timeout)

    async def fetch_committed(
        self,
        tps: Iterable[TopicPartition],
        require_stable: bool = False,
        timeout: float | None = None,
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        tps = list(tps)
        by_topic: dict[str, list[int]] = {}
        for tp in tps:
            by_topic.setdefault(tp.topic, []).append(tp.partition)

        async def attempt() -> dict[TopicPartition, OffsetAndMetadata | None]:
            node = await self.coordinator_node()
            conn = await self.client.connection(node)
            version = conn.version(messages.OffsetFetchRequest.API_KEY)
            if version >= 8:
                req = messages.OffsetFetchRequest(
                    groups=[
                        messages.OffsetFetchRequest.Groups(
                            group_id=self.group_id,
                            topics=[
                                messages.OffsetFetchRequest.Groups.Topics(
                                    name=t, partition_indexes=ps
                                )
                                for t, ps in by_topic.items()
                            ],
                        )
                    ],
                    require_stable=require_stable,
                )
            else:
                req = messages.OffsetFetchRequest(
                    group_id=self.group_id,
                    topics=[
                        messages.OffsetFetchRequest.Topics(name=t, partition_indexes=ps)
                        for t, ps in by_topic.items()
                    ],
                    require_stable=require_stable,
                )
            try:
                resp: messages.OffsetFetchResponse = await conn.send(req, version)
            except KafkaConnectionError:
                self.coordinator_dead()
                raise
            topics: (
                list[messages.OffsetFetchResponse.Groups.Topics]
                | list[messages.OffsetFetchResponse.Topics]
            )
            if version >= 8:
                g = resp.groups[0]
                code, topics = g.error_code, g.topics
            else:
                code, topics = resp.error_code, resp.topics
            if code:
                self._handle_error(code)
                raise error_for_code(code)(f"offset fetch for group {self.group_id}")
            out: dict[TopicPartition, OffsetAndMetadata | None] = {tp: None for tp in tps}
            for t in topics:
                for p in t.partitions:
                    if p.error_code:
                        if p.error_code == ErrorCode.UNSTABLE_OFFSET_COMMIT:
                            raise error_for_code(p.error_code)()
                        if p.error_code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                            raise error_for_code(p.error_code)(f"{t.name}[{p.partition_index}]")
                        continue
                    if p.committed_offset >= 0:
                        out[TopicPartition(t.name, p.partition_index)] = OffsetAndMetadata(
                            p.committed_offset, p.metadata, p.committed_leader_epoch
                        )
            return out

        return await self.client.with_retries(attempt, timeout=timeout)

    def _handle_error(self, code: int) -> None:
        if code in _COORDINATOR_ERRORS:
            self.coordinator_dead()
        elif code in (
            ErrorCode.UNKNOWN_MEMBER_ID,
            ErrorCode.ILLEGAL_GENERATION,
            ErrorCode.FENCED_MEMBER_EPOCH,
        ):
            self.rejoin_needed = True
        elif code == ErrorCode.REBALANCE_IN_PROGRESS:
            self.rejoin_needed = True

    # --- interface for the consumer ---

    async def ensure_active(self, topics: set[str]) -> None:
        raise NotImplementedError

    async def leave(self) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        raise NotImplementedError


class ClassicMember(GroupBase):
    def __init__(
        self,
        client: KafkaClient,
        config: Config,
        subs: SubscriptionState,
        assignors: list[Assignor],
    ) -> None:
        super().__init__(client, config, subs)
        self.assignors = assignors
        self.session_timeout = config["session.timeout.ms"]
        self.rebalance_timeout = config["max.poll.interval.ms"]
        self.heartbeat_interval = config["heartbeat.interval.ms"] / 1000
        self.protocol: str | None = None
        self.leader = False
        self._heartbeat_task: asyncio.Task[None] | None = None
        self._assigned_counts: dict[str, int] = {}
        self._joined_topics: set[str] = set()
        self._lock = asyncio.Lock()

    @property
    def rebalance_protocol(self) -> str:
        a = self._assignor(self.protocol) if self.protocol else None
        return a.protocol if a is not None else "eager"

    def _assignor(self, name: str | None) -> Assignor | None:
        for a in self.assignors:
            if a.name == name:
                return a
        return None

    def _metadata_changed(self) -> bool:
        if not self.leader:
            return False
        cluster = self.client.cluster
        for t, n in self._assigned_counts.items():
            parts = cluster.partitions_for(t)
            if parts is not None and len(parts) != n:
                return True
        return False

    async def ensure_active(self, topics: set[str]) -> None:
        if topics != self._joined_topics or self._metadata_changed():
            self.rejoin_needed = True
        if not self.rejoin_needed:
            return
        async with self._lock:
            while self.rejoin_needed and not self.closed:
                await self._rebalance(topics)

    async def _rebalance(self, topics: set[str]) -> None:
        owned = set(self.subs.assignment)
        cooperative = self.rebalance_protocol == COOPERATIVE
        if owned and not cooperative and self.generation >= 0:
            await self._revoked(owned)
            self.subs.assign([])
            owned = set()
        self.rejoin_needed = False
        try:
            assignment = await self._join_and_sync(topics, owned)
        except KafkaError as e:
            self.rejoin_needed = True
            if not e.retriable and not isinstance(
                e,
                (
                    error_for_code(ErrorCode.REBALANCE_IN_PROGRESS),
                    error_for_code(ErrorCode.UNKNOWN_MEMBER_ID),
                    error_for_code(ErrorCode.ILLEGAL_GENERATION),
                    error_for_code(ErrorCode.MEMBER_ID_REQUIRED),
                ),
            ):
                raise
            await asyncio.sleep(self.client.retry_backoff)
            return
        new = {TopicPartition(t, p) for t, ps in assignment.partitions.items() for p in ps}
        self._joined_topics = set(topics)
        if self.rebalance_protocol == COOPERATIVE:
            revoked = owned - new
            added = new - owned
            if revoked:
                await self._revoked(revoked)
                self.subs.remove(revoked)
                self.rejoin_needed = True  # let the partitions we gave up be placed
            self.subs.add(added)
            await self._assigned(added)
        else:
            lost = owned - new
            if lost:
                await self._revoked(lost)
            self.subs.assign(new)
            await self._assigned(new)
        if self._heartbeat_task is None or self._heartbeat_task.done():
            self._heartbeat_task = spawn(self._heartbeat_loop())

    async def _join_and_sync(self, topics: set[str], owned: set[TopicPartition]) -> Assignment:
        owned_map: dict[str, list[int]] = {}
        for tp in owned:
            owned_map.setdefault(tp.topic, []).append(tp.partition)
        sub = Subscription(
            sorted(topics),
            None,
            owned_map,
            self.generation,
            self.config["client.rack"] or None,
        )
        protocols = [
            messages.JoinGroupRequest.Protocols(name=a.name, metadata=encode_subscription(sub))
            for a in self.assignors
        ]
        while True:
            req = messages.JoinGroupRequest(
                group_id=self.group_id,
                session_timeout_ms=self.session_timeout,
                rebalance_timeout_ms=self.rebalance_timeout,
                member_id=self.member_id,
                group_instance_id=self.instance_id,
                protocol_type="consumer",
                protocols=protocols,
            )
            resp = await self._send(
                req, messages.JoinGroupResponse, timeout=self.rebalance_timeout / 1000 + 5
            )
            code = resp.error_code
            if code == ErrorCode.MEMBER_ID_REQUIRED:
                self.member_id = resp.member_id
                continue
            if code == ErrorCode.UNKNOWN_MEMBER_ID:
                self.member_id = ""
                self.generation = -1
                raise error_for_code(code)()
            if code == ErrorCode.ILLEGAL_GENERATION:
                self.generation = -1
                raise error_for_code(code)()
            if code:
                self._handle_error(code)
                raise error_for_code(code)(f"JoinGroup {self.group_id}")
            break
        self.member_id = resp.member_id
        self.generation = resp.generation_id
        self.protocol = resp.protocol_name
        self.leader = resp.leader == self.member_id and not resp.skip_assignment
        assignments: list[messages.SyncGroupRequest.Assignments] = []
        if self.leader:
            assignments = await self._lead(resp)
        sreq = messages.SyncGroupRequest(
            group_id=self.group_id,
            generation_id=self.generation,
            member_id=self.member_id,
            group_instance_id=self.instance_id,
            protocol_type="consumer",
            protocol_name=self.protocol,
            assignments=assignments,
        )
        sresp = await self._send(
            sreq, messages.SyncGroupResponse, timeout=self.rebalance_timeout / 1000 + 5
        )
        if sresp.error_code:
            code = sresp.error_code
            if code == ErrorCode.UNKNOWN_MEMBER_ID:
                self.member_id = ""
                self.generation = -1
            elif code == ErrorCode.ILLEGAL_GENERATION:
                self.generation = -1
            self._handle_error(code)
            raise error_for_code(code)(f"SyncGroup {self.group_id}")
        return decode_assignment(sresp.assignment)

    async def _lead(
        self, resp: messages.JoinGroupResponse
    ) -> list[messages.SyncGroupRequest.Assignments]:
        assignor = self._assignor(resp.protocol_name)
        if assignor is None:
            raise KafkaError(
                f"group chose assignor {resp.protocol_name!r}, which this member lacks"
            )
        members = {m.member_id: decode_subscription(m.metadata) for m in resp.members}
        all_topics = {t for s in members.values() for t in s.topics}
        self.client.add_topics(all_topics)
        await self.client.refresh_metadata()
        counts = {}
        for t in all_topics:
            parts = self.client.cluster.partitions_for(t)
            if parts:
                counts[t] = len(parts)
        self._assigned_counts = counts
        result = assignor.assign(members, counts)
        return [
            messages.SyncGroupRequest.Assignments(
                member_id=m, assignment=encode_assignment(Assignment(parts))
            )
            for m, parts in result.items()
        ]

    async def _heartbeat_loop(self) -> None:
        while not self.closed:
            await asyncio.sleep(self.heartbeat_interval)
            if self.generation < 0 or self._lock.locked():
                continue
            try:
                resp = await self._send(
                    messages.HeartbeatRequest(
                        group_id=self.group_id,
                        generation_id=self.generation,
                        member_id=self.member_id,
                        group_instance_id=self.instance_id,
                    ),
                    messages.HeartbeatResponse,
                )
            except KafkaError as e:
                log.debug("heartbeat failed: %s", e)
                continue
            code = resp.error_code
            if code == ErrorCode.REBALANCE_IN_PROGRESS:
                self.rejoin_needed = True
            elif code in (
                ErrorCode.UNKNOWN_MEMBER_ID,
                ErrorCode.ILLEGAL_GENERATION,
                ErrorCode.FENCED_INSTANCE_ID,
            ):
                lost = set(self.subs.assignment)
                if code == ErrorCode.UNKNOWN_MEMBER_ID:
                    self.member_id = ""
                self.generation = -1
                self.subs.assign([])
                await self._lost(lost)
                self.rejoin_needed = True
            elif code:
                self._handle_error(code)

    async def leave(self) -> None:
        if self.generation < 0 and not self.member_id:
            return
        if self.instance_id is not None:
            return  # static members keep their slot until the session times out
        try:
            node = await self.coordinator_node()
            conn = await self.client.connection(node)
            version = conn.version(messages.LeaveGroupRequest.API_KEY)
            if version >= 3:
                req = messages.LeaveGroupRequest(
                    group_id=self.group_id,
                    members=[
                        messages.LeaveGroupRequest.Members(
                            member_id=self.member_id, group_instance_id=self.instance_id
                        )
                    ],
                )
            else:
                req = messages.LeaveGroupRequest(group_id=self.group_id, member_id=self.member_id)
            await conn.send(req, version, timeout=5)
        except KafkaError as e:
            log.debug("LeaveGroup failed: %s", e)
        self.generation = -1
        self.member_id = ""

    async def close(self) -> None:
        self.closed = True
        if self._heartbeat_task is not None:
            self._heartbeat_task.cancel()
            try:
                await self._heartbeat_task
            except BaseException:
                pass
