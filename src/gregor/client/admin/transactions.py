"""Transactions: ListTransactions, DescribeTransactions, DescribeProducers, a hanging
transaction's abort marker (WriteTxnMarkers, Kafka's ``Admin.abortTransaction``), and ending
transactions other processes began (EndTxn through the producer's ``end_transaction``)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from gregor.client.admin.base import AdminBase, raise_first
from gregor.client.admin.types import TransactionDescription
from gregor.client.core.errors import UnsupportedForBrokerError, error_for_code
from gregor.client.core.metadata import TopicPartition
from gregor.client.producer.transaction_manager import TransactionHandle, end_transaction
from gregor.protocol import messages
from gregor.protocol.errors import KafkaError


class TransactionsApi(AdminBase):
    """The admin client's transaction calls."""

    async def list_transactions(
        self,
        states: Iterable[str] = (),
        producer_ids: Iterable[int] = (),
        min_duration_ms: int = -1,
    ) -> list[tuple[str, int, int, str]]:
        """(transactional id, coordinator node, producer id, state) from every broker's
        transaction coordinator, filtered as ListTransactions filters."""
        meta = await self._client.fetch_metadata([])
        out: list[tuple[str, int, int, str]] = []
        for node in sorted(b.node_id for b in meta.brokers):
            conn = await self._client.connection(node)
            req = messages.ListTransactionsRequest(
                state_filters=list(states),
                producer_id_filters=list(producer_ids),
                duration_filter=min_duration_ms,
            )
            version = conn.version(req.API_KEY)
            if min_duration_ms >= 0 and version < 1:
                raise UnsupportedForBrokerError("a duration filter needs ListTransactions v1")
            resp: messages.ListTransactionsResponse = await conn.send(req, version)
            if resp.error_code:
                raise error_for_code(resp.error_code)()
            out.extend(
                (t.transactional_id, node, t.producer_id, t.transaction_state)
                for t in resp.transaction_states
            )
        return sorted(out)

    async def describe_transactions(
        self, transactional_ids: Iterable[str]
    ) -> dict[str, TransactionDescription | KafkaError]:
        """Per transactional id: its coordinator's view (state, producer id and epoch, timeout,
        start time, partitions in the transaction), or the error."""
        out: dict[str, TransactionDescription | KafkaError] = {}
        for tid in transactional_ids:
            try:
                node = await self._client.find_coordinator(tid, 1)
            except KafkaError as e:
                out[tid] = e
                continue
            conn = await self._client.connection(node)
            req = messages.DescribeTransactionsRequest(transactional_ids=[tid])
            resp: messages.DescribeTransactionsResponse = await conn.send(
                req, conn.version(req.API_KEY)
            )
            for t in resp.transaction_states:
                if t.error_code:
                    out[t.transactional_id] = error_for_code(t.error_code)(t.transactional_id)
                    continue
                out[t.transactional_id] = {
                    "coordinator": node,
                    "state": t.transaction_state,
                    "producer_id": t.producer_id,
                    "producer_epoch": t.producer_epoch,
                    "timeout_ms": t.transaction_timeout_ms,
                    "start_time_ms": t.transaction_start_time_ms,
                    "partitions": sorted((tp.topic, p) for tp in t.topics for p in tp.partitions),
                }
        return out

    async def describe_producers(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, list[dict[str, int]] | KafkaError]:
        """Per partition, the active producers its leader keeps (id, epoch, last sequence and
        timestamp, coordinator epoch, the start offset of an open transaction or -1)."""
        wanted = [TopicPartition(*tp) for tp in partitions]
        meta = await self._client.fetch_metadata(sorted({tp.topic for tp in wanted}))
        leaders = {
            (t.name, p.partition_index): p.leader_id for t in meta.topics for p in t.partitions
        }
        out: dict[TopicPartition, list[dict[str, int]] | KafkaError] = {}
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in wanted:
            leader = leaders.get((tp.topic, tp.partition), -1)
            if leader < 0:
                out[tp] = error_for_code(3)(f"{tp.topic}-{tp.partition}")
            else:
                by_leader.setdefault(leader, []).append(tp)
        for leader, tps in by_leader.items():
            conn = await self._client.connection(leader)
            topics: dict[str, list[int]] = {}
            for tp in tps:
                topics.setdefault(tp.topic, []).append(tp.partition)
            req = messages.DescribeProducersRequest(
                topics=[
                    messages.DescribeProducersRequest.Topics(name=t, partition_indexes=ps)
                    for t, ps in topics.items()
                ]
            )
            resp: messages.DescribeProducersResponse = await conn.send(
                req, conn.version(req.API_KEY)
            )
            for t in resp.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    if p.error_code:
                        out[tp] = error_for_code(p.error_code)(p.error_message)
                        continue
                    out[tp] = [
                        {
                            "producer_id": a.producer_id,
                            "producer_epoch": a.producer_epoch,
                            "last_sequence": a.last_sequence,
                            "last_timestamp": a.last_timestamp,
                            "coordinator_epoch": a.coordinator_epoch,
                            "current_txn_start_offset": a.current_txn_start_offset,
                        }
                        for a in p.active_producers
                    ]
        return out

    async def abort_transaction(
        self,
        partition: TopicPartition,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
    ) -> None:
        """Write an abort marker for a producer's open transaction on one partition (Kafka's
        ``Admin.abortTransaction``, for a transaction its coordinator has lost: a hanging one).
        Needs CLUSTER_ACTION; raises the partition's error."""
        tp = TopicPartition(*partition)
        meta = await self._client.fetch_metadata([tp.topic])
        leader = next(
            (
                p.leader_id
                for t in meta.topics
                if t.name == tp.topic
                for p in t.partitions
                if p.partition_index == tp.partition
            ),
            -1,
        )
        if leader < 0:
            raise error_for_code(3)(f"{tp.topic}-{tp.partition}")
        conn = await self._client.connection(leader)
        req = messages.WriteTxnMarkersRequest(
            markers=[
                messages.WriteTxnMarkersRequest.Markers(
                    producer_id=producer_id,
                    producer_epoch=producer_epoch,
                    transaction_result=False,
                    topics=[
                        messages.WriteTxnMarkersRequest.Markers.Topics(
                            name=tp.topic, partition_indexes=[tp.partition]
                        )
                    ],
                    coordinator_epoch=coordinator_epoch,
                )
            ]
        )
        resp: messages.WriteTxnMarkersResponse = await conn.send(req, conn.version(req.API_KEY))
        for m in resp.markers:
            for t in m.topics:
                for p in t.partitions:
                    if p.error_code:
                        raise error_for_code(p.error_code)(f"{t.name}-{p.partition_index}")

    async def end_transactions(
        self,
        handles: Iterable[TransactionHandle],
        commit: bool,
        *,
        timeout: float | None = None,
        raise_on_error: bool = False,
    ) -> dict[TransactionHandle, KafkaError | None]:
        """Commit or abort, all at once, transactions other producers began (``end_transaction``)."""
        hs = [TransactionHandle(*h) for h in handles]
        got = await asyncio.gather(
            *(end_transaction(self._client, h, commit, timeout=timeout) for h in hs),
            return_exceptions=True,
        )
        if bad := [
            r for r in got if isinstance(r, BaseException) and not isinstance(r, KafkaError)
        ]:
            raise bad[0]
        out: dict[TransactionHandle, KafkaError | None] = {
            h: r if isinstance(r, KafkaError) else None for h, r in zip(hs, got, strict=True)
        }
        raise_first(out, raise_on_error)
        return out
