"""The transaction coordinator as a state machine without I/O.

Theory of operation. Every transactional id lives in one partition of ``__transaction_state``
(``partition_for``: Kafka's hash of the id); the coordinator serves an id only while that
partition is active (loaded). Its inputs are requests (each with an opaque ``token``),
completions of the work it asked for, batches of ``__transaction_state`` read back at load,
and the passing of time (``tick``). Its outputs wait in an outbox drained with ``take()``:

* ``TxnLogWrite(id, partition, batch)`` - a RecordBatch to append to ``__transaction_state``;
  the caller reports ``write_complete(id, error_code)``. A state change is applied only once
  its record is written, and the reply that depends on it is sent then.
* ``MarkerWrite(id, ...)`` - COMMIT or ABORT markers to write to the listed partitions with
  the producer's id and epoch and the coordinator epoch; the caller reports
  ``markers_complete(id, {partition: error_code})``. Partitions that failed are retried after
  ``retry_backoff_ms``; a partition that no longer exists counts as done (Kafka's rule).
* ``TxnReply(token, result)`` - the result of a request (an error code, or an
  :class:`InitProducerIdResult`); the broker turns it into the response of the request's
  version.

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
bumped epoch and the answer hands it to the client (``_end_v2``). A request of the ended
transaction that arrives late carries the old epoch and is fenced (PRODUCER_FENCED) instead of
ending the next transaction; a retry of the EndTxn that did end it (its epoch one below, or
the last epoch of the previous producer id after a rotation) gets the same answer again.
Version 1 clients (EndTxn below v5) keep the old rules (``_end``) on any cluster. The
cluster's ``transaction.version`` (``transaction_version()``) decides the value version the
coordinator writes (1 from level 1); the aborts it starts (a fence, a timeout) take the version
2 path on a version 2 cluster for a version 2 client's transaction only (as Kafka 4.1.1 does:
a version 1 client's is aborted with the fence epoch alone).

Queries that need no write (``verify``, ``describe``, ``list_transactions``) answer at once.

Around this module: ``transaction_types`` (config, outbox entries, results; re-exported
here), ``transaction_load`` (replaying ``__transaction_state``), ``transaction_queries``
(describe and list), ``transaction_state`` (per-id metadata and its transitions).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Iterable
from enum import Enum
from typing import Any

from gregor.coordinator.common.events import log_event
from gregor.coordinator.common.partitioning import partition_for
from gregor.coordinator.group.core import Timers
from gregor.coordinator.txn.load import replay_transaction_log
from gregor.coordinator.txn.queries import describe_transactions, list_transactions
from gregor.coordinator.txn.records import (
    TxnLogValue,
    encode_key,
    encode_value,
    value_version,
)
from gregor.coordinator.txn.state import (
    COMPLETE,
    IDLE,
    MAX_EPOCH,
    NO_PRODUCER_ID,
    PREPARING,
    TopicPartition,
    TxnMetadata,
    TxnState,
    TxnTransit,
    is_epoch_exhausted,
)
from gregor.coordinator.txn.types import (
    MARKER_DONE,
    MARKER_FENCED,
    EndTxnResult,
    InitProducerIdResult,
    MarkerWrite,
    TxnCoordinatorConfig,
    TxnDescription,
    TxnListing,
    TxnLogWrite,
    TxnReply,
    log_append_error,
)
from gregor.protocol.errors import ErrorCode
from gregor.protocol.records.batch import RecordBatchBuilder

__all__ = [
    "EndTxnResult",
    "InitProducerIdResult",
    "MarkerWrite",
    "TransactionCoordinator",
    "TxnCoordinatorConfig",
    "TxnDescription",
    "TxnListing",
    "TxnLogWrite",
    "TxnReply",
    "log_append_error",
]

log = logging.getLogger("gregor.coordinator.transactions")

#: What ``_end`` reports: (error code, producer id, producer epoch) - the id and epoch only for
#: a version 2 end that succeeded.
EndCallback = Callable[[int, int, int], None]


class _Status(Enum):
    LOADING = "loading"
    ACTIVE = "active"


class TransactionCoordinator:
    def __init__(
        self,
        config: TxnCoordinatorConfig,
        generate_producer_id: Callable[[], int],
        clock: Callable[[], int],
        transaction_version: Callable[[], int] = lambda: 0,
    ) -> None:
        self.config = config
        self.generate_producer_id = generate_producer_id
        self.clock = clock
        #: The cluster's finalized ``transaction.version`` (read at each use: it can change).
        self.transaction_version = transaction_version
        self.txns: dict[str, TxnMetadata] = {}
        self.partitions: dict[int, tuple[_Status, int]] = {}  # -> (status, coordinator epoch)
        self.timers = Timers()
        self._writes: list[TxnLogWrite] = []
        self._markers: list[MarkerWrite] = []
        self._replies: list[TxnReply] = []
        self._write_callbacks: dict[int, Callable[[int], None]] = {}
        self._marker_requests: dict[int, MarkerWrite] = {}
        self._ids = itertools.count(1)

    # --- outbox ---

    def take(self) -> tuple[list[TxnLogWrite], list[MarkerWrite], list[TxnReply]]:
        out = (self._writes, self._markers, self._replies)
        self._writes, self._markers, self._replies = [], [], []
        return out

    @property
    def has_output(self) -> bool:
        return bool(self._writes or self._markers or self._replies)

    def reply(self, token: Any, result: Any) -> None:
        self._replies.append(TxnReply(token, result))

    # --- time ---

    def next_deadline(self) -> int | None:
        return self.timers.next_deadline()

    def tick(self) -> None:
        while True:
            fn = self.timers.pop_due(self.clock())
            if fn is None:
                return
            fn()

    # --- partitions ---

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.config.num_partitions)

    def partition_error(self, transactional_id: str) -> int:
        """0 if this coordinator serves ``transactional_id`` now, else the error to answer."""
        entry = self.partitions.get(self.partition_for(transactional_id))
        if entry is None:
            return ErrorCode.NOT_COORDINATOR
        return 0 if entry[0] is _Status.ACTIVE else ErrorCode.COORDINATOR_LOAD_IN_PROGRESS

    def coordinator_epoch(self, transactional_id: str) -> int:
        entry = self.partitions.get(self.partition_for(transactional_id))
        return entry[1] if entry is not None else -1

    @property
    def loading(self) -> bool:
        return any(s is _Status.LOADING for s, _ in self.partitions.values())

    def begin_load(self, partition: int) -> None:
        self.partitions[partition] = (_Status.LOADING, -1)

    def load_batches(self, partition: int, data: bytes | memoryview) -> None:
        """Replay whole batches read from ``partition`` of ``__transaction_state``."""
        for tid, md in replay_transaction_log(data):
            if md is None:
                self.txns.pop(tid, None)
            else:
                self.txns[tid] = md

    def complete_load(self, partition: int, coordinator_epoch: int) -> None:
        """The partition is read to its end: serve its ids, finish what was in flight."""
        self.partitions[partition] = (_Status.ACTIVE, coordinator_epoch)
        resumed = aborting = 0
        for md in self._txns_of(partition):
            md.pending = None
            if md.state in PREPARING:
                resumed += 1
                self._send_markers(md)
            elif md.state == TxnState.ONGOING:
                aborting += 1
                self._schedule_timeout(md)
        if resumed or aborting:
            log_event(
                log,
                "txn.partition_loaded",
                partition=partition,
                completing=resumed,
                ongoing=aborting,
            )
        if self.timers.deadline(("expire",)) is None:
            self.timers.schedule(
                ("expire",),
                self.clock() + self.config.id_expiration_check_interval_ms,
                self._expire_ids,
            )

    def unload(self, partition: int) -> None:
        self.partitions.pop(partition, None)
        for md in list(self._txns_of(partition)):
            del self.txns[md.transactional_id]
            for kind in ("timeout", "markers", "complete"):
                self.timers.cancel((kind, md.transactional_id))

    def _txns_of(self, partition: int) -> list[TxnMetadata]:
        return [md for tid, md in self.txns.items() if self.partition_for(tid) == partition]

    # --- writes ---

    def _write_transit(
        self, md: TxnMetadata, transit: TxnTransit, done: Callable[[int], None]
    ) -> None:
        """Append ``transit`` for ``md``; apply it when written, then call ``done(error)``."""
        tid = md.transactional_id
        partition = self.partition_for(tid)
        epoch = self.coordinator_epoch(tid)
        now = self.clock()
        if transit.state == TxnState.DEAD:
            value = None
        else:
            value = encode_value(
                TxnLogValue(
                    transit.producer_id,
                    transit.producer_epoch,
                    transit.timeout_ms,
                    int(transit.state),
                    sorted(transit.partitions),
                    transit.last_update_ms,
                    transit.start_ms,
                    previous_producer_id=transit.last_producer_id,
                    next_producer_id=transit.next_producer_id,
                    client_transaction_version=transit.client_transaction_version,
                ),
                value_version(self.transaction_version()),
            )
        b = RecordBatchBuilder()
        b.append(now, encode_key(tid), value)
        wid = next(self._ids)

        def completed(code: int) -> None:
            current = self.partitions.get(partition)
            if self.txns.get(tid) is not md or current != (_Status.ACTIVE, epoch):
                # Unloaded (or reloaded) meanwhile: someone else owns the id now.
                return done(ErrorCode.NOT_COORDINATOR)
            if code:
                md.pending = None
                log_event(
                    log,
                    "txn.state_write_failed",
                    transactional_id=tid,
                    state=transit.state.display_name,
                    error=code,
                )
                return done(log_append_error(code))
            if transit.state == TxnState.DEAD:
                del self.txns[tid]
            else:
                md.apply(transit)
            done(0)

        self._write_callbacks[wid] = completed
        self._writes.append(TxnLogWrite(wid, partition, b.build()))

    def write_complete(self, write_id: int, error_code: int) -> None:
        cb = self._write_callbacks.pop(write_id, None)
        if cb is not None:
            cb(error_code)

    # --- InitProducerId ---

    def init_producer_id(
        self,
        token: Any,
        transactional_id: str,
        transaction_timeout_ms: int,
        producer_id: int = -1,
        producer_epoch: int = -1,
    ) -> None:
        def reply(code: int, pid: int = -1, epoch: int = -1) -> None:
            self.reply(token, InitProducerIdResult(code, pid, epoch))

        if not transactional_id:
            return reply(ErrorCode.INVALID_REQUEST)
        err = self.partition_error(transactional_id)
        if err:
            return reply(err)
        if not 0 < transaction_timeout_ms <= self.config.max_timeout_ms:
            return reply(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        if (producer_id == -1) != (producer_epoch == -1):
            return reply(ErrorCode.INVALID_REQUEST)
        expected = None if producer_id == -1 else (producer_id, producer_epoch)
        now = self.clock()
        md = self.txns.get(transactional_id)
        if md is None:
            md = TxnMetadata(
                transactional_id,
                self.generate_producer_id(),
                transaction_timeout_ms,
                last_update_ms=now,
            )
            self.txns[transactional_id] = md
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
            self._end_any(
                md,
                md.producer_id,
                epoch,
                False,
                False,
                self._server_tv2(md),
                lambda code, _pid, _epoch: reply(code or ErrorCode.CONCURRENT_TRANSACTIONS),
            )
            return
        if md.state not in IDLE:
            return reply(ErrorCode.UNKNOWN_SERVER_ERROR)
        if is_epoch_exhausted(md.producer_epoch) and (
            expected is None or expected[1] == md.producer_epoch
        ):
            transit = md.prepare_producer_id_rotation(
                self.generate_producer_id(), transaction_timeout_ms, now, expected is not None
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

        self._write_transit(md, transit, written)

    @staticmethod
    def _is_valid_producer(md: TxnMetadata, producer_id: int, producer_epoch: int) -> bool:
        """KIP-360: a producer may re-initialize with its last id and epoch unless another
        producer took the transactional id over meanwhile."""
        return (
            md.producer_epoch == -1
            or producer_id == md.producer_id
            or (producer_id == md.last_producer_id and is_epoch_exhausted(producer_epoch))
        )

    # --- AddPartitionsToTxn / AddOffsetsToTxn ---

    def _check_producer(
        self, transactional_id: str, producer_id: int, producer_epoch: int
    ) -> tuple[int, TxnMetadata | None]:
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST, None
        err = self.partition_error(transactional_id)
        if err:
            return err, None
        md = self.txns.get(transactional_id)
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
        token: Any,
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
            return self.reply(token, err)
        added = set(partitions)
        if md.pending is not None or md.state in PREPARING:
            return self.reply(token, ErrorCode.CONCURRENT_TRANSACTIONS)
        if md.state == TxnState.ONGOING and added <= md.partitions:
            return self.reply(token, 0)
        transit = md.prepare_add_partitions(added, self.clock(), client_transaction_version)

        def written(code: int) -> None:
            if not code:
                self._schedule_timeout(md)
            self.reply(token, code)

        self._write_transit(md, transit, written)

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

    # --- EndTxn ---

    def end_txn(
        self,
        token: Any,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        client_transaction_version: int = 0,
    ) -> None:
        """EndTxn; replies an :class:`EndTxnResult`. ``client_transaction_version`` is 2 for
        EndTxn v5 and later, else 0."""

        def reply(code: int, pid: int = -1, epoch: int = -1) -> None:
            self.reply(token, EndTxnResult(code, pid, epoch))

        if not transactional_id:
            return reply(ErrorCode.INVALID_REQUEST)
        err = self.partition_error(transactional_id)
        if err:
            return reply(err)
        md = self.txns.get(transactional_id)
        if md is None:
            return reply(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        self._end_any(
            md, producer_id, producer_epoch, commit, True, client_transaction_version >= 2, reply
        )

    def _server_tv2(self, md: TxnMetadata) -> bool:
        """Whether an abort the coordinator starts itself (a fence, a timeout) takes the version
        2 path: on a version 2 cluster, for a version 2 client's transaction (as Kafka 4.1 does;
        a version 1 client's is aborted with the fence epoch, as on a version 1 cluster)."""
        return self.transaction_version() >= 2 and md.client_transaction_version >= 2

    def _end_any(
        self,
        md: TxnMetadata,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        from_client: bool,
        tv2: bool,
        done: EndCallback,
    ) -> None:
        if tv2:
            self._end_v2(md, producer_id, producer_epoch, commit, from_client, done)
        else:
            self._end(
                md,
                producer_id,
                producer_epoch,
                commit,
                from_client,
                lambda code: done(code, -1, -1),
            )

    def _end(
        self,
        md: TxnMetadata,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        from_client: bool,
        done: Callable[[int], None],
    ) -> None:
        """EndTxn for transaction version 0/1 clients (Kafka's ``endTransactionWithTV1``):
        the epoch must be the current one and stays as it is."""
        fencing = md.pending == TxnState.PREPARE_EPOCH_FENCE
        code: int
        if md.producer_id != producer_id:
            code = ErrorCode.INVALID_PRODUCER_ID_MAPPING
        elif (
            from_client and producer_epoch != md.producer_epoch
        ) or producer_epoch < md.producer_epoch:
            code = ErrorCode.PRODUCER_FENCED
        elif md.pending is not None and not fencing:
            code = ErrorCode.CONCURRENT_TRANSACTIONS
        elif md.state == TxnState.ONGOING:
            if fencing and not commit:
                # The fence becomes the abort: the bumped epoch is in force from now on.
                md.pending = None
                md.producer_epoch = producer_epoch
                md.last_producer_epoch = -1
            target = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
            transit = md.transit(target, self.clock())

            def written(code: int) -> None:
                if code:
                    if fencing:
                        md.failed_epoch_fence = True
                    return done(code)
                self.timers.cancel(("timeout", md.transactional_id))
                done(0)
                self._send_markers(md)

            self._write_transit(md, transit, written)
            return
        elif md.state == TxnState.COMPLETE_COMMIT:
            code = 0 if commit else ErrorCode.INVALID_TXN_STATE
        elif md.state == TxnState.COMPLETE_ABORT:
            code = ErrorCode.INVALID_TXN_STATE if commit else 0
        elif md.state == TxnState.PREPARE_COMMIT:
            code = ErrorCode.CONCURRENT_TRANSACTIONS if commit else ErrorCode.INVALID_TXN_STATE
        elif md.state == TxnState.PREPARE_ABORT:
            code = ErrorCode.INVALID_TXN_STATE if commit else ErrorCode.CONCURRENT_TRANSACTIONS
        else:
            code = ErrorCode.INVALID_TXN_STATE
        if fencing:
            md.pending = None
        done(code)

    def _end_v2(
        self,
        md: TxnMetadata,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        from_client: bool,
        done: EndCallback,
    ) -> None:
        """EndTxn for transaction version 2 clients, and the coordinator's own aborts on a
        version 2 cluster (Kafka's ``endTransaction``).

        With the epoch bumped at every end, "same epoch" means the *next* transaction, so a
        request is taken only with the current epoch (an open or empty transaction, or a
        completed one to abort) or as the retry of the end that bumped it (one epoch below,
        or the previous producer id at the last epoch it had). As a table for the idle
        states (PF = PRODUCER_FENCED, ITS = INVALID_TXN_STATE, NONE = the same answer again,
        EB = a new end, with an epoch bump)::

                            abort            commit
                         retry current    retry current
            Empty          PF    EB         PF    ITS
            CompleteAbort  NONE  EB         ITS   ITS
            CompleteCommit ITS   EB         NONE  ITS
        """
        fencing = md.pending == TxnState.PREPARE_EPOCH_FENCE
        retry_on_overflow = (
            not fencing
            and md.last_producer_id == producer_id
            and producer_epoch == MAX_EPOCH - 1
            and md.producer_epoch == 0
        )
        retry_on_bump = not fencing and md.producer_epoch == producer_epoch + 1
        is_retry = retry_on_bump or retry_on_overflow
        if fencing:
            valid = (
                not from_client or producer_epoch == md.producer_epoch
            ) and producer_epoch >= md.producer_epoch
        elif md.state in PREPARING:
            valid = retry_on_bump
        elif md.state in COMPLETE:
            valid = is_retry or producer_epoch == md.producer_epoch
        else:
            valid = producer_epoch == md.producer_epoch

        def prepare(state: TxnState, no_partition_added: bool) -> None:
            next_pid = NO_PRODUCER_ID
            if not fencing and is_epoch_exhausted(md.producer_epoch):
                next_pid = self.generate_producer_id()
            if fencing:
                # The fence becomes the abort: the fenced epoch is in force from now on.
                md.pending = None
                md.producer_epoch = producer_epoch
                md.last_producer_epoch = -1
            transit = md.prepare_abort_or_commit(
                state,
                self.clock(),
                bump=md.producer_epoch < MAX_EPOCH,
                next_producer_id=next_pid,
                no_partition_added=no_partition_added,
            )

            def written(code: int) -> None:
                if code:
                    if fencing:
                        md.failed_epoch_fence = True
                    return done(code, -1, -1)
                self.timers.cancel(("timeout", md.transactional_id))
                if md.next_producer_id != NO_PRODUCER_ID:
                    done(0, md.next_producer_id, 0)
                else:
                    done(0, md.producer_id, md.producer_epoch)
                self._send_markers(md)

            self._write_transit(md, transit, written)

        code: int
        if md.producer_id != producer_id and not retry_on_overflow:
            code = ErrorCode.INVALID_PRODUCER_ID_MAPPING
        elif not valid:
            code = ErrorCode.PRODUCER_FENCED
        elif md.pending is not None and not fencing:
            code = ErrorCode.CONCURRENT_TRANSACTIONS
        elif md.state == TxnState.ONGOING:
            return prepare(TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT, False)
        elif md.state == TxnState.COMPLETE_COMMIT:
            if commit:
                code = 0 if is_retry else ErrorCode.INVALID_TXN_STATE
            elif is_retry:
                code = ErrorCode.INVALID_TXN_STATE
            else:
                return prepare(TxnState.PREPARE_ABORT, True)
        elif md.state == TxnState.COMPLETE_ABORT:
            if commit:
                code = ErrorCode.INVALID_TXN_STATE
            elif is_retry:
                code = 0
            else:
                return prepare(TxnState.PREPARE_ABORT, True)
        elif md.state == TxnState.PREPARE_COMMIT:
            code = ErrorCode.CONCURRENT_TRANSACTIONS if commit else ErrorCode.INVALID_TXN_STATE
        elif md.state == TxnState.PREPARE_ABORT:
            code = ErrorCode.INVALID_TXN_STATE if commit else ErrorCode.CONCURRENT_TRANSACTIONS
        elif md.state == TxnState.EMPTY and not commit:
            return prepare(TxnState.PREPARE_ABORT, True)
        else:
            code = ErrorCode.INVALID_TXN_STATE
        if fencing:
            md.pending = None
        if code == 0:
            done(0, md.producer_id, md.producer_epoch)
        else:
            done(code, -1, -1)

    # --- markers ---

    def _send_markers(self, md: TxnMetadata) -> None:
        self.timers.cancel(("markers", md.transactional_id))
        if not md.partitions:
            return self._complete(md)
        m = MarkerWrite(
            next(self._ids),
            md.transactional_id,
            md.producer_id,
            md.producer_epoch,
            md.state == TxnState.PREPARE_COMMIT,
            self.coordinator_epoch(md.transactional_id),
            tuple(sorted(md.partitions)),
        )
        self._marker_requests[m.id] = m
        self._markers.append(m)

    def markers_complete(self, marker_id: int, results: dict[TopicPartition, int]) -> None:
        """The caller wrote (or failed to write) the markers of request ``marker_id``."""
        m = self._marker_requests.pop(marker_id, None)
        if m is None:
            return
        md = self.txns.get(m.transactional_id)
        if (
            md is None
            or md.producer_id != m.producer_id
            or md.producer_epoch != m.producer_epoch
            or md.state not in PREPARING
            or md.pending is not None
        ):
            return
        failed = []
        for tp in m.partitions:
            code = results.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR)
            if code in MARKER_DONE or code in MARKER_FENCED:
                if code in MARKER_FENCED:
                    log_event(
                        log,
                        "txn.marker_fenced",
                        transactional_id=m.transactional_id,
                        topic=tp[0],
                        partition=tp[1],
                        error=code,
                    )
                md.partitions.discard(tp)
            else:
                failed.append((tp, code))
        if md.partitions:
            log_event(
                log,
                "txn.marker_retry",
                transactional_id=m.transactional_id,
                partitions=len(md.partitions),
                error=failed[0][1] if failed else 0,
            )
            tid = md.transactional_id
            self.timers.schedule(
                ("markers", tid),
                self.clock() + self.config.retry_backoff_ms,
                lambda: self._retry_markers(tid, md),
            )
            return
        self._complete(md)

    def _retry_markers(self, tid: str, md: TxnMetadata) -> None:
        if self.txns.get(tid) is md and md.state in PREPARING and md.pending is None:
            self._send_markers(md)

    def _complete(self, md: TxnMetadata) -> None:
        tid = md.transactional_id
        transit = md.prepare_complete(self.clock())
        commit = transit.state == TxnState.COMPLETE_COMMIT

        def written(code: int) -> None:
            if not code:
                log_event(
                    log,
                    "txn.completed",
                    transactional_id=tid,
                    producer_id=md.producer_id,
                    epoch=md.producer_epoch,
                    result="commit" if commit else "abort",
                )
                return
            if code == ErrorCode.NOT_COORDINATOR:
                return
            self.timers.schedule(
                ("complete", tid),
                self.clock() + self.config.retry_backoff_ms,
                lambda: self._retry_complete(tid, md),
            )

        self._write_transit(md, transit, written)

    def _retry_complete(self, tid: str, md: TxnMetadata) -> None:
        if (
            self.txns.get(tid) is md
            and md.state in PREPARING
            and md.pending is None
            and not md.partitions
        ):
            self._complete(md)

    # --- timeouts and expiration ---

    def _schedule_timeout(self, md: TxnMetadata, deadline: int | None = None) -> None:
        tid, start = md.transactional_id, md.start_ms
        if deadline is None:
            deadline = start + md.timeout_ms
        self.timers.schedule(("timeout", tid), deadline, lambda: self._on_timeout(tid, start))

    def _on_timeout(self, tid: str, start: int) -> None:
        md = self.txns.get(tid)
        if md is None or md.state != TxnState.ONGOING or md.start_ms != start:
            return
        if md.pending is not None:
            self._schedule_timeout(md, self.clock() + self.config.retry_backoff_ms)
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
            if code and self.txns.get(tid) is md and md.state == TxnState.ONGOING:
                self._schedule_timeout(md, self.clock() + self.config.retry_backoff_ms)

        self._end_any(md, md.producer_id, epoch, False, False, self._server_tv2(md), aborted)

    def _expire_ids(self) -> None:
        now = self.clock()
        horizon = now - self.config.id_expiration_ms
        for tid, md in list(self.txns.items()):
            if (
                md.pending is None
                and md.state in IDLE
                and md.last_update_ms <= horizon
                and self.partition_error(tid) == 0
            ):
                log_event(log, "txn.id_expired", transactional_id=tid, producer_id=md.producer_id)
                self._write_transit(md, md.prepare_dead(now), lambda code: None)
        self.timers.schedule(
            ("expire",), now + self.config.id_expiration_check_interval_ms, self._expire_ids
        )

    # --- DescribeTransactions / ListTransactions ---

    def describe(self, transactional_ids: Iterable[str]) -> list[TxnDescription]:
        return describe_transactions(self.txns, self.partition_error, transactional_ids)

    def list_transactions(
        self,
        state_filters: Iterable[str],
        producer_id_filters: Iterable[int],
        duration_filter_ms: int = -1,
    ) -> tuple[int, list[str], list[TxnListing]]:
        """(error, unknown state names, matching transactions)."""
        return list_transactions(
            self.txns,
            self.partition_error,
            self.loading,
            self.clock,
            state_filters,
            producer_id_filters,
            duration_filter_ms,
        )
