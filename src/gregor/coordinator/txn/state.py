"""The state of one transactional id, and the transitions between its states.

A transactional id maps to a producer (id and epoch) and to at most one transaction at a
time. The coordinator changes that state in two steps: it prepares a :class:`TxnTransit` (the
whole next image, which is what gets written to ``__transaction_state``) and marks the
metadata's ``pending`` state; only when the write succeeds is the transit applied. While a
transition is pending, other requests for the id are answered CONCURRENT_TRANSACTIONS.

States (Kafka's, with their on-disk numbers)::

    Empty(0) --AddPartitions/AddOffsets--> Ongoing(1) --EndTxn--> PrepareCommit(2) / PrepareAbort(3)
    PrepareCommit --markers written--> CompleteCommit(4);  PrepareAbort --> CompleteAbort(5)
    Complete* / Empty --AddPartitions--> Ongoing;  Complete* / Empty --InitProducerId--> Empty
    Empty / Complete* --expired--> Dead(6) (a tombstone)
    Ongoing --InitProducerId or timeout--> PrepareEpochFence(7, never written) --> PrepareAbort

Epochs: every InitProducerId bumps the producer epoch (fencing the previous producer); when
the epoch would reach the int16 limit a new producer id is allocated instead. A fence (a new
producer, or a transaction that timed out) bumps the epoch before aborting, so the abort
markers carry the new epoch and the old producer's writes are rejected everywhere.
``last_producer_epoch`` remembers the epoch before a bump so that a producer retrying an
InitProducerId whose answer it lost (KIP-360) gets the same answer again.

Transaction version 2 (KIP-890 part 2, a client's EndTxn v5 and its broker-side partition adds):
ending a transaction bumps the epoch once more (``prepare_abort_or_commit`` with ``bump``), so
the markers carry an epoch the transaction's own requests never had and anything late from it
is fenced; the new epoch goes back to the client in the EndTxn answer. When that bump would
exhaust the epoch, a new producer id is allocated with the Prepare state (``next_producer_id``)
and taken over at completion at epoch 0 (``last_producer_id`` keeps the old one, so the
client's retry of that EndTxn is still recognised). ``client_transaction_version`` records the
version of the client's last add or end (0 or 2), as Kafka's log does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 0x7FFF

TopicPartition = tuple[str, int]


class TxnState(IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def display_name(self) -> str:
        """The name DescribeTransactions and ListTransactions use."""
        return _NAMES[self]


_NAMES = {
    TxnState.EMPTY: "Empty",
    TxnState.ONGOING: "Ongoing",
    TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort",
    TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort",
    TxnState.DEAD: "Dead",
    TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
STATES_BY_NAME = {name: state for state, name in _NAMES.items()}

PREPARING = (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)
COMPLETE = (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
IDLE = (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)


def is_epoch_exhausted(epoch: int) -> bool:
    """An epoch this close to the int16 limit cannot be bumped once more for a fence, so the
    next InitProducerId allocates a new producer id instead (Kafka's rule)."""
    return epoch >= MAX_EPOCH - 1


@dataclass(frozen=True)
class TxnTransit:
    """The next image of a transactional id, to be written and then applied."""

    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition]
    start_ms: int
    last_update_ms: int
    next_producer_id: int = NO_PRODUCER_ID
    client_transaction_version: int = 0


