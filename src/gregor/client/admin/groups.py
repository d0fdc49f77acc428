"""Consumer groups and share groups: listing, describing and deleting them, and their committed
offsets (OffsetFetch, OffsetCommit and OffsetDelete through the consumer's own group code, asked
of each group's coordinator; DescribeShareGroupOffsets and friends for share groups)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from gregor.client.admin.base import AdminBase, error_or_none, raise_first
from gregor.client.admin.types import (
    GroupDescription,
    MemberDescription,
    ShareGroupDescription,
    ShareMemberDescription,
)
from gregor.client.consumer.assignors import decode_assignment
from gregor.client.consumer.fetcher import SubscriptionState
from gregor.client.consumer.group import GroupBase, OffsetAndMetadata
from gregor.client.core.config import Config
from gregor.client.core.errors import error_for_code
from gregor.client.core.metadata import TopicPartition
from gregor.protocol import messages
from gregor.protocol.errors import KafkaError


class GroupsApi(AdminBase):
    """The admin client's group calls."""

    async def list_groups(self) -> list[tuple[str, str, str]]:
        """(group_id, protocol_type, state) for every group on every broker."""
        await self._client.refresh_metadata()
        out: list[tuple[str, str, str]] = []
        for node in list(self._client.cluster.brokers):
            conn = await self._client.connection(node)
            resp: messages.ListGroupsResponse = await conn.send(
                messages.ListGroupsRequest(), conn.version(messages.ListGroupsRequest.API_KEY)
            )
            if resp.error_code:
                raise error_for_code(resp.error_code)()
            out.extend((g.group_id, g.protocol_type, g.group_state) for g in resp.groups)
        return sorted(out)

    async def describe_groups(self, group_ids: Iterable[str]) -> dict[str, GroupDescription]:
        out: dict[str, GroupDescription] = {}
        for gid in group_ids:
            node = await self._client.find_coordinator(gid, 0)
            conn = await self._client.connection(node)
            resp: messages.DescribeGroupsResponse = await conn.send(
                messages.DescribeGroupsRequest(groups=[gid]),
                conn.version(messages.DescribeGroupsRequest.API_KEY),
            )
            for g in resp.groups:
                members = []
                for m in g.members:
                    tps: set[TopicPartition] = set()
                    if g.protocol_type == "consumer" and m.member_assignment:
                        try:
                            a = decode_assignment(m.member_assignment)
                            tps = {
                                TopicPartition(t, p) for t, ps in a.partitions.items() for p in ps
                            }
                        except KafkaError:
                            pass
                    members.append(
                        MemberDescription(
                            m.member_id, m.group_instance_id, m.client_id, m.client_host, tps
                        )
                    )
                out[g.group_id] = GroupDescription(
                    g.group_id,
                    g.group_state,
                    g.protocol_type,
                    g.protocol_data,
                    members,
                    error_or_none(g.error_code),
                )
        return out

    async def describe_share_groups(
        self, group_ids: Iterable[str]
    ) -> dict[str, ShareGroupDescription | KafkaError]:
        """ShareGroupDescribe, asked of each group's coordinator."""
        out: dict[str, ShareGroupDescription | KafkaError] = {}
        for gid in group_ids:
            node = await self._client.find_coordinator(gid, 0)
            conn = await self._client.connection(node)
            resp: messages.ShareGroupDescribeResponse = await conn.send(
                messages.ShareGroupDescribeRequest(
                    group_ids=[gid], include_authorized_operations=False
                ),
                conn.version(messages.ShareGroupDescribeRequest.API_KEY),
            )
            for g in resp.groups:
                if g.error_code:
                    out[g.group_id] = error_for_code(g.error_code)(g.error_message)
                    continue
                members = [
                    ShareMemberDescription(
                        m.member_id,
                        m.member_epoch,
                        m.client_id,
                        m.client_host,
                        m.rack_id,
                        list(m.subscribed_topic_names),
                        {
                            TopicPartition(t.topic_name, p)
                            for t in m.assignment.topic_partitions
                            for p in t.partitions
                        },
                    )
                    for m in g.members
                ]
                out[g.group_id] = ShareGroupDescription(
                    g.group_id,
                    g.group_state,
                    g.group_epoch,
                    g.assignment_epoch,
                    g.assignor_name,
                    members,
                )
        return out

    async def describe_share_group_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, tuple[int, int] | KafkaError]:
        """(start offset, lag) of each partition the share group has state for (or of
        ``partitions``; -1 when unknown): DescribeShareGroupOffsets."""
        node = await self._client.find_coordinator(group_id, 0)
        conn = await self._client.connection(node)
        G = messages.DescribeShareGroupOffsetsRequest.Groups
        topics = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for tp in partitions:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            topics = [
                G.Topics(topic_name=t, partitions=sorted(ps)) for t, ps in sorted(by_topic.items())
            ]
        version = conn.version(messages.DescribeShareGroupOffsetsRequest.API_KEY)
        resp: messages.DescribeShareGroupOffsetsResponse = await conn.send(
            messages.DescribeShareGroupOffsetsRequest(groups=[G(group_id=group_id, topics=topics)]),
            version,
        )
        g = resp.groups[0]
        if g.error_code:
            raise error_for_code(g.error_code)(g.error_message)
        return {
            TopicPartition(t.topic_name, p.partition_index): (
                error_for_code(p.error_code)(p.error_message)
                if p.error_code
                else (p.start_offset, p.lag if version >= 1 else -1)
            )
            for t in g.topics
            for p in t.partitions
        }

    async def alter_share_group_offsets(
        self, group_id: str, offsets: Mapping[TopicPartition, int], *, raise_on_error: bool = False
    ) -> dict[TopicPartition, KafkaError | None]:
        """Set where an empty share group starts in each partition (AlterShareGroupOffsets)."""
        node = await self._client.find_coordinator(group_id, 0)
        conn = await self._client.connection(node)
        T = messages.AlterShareGroupOffsetsRequest.Topics
        by_topic: dict[str, list[messages.AlterShareGroupOffsetsRequest.Topics.Partitions]] = {}
        for tp, off in offsets.items():
            by_topic.setdefault(tp.topic, []).append(
                T.Partitions(partition_index=tp.partition, start_offset=off)
            )
        resp: messages.AlterShareGroupOffsetsResponse = await conn.send(
            messages.AlterShareGroupOffsetsRequest(
                group_id=group_id,
                topics=[T(topic_name=t, partitions=ps) for t, ps in sorted(by_topic.items())],
            ),
            conn.version(messages.AlterShareGroupOffsetsRequest.API_KEY),
        )
        if resp.error_code:
            raise error_for_code(resp.error_code)(resp.error_message)
        out = {
            TopicPartition(t.topic_name, p.partition_index): error_or_none(
                p.error_code, p.error_message
            )
            for t in resp.responses
            for p in t.partitions
        }
        raise_first(out, raise_on_error)
        return out

    async def delete_share_group_offsets(
        self, group_id: str, topics: Iterable[str], *, raise_on_error: bool = False
    ) -> dict[str, KafkaError | None]:
        """Forget an empty share group's state for whole topics (DeleteShareGroupOffsets)."""
        node = await self._client.find_coordinator(group_id, 0)
        conn = await self._client.connection(node)
        resp: messages.DeleteShareGroupOffsetsResponse = await conn.send(
            messages.DeleteShareGroupOffsetsRequest(
                group_id=group_id,
                topics=[
                    messages.DeleteShareGroupOffsetsRequest.Topics(topic_name=t) for t in topics
                ],
            ),
            conn.version(messages.DeleteShareGroupOffsetsRequest.API_KEY),
        )
        if resp.error_code:
            raise error_for_code(resp.error_code)(resp.error_message)
        out = {t.topic_name: error_or_none(t.error_code, t.error_message) for t in resp.responses}
        raise_first(out, raise_on_error)
        return out

    async def delete_groups(
        self, group_ids: Iterable[str], *, raise_on_error: bool = False
    ) -> dict[str, KafkaError | None]:
        out: dict[str, KafkaError | None] = {}
        for gid in group_ids:
            node = await self._client.find_coordinator(gid, 0)
            conn = await self._client.connection(node)
            resp: messages.DeleteGroupsResponse = await conn.send(
                messages.DeleteGroupsRequest(groups_names=[gid]),
                conn.version(messages.DeleteGroupsRequest.API_KEY),
            )
            for r in resp.results:
                out[r.group_id] = error_or_none(r.error_code)
        raise_first(out, raise_on_error)
        return out

    def _group(self, group_id: str) -> GroupBase:
        cfg = Config(
            "consumer",
            {"bootstrap.servers": self.config["bootstrap.servers"], "group.id": group_id},
        )
        return GroupBase(self._client, cfg, SubscriptionState())

    async def list_consumer_group_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """Committed offsets of a group (all its partitions when ``partitions`` is None)."""
        g = self._group(group_id)
        if partitions is None:
            return await self._all_group_offsets(g)
        got = await g.fetch_committed(list(partitions))
        return {tp: om for tp, om in got.items() if om is not None}

    async def _all_group_offsets(self, g: GroupBase) -> dict[TopicPartition, OffsetAndMetadata]:
        node = await g.coordinator_node()
        conn = await self._client.connection(node)
        version = conn.version(messages.OffsetFetchRequest.API_KEY, min_version=2)
        if version >= 8:
            req = messages.OffsetFetchRequest(
                groups=[messages.OffsetFetchRequest.Groups(group_id=g.group_id, topics=None)]
            )
        else:
            req = messages.OffsetFetchRequest(group_id=g.group_id, topics=None)
        resp: messages.OffsetFetchResponse = await conn.send(req, version)
        topics: (
            list[messages.OffsetFetchResponse.Groups.Topics]
            | list[messages.OffsetFetchResponse.Topics]
        )
        if version >= 8:
            code, topics = resp.groups[0].error_code, resp.groups[0].topics
        else:
            code, topics = resp.error_code, resp.topics
        if code:
            raise error_for_code(code)(g.group_id)
        out = {}
        for t in topics:
            for p in t.partitions:
                if not p.error_code and p.committed_offset >= 0:
                    out[TopicPartition(t.name, p.partition_index)] = OffsetAndMetadata(
                        p.committed_offset, p.metadata, p.committed_leader_epoch
                    )
        return out

    async def alter_consumer_group_offsets(
        self, group_id: str, offsets: Mapping[TopicPartition, int | OffsetAndMetadata]
    ) -> None:
        """Set a group's committed offsets (the group must have no active members)."""
        g = self._group(group_id)
        oms = {
            TopicPartition(*tp): v
            if isinstance(v, OffsetAndMetadata)
            else OffsetAndMetadata(int(v))
            for tp, v in offsets.items()
        }
        await g.commit(oms)

    async def delete_consumer_group_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition]
    ) -> None:
        g = self._group(group_id)
        by_topic: dict[str, list[int]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        node = await g.coordinator_node()
        conn = await self._client.connection(node)
        req = messages.OffsetDeleteRequest(
            group_id=group_id,
            topics=[
                messages.OffsetDeleteRequest.Topics(
                    name=t,
                    partitions=[
                        messages.OffsetDeleteRequest.Topics.Partitions(partition_index=p)
                        for p in ps
                    ],
                )
                for t, ps in by_topic.items()
            ],
        )
        resp: messages.OffsetDeleteResponse = await conn.send(req, conn.version(req.API_KEY))
        if resp.error_code:
            raise error_for_code(resp.error_code)(group_id)
