"""The transaction coordinator's two-phase commit: EndTxn, the markers, the completion.

EndTxn writes PrepareCommit/PrepareAbort, answers the client, then asks for the markers (a
``MarkerWrite`` effect in the outbox); when every partition has its marker it writes
CompleteCommit/CompleteAbort. Partitions whose marker failed are asked again after
``retry_backoff_ms``; a partition that no longer exists counts as done (Kafka's rule). A
version 2 client's end (``_end_v2``) bumps the epoch (or moves to a new producer id when the
epoch is exhausted) and hands it back; a version 1 client's (``_end``) keeps the old rules.
The aborts the coordinator starts itself (a fence by InitProducerId, a timeout) come through
``end_any`` too.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from gregor.coordinator.common.events import log_event
from gregor.coordinator.common.outbox import Token
from gregor.coordinator.txn.core import TxnCore
from gregor.coordinator.txn.state import (
    COMPLETE,
    MAX_EPOCH,
    NO_PRODUCER_ID,
    PREPARING,
    TopicPartition,
    TxnMetadata,
    TxnState,
    is_epoch_exhausted,
)
from gregor.coordinator.txn.types import MARKER_DONE, MARKER_FENCED, EndTxnResult, MarkerWrite
from gregor.protocol.errors import ErrorCode

log = logging.getLogger("gregor.coordinator.transactions")

#: What ``_end`` reports: (error code, producer id, producer epoch) - the id and epoch only for
#: a version 2 end that succeeded.
EndCallback = Callable[[int, int, int], None]


class TxnCommits:
    """EndTxn and the markers, over the shared ``TxnCore``."""

    def __init__(self, core: TxnCore) -> None:
        self.core = core
        self._marker_requests: dict[int, MarkerWrite] = {}

    def end_txn(
        self,
        token: Token[EndTxnResult],
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        client_transaction_version: int = 0,
    ) -> None:
        """EndTxn; replies an :class:`EndTxnResult`. ``client_transaction_version`` is 2 for
        EndTxn v5 and later, else 0."""

        def reply(code: int, pid: int = -1, epoch: int = -1) -> None:
            self.core.reply(token, EndTxnResult(code, pid, epoch))

        if not transactional_id:
            return reply(ErrorCode.INVALID_REQUEST)
        err = self.core.partition_error(transactional_id)
        if err:
            return reply(err)
        md = self.core.txns.get(transactional_id)
        if md is None:
            return reply(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        self.end_any(
            md, producer_id, producer_epoch, commit, True, client_transaction_version >= 2, reply
        )

    def server_tv2(self, md: TxnMetadata) -> bool:
        """Whether an abort the coordinator starts itself (a fence, a timeout) takes the version
        2 path: on a version 2 cluster, for a version 2 client's transaction (as Kafka 4.1 does;
        a version 1 client's is aborted with the fence epoch, as on a version 1 cluster)."""
        return self.core.transaction_version() >= 2 and md.client_transaction_version >= 2

    def end_any(
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
            transit = md.transit(target, self.core.clock())

            def written(code: int) -> None:
                if code:
                    if fencing:
                        md.failed_epoch_fence = True
                    return done(code)
                self.core.timers.cancel(("timeout", md.transactional_id))
                done(0)
                self.send_markers(md)

            self.core.write_transit(md, transit, written)
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
                next_pid = self.core.generate_producer_id()
            if fencing:
                # The fence becomes the abort: the fenced epoch is in force from now on.
                md.pending = None
                md.producer_epoch = producer_epoch
                md.last_producer_epoch = -1
            transit = md.prepare_abort_or_commit(
                state,
                self.core.clock(),
                bump=md.producer_epoch < MAX_EPOCH,
                next_producer_id=next_pid,
                no_partition_added=no_partition_added,
            )

            def written(code: int) -> None:
                if code:
                    if fencing:
                        md.failed_epoch_fence = True
                    return done(code, -1, -1)
                self.core.timers.cancel(("timeout", md.transactional_id))
                if md.next_producer_id != NO_PRODUCER_ID:
                    done(0, md.next_producer_id, 0)
                else:
                    done(0, md.producer_id, md.producer_epoch)
                self.send_markers(md)

            self.core.write_transit(md, transit, written)

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

    def send_markers(self, md: TxnMetadata) -> None:
        self.core.timers.cancel(("markers", md.transactional_id))
        if not md.partitions:
            return self._complete(md)
        m = MarkerWrite(
            self.core.outbox.next_id(),
            md.transactional_id,
            md.producer_id,
            md.producer_epoch,
            md.state == TxnState.PREPARE_COMMIT,
            self.core.coordinator_epoch(md.transactional_id),
            tuple(sorted(md.partitions)),
        )
        self._marker_requests[m.id] = m
        self.core.outbox.effect(m)

    def markers_complete(self, marker_id: int, results: dict[TopicPartition, int]) -> None:
        """The caller wrote (or failed to write) the markers of request ``marker_id``."""
        m = self._marker_requests.pop(marker_id, None)
        if m is None:
            return
        md = self.core.txns.get(m.transactional_id)
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
            self.core.timers.schedule(
                ("markers", tid),
                self.core.clock() + self.core.config.retry_backoff_ms,
                lambda: self._retry_markers(tid, md),
            )
            return
        self._complete(md)

    def _retry_markers(self, tid: str, md: TxnMetadata) -> None:
        if self.core.txns.get(tid) is md and md.state in PREPARING and md.pending is None:
            self.send_markers(md)

    def _complete(self, md: TxnMetadata) -> None:
        tid = md.transactional_id
        transit = md.prepare_complete(self.core.clock())
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
            self.core.timers.schedule(
                ("complete", tid),
                self.core.clock() + self.core.config.retry_backoff_ms,
                lambda: self._retry_complete(tid, md),
            )

        self.core.write_transit(md, transit, written)

    def _retry_complete(self, tid: str, md: TxnMetadata) -> None:
        if (
            self.core.txns.get(tid) is md
            and md.state in PREPARING
            and md.pending is None
            and not md.partitions
        ):
            self._complete(md)