@dataclass
class TxnMetadata:
    transactional_id: str
    producer_id: int
    timeout_ms: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    last_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    state: TxnState = TxnState.EMPTY
    partitions: set[TopicPartition] = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1
    pending: TxnState | None = None
    # A fence whose write failed already bumped the epoch in memory; do not bump twice.
    failed_epoch_fence: bool = False
    #: Transaction version 2: the producer id the transaction moves to at completion, when
    #: its epoch bump exhausted the current one (else -1).
    next_producer_id: int = NO_PRODUCER_ID
    #: The transaction version of the client's last add or end (0, or 2 for KIP-890 part 2).
    client_transaction_version: int = 0

    def transit(self, state: TxnState, now: int, **changes: object) -> TxnTransit:
        """Mark ``state`` pending and return the image to write."""
        base = {
            "producer_id": self.producer_id,
            "last_producer_id": self.last_producer_id,
            "producer_epoch": self.producer_epoch,
            "last_producer_epoch": self.last_producer_epoch,
            "timeout_ms": self.timeout_ms,
            "state": state,
            "partitions": frozenset(self.partitions),
            "start_ms": self.start_ms,
            "last_update_ms": now,
            "next_producer_id": self.next_producer_id,
            "client_transaction_version": self.client_transaction_version,
        }
        base.update(changes)
        self.pending = state
        return TxnTransit(**base)  # type: ignore[arg-type]

    def apply(self, t: TxnTransit) -> None:
        self.producer_id = t.producer_id
        self.last_producer_id = t.last_producer_id
        self.producer_epoch = t.producer_epoch
        self.last_producer_epoch = t.last_producer_epoch
        self.timeout_ms = t.timeout_ms
        self.state = t.state
        self.partitions = set(t.partitions)
        self.start_ms = t.start_ms
        self.last_update_ms = t.last_update_ms
        self.next_producer_id = t.next_producer_id
        self.client_transaction_version = t.client_transaction_version
        self.pending = None
        self.failed_epoch_fence = False

    # --- the transitions ---

    def prepare_epoch_bump(
        self, timeout_ms: int, expected_epoch: int | None, now: int
    ) -> TxnTransit | None:
        """InitProducerId on an idle id: the next epoch, or the current one again for a
        retry of the last bump (KIP-360). None means the caller is fenced."""
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            epoch, last = self.producer_epoch, self.last_producer_epoch
        else:
            return None
        return self.transit(
            TxnState.EMPTY,
            now,
            producer_epoch=epoch,
            last_producer_epoch=last,
            timeout_ms=timeout_ms,
            partitions=frozenset(),
            start_ms=-1,
        )

    def prepare_producer_id_rotation(
        self, new_producer_id: int, timeout_ms: int, now: int, record_last_epoch: bool
    ) -> TxnTransit:
        """InitProducerId when the epoch is exhausted: a new producer id at epoch 0."""
        return self.transit(
            TxnState.EMPTY,
            now,
            producer_id=new_producer_id,
            last_producer_id=self.producer_id,
            producer_epoch=0,
            last_producer_epoch=self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
            timeout_ms=timeout_ms,
            partitions=frozenset(),
            start_ms=-1,
        )

    def fence_epoch(self) -> int:
        """Start fencing an ongoing transaction: the epoch its abort will carry. The state
        stays Ongoing; ``pending`` says a fence is under way (nothing is written for it)."""
        self.pending = TxnState.PREPARE_EPOCH_FENCE
        if self.failed_epoch_fence or self.producer_epoch >= MAX_EPOCH:
            return self.producer_epoch
        return self.producer_epoch + 1

    def prepare_add_partitions(
        self, added: set[TopicPartition], now: int, client_transaction_version: int = 0
    ) -> TxnTransit:
        if self.state == TxnState.ONGOING:
            partitions, start = self.partitions | added, self.start_ms
        else:
            partitions, start = set(added), now
        return self.transit(
            TxnState.ONGOING,
            now,
            partitions=frozenset(partitions),
            start_ms=start,
            client_transaction_version=client_transaction_version,
        )

    def prepare_abort_or_commit(
        self,
        state: TxnState,
        now: int,
        *,
        bump: bool = False,
        next_producer_id: int = NO_PRODUCER_ID,
        no_partition_added: bool = False,
    ) -> TxnTransit:
        """PrepareCommit or PrepareAbort. ``bump`` (transaction version 2) ends the
        transaction one epoch higher; ``next_producer_id`` is the id to move to at completion
        when that bump exhausts the epoch. A version 2 abort of a transaction that added
        nothing starts (and ends) it now."""
        changes: dict[str, object] = {}
        if bump:
            changes.update(
                producer_epoch=self.producer_epoch + 1,
                last_producer_epoch=self.producer_epoch,
                next_producer_id=next_producer_id,
                client_transaction_version=2,
            )
        else:
            changes.update(client_transaction_version=0)
        if no_partition_added:
            changes["start_ms"] = now
        return self.transit(state, now, **changes)

    def prepare_complete(self, now: int) -> TxnTransit:
        state = (
            TxnState.COMPLETE_COMMIT
            if self.state == TxnState.PREPARE_COMMIT
            else TxnState.COMPLETE_ABORT
        )
        if self.client_transaction_version >= 2 and self.next_producer_id != NO_PRODUCER_ID:
            # The epoch was exhausted: the producer continues under the new id at epoch 0.
            return self.transit(
                state,
                now,
                partitions=frozenset(),
                producer_id=self.next_producer_id,
                last_producer_id=self.producer_id,
                producer_epoch=0,
                next_producer_id=NO_PRODUCER_ID,
            )
        return self.transit(state, now, partitions=frozenset(), next_producer_id=NO_PRODUCER_ID)

    def prepare_dead(self, now: int) -> TxnTransit:
        return self.transit(TxnState.DEAD, now, partitions=frozenset())
