"""Per-partition producer state: idempotence (sequence numbers) and transactions.

Theory of operation. For every producer id that wrote to the partition the manager keeps a
:class:`ProducerStateEntry`: its epoch, the metadata (first/last sequence, last offset,
timestamp) of its last five batches, the coordinator epoch of its last transaction marker, and
the first offset of its open transaction if any. An append is checked in two steps, as in
Kafka: :meth:`ProducerStateManager.stage` copies the entries the append touches into a
:class:`ProducerAppend`, which validates each batch (epoch fencing, sequence continuity,
transaction state) against the copies; only after the bytes are on disk does
:meth:`ProducerStateManager.commit` install them. A failed write therefore leaves the state
untouched.

Errors, as Kafka reports them to a producer (origin CLIENT; replication only warns):
  * epoch below the producer's current epoch              -> INVALID_PRODUCER_EPOCH (47)
  * new epoch whose first sequence is not 0               -> OUT_OF_ORDER_SEQUENCE_NUMBER (45)
  * no state for the producer (retention, DeleteRecords or expiry removed it): any first
    sequence is accepted, as Kafka does since KIP-360; UNKNOWN_PRODUCER_ID is not raised
  * a gap or an overlap with the last sequence            -> OUT_OF_ORDER_SEQUENCE_NUMBER (45)
  * a batch wholly behind the last sequence that is not one
    of the five remembered batches (we cannot give its offsets) -> DUPLICATE_SEQUENCE_NUMBER (46)
  * a non-transactional batch inside an open transaction  -> INVALID_TXN_STATE (48)
  * a marker from an older coordinator epoch              -> TRANSACTION_COORDINATOR_FENCED (52)
A retried batch that *is* one of the five is answered by :meth:`find_duplicate` with its
original offsets and is not written again.

Transactions. A transactional batch opens a transaction at its first offset; a control batch
(COMMIT/ABORT marker) closes it and yields a :class:`CompletedTxn`. The log turns an aborted one
into an entry of the segment's ``.txnindex`` with the last stable offset at that point. Open
transactions (and completed ones whose marker is not yet below the high watermark) hold back
the last stable offset: LSO = min(first offset of the earliest such transaction, HW).

Snapshots. ``<offset>.snapshot`` holds the state as of ``offset`` (the map end offset) and is
written when a segment rolls and at clean shutdown; loading reads the newest readable snapshot
and replays the batches after it. Layout (big-endian)::

    version int16 (=1) | crc32c uint32 (of every byte after it) | entry_count int32
    entry: producer_id int64 | producer_epoch int16 | coordinator_epoch int32
           | last_timestamp int64 | current_txn_first_offset int64 (-1: none)
           | batch_count int8, then per batch (oldest first):
             first_seq int32 | last_seq int32 | last_offset int64 | offset_delta int32
             | timestamp int64
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Iterable
from typing import NamedTuple

from crc32c import crc32c

from gregor.storage.append_types import AppendOrigin as AppendOrigin  # re-exported
from gregor.storage.append_types import BatchMetadata as BatchMetadata  # re-exported
from gregor.storage.checkpoint import write_atomically
from gregor.storage.errors import (
    DuplicateSequenceError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from gregor.storage.fast_append import ProducerStateCore
from gregor.storage.files import SNAPSHOT_SUFFIX, file_name, parse_base_offset

log = logging.getLogger(__name__)

NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
BATCHES_TO_RETAIN = 5
INT32_MAX = 0x7FFFFFFF
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 24 * 3600 * 1000

SNAPSHOT_VERSION = 1
_SNAP_HEAD = struct.Struct(">hI")
_SNAP_COUNT = struct.Struct(">i")
_SNAP_ENTRY = struct.Struct(">qhiqqb")
_SNAP_BATCH = struct.Struct(">iiqiq")


class CompletedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int  # the marker's offset
    is_aborted: bool


class ProducerStateEntry:
    __slots__ = (
        "producer_id",
        "producer_epoch",
        "batches",
        "coordinator_epoch",
        "last_timestamp",
        "current_txn_first_offset",
    )

    def __init__(
        self,
        producer_id: int,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        batches: list[BatchMetadata] | None = None,
        coordinator_epoch: int = -1,
        last_timestamp: int = -1,
        current_txn_first_offset: int = -1,
    ) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.batches = batches if batches is not None else []
        self.coordinator_epoch = coordinator_epoch
        self.last_timestamp = last_timestamp
        self.current_txn_first_offset = current_txn_first_offset

    def copy(self) -> ProducerStateEntry:
        return ProducerStateEntry(
            self.producer_id,
            self.producer_epoch,
            list(self.batches),
            self.coordinator_epoch,
            self.last_timestamp,
            self.current_txn_first_offset,
        )

    def __repr__(self) -> str:
        return (
            f"ProducerStateEntry(pid={self.producer_id}, epoch={self.producer_epoch}, "
            f"last_seq={self.last_seq}, last_data_offset={self.last_data_offset}, "
            f"txn_first_offset={self.current_txn_first_offset})"
        )

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def first_seq(self) -> int:
        return self.batches[0].first_seq if self.batches else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.producer_epoch:
            return None
        for b in self.batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        return None

    def maybe_update_epoch(self, epoch: int) -> None:
        if self.producer_epoch != epoch:
            self.batches = []
            self.producer_epoch = epoch

    def add_batch(self, epoch: int, first_seq: int, last_seq: int, last_offset: int,
                  offset_delta: int, timestamp: int) -> None:  # fmt: skip
        self.maybe_update_epoch(epoch)
        self.batches.append(
            BatchMetadata(first_seq, last_seq, last_offset, offset_delta, timestamp)
        )
        if len(self.batches) > BATCHES_TO_RETAIN:
            del self.batches[0]
        self.last_timestamp = timestamp

    def remove_batches_before(self, offset: int) -> None:
        self.batches = [b for b in self.batches if b.last_offset >= offset]


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


def _is_behind(last_seq: int, batch_last_seq: int) -> bool:
    """Whether a batch ending at ``batch_last_seq`` is at or before ``last_seq`` (modulo the
    int32 wrap-around, looking at most half the sequence space back)."""
    return ((last_seq - batch_last_seq) & INT32_MAX) < (1 << 30)


class ProducerAppend:
    """Staged producer-state changes of one append (Kafka's ProducerAppendInfo)."""

    __slots__ = ("_manager", "origin", "entries", "started_txns", "completed_txns")

    def __init__(self, manager: ProducerStateManager, origin: AppendOrigin) -> None:
        self._manager = manager
        self.origin = origin
        self.entries: dict[int, ProducerStateEntry] = {}
        self.started_txns: list[tuple[int, int]] = []  # (first_offset, producer_id)
        self.completed_txns: list[CompletedTxn] = []

    def _entry(self, producer_id: int) -> ProducerStateEntry:
        updated = self.entries.get(producer_id)
        if updated is None:
            current = self._manager.entries.get(producer_id)
            updated = current.copy() if current else ProducerStateEntry(producer_id)
            self.entries[producer_id] = updated
        return updated

    def _check_epoch(self, entry: ProducerStateEntry, epoch: int, offset: int) -> None:
        if epoch < entry.producer_epoch:
            msg = (
                f"epoch {epoch} of producer {entry.producer_id} at offset {offset} is older "
                f"than its current epoch {entry.producer_epoch}"
            )
            if self.origin is AppendOrigin.REPLICATION:
                log.warning("%s", msg)
            else:
                raise InvalidProducerEpochError(msg)

    def _check_sequence(
        self,
        entry: ProducerStateEntry,
        epoch: int,
        first_seq: int,
        last_seq: int,
    ) -> None:
        pid = entry.producer_id
        if epoch != entry.producer_epoch:
            # No state at all for the producer (its records were removed by retention or
            # DeleteRecords, or it expired): any sequence is accepted, as Kafka does since
            # KIP-360 (2.5); a known producer's new epoch must start at 0.
            if first_seq != 0 and entry.producer_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceError(
                    f"producer {pid} starts epoch {epoch} at sequence {first_seq}, not 0"
                )
            return
        current_last = entry.last_seq
        if _in_sequence(current_last, first_seq):
            return
        if current_last != NO_SEQUENCE and _is_behind(current_last, last_seq):
            raise DuplicateSequenceError(
                f"producer {pid} batch {first_seq}..{last_seq} was written before "
                f"(last sequence {current_last}) but is no longer remembered"
            )
        raise OutOfOrderSequenceError(
            f"out of order sequence for producer {pid}: {first_seq} (incoming) after "
            f"{current_last} (last written)"
        )

    def append_data_batch(
        self,
        producer_id: int,
        epoch: int,
        first_seq: int,
        last_seq: int,
        first_offset: int,
        last_offset: int,
        max_timestamp: int,
        is_transactional: bool,
    ) -> None:
        entry = self._entry(producer_id)
        self._check_epoch(entry, epoch, first_offset)
        if self.origin is AppendOrigin.CLIENT:
            self._check_sequence(entry, epoch, first_seq, last_seq)
        entry.add_batch(
            epoch, first_seq, last_seq, last_offset, last_offset - first_offset, max_timestamp
        )
        if entry.current_txn_first_offset >= 0 and not is_transactional:
            raise InvalidTxnStateError(
                f"producer {producer_id} wrote a non-transactional batch at offset "
                f"{first_offset} inside its open transaction"
            )
        if entry.current_txn_first_offset < 0 and is_transactional:
            entry.current_txn_first_offset = first_offset
            self.started_txns.append((first_offset, producer_id))

    def append_end_txn_marker(
        self,
        producer_id: int,
        epoch: int,
        commit: bool,
        coordinator_epoch: int,
        offset: int,
        timestamp: int,
    ) -> CompletedTxn | None:
        entry = self._entry(producer_id)
        self._check_epoch(entry, epoch, offset)
        if entry.coordinator_epoch > coordinator_epoch:
            msg = (
                f"marker for producer {producer_id} at offset {offset} comes from coordinator "
                f"epoch {coordinator_epoch}, below {entry.coordinator_epoch}"
            )
            if self.origin is AppendOrigin.REPLICATION:
                log.info("%s", msg)
            else:
                raise TransactionCoordinatorFencedError(msg)
        completed = None
        if entry.current_txn_first_offset >= 0:
            completed = CompletedTxn(
                producer_id, entry.current_txn_first_offset, offset, not commit
            )
            self.completed_txns.append(completed)
        entry.maybe_update_epoch(epoch)
        entry.current_txn_first_offset = -1
        entry.coordinator_epoch = coordinator_epoch
        entry.last_timestamp = timestamp
        return completed


class ProducerStateManager(ProducerStateCore):
    def __init__(
        self,
        directory: str | None,
        *,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        sync: bool = True,
    ) -> None:
        self.dir = directory
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.sync = sync
        self.entries: dict[int, ProducerStateEntry] = {}
        # first_offset -> producer_id; insertion order is offset order
        self.ongoing_txns: dict[int, int] = {}
        # first_offset -> completed txn whose marker is not yet below the high watermark
        self.unreplicated_txns: dict[int, CompletedTxn] = {}
        self.map_end_offset = 0
        self.last_snapshot_offset: int | None = None

    # --- queries ---

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.entries.get(producer_id)

    def find_duplicate(
        self, producer_id: int, epoch: int, first_seq: int, last_seq: int
    ) -> BatchMetadata | None:
        entry = self.entries.get(producer_id)
        return entry.find_duplicate(epoch, first_seq, last_seq) if entry else None

    def first_unstable_offset(self) -> int | None:
        """First offset of the earliest open or not-yet-replicated transaction."""
        candidates = []
        if self.ongoing_txns:
            candidates.append(next(iter(self.ongoing_txns)))
        if self.unreplicated_txns:
            candidates.append(min(self.unreplicated_txns))
        return min(candidates) if candidates else None

    def last_stable_offset_for(self, completed: CompletedTxn) -> int:
        """The LSO once ``completed`` is done: the first offset of another producer's open
        transaction, else just past the marker (goes in the aborted-txn index entry)."""
        for first_offset, pid in self.ongoing_txns.items():
            if pid != completed.producer_id:
                return first_offset
        return completed.last_offset + 1

    @property
    def is_empty(self) -> bool:
        return not self.entries and not self.ongoing_txns

    # --- updates ---

    def stage(self, origin: AppendOrigin = AppendOrigin.CLIENT) -> ProducerAppend:
        return ProducerAppend(self, origin)

    def commit(self, staged: ProducerAppend, end_offset: int) -> None:
        """Install the staged entries and started transactions; completed transactions are
        finished separately with :meth:`complete_txn` (after the txn index is updated)."""
        self.entries.update(staged.entries)
        for first_offset, pid in staged.started_txns:
            self.ongoing_txns[first_offset] = pid
        if end_offset > self.map_end_offset:
            self.map_end_offset = end_offset

    def complete_txn(self, completed: CompletedTxn) -> None:
        if self.ongoing_txns.pop(completed.first_offset, None) is None:
            log.warning("completed transaction %s was not open", completed)
            return
        self.unreplicated_txns[completed.first_offset] = completed

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        if self.unreplicated_txns:
            for first, txn in list(self.unreplicated_txns.items()):
                if txn.last_offset < high_watermark:
                    del self.unreplicated_txns[first]

    def truncate_head(self, log_start_offset: int) -> None:
        """Forget batches below the new log start offset, and producers left with none."""
        evicted = []
        for pid, entry in self.entries.items():
            entry.remove_batches_before(log_start_offset)
            if entry.last_data_offset < log_start_offset:
                evicted.append(pid)
        for pid in evicted:
            del self.entries[pid]
        if evicted:
            gone = set(evicted)
            self.ongoing_txns = {o: p for o, p in self.ongoing_txns.items() if p not in gone}
        self.unreplicated_txns = {
            o: t for o, t in self.unreplicated_txns.items() if t.last_offset >= log_start_offset
        }
        if self.map_end_offset < log_start_offset:
            self.map_end_offset = log_start_offset
        self.delete_snapshots_below(log_start_offset)

    def remove_expired_producers(self, now_ms: int) -> list[int]:
        """Drop producers without an open transaction idle for producer.id.expiration.ms."""
        expired = [
            pid
            for pid, e in self.entries.items()
            if e.current_txn_first_offset < 0
            and now_ms - e.last_timestamp >= self.producer_id_expiration_ms
        ]
        for pid in expired:
            del self.entries[pid]
        return expired

    def clear(self, map_end_offset: int) -> None:
        self.entries.clear()
        self.ongoing_txns.clear()
        self.unreplicated_txns.clear()
        self.map_end_offset = map_end_offset

    # --- snapshots ---

    def snapshot_offsets(self) -> list[int]:
        return _snapshot_offsets_in(self.dir) if self.dir else []

    def _snapshot_path(self, offset: int) -> str:
        assert self.dir is not None
        return os.path.join(self.dir, file_name(offset, SNAPSHOT_SUFFIX))

    def take_snapshot(self) -> int | None:
        """Write ``<map_end_offset>.snapshot`` unless it exists already."""
        if not self.dir:
            return None
        offset = self.map_end_offset
        if offset == self.last_snapshot_offset and os.path.exists(self._snapshot_path(offset)):
            return None
        write_atomically(self._snapshot_path(offset), self.encode_snapshot(), sync=self.sync)
        self.last_snapshot_offset = offset
        return offset

    def encode_snapshot(self) -> bytes:
        parts = [_SNAP_COUNT.pack(len(self.entries))]
        for e in self.entries.values():
            parts.append(
                _SNAP_ENTRY.pack(
                    e.producer_id,
                    e.producer_epoch,
                    e.coordinator_epoch,
                    e.last_timestamp,
                    e.current_txn_first_offset,
                    len(e.batches),
                )
            )
            parts.extend(_SNAP_BATCH.pack(*b) for b in e.batches)
        body = b"".join(parts)
        return _SNAP_HEAD.pack(SNAPSHOT_VERSION, crc32c(body)) + body

    @staticmethod
    def decode_snapshot(data: bytes) -> list[ProducerStateEntry]:
        """Entries of a snapshot; ValueError if it is damaged."""
        if len(data) < _SNAP_HEAD.size + _SNAP_COUNT.size:
            raise ValueError("snapshot is truncated")
        version, crc = _SNAP_HEAD.unpack_from(data)
        if version != SNAPSHOT_VERSION:
            raise ValueError(f"unknown snapshot version {version}")
        body = memoryview(data)[_SNAP_HEAD.size :]
        if crc32c(body) != crc:
            raise ValueError("snapshot fails its CRC32C check")
        try:
            (count,) = _SNAP_COUNT.unpack_from(body)
            pos = _SNAP_COUNT.size
            out = []
            for _ in range(count):
                pid, epoch, coord, ts, txn_first, nb = _SNAP_ENTRY.unpack_from(body, pos)
                pos += _SNAP_ENTRY.size
                batches = []
                for _ in range(nb):
                    batches.append(BatchMetadata(*_SNAP_BATCH.unpack_from(body, pos)))
                    pos += _SNAP_BATCH.size
                out.append(ProducerStateEntry(pid, epoch, batches, coord, ts, txn_first))
        except struct.error:
            raise ValueError("snapshot is truncated") from None
        if pos != len(body):
            raise ValueError("snapshot has trailing bytes")
        return out

    def load_latest_snapshot(self, max_offset: int, log_start_offset: int) -> int | None:
        """Load the newest readable snapshot at or below ``max_offset``; delete the ones
        above it and unreadable ones. Returns its offset (state is cleared when none)."""
        self.clear(log_start_offset)
        self.last_snapshot_offset = None
        for offset in reversed(self.snapshot_offsets()):
            path = self._snapshot_path(offset)
            if offset > max_offset:
                _unlink_if_present(path)
                continue
            try:
                with open(path, "rb") as f:
                    entries = self.decode_snapshot(f.read())
            except FileNotFoundError:
                continue  # pruned meanwhile by a checkpoint written in another thread
            except (OSError, ValueError) as e:
                log.warning("deleting unreadable producer snapshot %s: %s", path, e)
                _unlink_if_present(path)
                continue
            self.load_entries(entries, offset)
            self.last_snapshot_offset = offset
            return offset
        return None

    def load_entries(self, entries: Iterable[ProducerStateEntry], map_end_offset: int) -> None:
        self.clear(map_end_offset)
        txns = []
        for e in entries:
            self.entries[e.producer_id] = e
            if e.current_txn_first_offset >= 0:
                txns.append((e.current_txn_first_offset, e.producer_id))
        for first, pid in sorted(txns):
            self.ongoing_txns[first] = pid

    def delete_snapshots_below(self, offset: int) -> None:
        if self.dir:
            delete_snapshot_files_below(self.dir, offset)

    def delete_snapshots_above(self, offset: int) -> None:
        for off in self.snapshot_offsets():
            if off > offset:
                _unlink_if_present(self._snapshot_path(off))
        if self.last_snapshot_offset is not None and self.last_snapshot_offset > offset:
            self.last_snapshot_offset = None


def _snapshot_offsets_in(directory: str) -> list[int]:
    out = []
    for name in os.listdir(directory):
        if name.endswith(SNAPSHOT_SUFFIX):
            off = parse_base_offset(name)
            if off is not None and name == file_name(off, SNAPSHOT_SUFFIX):
                out.append(off)
    return sorted(out)


def _unlink_if_present(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def delete_snapshot_files_below(directory: str, offset: int) -> None:
    """Unlink the producer snapshots of ``directory`` below ``offset``. Touches files only (no
    manager state), so it may run in another thread than the log's owner: the owner only
    ever writes snapshots at or above the log end offset."""
    try:
        offsets = _snapshot_offsets_in(directory)
    except FileNotFoundError:
        return  # the log was deleted meanwhile
    for off in offsets:
        if off < offset:
            _unlink_if_present(os.path.join(directory, file_name(off, SNAPSHOT_SUFFIX)))
