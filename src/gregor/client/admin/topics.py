"""Topics and partitions: CreateTopics, DeleteTopics, CreatePartitions (sent to the controller)
and the topic descriptions from Metadata."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from gregor.client.admin.base import AdminBase, error_or_none, raise_first
from gregor.client.admin.types import NewTopic, PartitionInfo, TopicDescription
from gregor.client.core.errors import error_for_code
from gregor.protocol import messages
from gregor.protocol.errors import KafkaError


class TopicsApi(AdminBase):
    """The admin client's topic calls."""

    async def create_topics(
        self,
        topics: Iterable[NewTopic],
        *,
        validate_only: bool = False,
        raise_on_error: bool = False,
    ) -> dict[str, KafkaError | None]:
        topics = list(topics)
        conn = await self._controller()
        version = conn.version(messages.CreateTopicsRequest.API_KEY)
        req_topics = []
        for t in topics:
            np, rf = t.num_partitions, t.replication_factor
            if version < 4:
                np = 1 if np < 0 else np
                rf = 1 if rf < 0 else rf
            assignments = [
                messages.CreateTopicsRequest.Topics.Assignments(
                    partition_index=p, broker_ids=list(b)
                )
                for p, b in sorted((t.assignments or {}).items())
            ]
            if assignments:
                np, rf = -1, -1
            req_topics.append(
                messages.CreateTopicsRequest.Topics(
                    name=t.name,
                    num_partitions=np,
                    replication_factor=rf,
                    assignments=assignments,
                    configs=[
                        messages.CreateTopicsRequest.Topics.Configs(name=k, value=str(v))
                        for k, v in t.configs.items()
                    ],
                )
            )
        req = messages.CreateTopicsRequest(
            topics=req_topics, timeout_ms=self._timeout_ms, validate_only=validate_only
        )
        resp: messages.CreateTopicsResponse = await conn.send(req, version)
        out = {t.name: error_or_none(t.error_code, t.error_message) for t in resp.topics}
        self._client.request_update()
        raise_first(out, raise_on_error)
        return out

    async def delete_topics(
        self, names: Iterable[str], *, raise_on_error: bool = False
    ) -> dict[str, KafkaError | None]:
        names = list(names)
        conn = await self._controller()
        version = conn.version(messages.DeleteTopicsRequest.API_KEY)
        if version >= 6:
            req = messages.DeleteTopicsRequest(
                topics=[messages.DeleteTopicsRequest.Topics(name=n) for n in names],
                timeout_ms=self._timeout_ms,
            )
        else:
            req = messages.DeleteTopicsRequest(topic_names=names, timeout_ms=self._timeout_ms)
        resp: messages.DeleteTopicsResponse = await conn.send(req, version)
        # by name: the answer names every topic asked for (only a deletion by id leaves it null)
        out = {
            r.name: error_or_none(r.error_code, r.error_message)
            for r in resp.responses
            if r.name is not None
        }
        self._client.request_update()
        raise_first(out, raise_on_error)
        return out

    async def create_partitions(
        self,
        counts: Mapping[str, int],
        *,
        assignments: Mapping[str, list[list[int]]] | None = None,
        validate_only: bool = False,
        raise_on_error: bool = False,
    ) -> dict[str, KafkaError | None]:
        conn = await self._controller()
        req = messages.CreatePartitionsRequest(
            topics=[
                messages.CreatePartitionsRequest.Topics(
                    name=t,
                    count=n,
                    assignments=[
                        messages.CreatePartitionsRequest.Topics.Assignments(broker_ids=b)
                        for b in (assignments or {}).get(t, [])
                    ]
                    or None,
                )
                for t, n in counts.items()
            ],
            timeout_ms=self._timeout_ms,
            validate_only=validate_only,
        )
        resp: messages.CreatePartitionsResponse = await conn.send(req, conn.version(req.API_KEY))
        out = {r.name: error_or_none(r.error_code, r.error_message) for r in resp.results}
        self._client.request_update()
        raise_first(out, raise_on_error)
        return out

    async def list_topics(self, internal: bool = False) -> dict[str, TopicDescription]:
        resp = await self._client.fetch_metadata(None, update=False)
        return {
            d.name: d
            for d in (self._describe(t.name, t) for t in resp.topics if t.name and not t.error_code)
            if internal or not d.is_internal
        }

    async def describe_topics(
        self, names: Iterable[str]
    ) -> dict[str, TopicDescription | KafkaError]:
        resp = await self._client.fetch_metadata(list(names), update=False)
        out: dict[str, TopicDescription | KafkaError] = {}
        for t in resp.topics:
            if t.name is None:  # asked by name: every answer has one
                continue
            if t.error_code:
                out[t.name] = error_for_code(t.error_code)(t.name)
            else:
                out[t.name] = self._describe(t.name, t)
        return out

    @staticmethod
    def _describe(name: str, t: messages.MetadataResponse.Topics) -> TopicDescription:
        return TopicDescription(
            name,
            t.topic_id,
            t.is_internal,
            sorted(
                (
                    PartitionInfo(
                        p.partition_index,
                        p.leader_id,
                        p.leader_epoch,
                        list(p.replica_nodes),
                        list(p.isr_nodes),
                    )
                    for p in t.partitions
                ),
                key=lambda p: p.partition,
            ),
        )
