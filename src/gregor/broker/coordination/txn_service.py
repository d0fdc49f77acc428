"""The transaction coordinator as a typed service for the handlers.

``TxnService`` runs ``TransactionCoordinator`` (``gregor.coordinator``) on the shared
``CoordinatorRuntime``; its state lives in ``__transaction_state`` and the coordinator epoch
of a partition is that partition's leader epoch. Besides writes and replies, this
coordinator's outbox holds marker requests: each becomes a COMMIT/ABORT control batch
appended to every partition of the transaction through the replica manager, and the results
go back to the coordinator once the high watermark of each partition covers its marker
(Kafka's ``requiredAcks = -1`` for markers: a stale leader's local append is no answer); on
one node that is at once, and the coordinator usually finishes a whole EndTxn in one pump.
New producer ids come from the broker's ``ProducerIdManager``; a block is reserved before
each request that may need one, so the state machine's synchronous ``generate`` never waits.

In a cluster (``routing`` set), markers for partitions led by other brokers go to their
leaders as WriteTxnMarkers and their results come back to the coordinator when the answers
arrive (then the runtime pumps again); a KIP-890 check for a producer whose coordinator is
another broker is asked of that broker.

Transactional writes that reach a partition leader without the producer's transaction running
there are checked with the coordinator (``check_transactional_write``), as Kafka's
``AddPartitionsToTxnManager`` does, by the operation the request's version allows: Produce
v12+ and TxnOffsetCommit v5+ come from transaction version 2 clients, which never send
AddPartitionsToTxn, so the leader has the coordinator *add* the partition (ADD_PARTITION);
older versions only *verify* it was added (answering TRANSACTION_ABORTABLE from Produce v11 and
TxnOffsetCommit v4 on, GENERIC_ERROR, and INVALID_TXN_STATE below, DEFAULT_ERROR). A
coordinator still completing the producer's previous transaction (CONCURRENT_TRANSACTIONS) is
asked again a few times after a short backoff before the producer is told to retry.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Sequence

from gregor.broker.channels.txn_routing import TxnRouting
from gregor.broker.common.topics import TXN_TOPIC
from gregor.broker.coordination.coordinator_runtime import (
    CoordinatorRuntime,
    InternalTopic,
    PartitionWriter,
    TopicCreator,
    wall_clock_ms,
)
from gregor.broker.coordination.producer_ids import ProducerIdManager
from gregor.coordinator.txn.coordinator import (
    EndTxnResult,
    InitProducerIdResult,
    MarkerWrite,
    TransactionCoordinator,
    TxnCoordinatorConfig,
    TxnDescription,
    TxnListing,
)
from gregor.coordinator.txn.types import TxnOperation
from gregor.protocol.errors import ErrorCode
from gregor.storage.producer_state import AppendOrigin

TXN_TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    "segment.bytes": "104857600",
    "compression.type": "uncompressed",
}

TopicPartition = tuple[str, int]

# Verification answers a producer should retry (KIP-890 maps coordinator trouble to a
# retriable produce error).
_RETRIABLE_VERIFY = frozenset(
    {
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.CONCURRENT_TRANSACTIONS,
        ErrorCode.NETWORK_EXCEPTION,
    }
)
#: Kafka's ``add.partitions.to.txn.retry.backoff.ms`` and its ``...max.ms``: how long a leader
#: keeps asking a coordinator that answers CONCURRENT_TRANSACTIONS.
ADD_PARTITIONS_RETRY_BACKOFF_S = 0.02
ADD_PARTITIONS_RETRY_MAX_S = 0.1


#: Appends one COMMIT/ABORT marker: (topic, partition, producer id, producer epoch, commit,
#: coordinator epoch) -> its error code, or an awaitable of it that ends once the high
#: watermark covers the marker (the replica manager's ``write_txn_marker``).
MarkerWriter = Callable[[str, int, int, int, bool, int], ErrorCode | Awaitable[ErrorCode]]


class TxnService(CoordinatorRuntime):
    def __init__(
        self,
        config: TxnCoordinatorConfig,
        replication_factor: int,
        producer_ids: ProducerIdManager,
        writer: PartitionWriter,
        markers: MarkerWriter,
        creator: TopicCreator,
        clock: Callable[[], int] = wall_clock_ms,
        transaction_version: Callable[[], int] = lambda: 0,
        session_confirmed: Callable[[], bool] = lambda: True,
    ) -> None:
        self.producer_ids = producer_ids
        self.write_marker = markers
        self.coordinator = TransactionCoordinator(
            config, producer_ids.generate, clock, transaction_version, session_confirmed
        )
        #: Set in a cluster: markers and verification that concern other brokers.
        self.routing: TxnRouting | None = None
        self._marker_tasks: set[asyncio.Task[None]] = set()
        topic = InternalTopic(
            TXN_TOPIC,
            config.num_partitions,
            replication_factor,
            TXN_TOPIC_CONFIGS,
            AppendOrigin.CLIENT,
        )
        super().__init__(
            "transactions",
            self.coordinator,
            topic,
            writer,
            creator,
            clock,
            on_effect=self._write_markers,
        )

    # --- the marker requests in the coordinator's outbox ---

    def _write_markers(self, m: MarkerWrite) -> None:
        """Each partition's marker through its leader: appended here now (the replica
        manager) or sent to another broker (WriteTxnMarkers). Either answers once the
        partition's high watermark covers the marker (Kafka's ``requiredAcks = -1``), so a
        leader that loses the partition before its followers have the marker fails it and the
        coordinator writes it again to the new leader. When every answer is known at once (one
        node, or in-sync replicas that are all here) the coordinator hears of them in this
        pump, as before."""
        routing = self.routing
        remote: dict[int, list[TopicPartition]] = {}
        results: dict[TopicPartition, int] = {}
        waiting: dict[TopicPartition, Awaitable[ErrorCode]] = {}
        for tp in m.partitions:
            if routing is not None and (leader := routing.leader_of(*tp)) != routing.node_id:
                remote.setdefault(leader, []).append(tp)
                continue
            code = self.write_marker(
                tp[0], tp[1], m.producer_id, m.producer_epoch, m.commit, m.coordinator_epoch
            )
            if isinstance(code, ErrorCode):
                results[tp] = int(code)
            else:
                waiting[tp] = code
        if not waiting and (not remote or routing is None):
            self.coordinator.markers_complete(m.id, results)
            return
        task = asyncio.create_task(self._await_markers(routing, m, remote, waiting, results))
        self._marker_tasks.add(task)
        task.add_done_callback(self._marker_tasks.discard)

    async def _await_markers(
        self,
        routing: TxnRouting | None,
        m: MarkerWrite,
        remote: dict[int, list[TopicPartition]],
        waiting: dict[TopicPartition, Awaitable[ErrorCode]],
        results: dict[TopicPartition, int],
    ) -> None:
        async def local() -> dict[TopicPartition, int]:
            codes = await asyncio.gather(*waiting.values())
            return {tp: int(code) for tp, code in zip(waiting, codes, strict=True)}

        asks: list[Awaitable[dict[TopicPartition, int]]] = [local()]
        if routing is not None:
            asks += [
                routing.write_markers(
                    leader, tps, m.producer_id, m.producer_epoch, m.commit, m.coordinator_epoch
                )
                for leader, tps in remote.items()
            ]
        answers = await asyncio.gather(*asks)
        for answer in answers:
            results.update(answer)
        self.coordinator.markers_complete(m.id, results)
        self.pump()

    async def stop(self) -> None:
        for task in list(self._marker_tasks):
            task.cancel()
        await asyncio.gather(*self._marker_tasks, return_exceptions=True)
        await super().stop()

    # --- lookups ---

    async def coordinator_error(self, transactional_id: str) -> ErrorCode:
        """FindCoordinator for a transactional id: NONE or the error to answer."""
        await self.ensure_topic()
        return ErrorCode(self.coordinator.partition_error(transactional_id))

    # --- requests ---

    async def init_producer_id(
        self, transactional_id: str, timeout_ms: int, producer_id: int, producer_epoch: int
    ) -> InitProducerIdResult:
        await self.producer_ids.reserve(2)
        c = self.coordinator
        return await self.call(
            c.init_producer_id, transactional_id, timeout_ms, producer_id, producer_epoch
        )

    async def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Sequence[TopicPartition],
        client_transaction_version: int = 0,
    ) -> ErrorCode:
        c = self.coordinator
        code = await self.call(
            c.add_partitions,
            transactional_id,
            producer_id,
            producer_epoch,
            list(partitions),
            client_transaction_version,
        )
        return ErrorCode(code)

    async def end_txn(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        client_transaction_version: int = 0,
    ) -> EndTxnResult:
        if client_transaction_version >= 2:
            await self.producer_ids.reserve(1)  # the epoch bump may exhaust the epoch
        c = self.coordinator
        return await self.call(
            c.end_txn,
            transactional_id,
            producer_id,
            producer_epoch,
            commit,
            client_transaction_version,
        )

    async def verify(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Sequence[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        """Whether each partition is in the producer's ongoing transaction (no write)."""
        await self.ensure_topic()
        found = self.coordinator.verify(
            transactional_id, producer_id, producer_epoch, list(partitions)
        )
        return {tp: ErrorCode(code) for tp, code in found.items()}

    async def verify_partition(
        self,
        transactional_id: str,
        topic: str,
        partition: int,
        producer_id: int,
        producer_epoch: int,
        *,
        add: bool = False,
    ) -> ErrorCode:
        """Whether (topic, partition) is in the producer's ongoing transaction, asked of this
        broker's coordinator or, in a cluster, of the broker that coordinates
        ``transactional_id`` (AddPartitionsToTxn v4, verify only): NONE or the error. With
        ``add`` (transaction version 2) the coordinator adds the partition instead."""
        routing = self.routing
        if routing is not None:
            coordinator = routing.leader_of(
                TXN_TOPIC, self.coordinator.partition_for(transactional_id)
            )
            if coordinator != routing.node_id:
                if coordinator < 0:
                    return ErrorCode.COORDINATOR_NOT_AVAILABLE
                return await routing.verify(
                    coordinator,
                    transactional_id,
                    producer_id,
                    producer_epoch,
                    topic,
                    partition,
                    verify_only=not add,
                )
        tp = (topic, partition)
        if add:
            return await self.add_partitions(transactional_id, producer_id, producer_epoch, [tp], 2)
        return (await self.verify(transactional_id, producer_id, producer_epoch, [tp]))[tp]

    async def check_transactional_write(
        self,
        transactional_id: str,
        topic: str,
        partition: int,
        producer_id: int,
        producer_epoch: int,
        operation: TxnOperation,
    ) -> ErrorCode:
        """A transactional write to (topic, partition) that would start the producer's
        transaction there: have the coordinator verify the partition is in it (or add it,
        for ADD_PARTITION); NONE, or the coordinator's answer as the writer sees it
        (PRODUCER_FENCED as INVALID_PRODUCER_EPOCH; not in the transaction by ``operation``;
        retriable trouble left as it is)."""
        add = operation is TxnOperation.ADD_PARTITION
        loop = asyncio.get_running_loop()
        deadline = loop.time() + ADD_PARTITIONS_RETRY_MAX_S
        while True:
            code = await self.verify_partition(
                transactional_id, topic, partition, producer_id, producer_epoch, add=add
            )
            if code != ErrorCode.CONCURRENT_TRANSACTIONS or loop.time() >= deadline:
                break
            await asyncio.sleep(ADD_PARTITIONS_RETRY_BACKOFF_S)
        if code == ErrorCode.PRODUCER_FENCED:
            return ErrorCode.INVALID_PRODUCER_EPOCH
        if code in (ErrorCode.INVALID_TXN_STATE, ErrorCode.TRANSACTION_ABORTABLE):
            if operation is TxnOperation.DEFAULT_ERROR:
                return ErrorCode.INVALID_TXN_STATE
            return ErrorCode.TRANSACTION_ABORTABLE
        return code

    async def verify_produce(
        self,
        transactional_id: str,
        topic: str,
        partition: int,
        producer_id: int,
        producer_epoch: int,
        operation: TxnOperation | None = None,
    ) -> ErrorCode:
        """KIP-890 for a transactional batch that starts a transaction on a partition: NONE
        if the partition is (now) in the producer's transaction, else the Produce error to
        answer (coordinator trouble as the retriable NOT_ENOUGH_REPLICAS, as Kafka does for
        clients that would not retry the coordinator's own errors)."""
        code = await self.check_transactional_write(
            transactional_id,
            topic,
            partition,
            producer_id,
            producer_epoch,
            TxnOperation.DEFAULT_ERROR if operation is None else operation,
        )
        if code in _RETRIABLE_VERIFY:
            return ErrorCode.NOT_ENOUGH_REPLICAS
        return code

    async def describe(self, transactional_ids: Iterable[str]) -> list[TxnDescription]:
        await self.ensure_topic()
        return self.coordinator.describe(transactional_ids)

    async def list_transactions(
        self, states: Sequence[str], producer_ids: Sequence[int], duration_ms: int
    ) -> tuple[ErrorCode, list[str], list[TxnListing]]:
        await self.ensure_topic()
        code, unknown, listing = self.coordinator.list_transactions(
            states, producer_ids, duration_ms
        )
        return ErrorCode(code), list(unknown), listing
