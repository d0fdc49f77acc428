"""One hosted partition: its log, its place in the replica set, and who waits on it.

Theory of operation. A ``Partition`` is the only owner of the rules that sit between a
request and a ``Log`` (Kafka's ``kafka.cluster.Partition``):

* **Role and epochs.** The metadata publisher makes this broker the partition's leader (or,
  in a cluster, a follower) with the leader epoch, partition epoch, replicas and ISR of the
  metadata image. A request that names a leader epoch is checked against ours
  (``check_epoch``): older is FENCED_LEADER_EPOCH, newer is UNKNOWN_LEADER_EPOCH.
* **Appends.** Every leader append (clients, coordinators, transaction markers) goes through
  ``append_as_leader`` / ``append_txn_marker``, which stamp the leader epoch, then wake the
  followers' fetches (log end offset moved) and try to advance the high watermark.
* **High watermark.** The high watermark is the smallest log end offset in the maximal
  ISR: ours, and the last fetch offset (``update_follower``) of each follower in the ISR or
  asked into it. A follower asked in counts from the moment it is asked (Kafka's
  ``maximalIsr``): the controller may commit it and then elect it leader before this broker
  hears back, so nothing it lacks may be acknowledged. A follower asked out still counts
  until the image without it arrives. On one node the ISR is this broker alone, so the high
  watermark follows the log end offset at once. When it advances, the consumers' long-poll
  fetches and the acks=all produces waiting for it are released. ``min.insync.replicas`` is
  checked before a client's acks=all append, and again when the high watermark releases it:
  if the maximal ISR has meanwhile shrunk below it, the records are committed but the
  producer gets NOT_ENOUGH_REPLICAS_AFTER_APPEND (Kafka's ``checkEnoughReplicasReachOffset``),
  since fewer copies exist than it asked for.
* **ISR.** A follower that has fetched up to the high watermark (and into this leader's
  epoch) is asked into the ISR; one that has not caught up with the log end offset for
  ``replica.lag.time.max.ms`` is asked out (``isr_to_shrink``). Asking is the ``alter_isr``
  hook (a compare-and-set on the partition epoch in the metadata store); the ISR here
  changes only when the new image comes back through ``make_leader``. One request is
  pending at a time.
* **Follower.** A follower appends what it fetched from the leader as it is (offsets and
  epochs are the leader's) and takes the leader's high watermark, capped by its own log end
  offset (``append_as_follower``, ``follower_fetched``).
* **Reads.** A consumer reads up to the high watermark (or the last stable offset for
  READ_COMMITTED); a follower reads up to the log end offset.

Everything runs on the broker's event loop; no method awaits, so a partition's appends are
serialized without locks.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gregor.broker.common.file_send import SendableRegion
from gregor.protocol.errors import (
    ErrorCode,
    InvalidRequestError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    PolicyViolationError,
)
from gregor.storage.log import Log
from gregor.storage.log_info import LogAppendInfo
from gregor.storage.producer_state import AppendOrigin, ProducerStateEntry
from gregor.storage.transaction_index import AbortedTxn
from gregor.storage.validator import ScannedBatch

READ_UNCOMMITTED = 0
READ_COMMITTED = 1

# ListOffsets special timestamps.
LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5


@dataclass(slots=True)
class PartitionRead:
    """What a fetch of one partition found (``records`` is None for no data)."""

    records: bytes | memoryview | None
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted_transactions: list[AbortedTxn] | None
    #: Instead of ``records``, when the read was asked for a region (sendfile).
    region: SendableRegion | None = None


@dataclass(slots=True)
class FollowerState:
    """What the leader knows of one follower: its log end offset as of its last fetch."""

    log_end_offset: int = -1
    last_fetch_ms: int = -1
    #: When its fetch last reached our log end offset (-1: never, since we became leader).
    last_caught_up_ms: int = -1


@dataclass(frozen=True, slots=True)
class OffsetLookup:
    timestamp: int
    offset: int
    leader_epoch: int


NOT_FOUND = OffsetLookup(-1, -1, -1)


class Partition:
    def __init__(
        self, topic: str, index: int, topic_id: uuid.UUID, log: Log, local_id: int
    ) -> None:
        self.topic = topic
        self.index = index
        self.topic_id = topic_id
        self.log = log
        self.local_id = local_id
        self.leader_id = -1
        self.leader_epoch = -1
        self.partition_epoch = -1
        self.replicas: tuple[int, ...] = ()
        self.isr: tuple[int, ...] = ()
        self.min_insync_replicas = 1
        self.followers: dict[int, FollowerState] = {}
        self._data_waiters: set[asyncio.Future[None]] = set()  # consumers: HW/LSO moved
        self._replica_waiters: set[asyncio.Future[None]] = set()  # followers: LEO moved
        #: (offset, future, whether min.insync.replicas is checked when released)
        self._acks_waiters: list[tuple[int, asyncio.Future[None], bool]] = []
        #: Asks the metadata store for a new ISR (set by the replica manager in a cluster).
        self.alter_isr: Callable[[Partition, tuple[int, ...]], None] | None = None
        self.pending_isr: tuple[int, ...] | None = None
        #: When this broker became leader (a new follower gets that long to catch up).
        self.leader_since_ms = -1
        #: [shrinks, expands] of the ISR while this broker leads (the broker's metrics list).
        self.isr_changes: list[int] = [0, 0]

    def __repr__(self) -> str:
        return f"Partition({self.topic}-{self.index}, leader={self.leader_id}, epoch={self.leader_epoch})"

    @property
    def waiting_acks(self) -> int:
        """acks=all produces waiting for the high watermark (Kafka's produce purgatory)."""
        return len(self._acks_waiters)

    @property
    def waiting_fetches(self) -> int:
        """Long-poll fetches waiting for data (Kafka's fetch purgatory)."""
        return len(self._data_waiters) + len(self._replica_waiters)

    # --- role ---

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_id

    def make_leader(
        self, leader_epoch: int, partition_epoch: int, replicas: Sequence[int], isr: Sequence[int]
    ) -> None:
        """Become (or stay) the leader with the image's epochs and replica set."""
        if not self.is_leader or leader_epoch != self.leader_epoch:
            self.followers = {}
            self.leader_since_ms = _now_ms()
            if len(replicas) > 1 and leader_epoch > self.log.leader_epoch_cache.latest:
                # The new epoch starts at our log end offset (Kafka's leader does this at
                # election): a follower asking where its older epoch ends learns it here.
                self.log.leader_epoch_cache.assign(leader_epoch, self.log.log_end_offset)
        if self.is_leader and leader_epoch == self.leader_epoch and set(isr) != set(self.isr):
            self.isr_changes[0 if len(isr) < len(self.isr) else 1] += 1
        if (leader_epoch, partition_epoch) != (self.leader_epoch, self.partition_epoch):
            # A newer partition state settles any change asked for before it (one asked on
            # an older partition epoch can no longer commit); the same state again does not.
            self.pending_isr = None
        self.leader_id = self.local_id
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        self.replicas = tuple(replicas)
        self.isr = tuple(isr)
        self.followers = {
            r: self.followers.get(r, FollowerState()) for r in replicas if r != self.local_id
        }
        # A leader whose ISR is itself alone holds every replica's copy, so it may expose
        # its whole log (the checkpointed high watermark lags after a crash), as Kafka's
        # leader does when it takes over a single-replica partition.
        self.maybe_advance_high_watermark()

    def make_follower(
        self, leader_id: int, leader_epoch: int, partition_epoch: int, replicas: Sequence[int]
    ) -> None:
        """Follow ``leader_id``: clients get NOT_LEADER_OR_FOLLOWER; waiters are released."""
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        self.replicas = tuple(replicas)
        self.followers = {}
        self.pending_isr = None
        self.release_waiters(
            NotLeaderOrFollowerError(f"{self.topic}-{self.index} moved to {leader_id}")
        )

    def check_epoch(self, current_leader_epoch: int | None) -> ErrorCode:
        """NONE, or the error for a request that names another leader epoch (-1: none)."""
        if (
            current_leader_epoch is None
            or current_leader_epoch < 0
            or current_leader_epoch == self.leader_epoch
        ):
            return ErrorCode.NONE
        if current_leader_epoch < self.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        return ErrorCode.UNKNOWN_LEADER_EPOCH

    def _require_leader(self) -> None:
        if not self.is_leader:
            raise NotLeaderOrFollowerError(
                f"This broker is not the leader of {self.topic}-{self.index}."
            )

    # --- appends ---

    def append_as_leader(
        self,
        records: bytes | bytearray | memoryview,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        required_acks: int = 1,
        scanned: Sequence[ScannedBatch] | None = None,
    ) -> LogAppendInfo:
        """Append as the leader; ``scanned``: the batches' records already decompressed and
        walked (``validator.scan_batches``)."""
        self._require_leader()
        if required_acks == -1 and len(self.isr) < self.min_insync_replicas:
            raise NotEnoughReplicasError(
                f"The size of the current ISR {len(self.isr)} is below min.insync.replicas "
                f"{self.min_insync_replicas} for {self.topic}-{self.index}."
            )
        if scanned is None:
            info = self.log.append(records, leader_epoch=self.leader_epoch, origin=origin)
        else:
            info = self.log.append(
                records, leader_epoch=self.leader_epoch, origin=origin, scanned=scanned
            )
        self._appended()
        return info

    def append_txn_marker(
        self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int
    ) -> LogAppendInfo:
        self._require_leader()
        info = self.log.append_end_txn_marker(
            producer_id,
            producer_epoch,
            commit=commit,
            coordinator_epoch=coordinator_epoch,
            leader_epoch=self.leader_epoch,
        )
        self._appended()
        return info

    def _appended(self) -> None:
        _wake(self._replica_waiters)
        self.maybe_advance_high_watermark()

    # --- high watermark and followers ---

    def maybe_advance_high_watermark(self) -> bool:
        """Move the high watermark to the smallest log end offset in the maximal ISR."""
        hw = self.log.log_end_offset
        for replica in self.maximal_isr:
            if replica != self.local_id:
                state = self.followers.get(replica)
                hw = min(hw, state.log_end_offset if state is not None else -1)
        if not self.log.maybe_increment_high_watermark(hw):
            return False
        _wake(self._data_waiters)
        self._release_acks()
        return True

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        """The ISR and any follower asked into it: the replicas the controller may elect
        before this broker learns the outcome of a pending change."""
        pending = self.pending_isr
        if pending is None:
            return self.isr
        return self.isr + tuple(r for r in pending if r not in self.isr)

    def update_follower(self, replica_id: int, fetch_offset: int, now_ms: int) -> bool:
        """A follower fetched from ``fetch_offset``: it holds everything below it. Returns
        whether the high watermark advanced; asks for the follower to join the ISR once it
        has caught up."""
        state = self.followers.get(replica_id)
        if state is None:
            return False
        moved = state.log_end_offset != fetch_offset
        state.log_end_offset = fetch_offset
        state.last_fetch_ms = now_ms
        if fetch_offset >= self.log.log_end_offset:
            state.last_caught_up_ms = now_ms
        if not moved and replica_id in self.maximal_isr:
            return False  # nothing new for the high watermark (the common idle partition)
        if replica_id not in self.isr and self._caught_up_to_join(fetch_offset):
            self._ask_isr(tuple(r for r in self.replicas if r in self.isr or r == replica_id))
        return self.maybe_advance_high_watermark()

    def _caught_up_to_join(self, fetch_offset: int) -> bool:
        """Kafka's rule: the follower holds the high watermark and this leader's epoch."""
        epoch_start = self.log.leader_epoch_cache.start_offset_of(self.leader_epoch)
        return fetch_offset >= self.log.high_watermark and (
            epoch_start is None or fetch_offset >= epoch_start
        )

    def isr_to_shrink(self, now_ms: int, max_lag_ms: int) -> tuple[int, ...] | None:
        """The ISR without the followers that have not caught up for ``max_lag_ms``, or None
        if all are in step (or a change is pending)."""
        if not self.is_leader or self.pending_isr is not None:
            return None
        out = []
        for replica in self.isr:
            state = self.followers.get(replica)
            if state is not None:
                since = max(state.last_caught_up_ms, self.leader_since_ms)
                if now_ms - since > max_lag_ms and state.log_end_offset < self.log.log_end_offset:
                    continue
            out.append(replica)
        return tuple(out) if len(out) < len(self.isr) and out else None

    def _ask_isr(self, isr: tuple[int, ...]) -> None:
        if self.alter_isr is not None and self.pending_isr is None and isr != self.isr:
            self.pending_isr = isr
            self.alter_isr(self, isr)

    def shrink_isr(self, now_ms: int, max_lag_ms: int) -> None:
        isr = self.isr_to_shrink(now_ms, max_lag_ms)
        if isr is not None:
            self._ask_isr(isr)

    # --- follower ---

    def append_as_follower(self, records: bytes | bytearray | memoryview) -> LogAppendInfo:
        return self.log.append_as_follower(records)

    def follower_fetched(self, leader_high_watermark: int, leader_log_start_offset: int) -> None:
        """Take the leader's high watermark (capped by our log end offset) and log start."""
        log = self.log
        if leader_log_start_offset > log.log_start_offset:
            log.increment_log_start_offset(min(leader_log_start_offset, log.log_end_offset))
        hw = min(leader_high_watermark, log.log_end_offset)
        if hw > log.high_watermark:
            log.update_high_watermark(hw)
            _wake(self._data_waiters)  # consumers reading from this follower (KIP-392)

    def wait_for_high_watermark(self, offset: int, min_isr: bool = False) -> asyncio.Future[None]:
        """A future done once the high watermark reaches ``offset`` (acks=all); with
        ``min_isr``, failed with NOT_ENOUGH_REPLICAS_AFTER_APPEND if by then the maximal ISR
        is below ``min.insync.replicas``."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self.log.high_watermark >= offset:
            self._acknowledge(fut, min_isr)
        else:
            self._acks_waiters.append((offset, fut, min_isr))
        return fut

    def _release_acks(self) -> None:
        if not self._acks_waiters:
            return
        hw = self.log.high_watermark
        waiting = []
        for offset, fut, min_isr in self._acks_waiters:
            if offset <= hw:
                self._acknowledge(fut, min_isr)
            else:
                waiting.append((offset, fut, min_isr))
        self._acks_waiters = waiting

    def _acknowledge(self, fut: asyncio.Future[None], min_isr: bool) -> None:
        """Release a write the high watermark has reached: done, or (``min_isr`` and the
        maximal ISR below ``min.insync.replicas``) NOT_ENOUGH_REPLICAS_AFTER_APPEND."""
        if fut.done():
            return
        if min_isr and len(self.maximal_isr) < self.min_insync_replicas:
            fut.set_exception(
                NotEnoughReplicasAfterAppendError(
                    f"Committed at {self.topic}-{self.index} with an ISR of "
                    f"{len(self.maximal_isr)}, below min.insync.replicas "
                    f"{self.min_insync_replicas}."
                )
            )
        else:
            fut.set_result(None)

    # --- long-poll waiters ---

    def add_waiter(self, fut: asyncio.Future[None], from_follower: bool) -> None:
        (self._replica_waiters if from_follower else self._data_waiters).add(fut)

    def remove_waiter(self, fut: asyncio.Future[None]) -> None:
        self._data_waiters.discard(fut)
        self._replica_waiters.discard(fut)

    def release_waiters(self, error: Exception | None = None) -> None:
        """Wake every waiter (shutdown, deletion, leadership change); acks=all produces get
        ``error`` if given."""
        _wake(self._data_waiters)
        _wake(self._replica_waiters)
        acks, self._acks_waiters = self._acks_waiters, []
        for _, fut, _ in acks:
            if not fut.done():
                if error is None:
                    fut.set_result(None)
                else:
                    fut.set_exception(error)

    # --- reads ---

    def read(
        self,
        fetch_offset: int,
        max_bytes: int,
        *,
        isolation: int,
        from_follower: bool,
        min_one: bool,
        region: bool = False,
    ) -> PartitionRead:
        """Read from ``fetch_offset``; raises the storage error (OFFSET_OUT_OF_RANGE, ...).
        With ``region`` the records are not read but handed out as a ``SendableRegion`` of the
        segment file, for sendfile (``file_send``)."""
        log = self.log
        high_watermark = log.high_watermark
        last_stable_offset = log.last_stable_offset
        if from_follower:
            upper = log.log_end_offset
        else:
            upper = last_stable_offset if isolation == READ_COMMITTED else high_watermark
        committed = isolation == READ_COMMITTED and not from_follower
        records: bytes | memoryview | None = None
        sendable: SendableRegion | None = None
        aborted: list[AbortedTxn] | None = None
        if max_bytes > 0 or min_one:
            info = log.read(
                fetch_offset,
                max(max_bytes, 0),
                max_offset=upper,
                min_one_message=min_one,
                include_aborted_txns=committed,
            )
            found = info.region
            if found is not None:
                if region and found.length:
                    sendable = SendableRegion(found.fd, found.position, found.length)
                else:
                    records = found.read()
            aborted = info.aborted_transactions
        else:
            # Nothing fits, but the offset must still be checked.
            log.read(fetch_offset, 0, max_offset=upper, min_one_message=False)
        return PartitionRead(
            records, high_watermark, last_stable_offset, log.log_start_offset, aborted, sendable
        )

    def fetch_offset_for_timestamp(
        self, timestamp: int, isolation: int, from_replica: bool
    ) -> OffsetLookup:
        """ListOffsets: Kafka's ``Partition.fetchOffsetForTimestamp``."""
        log = self.log
        cache = log.leader_epoch_cache
        if timestamp in (LATEST, LATEST_TIERED):
            if from_replica:
                offset = log.log_end_offset
            else:
                offset = (
                    log.last_stable_offset if isolation == READ_COMMITTED else log.high_watermark
                )
            latest = cache.latest_epoch
            return OffsetLookup(-1, offset, latest if latest is not None else self.leader_epoch)
        if timestamp in (EARLIEST, EARLIEST_LOCAL):
            offset = log.log_start_offset
            epoch = cache.epoch_for_offset(offset)
            return OffsetLookup(-1, offset, epoch if epoch is not None else self.leader_epoch)
        if timestamp == MAX_TIMESTAMP:
            found = log.latest_timestamp()
            if found is None:
                return NOT_FOUND
            return OffsetLookup(found.timestamp, found.offset, _epoch(found.leader_epoch))
        if timestamp < 0:
            raise InvalidRequestError(f"Unknown special timestamp {timestamp}.")
        found = log.offset_for_timestamp(timestamp)
        if found is None or found.offset >= log.high_watermark:
            return NOT_FOUND
        if isolation == READ_COMMITTED and found.offset >= log.last_stable_offset:
            return NOT_FOUND
        return OffsetLookup(found.timestamp, found.offset, _epoch(found.leader_epoch))

    def end_offset_for_epoch(self, leader_epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (the largest epoch <= the one asked, its end offset)."""
        return self.log.leader_epoch_cache.end_offset_for(leader_epoch, self.log.log_end_offset)

    # --- administration ---

    def delete_records(self, offset: int) -> int:
        """Raise the log start offset (-1: to the high watermark); returns the new one."""
        self._require_leader()
        if not self.log.config.delete:
            # As in Kafka: a compact-only topic keeps the latest value of every key; deleting
            # a prefix would drop keys, so it is a policy violation.
            raise PolicyViolationError(
                f"Records of the compacted topic {self.topic} cannot be deleted."
            )
        low_watermark = self.log.delete_records(offset)
        _wake(self._data_waiters)
        return low_watermark

    def active_producers(self) -> list[ProducerStateEntry]:
        return sorted(self.log.producer_state.entries.values(), key=lambda e: e.producer_id)

    def has_ongoing_transaction(self, producer_id: int, producer_epoch: int) -> bool:
        """Whether ``producer_id`` already has a transaction open here at this epoch (so a
        transactional batch continues it rather than starting one: KIP-890)."""
        entry = self.log.producer_state.last_entry(producer_id)
        return (
            entry is not None
            and entry.current_txn_first_offset >= 0
            and entry.producer_epoch == producer_epoch
        )


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _epoch(leader_epoch: int | None) -> int:
    return leader_epoch if leader_epoch is not None else -1


def _wake(waiters: set[asyncio.Future[None]]) -> None:
    if waiters:
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)
        waiters.clear()
