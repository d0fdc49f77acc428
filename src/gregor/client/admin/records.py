"""Records and offsets: DeleteRecords and ListOffsets, each sent to the partitions' leaders."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from gregor.client.admin.base import AdminBase, raise_first
from gregor.client.consumer.consumer import EARLIEST, LATEST, list_offsets
from gregor.client.core.errors import error_for_code
from gregor.client.core.metadata import TopicPartition
from gregor.protocol import messages
from gregor.protocol.errors import KafkaError


class RecordsApi(AdminBase):
    """The admin client's record and offset calls."""

    async def delete_records(
        self, before: Mapping[TopicPartition, int], *, raise_on_error: bool = False
    ) -> dict[TopicPartition, int | KafkaError]:
        """Delete records below the given offsets (-1: the high watermark); returns low watermarks."""
        cluster = self._client.cluster
        topics = {tp.topic for tp in before}
        self._client.add_topics(topics)
        await self._client.refresh_metadata()
        if any(cluster.leader_for(TopicPartition(*tp)) < 0 for tp in before):
            # the refresh may have joined one sent before the partition existed (a partition
            # just added): ask once more, with a request sent now
            await self._client.fetch_metadata(sorted(topics))
        by_node: dict[int, dict[TopicPartition, int]] = {}
        out: dict[TopicPartition, int | KafkaError] = {}
        for tp, off in before.items():
            tp = TopicPartition(*tp)
            node = cluster.leader_for(tp)
            if node < 0:
                out[tp] = error_for_code(3)(str(tp))
                continue
            by_node.setdefault(node, {})[tp] = off

        async def one(node: int, q: dict[TopicPartition, int]) -> None:
            conn = await self._client.connection(node)
            topics: dict[str, list[messages.DeleteRecordsRequest.Topics.Partitions]] = {}
            for tp, off in q.items():
                topics.setdefault(tp.topic, []).append(
                    messages.DeleteRecordsRequest.Topics.Partitions(
                        partition_index=tp.partition, offset=off
                    )
                )
            req = messages.DeleteRecordsRequest(
                topics=[
                    messages.DeleteRecordsRequest.Topics(name=t, partitions=ps)
                    for t, ps in topics.items()
                ],
                timeout_ms=self._timeout_ms,
            )
            resp: messages.DeleteRecordsResponse = await conn.send(req, conn.version(req.API_KEY))
            for t in resp.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    out[tp] = (
                        error_for_code(p.error_code)(str(tp)) if p.error_code else p.low_watermark
                    )

        await asyncio.gather(*(one(n, q) for n, q in by_node.items()))
        raise_first(out, raise_on_error)
        return out

    async def list_offsets(
        self, specs: Mapping[TopicPartition, int | str], *, isolation_level: int = 0
    ) -> dict[TopicPartition, tuple[int | None, int]]:
        """Offsets by spec: "earliest", "latest", or a timestamp in ms."""
        q = {}
        for tp, spec in specs.items():
            if spec == "earliest":
                q[TopicPartition(*tp)] = EARLIEST
            elif spec == "latest":
                q[TopicPartition(*tp)] = LATEST
            else:
                q[TopicPartition(*tp)] = int(spec)
        r = await list_offsets(self._client, q, isolation_level, self._timeout_ms / 1000)
        return {tp: (v[0], v[1]) for tp, v in r.items()}
