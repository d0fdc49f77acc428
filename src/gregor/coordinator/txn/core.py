"""The transaction coordinator's shared state: transactions, partitions, timers, outbox.

``TxnCore`` is what the request side (``coordinator.txn.coordinator``) and the two-phase
commit (``coordinator.txn.commit``) share: every transactional id's metadata, the status and
coordinator epoch of each ``__transaction_state`` partition this broker leads, the timers,
and the outbox (writes to ``__transaction_state``, replies, and marker requests as its
effects). ``write_transit`` appends one state change and applies it once written: a change
is never visible before it is durable.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from gregor.coordinator.common.append_errors import TXN_LOG_APPEND_ERRORS
from gregor.coordinator.common.events import log_event
from gregor.coordinator.common.outbox import Outbox, Token
from gregor.coordinator.common.partitioning import partition_for
from gregor.coordinator.common.timers import PartitionStatus, Timers, session_always_confirmed
from gregor.coordinator.txn.records import TxnLogValue, encode_key, encode_value, value_version
from gregor.coordinator.txn.state import TxnMetadata, TxnState, TxnTransit
from gregor.coordinator.txn.types import MarkerWrite, TxnCoordinatorConfig
from gregor.protocol.errors import ErrorCode
from gregor.protocol.records.batch import RecordBatchBuilder

T = TypeVar("T")

log = logging.getLogger("gregor.coordinator.transactions")


class TxnCore:
    def __init__(
        self,
        config: TxnCoordinatorConfig,
        generate_producer_id: Callable[[], int],
        clock: Callable[[], int],
        transaction_version: Callable[[], int],
        session_confirmed: Callable[[], bool] = session_always_confirmed,
    ) -> None:
        self.config = config
        #: False while the broker cannot confirm its metadata session (``common.timers``).
        self.session_confirmed = session_confirmed
        self.generate_producer_id = generate_producer_id
        self.clock = clock
        #: The cluster's finalized ``transaction.version`` (read at each use: it can change).
        self.transaction_version = transaction_version
        self.txns: dict[str, TxnMetadata] = {}
        #: partition -> (status, coordinator epoch)
        self.partitions: dict[int, tuple[PartitionStatus, int]] = {}
        self.timers = Timers()
        self.outbox: Outbox[MarkerWrite] = Outbox()

    def reply(self, token: Token[T], response: T) -> None:
        self.outbox.reply(token, response)

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.config.num_partitions)

    def partition_error(self, transactional_id: str) -> int:
        """0 if this coordinator serves ``transactional_id`` now, else the error to answer."""
        entry = self.partitions.get(self.partition_for(transactional_id))
        if entry is None or not self.session_confirmed():
            return ErrorCode.NOT_COORDINATOR
        return 0 if entry[0] is PartitionStatus.ACTIVE else ErrorCode.COORDINATOR_LOAD_IN_PROGRESS

    def coordinator_epoch(self, transactional_id: str) -> int:
        entry = self.partitions.get(self.partition_for(transactional_id))
        return entry[1] if entry is not None else -1

    @property
    def loading(self) -> bool:
        return any(s is PartitionStatus.LOADING for s, _ in self.partitions.values())

    def txns_of(self, partition: int) -> list[TxnMetadata]:
        return [md for tid, md in self.txns.items() if self.partition_for(tid) == partition]

    def write_transit(
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

        def completed(code: int, _base_offset: int) -> None:
            current = self.partitions.get(partition)
            if self.txns.get(tid) is not md or current != (PartitionStatus.ACTIVE, epoch):
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
                return done(TXN_LOG_APPEND_ERRORS(code))
            if transit.state == TxnState.DEAD:
                del self.txns[tid]
            else:
                md.apply(transit)
            done(0)

        self.outbox.write(partition, b.build(), completed)
