"""The transaction coordinator as a state machine without I/O.

Theory of operation. Every transactional id lives in one partition of ``__transaction_state``
(``partition_for``: Kafka's hash of the id); the coordinator serves an id only while that
partition is active (loaded). Its inputs are requests (each with an opaque ``token``),
completions of the work it asked for, batches of ``__transaction_state`` read back at load,
and the passing of time (``tick``). Its outputs wait in the shared outbox
(``coordinator.common.outbox``) drained with ``take()``:

* writes - a RecordBatch to append to ``__transaction_state``; the caller reports
  ``write_complete(id, error_code)``. A state change is applied only once its record is
  written, and the reply that depends on it is sent then.
* effects, each a ``MarkerWrite(id, ...)`` - COMMIT or ABORT markers to write to the listed
  partitions with the producer's id and epoch and the coordinator epoch; the caller reports
  ``markers_complete(id, {partition: error_code})``. Partitions that failed are retried after
  ``retry_backoff_ms``; a partition that no longer exists counts as done (Kafka's rule).
* replies - the result of a request, typed by its token (an error code, an
  :class:`InitProducerIdResult`, an :class:`EndTxnResult`); the broker turns it into the
  response of the request's version.

Two-phase commit. EndTxn writes PrepareCommit/PrepareAbort, answers the client, then asks for
the markers; when every partition has its marker it writes CompleteCommit/CompleteAbort. After
a restart, a transaction found in a Prepare state has its markers sent again, and an Ongoing
one is aborted when its timeout passes (unless its producer commits or aborts it first).

Fencing. InitProducerId for an id whose transaction is Ongoing bumps the epoch and aborts that
transaction with the new epoch (answering CONCURRENT_TRANSACTIONS, so the client retries and
gets a further bump once the abort is complete). A transaction older than its timeout is
aborted the same way. The markers carry the bumped epoch, so the old producer's writes are
refused by every partition of the transaction afterwards.

Transaction version 2 (KIP-890 part 2). A client that sends EndTxn v5 (and lets the partition
leaders add partitions for it, AddPartitionsToTxn v4+ from the broker) is a version 2 client
for that request, whatever level the cluster finalized (Kafka's
``transactionVersionForEndTxn``): ending its transaction bumps the epoch, the markers carry the
bumped epoch and the answer hands it to the client (``commit._end_v2``). A request of the ended
transaction that arrives late carries the old epoch and is fenced (PRODUCER_FENCED) instead of
ending the next transaction; a retry of the EndTxn that did end it (its epoch one below, or
the last epoch of the previous producer id after a rotation) gets the same answer again.
Version 1 clients (EndTxn below v5) keep the old rules (``commit._end``) on any cluster. The
cluster's ``transaction.version`` (``transaction_version()``) decides the value version the
coordinator writes (1 from level 1); the aborts it starts (a fence, a timeout) take the version
2 path on a version 2 cluster for a version 2 client's transaction only (as Kafka 4.1.1 does:
a version 1 client's is aborted with the fence epoch alone).

Queries that need no write (``verify``, ``describe``, ``list_transactions``) answer at once.

Around this module: ``core`` (the state shared with the commit side, and ``write_transit``),
``commit`` (EndTxn, markers and completion), ``types`` (config, marker requests, results;
re-exported here), ``load`` (replaying ``__transaction_state``), ``queries`` (describe and
list), ``state`` (per-id metadata and its transitions).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from gregor.coordinator.common.events import log_event
from gregor.coordinator.common.outbox import Output, Token
from gregor.coordinator.common.timers import PartitionStatus, session_always_confirmed
from gregor.coordinator.txn.commit import TxnCommits
from gregor.coordinator.txn.core import TxnCore
from gregor.coordinator.txn.load import replay_transaction_log
from gregor.coordinator.txn.queries import describe_transactions, list_transactions
from gregor.coordinator.txn.state import (
    IDLE,
    NO_PRODUCER_ID,
    PREPARING,
    TopicPartition,
    TxnMetadata,
    TxnState,
    is_epoch_exhausted,
)
from gregor.coordinator.txn.types import (
    EndTxnResult,
    InitProducerIdResult,
    MarkerWrite,
    TxnCoordinatorConfig,
    TxnDescription,
    TxnListing,
)
from gregor.protocol.errors import ErrorCode

__all__ = [
    "EndTxnResult",
    "InitProducerIdResult",
    "MarkerWrite",
    "TransactionCoordinator",
    "TxnCoordinatorConfig",
    "TxnDescription",
    "TxnListing",
]

log = logging.getLogger("gregor.coordinator.transactions")


class TransactionCoordinator:
    """InitProducerId, AddPartitionsToTxn, verification, timeouts and queries over one
    ``TxnCore``, with EndTxn and the markers composed in (``TxnCommits``)."""

    def __init__(
        self,
        config: TxnCoordinatorConfig,
        generate_producer_id: Callable[[], int],
        clock: Callable[[], int],
        transaction_version: Callable[[], int] = lambda: 0,
        session_confirmed: Callable[[], bool] = session_always_confirmed,
    ) -> None:
        self.core = TxnCore(
            config, generate_producer_id, clock, transaction_version, session_confirmed
        )
        self.commits = TxnCommits(self.core)
        self.end_txn = self.commits.end_txn
        self.markers_complete = self.commits.markers_complete

    # --- state ---

    @property
    def config(self) -> TxnCoordinatorConfig:
        return self.core.config

    @property
    def txns(self) -> dict[str, TxnMetadata]:
        return self.core.txns

    def partition_for(self, transactional_id: str) -> int:
        return self.core.partition_for(transactional_id)

    def partition_error(self, transactional_id: str) -> int:
        """0 if this coordinator serves ``transactional_id`` now, else the error to answer."""
        return self.core.partition_error(transactional_id)

    # --- the runtime's side: outbox and time ---

    @property
    def has_output(self) -> bool:
        return self.core.outbox.has_output

    def take(self) -> Output[MarkerWrite]:
        return self.core.outbox.take()

    def write_complete(self, write_id: int, error_code: int, base_offset: int = -1) -> None:
        """The caller appended write ``write_id`` (error_code 0) or failed to."""
        self.core.outbox.write_complete(write_id, error_code, base_offset)

    def next_deadline(self) -> int | None:
        return self.core.timers.next_deadline()

    def tick(self) -> None:
        self.core.timers.run_due(self.core.clock)

    # --- loading ---

    def begin_load(self, partition: int) -> None:
        self.core.partitions[partition] = (PartitionStatus.LOADING, -1)

    def load_batches(self, partition: int, data: bytes | memoryview) -> None:
        """Replay whole batches read from ``partition`` of ``__transaction_state``."""
        for tid, md in replay_transaction_log(data):
            if md is None:
                self.core.txns.pop(tid, None)
            else:
                self.core.txns[tid] = md

    def complete_load(self, partition: int, leader_epoch: int) -> None:
        """The partition is read to its end: serve its ids, finish what was in flight. The
        coordinator epoch is the leader epoch of the ``__transaction_state`` partition."""
        self.core.partitions[partition] = (PartitionStatus.ACTIVE, max(leader_epoch, 0))
        resumed = aborting = 0
        for md in self.core.txns_of(partition):
            md.pending = None
            if md.state in PREPARING:
                resumed += 1
                self.commits.send_markers(md)
            elif md.state == TxnState.ONGOING:
                aborting += 1
                self.schedule_timeout(md)
        if resumed or aborting:
            log_event(
                log,
                "txn.partition_loaded",
                partition=partition,
                completing=resumed,
                ongoing=aborting,
            )
        if self.core.timers.deadline(("expire",)) is None:
            self.core.timers.schedule(
                ("expire",),
                self.core.clock() + self.core.config.id_expiration_check_interval_ms,
                self._expire_ids,
            )

    def unload(self, partition: int) -> None:
        self.core.partitions.pop(partition, None)
        for md in list(self.core.txns_of(partition)):
            del self.core.txns[md.transactional_id]
            for kind in ("timeout", "markers", "complete"):
                self.core.timers.cancel((kind, md.transactional_id))

    def init_producer_id(
        self,
        token: Token[InitProducerIdResult],
        transactional_id: str,
        transaction_timeout_ms: int,
        producer_id: int = -1,
        producer_epoch: int = -1,
    ) -> None:
        def reply(code: int, pid: int = -1, epoch: int = -1) -> None:
            self.core.reply(token, InitProducerIdResult(code, pid, epoch))

        if not transactional_id:
            return reply(ErrorCode.INVALID_REQUEST)
        err = self.core.partition_error(transactional_id)
        if err:
            return reply(err)
        if not 0 < transaction_timeout_ms <= self.core.config.max_timeout_ms:
            return reply(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        if (producer_id == -1) != (producer_epoch == -1):
            return reply(ErrorCode.INVALID_REQUEST)
        expected = None if producer_id == -1 else (producer_id, producer_epoch)
        now = self.core.clock()
        md = self.core.txns.get(transactional_id)
        if md is None:
            md = TxnMetadata(
                transactional_id,
                self.core.generate_producer_id(),
                transaction_timeout_ms,
                last_update_ms=now,
            )
            self.core.txns[transactional_id] = md
        if md.pending is not None:
            return reply(ErrorCode.CONCURRENT_TRANSACTIONS)
        if expected is not None and not self._is_valid_producer(md, *expected):
            return reply(ErrorCode.PRODUCER_FENCED)
        if md.state in PREPARING:
            return reply(ErrorCode.CONCURRENT_TRANSACTIONS)
        if md.state == TxnState.ONGOING:
            # Abort the running transaction with a bumped epoch; the client retries.
            epoch = md.fence_epoch()
            log_event(
                log,
                "txn.fencing",
                transactional_id=transactional_id,
                producer_id=md.producer_id,
                epoch=epoch,
                reason="init_producer_id",
            )
            self.commits.end_any(
                md,
                md.producer_id,
                epoch,
                False,
                False,
                self.commits.server_tv2(md),
                lambda code, _pid, _epoch: reply(code or ErrorCode.CONCURRENT_TRANSACTIONS),
            )
            return
        if md.state not in IDLE:
            return reply(ErrorCode.UNKNOWN_SERVER_ERROR)
        if is_epoch_exhausted(md.producer_epoch) and (
            expected is None or expected[1] == md.producer_epoch
        ):
            transit = md.prepare_producer_id_rotation(
                self.core.generate_producer_id(), transaction_timeout_ms, now, expected is not None
            )
        else:
            bumped = md.prepare_epoch_bump(
                transaction_timeout_ms, None if expected is None else expected[1], now
            )
            if bumped is None:
                return reply(ErrorCode.PRODUCER_FENCED)
            transit = bumped

        def written(code: int) -> None:
            if code:
                return reply(code)
            log_event(
                log,
                "txn.producer_initialized",
                transactional_id=transactional_id,
                producer_id=md.producer_id,
                epoch=md.producer_epoch,
            )
            reply(0, md.producer_id, md.producer_epoch)

        self.core.write_transit(md, transit, written)

    @staticmethod
    def _is_valid_producer(md: TxnMetadata, producer_id: int, producer_epoch: int) -> bool:
        """KIP-360: a producer may re-initialize with its last id and epoch unless another
        producer took the transactional id over meanwhile."""
        return (
            md.producer_epoch == -1
            or producer_id == md.producer_id
            or (producer_id == md.last_producer_id and is_epoch_exhausted(producer_epoch))
        )

    def _check_producer(
        self, transactional_id: str, producer_id: int, producer_epoch: int
    ) -> tuple[int, TxnMetadata | None]:
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST, None
        err = self.core.partition_error(transactional_id)
        if err:
            return err, None
        md = self.core.txns.get(transactional_id)
        if (
            md is not None
            and md.producer_id != producer_id
            and self._moving_to(md, producer_id, producer_epoch)
        ):
            # Version 2: the client already has the new producer id its last EndTxn moves to;
            # the move completes with the markers. Retriable, not a fence of itself.
            return ErrorCode.CONCURRENT_TRANSACTIONS, None
        if md is None or md.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING, None
        if md.producer_epoch != producer_epoch:
            return ErrorCode.PRODUCER_FENCED, None
        return 0, md

    @staticmethod
    def _moving_to(md: TxnMetadata, producer_id: int, producer_epoch: int) -> bool:
        return (
            md.state in PREPARING
            and md.next_producer_id != NO_PRODUCER_ID
            and md.next_producer_id == producer_id
            and producer_epoch == 0
        )

    def add_partitions(
        self,
        token: Token[int],
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
        client_transaction_version: int = 0,
    ) -> None:
        """Add partitions to the producer's transaction (starting one if none runs).
        ``client_transaction_version`` is 2 for a partition leader adding on a version 2
        client's behalf (AddPartitionsToTxn v4+ without verify_only), else 0."""
        err, md = self._check_producer(transactional_id, producer_id, producer_epoch)
        if md is None:
            return self.core.reply(token, err)
        added = set(partitions)
        if md.pending is not None or md.state in PREPARING:
            return self.core.reply(token, ErrorCode.CONCURRENT_TRANSACTIONS)
        if md.state == TxnState.ONGOING and added <= md.partitions:
            return self.core.reply(token, 0)
        transit = md.prepare_add_partitions(added, self.core.clock(), client_transaction_version)

        def written(code: int) -> None:
            if not code:
                self.schedule_timeout(md)
            self.core.reply(token, code)

        self.core.write_transit(md, transit, written)

    def verify(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> dict[TopicPartition, int]:
        """Whether each partition is part of the producer's running transaction (KIP-890's
        verification): 0, or the error for it. Answers at once; changes nothing."""
        parts = list(partitions)
        err, md = self._check_producer(transactional_id, producer_id, producer_epoch)
        if md is None:
            return dict.fromkeys(parts, err)
        if md.state in PREPARING:
            return dict.fromkeys(parts, ErrorCode.CONCURRENT_TRANSACTIONS)
        return {tp: 0 if tp in md.partitions else ErrorCode.INVALID_TXN_STATE for tp in parts}

    def schedule_timeout(self, md: TxnMetadata, deadline: int | None = None) -> None:
        tid, start = md.transactional_id, md.start_ms
        if deadline is None:
            deadline = start + md.timeout_ms
        self.core.timers.schedule(("timeout", tid), deadline, lambda: self._on_timeout(tid, start))

    def _on_timeout(self, tid: str, start: int) -> None:
        md = self.core.txns.get(tid)
        if md is None or md.state != TxnState.ONGOING or md.start_ms != start:
            return
        if md.pending is not None:
            self.schedule_timeout(md, self.core.clock() + self.core.config.retry_backoff_ms)
            return
        epoch = md.fence_epoch()
        log_event(
            log,
            "txn.timed_out",
            transactional_id=tid,
            producer_id=md.producer_id,
            epoch=epoch,
            timeout_ms=md.timeout_ms,
        )

        def aborted(code: int, _pid: int, _epoch: int) -> None:
            if code and self.core.txns.get(tid) is md and md.state == TxnState.ONGOING:
                self.schedule_timeout(md, self.core.clock() + self.core.config.retry_backoff_ms)

        self.commits.end_any(
            md, md.producer_id, epoch, False, False, self.commits.server_tv2(md), aborted
        )

    def _expire_ids(self) -> None:
        now = self.core.clock()
        horizon = now - self.core.config.id_expiration_ms
        for tid, md in list(self.core.txns.items()):
            if (
                md.pending is None
                and md.state in IDLE
                and md.last_update_ms <= horizon
                and self.core.partition_error(tid) == 0
            ):
                log_event(log, "txn.id_expired", transactional_id=tid, producer_id=md.producer_id)
                self.core.write_transit(md, md.prepare_dead(now), lambda code: None)
        self.core.timers.schedule(
            ("expire",), now + self.core.config.id_expiration_check_interval_ms, self._expire_ids
        )

    def describe(self, transactional_ids: Iterable[str]) -> list[TxnDescription]:
        return describe_transactions(self.core.txns, self.core.partition_error, transactional_ids)

    def list_transactions(
        self,
        state_filters: Iterable[str],
        producer_id_filters: Iterable[int],
        duration_filter_ms: int = -1,
    ) -> tuple[int, list[str], list[TxnListing]]:
        """(error, unknown state names, matching transactions)."""
        if not self.core.session_confirmed():
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, [], []  # see ``common.timers``
        return list_transactions(
            self.core.txns,
            self.core.partition_error,
            self.core.loading,
            self.core.clock,
            state_filters,
            producer_id_filters,
            duration_filter_ms,
        )
