"""The partitions this broker hosts, and the only path for appends and reads.

Theory of operation. The ``ReplicaManager`` owns one ``Partition`` per hosted partition
(Kafka's ``ReplicaManager``). The metadata publisher calls ``become_leader`` /
``become_follower`` / ``stop_replicas`` as the metadata image changes; everything else goes
through this class:

* **Produce** (``append_records``): Kafka's checks of the request's records come first (one
  v2 batch from Produce v3 on, base offset 0, known codecs; ``produce_validation``), legacy
  message sets are up-converted to RecordBatch v2, a transactional batch that would start a
  transaction is verified with the transaction coordinator first (KIP-890), a compressed batch
  is decompressed and its records walked (``validator.scan_batches``; one that inflates past
  ``INLINE_DECOMPRESSED_BYTES`` in a worker thread, so a decompression bomb does not stall the
  event loop), each partition is appended by its ``Partition`` (the record checks, offsets and
  leader epoch are the log's and the partition's business; errors with KIP-467's record errors
  come back as such), and acks=-1 waits until the high watermark covers the batch (the
  produce purgatory) or the request times out. On one node the ISR is this broker, so that
  wait ends at once.
* **Coordinator writes** (``append_internal`` / ``committed``, the coordinators'
  ``PartitionWriter``) and **transaction markers** (``write_txn_marker``) take the same
  partition path; a marker is answered once the high watermark covers it (Kafka's
  ``requiredAcks = -1`` for WriteTxnMarkers). Listeners registered with ``on_txn_marker`` hear
  of every such marker (the group coordinator turns pending transactional offsets into
  committed ones).
* **Fetch** (``fetch``; its parameters and results are ``fetch_params``): reads every
  requested partition; if fewer than ``min_bytes`` are ready it parks one future on each
  partition's waiters and reads again when any of them moves (high watermark for consumers,
  log end offset for followers) or ``max_wait_ms`` passes (the fetch purgatory). A fetch from
  a follower also reports its position to the partition, which may move the high watermark.

Everything runs on the broker's event loop. Whether an absent partition is unknown or simply
led elsewhere is read from the current metadata image.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from gregor.broker.common.errors import code_of, kafka_error, message_of
from gregor.broker.common.file_send import SendableRegion
from gregor.broker.common.topics import INTERNAL_TOPICS
from gregor.broker.replication.fetch_params import (
    FetchParams,
    FetchPartition,
    convert_all,
    drop_partial_tail,
    nothing_to_read,
)
from gregor.broker.replication.log_dir_moves import LogDirMoves
from gregor.broker.replication.partition import Partition
from gregor.broker.replication.produce_validation import (
    check_batches,
    scan_compressed,
    upconvert_legacy,
)
from gregor.broker.replication.schema_id_validator import SchemaIdValidator
from gregor.cluster.image import MetadataImage
from gregor.coordinator.txn.types import TxnOperation
from gregor.protocol.errors import (
    CorruptMessageError,
    ErrorCode,
    InvalidTopicError,
    KafkaError,
    NotLeaderOrFollowerError,
    RequestTimedOutError,
    UnknownTopicOrPartitionError,
)
from gregor.protocol.exceptions import ProtocolError
from gregor.protocol.records.header import (
    HEADER_SIZE,
    peek_magic,
    read_header,
)
from gregor.storage.errors import RecordError
from gregor.storage.log import Log
from gregor.storage.log_info import LogAppendInfo
from gregor.storage.manager import LogManager
from gregor.storage.producer_state import AppendOrigin
from gregor.storage.validator import ScannedBatch

log = logging.getLogger("gregor.broker.replica_manager")

TopicPartition = tuple[str, int]
#: How long a transaction marker waits for the high watermark (Kafka uses the broker's
#: ``request.timeout.ms``, 30 s by default).
MARKER_TIMEOUT_MS = 30_000


class TransactionVerifier(Protocol):
    """KIP-890: may this transactional batch start a transaction on this partition? (With
    ``operation`` ADD_PARTITION, transaction version 2: the coordinator adds it.)"""

    async def verify_produce(
        self,
        transactional_id: str,
        topic: str,
        partition: int,
        producer_id: int,
        producer_epoch: int,
        operation: TxnOperation | None,
    ) -> ErrorCode: ...


class FollowerFetchers(Protocol):
    """Keeps this broker's follower partitions fetching from their leaders
    (``gregor.broker.replication.replica_fetcher``)."""

    def follow(self, partition: Partition, *, truncate: bool) -> None: ...

    def unfollow(self, partition: Partition) -> None: ...


AlterIsr = Callable[[Partition, tuple[int, ...]], None]

TxnMarkerListener = Callable[[str, int, int, bool], None]  # topic, partition, producer id, commit


@dataclass(slots=True)
class ProduceResult:
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    info: LogAppendInfo | None = None
    #: KIP-467: (batch_index, message) of each record at fault in a refused batch.
    record_errors: list[RecordError] = field(default_factory=list)


class ReplicaManager:
    def __init__(self, node_id: int, logs: LogManager, image: Callable[[], MetadataImage]) -> None:
        self.node_id = node_id
        self.logs = logs
        self._image = image
        self.partitions: dict[TopicPartition, Partition] = {}
        #: [ISR shrinks, ISR expansions] of the partitions led here (the broker's metrics).
        self.isr_changes: list[int] = [0, 0]
        self.stopping = False
        self.transactions: TransactionVerifier | None = None
        self._marker_listeners: list[TxnMarkerListener] = []
        #: In a cluster: the follower fetchers, and how a leader asks for a new ISR.
        self.fetchers: FollowerFetchers | None = None
        self.alter_isr: AlterIsr | None = None
        self.log_dir_moves = LogDirMoves(logs, self.partitions)
        #: The leader's schema ID validation of produced records (``schema_id_validator``).
        self.schema_ids: SchemaIdValidator | None = None

    # --- lifecycle, driven by the metadata publisher ---

    def become_leader(
        self,
        topic: str,
        index: int,
        *,
        topic_id: uuid.UUID,
        leader_epoch: int,
        partition_epoch: int,
        replicas: Sequence[int],
        isr: Sequence[int],
        min_insync_replicas: int,
    ) -> Partition:
        partition = self._partition_for_hosting(topic, index, topic_id)
        partition.min_insync_replicas = min_insync_replicas
        if self.fetchers is not None and not partition.is_leader:
            self.fetchers.unfollow(partition)
        partition.make_leader(leader_epoch, partition_epoch, replicas, isr)
        return partition

    def become_follower(
        self,
        topic: str,
        index: int,
        *,
        topic_id: uuid.UUID,
        leader: int,
        leader_epoch: int,
        partition_epoch: int,
        replicas: Sequence[int],
    ) -> Partition:
        partition = self._partition_for_hosting(topic, index, topic_id)
        # A new leader (or epoch) means our log may have diverged from it: truncate first.
        changed = partition.is_leader or (partition.leader_id, partition.leader_epoch) != (
            leader,
            leader_epoch,
        )
        partition.make_follower(leader, leader_epoch, partition_epoch, replicas)
        if self.fetchers is not None:
            if leader >= 0:
                self.fetchers.follow(partition, truncate=changed)
            else:
                self.fetchers.unfollow(partition)
        return partition

    def _partition_for_hosting(self, topic: str, index: int, topic_id: uuid.UUID) -> Partition:
        partition = self.partitions.get((topic, index))
        if partition is None:
            log = self.logs.get_or_create_log(topic, index)
            partition = Partition(topic, index, topic_id, log, self.node_id)
            partition.alter_isr = self.alter_isr
            partition.isr_changes = self.isr_changes
            self.partitions[(topic, index)] = partition
        return partition

    def stop_replicas(
        self, topic: str, indexes: Iterable[int], *, delete: bool, topic_deleted: bool = False
    ) -> None:
        """Stop hosting (and with ``delete``, remove the logs of) these partitions. Produces
        waiting for acks=all get UNKNOWN_TOPIC_OR_PARTITION when the topic was deleted, else
        NOT_LEADER_OR_FOLLOWER (the replica moved away: the client retries on the leader)."""
        for index in indexes:
            partition = self.partitions.pop((topic, index), None)
            if partition is not None:
                if self.fetchers is not None:
                    self.fetchers.unfollow(partition)
                gone: KafkaError = (
                    UnknownTopicOrPartitionError(f"Topic {topic} was deleted.")
                    if topic_deleted
                    else NotLeaderOrFollowerError(
                        f"{topic}-{index} is no longer hosted on this broker."
                    )
                )
                partition.release_waiters(gone)
            if delete:
                self.logs.delete_log(topic, index)

    def alter_log_dir(self, topic: str, index: int, log_dir: str) -> ErrorCode:
        """AlterReplicaLogDirs for one partition (``log_dir_moves``): REPLICA_NOT_AVAILABLE
        when this broker does not host it."""
        partition = self.partitions.get((topic, index))
        if partition is None:
            return ErrorCode.REPLICA_NOT_AVAILABLE
        return self.log_dir_moves.start(partition, log_dir)

    def shutdown(self) -> None:
        """Wake every waiting fetch and produce: they answer with what they have."""
        self.stopping = True
        for partition in self.partitions.values():
            partition.release_waiters()

    def shrink_isrs(self, max_lag_ms: int) -> None:
        """Ask to drop the followers that have lagged for ``max_lag_ms`` from each ISR we lead."""
        now_ms = int(time.time() * 1000)
        for partition in self.partitions.values():
            if partition.is_leader and len(partition.isr) > 1:
                partition.shrink_isr(now_ms, max_lag_ms)

    # --- lookups ---

    def get_partition(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    def local_log(self, topic: str, index: int) -> Log | None:
        partition = self.partitions.get((topic, index))
        return partition.log if partition is not None else None

    def leader_partition(self, topic: str, index: int) -> Partition:
        """The partition if this broker leads it; raises UNKNOWN_TOPIC_OR_PARTITION or
        NOT_LEADER_OR_FOLLOWER otherwise."""
        partition = self.partitions.get((topic, index))
        if partition is not None and partition.is_leader:
            return partition
        if self._image().partition(topic, index) is None:
            raise UnknownTopicOrPartitionError(f"This server does not host {topic}-{index}.")
        raise NotLeaderOrFollowerError(f"This broker is not the leader of {topic}-{index}.")

    # --- produce ---

    async def append_records(
        self,
        entries: Sequence[tuple[str, int, bytes | bytearray | memoryview | None]],
        *,
        required_acks: int,
        timeout_ms: int,
        transactional_id: str | None = None,
        version: int = 11,
        txn_operation: TxnOperation | None = None,
    ) -> list[ProduceResult]:
        """Append each (topic, partition, records); acks=-1 waits for the high watermark.
        ``version``: the Produce request's (zstd needs v7, KIP-110; v3 and later carry exactly
        one v2 batch per partition); ``txn_operation`` is what the Produce version lets KIP-890
        do about a partition not yet in the transaction (``txn_service.TxnOperation``; None:
        verify, Produce v10's)."""
        results: list[ProduceResult] = []
        waits: list[tuple[ProduceResult, asyncio.Future[None]]] = []
        for topic, index, records in entries:
            result = ProduceResult()
            results.append(result)
            try:
                partition = self.leader_partition(topic, index)
                if records is None or len(records) == 0:
                    raise CorruptMessageError("empty record set")
                data, scanned = await self._prepare(
                    partition, records, transactional_id, version, txn_operation
                )
                # No copy: the log stamps offsets into a writable buffer in place and copies
                # (or writes in two pieces) a read-only one such as a slice of the request.
                result.info = partition.append_as_leader(
                    data, AppendOrigin.CLIENT, required_acks, scanned
                )
            except (KafkaError, ProtocolError) as e:
                result.error, result.message = code_of(e), message_of(e)
                result.record_errors = getattr(e, "record_errors", None) or []
                continue
            if required_acks == -1:
                waits.append(
                    (
                        result,
                        partition.wait_for_high_watermark(
                            result.info.last_offset + 1, min_isr=True
                        ),
                    )
                )
        if waits:
            await self._await_acks(waits, timeout_ms)
        return results

    async def _prepare(
        self,
        partition: Partition,
        records: bytes | bytearray | memoryview,
        transactional_id: str | None,
        version: int,
        txn_operation: TxnOperation | None = None,
    ) -> tuple[bytes | bytearray | memoryview, list[ScannedBatch] | None]:
        """Client records as the log takes them and, for compressed ones, their batches
        already decompressed and walked; or the error (Kafka's checks before the log's own:
        internal topics, the request's records (``ProduceRequest.validateRecords`` and the
        base offset), codecs, KIP-890 verification)."""
        if partition.topic in INTERNAL_TOPICS:
            raise InvalidTopicError(f"Cannot append to internal topic {partition.topic}")
        if peek_magic(records) < 2:
            limit = max(partition.log.config.max_message_bytes * 4, 1 << 26)
            converted = upconvert_legacy(records, version, limit)
            if self.schema_ids is not None:
                await self.schema_ids.check(partition.topic, converted, None)
            return converted, None
        compressed = check_batches(partition.topic, partition.index, records, version)
        if (
            transactional_id is not None
            and self.transactions is not None
            and len(records) >= HEADER_SIZE
        ):
            h = read_header(records)
            if (
                h.is_transactional
                and h.producer_id >= 0
                and not partition.has_ongoing_transaction(h.producer_id, h.producer_epoch)
            ):
                code = await self.transactions.verify_produce(
                    transactional_id,
                    partition.topic,
                    partition.index,
                    h.producer_id,
                    h.producer_epoch,
                    txn_operation,
                )
                if code:
                    raise kafka_error(code, f"transaction verification failed: {code.name}")
        scanned = await scan_compressed(records) if compressed else None
        if self.schema_ids is not None:  # Confluent Server's schema ID validation
            await self.schema_ids.check(partition.topic, records, scanned)
        return records, scanned

    @staticmethod
    async def _await_acks(
        waits: list[tuple[ProduceResult, asyncio.Future[None]]], timeout_ms: int
    ) -> None:
        pending = [f for _, f in waits if not f.done()]
        if pending:
            await asyncio.wait(pending, timeout=max(timeout_ms, 0) / 1000.0)
        for result, fut in waits:
            if not fut.done():
                fut.cancel()
                result.error = ErrorCode.REQUEST_TIMED_OUT
                result.message = str(RequestTimedOutError("acks=all timed out waiting for the ISR"))
            elif fut.exception() is not None:
                exc = fut.exception()
                assert exc is not None
                result.error, result.message = code_of(exc), message_of(exc)

    # --- coordinator writes and transaction markers ---

    def append_internal(
        self, topic: str, index: int, records: bytes | bytearray | memoryview, origin: AppendOrigin
    ) -> LogAppendInfo:
        """A coordinator's write (``PartitionWriter.append``); raises on failure."""
        return self.leader_partition(topic, index).append_as_leader(records, origin)

    def committed(self, topic: str, index: int, offset: int) -> asyncio.Future[None]:
        """Done once the partition's high watermark reaches ``offset`` (the write is then
        on every in-sync replica)."""
        return self.leader_partition(topic, index).wait_for_high_watermark(offset)

    def on_txn_marker(self, listener: TxnMarkerListener) -> None:
        self._marker_listeners.append(listener)

    def write_txn_marker(
        self,
        topic: str,
        index: int,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
        timeout_ms: int = MARKER_TIMEOUT_MS,
    ) -> ErrorCode | Awaitable[ErrorCode]:
        """Append a COMMIT/ABORT marker to one partition now; its error code, at once when
        it is known (an error, or a high watermark that already covers the marker, as on one
        node) or else as an awaitable that ends when the high watermark covers it.

        Kafka's ``handleWriteTxnMarkersRequest`` appends with ``requiredAcks = -1``: a leader
        that loses the partition before its followers have the marker (a stale leader that
        is partitioned away or was paused) answers NOT_LEADER_OR_FOLLOWER, or
        REQUEST_TIMED_OUT, and the coordinator writes the marker again to the new leader
        (answered at the local append, the producer's next transaction's marker commits
        records the new leader never saw aborted: chaos scenario stale-leader-marker)."""
        try:
            partition = self.leader_partition(topic, index)
            info = partition.append_txn_marker(
                producer_id, producer_epoch, commit, coordinator_epoch
            )
        except KafkaError as e:
            return code_of(e)
        end = info.last_offset + 1
        if partition.log.high_watermark >= end:
            self._marker_written(topic, index, producer_id, commit)
            return ErrorCode.NONE
        return self._marker_replicated(partition, end, timeout_ms, producer_id, commit)

    async def _marker_replicated(
        self, partition: Partition, end: int, timeout_ms: int, producer_id: int, commit: bool
    ) -> ErrorCode:
        try:
            await asyncio.wait_for(
                partition.wait_for_high_watermark(end), max(timeout_ms, 0) / 1000.0
            )
        except TimeoutError:
            return ErrorCode.REQUEST_TIMED_OUT
        except KafkaError as e:
            return code_of(e)
        if not partition.is_leader or partition.log.high_watermark < end:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER  # released by a leadership change
        self._marker_written(partition.topic, partition.index, producer_id, commit)
        return ErrorCode.NONE

    def _marker_written(self, topic: str, index: int, producer_id: int, commit: bool) -> None:
        for listener in self._marker_listeners:
            listener(topic, index, producer_id, commit)

    # --- fetch ---

    async def fetch(self, parts: list[FetchPartition], params: FetchParams) -> None:
        """Fill in each part; wait for ``min_bytes`` up to ``max_wait_ms`` (long poll)."""
        deadline = time.monotonic() + max(params.max_wait_ms, 0) / 1000.0
        if params.from_follower:
            now_ms = int(time.time() * 1000)
            for part in parts:
                p = self.partitions.get((part.topic, part.index))
                if p is not None and p.is_leader:
                    p.update_follower(params.replica_id, part.fetch_offset, now_ms)
        while True:
            total = self._read_all(parts, params)
            remaining = deadline - time.monotonic()
            hosted = [
                p
                for part in parts
                if not part.error
                and (p := self.partitions.get((part.topic, part.index))) is not None
            ]
            hung_up = params.hung_up is not None and params.hung_up.done()
            if (
                total >= params.min_bytes
                or remaining <= 0
                or not hosted
                or self.stopping
                or hung_up
                or any(part.error for part in parts)
            ):
                if params.convert is not None:
                    await convert_all(parts, params)
                return
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            for p in hosted:
                p.add_waiter(fut, params.from_follower)
            waits: set[asyncio.Future[None]] = {fut}
            if params.hung_up is not None:
                waits.add(params.hung_up)
            try:
                await asyncio.wait(waits, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for p in hosted:
                    p.remove_waiter(fut)

    def _replica_in_rack(self, partition: Partition, rack: str) -> int:
        """Kafka's RackAwareReplicaSelector: -1 (read here) when this leader is in ``rack`` or
        no live in-sync replica is; else such a replica, the most caught up first."""
        image = self._image()
        brokers = image.brokers
        mine = brokers.get(self.node_id)
        if mine is None or mine.rack == rack:
            return -1
        candidates = [
            r
            for r in partition.isr
            if r != self.node_id
            and (b := brokers.get(r)) is not None
            and not b.fenced
            and b.rack == rack
        ]
        if not candidates:
            return -1
        return max(
            candidates,
            key=lambda r: partition.followers[r].log_end_offset if r in partition.followers else -1,
        )

    def _read_all(self, parts: list[FetchPartition], params: FetchParams) -> int:
        total = 0
        first_with_data = True
        regions = params.sendfile and params.convert is None
        for part in parts:
            part.error = part.preset_error  # e.g. an unknown topic id: nothing to read
            if type(part.records) is SendableRegion:  # an earlier pass of a long poll
                part.records.close()
            part.records, part.aborted_transactions, part.size = None, None, 0
            part.high_watermark = part.last_stable_offset = part.log_start_offset = -1
            if part.error:
                continue
            partition = self.partitions.get((part.topic, part.index))
            if partition is None:
                part.error = params.unknown_error
                continue
            if not partition.is_leader and not (params.follower_read and partition.leader_id >= 0):
                part.error = ErrorCode.NOT_LEADER_OR_FOLLOWER
                continue
            if params.from_follower and params.replica_id not in partition.followers:
                # Kafka's answer to a replica fetch from a broker that is not a follower here.
                part.error = ErrorCode.NOT_LEADER_OR_FOLLOWER
                continue
            fenced = partition.check_epoch(part.current_leader_epoch)
            if fenced:
                part.error = fenced
                continue
            if params.client_rack is not None and partition.is_leader:
                preferred = self._replica_in_rack(partition, params.client_rack)
                if preferred >= 0:
                    # KIP-392: no records from here; the consumer goes to ``preferred``.
                    part.preferred_read_replica = preferred
                    nothing_to_read(part, partition.log)
                    continue
            if params.from_follower and part.fetch_offset == partition.log.log_end_offset:
                # A follower that has everything: nothing to read (most partitions, most times).
                nothing_to_read(part, partition.log)
                continue
            limit = min(part.max_bytes, params.max_bytes - total)
            try:
                read = partition.read(
                    part.fetch_offset,
                    limit,
                    isolation=params.isolation,
                    from_follower=params.from_follower,
                    min_one=first_with_data,
                    region=regions,
                )
            except KafkaError as e:  # the log's errors (OFFSET_OUT_OF_RANGE, ...)
                part.error = code_of(e)
                part.high_watermark = partition.log.high_watermark
                part.log_start_offset = partition.log.log_start_offset
                continue
            records: bytes | memoryview | SendableRegion | None = read.records
            if read.region is not None:
                records = read.region
            if records is not None and len(records) >= limit:
                records = drop_partial_tail(records)
            n = len(records) if records is not None else 0
            if n:
                first_with_data = False
                total += n
            part.records = records if records is not None else b""
            part.size = n
            part.high_watermark = read.high_watermark
            part.last_stable_offset = read.last_stable_offset
            part.log_start_offset = read.log_start_offset
            part.aborted_transactions = read.aborted_transactions
        return total
