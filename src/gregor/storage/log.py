"""The log of one topic-partition: an ordered list of segments in ``<topic>-<partition>/``.

Theory of operation. Offsets grow without bound; the log keeps them in segments named by their
base offset, only the last (active) one taking appends. An append validates the incoming
batches (``validator``: headers and CRCs; as the leader also every record, as Kafka's
LogValidator does; a follower appends its leader's bytes as they are), checks producer state,
rewrites each batch's base offset and partition leader epoch in place (and for LogAppendTime
topics the timestamp, or a CreateTime batch's max timestamp when its records say otherwise,
which changes the CRC), and writes the whole record set with one ``write``. Before writing, the active segment rolls when
the new bytes would pass ``segment.bytes``, when ``segment.ms`` passed since its first batch,
when an index is full, or when an offset would not fit a relative (int32) offset.

Offsets the log tracks, lowest first:
  * ``log_start_offset`` - the first offset readable (raised by retention and DeleteRecords);
  * ``recovery_point``   - everything below it was fsynced: recovery after a crash starts at
                           the segment holding it;
  * ``last_stable_offset`` <= ``high_watermark`` <= ``log_end_offset``: the broker advances
                           the high watermark (for a single node, to the log end offset after
                           each append); open transactions hold the LSO back.

Durability. By default the log relies on the page cache as Kafka does: ``flush.messages`` and
``flush.ms`` (Kafka's defaults: never) decide when :meth:`flush` fsyncs; with
``flush.messages=1`` every append is fsynced before it returns (the active segment's data with
``fdatasync``; a segment's indexes when it rolls: recovery rebuilds the indexes of every segment
from the recovery point on, so they need not be synced sooner).

Reads return a :class:`FileRegion` of one segment (Kafka's ``FetchDataInfo``) for
``os.sendfile``: from the start of the batch holding the fetch offset, at most ``max_bytes``
(but the whole first batch when ``min_one_message``, KIP-74), never past ``max_offset``.

Deleting a segment (retention, truncation, compaction) first renames its files to
``.deleted`` and drops it from the log; the files are unlinked ``file.delete.delay.ms`` later
(:meth:`take_due_deletions` + :func:`delete_segment_files`), so a region handed out just
before stays readable, as in Kafka.

Where the parts live: ``loader`` opens a directory and returns what the log is built from;
``local_log`` (the base class) owns the segments, log end offset and recovery point, rolls
and flushes; ``validator`` checks and stamps incoming batches; ``producer_replay`` stages
producer state per batch; ``log_segments`` keeps the sorted segment list and reads across it;
``retention`` picks the segments to delete; ``segment`` appends, indexes and reads one
segment. This module holds the offsets and orchestrates the rest (Kafka's UnifiedLog).

Threading: a Log is not thread-safe. One owner per partition serializes every call (the
broker's per-partition task or lock); the owner may make a call from an executor thread as long
as calls never overlap. :func:`delete_segment_files` is the exception: it only touches segments
already detached from the log and may run anywhere.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Sequence

from gregor.protocol.records.control import build_control_batch
from gregor.protocol.records.header import (
    BatchHeader,
)
from gregor.storage.clock import Clock
from gregor.storage.clock import now_ms as wall_clock_ms
from gregor.storage.config import LogConfig
from gregor.storage.epoch import LeaderEpochCache
from gregor.storage.errors import OffsetOutOfRangeError, UnexpectedAppendOffsetError
from gregor.storage.index import NO_TIMESTAMP
from gregor.storage.loader import load
from gregor.storage.local_log import LocalLog
from gregor.storage.log_info import FetchDataInfo, LogAppendInfo, TimestampAndOffset
from gregor.storage.producer_replay import commit_append, rebuild_producer_state, stage_append
from gregor.storage.producer_state import (
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    AppendOrigin,
    BatchMetadata,
    ProducerAppend,
    ProducerStateManager,
)
from gregor.storage.retention import (
    SegmentPredicate,
    below_log_start,
    deletable_prefix,
    older_than,
    over_retention_bytes,
)
from gregor.storage.segment import LogSegment
from gregor.storage.validator import ScannedBatch, place_batches, validate_batches

logger = logging.getLogger(__name__)


class Log(LocalLog):
    def __init__(
        self,
        directory: str,
        config: LogConfig | None = None,
        *,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        high_watermark: int | None = None,
        had_clean_shutdown: bool = False,
        clock: Clock = wall_clock_ms,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        sync_metadata: bool = True,
    ) -> None:
        """Open the log in ``directory`` (created if missing), recovering it unless
        ``had_clean_shutdown``. ``recovery_point``, ``log_start_offset`` and
        ``high_watermark`` come from the log directory's checkpoint files."""
        os.makedirs(directory, exist_ok=True)
        config = config or LogConfig()
        opened_ms = clock()
        loaded = load(
            os.path.abspath(directory),
            config,
            log_start_offset=log_start_offset,
            recovery_point=recovery_point,
            had_clean_shutdown=had_clean_shutdown,
            clock=clock,
            producer_id_expiration_ms=producer_id_expiration_ms,
            sync_metadata=sync_metadata,
        )
        super().__init__(
            directory,
            config,
            loaded.segments,
            log_end_offset=loaded.log_end_offset,
            recovery_point=loaded.recovery_point,
            clock=clock,
            last_flush_ms=opened_ms,
        )
        self._cleaning_pins: set[int] = set()
        self.cleaning_aborted = False
        self.log_start_offset = loaded.log_start_offset
        self.leader_epoch_cache: LeaderEpochCache = loaded.leader_epoch_cache
        self.producer_state: ProducerStateManager = loaded.producer_state
        self.high_watermark = 0
        self.update_high_watermark(
            high_watermark if high_watermark is not None else self.log_start_offset
        )

    @property
    def config(self) -> LogConfig:
        return self._config

    @config.setter
    def config(self, config: LogConfig) -> None:
        self._set_fast_config(config)

    # --- offsets ---

    @property
    def last_stable_offset(self) -> int:
        first_unstable = self.producer_state.first_unstable_offset()
        if first_unstable is not None and first_unstable < self.high_watermark:
            return first_unstable
        return self.high_watermark

    def update_high_watermark(self, offset: int) -> int:
        """Set the high watermark, clamped to [log_start_offset, log_end_offset]."""
        hw = max(self.log_start_offset, min(offset, self.log_end_offset))
        self.high_watermark = hw
        self.producer_state.on_high_watermark_updated(hw)
        return hw

    def maybe_increment_high_watermark(self, offset: int) -> bool:
        if offset > self.high_watermark:
            old = self.high_watermark
            return self.update_high_watermark(offset) > old
        return False

    # --- appending ---

    def append_as_follower(
        self, records: bytes | bytearray | memoryview, *, now_ms: int | None = None
    ) -> LogAppendInfo:
        """Append batches that already carry their offsets and epochs (replication)."""
        return self._append(records, AppendOrigin.REPLICATION, -1, False, now_ms)

    def append_end_txn_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        *,
        commit: bool,
        coordinator_epoch: int,
        leader_epoch: int = 0,
        now_ms: int | None = None,
    ) -> LogAppendInfo:
        """Write a COMMIT/ABORT control batch (the transaction coordinator's WriteTxnMarkers)."""
        if now_ms is None:
            now_ms = self._clock()
        batch = build_control_batch(
            producer_id, producer_epoch, commit, coordinator_epoch, timestamp=now_ms
        )
        return self.append(
            batch, leader_epoch=leader_epoch, origin=AppendOrigin.COORDINATOR, now_ms=now_ms
        )

    def _append(
        self,
        records: bytes | bytearray | memoryview,
        origin: AppendOrigin,
        leader_epoch: int,
        assign: bool,
        now_ms: int | None,
        scanned: Sequence[ScannedBatch] | None = None,
    ) -> LogAppendInfo:
        self._check_open()
        if now_ms is None:
            now_ms = self._clock()
        cfg = self.config
        mv = records if isinstance(records, memoryview) else memoryview(records)
        total = len(mv)
        headers, restamp = validate_batches(mv, cfg, origin, assign, now_ms, self.name, scanned)
        # A leader stamps LogAppendTime; a follower keeps the leader's timestamps.
        log_append_time = now_ms if assign and cfg.log_append_time else NO_TIMESTAMP

        # The offsets each batch gets.
        if assign:
            first_offset = off = self.log_end_offset
            bases = []
            for _, h in headers:
                bases.append(off)
                off += h.last_offset_delta + 1
        else:
            bases = [h.base_offset for _, h in headers]
            first_offset = bases[0]
            if first_offset < self.log_end_offset:
                raise UnexpectedAppendOffsetError(
                    f"follower append at offset {first_offset} is below the log end offset "
                    f"{self.log_end_offset} of {self.name}"
                )

        # Producer state: a retried batch is answered with its original offsets; otherwise
        # the changes are staged and checked, and installed only after the write.
        lat = None if log_append_time == NO_TIMESTAMP else log_append_time
        staged = stage_append(self.producer_state, mv, headers, bases, origin, lat)
        if isinstance(staged, BatchMetadata):
            return LogAppendInfo.of_duplicate(staged, self.log_start_offset, cfg.log_append_time)

        buf, batches, max_ts, offset_of_max, count = place_batches(
            mv, headers, bases, log_append_time, leader_epoch if assign else None, restamp
        )
        last_offset = batches[-1].last_offset
        segment = self._maybe_roll(total, max_ts, first_offset, last_offset, now_ms)
        if len(batches) == 1:
            segment.append_one(buf, last_offset, max_ts)
        else:
            segment.append(buf, batches)
        self.log_end_offset = last_offset + 1
        self._after_append(staged, headers, leader_epoch if assign else None, first_offset)
        if self.log_end_offset - self.recovery_point >= cfg.flush_messages:
            self.flush()
        return LogAppendInfo(
            first_offset,
            last_offset,
            log_append_time,
            self.log_start_offset,
            max_ts,
            offset_of_max,
            count,
            total,
        )

    def _after_append(
        self,
        staged: ProducerAppend | None,
        headers: list[tuple[int, BatchHeader]],
        leader_epoch: int | None,
        first_offset: int,
    ) -> None:
        cache = self.leader_epoch_cache
        if leader_epoch is not None:
            if leader_epoch > cache.latest:  # (latest is -1 when empty)
                cache.assign(leader_epoch, first_offset)
        else:
            for _, h in headers:
                if h.partition_leader_epoch > cache.latest:
                    cache.assign(h.partition_leader_epoch, h.base_offset)
        commit_append(self.producer_state, staged, self.log_end_offset, self._segments.active)

    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment at the log end offset; snapshot producer state there."""
        active = self._segments.active
        seg = super().roll(expected_next_offset)
        if seg is not active:
            self.take_producer_snapshot()
        return seg

    # --- reading ---

    def read(
        self,
        offset: int,
        max_bytes: int,
        max_offset: int | None = None,
        min_one_message: bool = True,
        *,
        include_aborted_txns: bool = False,
    ) -> FetchDataInfo:
        """Batches from the one holding ``offset``: up to ``max_bytes`` (the whole first batch
        if ``min_one_message``), ending before ``max_offset`` (the high watermark or LSO for
        consumers; default the log end offset). Raises OffsetOutOfRangeError outside
        [log_start_offset, log_end_offset]."""
        self._check_open()
        leo = self.log_end_offset
        if offset < self.log_start_offset or offset > leo:
            raise OffsetOutOfRangeError(offset, self.log_start_offset, leo, self.name)
        if max_offset is None or max_offset > leo:
            max_offset = leo
        if offset >= max_offset:
            return FetchDataInfo(offset, None, -1, [] if include_aborted_txns else None)
        return self._segments.read(
            offset, max_bytes, max_offset, min_one_message, include_aborted_txns, leo
        )

    def iter_batches(self, start_offset: int | None = None) -> Iterator[tuple[BatchHeader, bytes]]:
        """Every batch from the one holding ``start_offset`` (default the log start) to the
        end, with its bytes: for tests, tools and the cleaner's planning, not the fetch path."""
        start = self.log_start_offset if start_offset is None else start_offset
        return self._segments.iter_batches(start)

    # --- timestamps ---

    def offset_for_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """The first record with a timestamp >= ``timestamp`` (ListOffsets), via the time
        indexes; None when every record is older."""
        start = self.log_start_offset
        for seg in self._segments.from_offset(start):
            found = seg.find_record_at_timestamp(timestamp, start)
            if found is not None:
                epoch = self.leader_epoch_cache.epoch_for_offset(found[1])
                return TimestampAndOffset(found[0], found[1], epoch)
        return None

    def latest_timestamp(self) -> TimestampAndOffset | None:
        """The largest timestamp in the log and the offset of the record carrying it
        (ListOffsets MAX_TIMESTAMP); None if the log has no timestamped record."""
        found = self._segments.latest_timestamp()
        if found is None:
            return None
        return TimestampAndOffset(*found, self.leader_epoch_cache.epoch_for_offset(found[1]))

    # --- log start offset, retention ---

    def delete_records(self, offset: int) -> int:
        """DeleteRecords: raise the log start offset to ``offset`` (at most the high
        watermark; -1 means the high watermark) and drop the segments wholly below it.
        Returns the new log start offset (the low watermark)."""
        self._check_open()
        if offset == -1:
            offset = self.high_watermark
        if offset > self.high_watermark or offset < 0:
            raise OffsetOutOfRangeError(
                offset, self.log_start_offset, self.high_watermark, f"{self.name} (DeleteRecords)"
            )
        self._increment_log_start_offset(offset)
        self._delete_segments_while(below_log_start(offset))
        return self.log_start_offset

    def increment_log_start_offset(self, offset: int) -> None:
        """A follower takes its leader's log start offset (no segment is deleted here:
        retention does that later, as for DeleteRecords)."""
        self._check_open()
        self._increment_log_start_offset(offset)

    def _increment_log_start_offset(self, offset: int) -> None:
        if offset <= self.log_start_offset:
            return
        self.log_start_offset = offset
        self.leader_epoch_cache.truncate_from_start(offset)
        self.producer_state.truncate_head(offset)
        if self.high_watermark < offset:
            self.update_high_watermark(offset)

    def delete_old_segments(self, now_ms: int | None = None) -> int:
        """Retention: with cleanup.policy delete, drop whole segments older than
        retention.ms or beyond retention.bytes; with any policy, those below the log start
        offset. Never past the high watermark. Returns how many segments were deleted."""
        self._check_open()
        if now_ms is None:
            now_ms = self._clock()
        deleted = self._delete_segments_while(below_log_start(self.log_start_offset))
        cfg = self.config
        if not cfg.delete:
            return deleted
        if cfg.retention_bytes >= 0:
            excess = self._segments.size - cfg.retention_bytes
            deleted += self._delete_segments_while(over_retention_bytes(excess))
        if cfg.retention_ms >= 0:
            deleted += self._delete_segments_while(older_than(now_ms - cfg.retention_ms))
        return deleted

    def _delete_segments_while(self, predicate: SegmentPredicate) -> int:
        deletable = deletable_prefix(
            self._segments,
            predicate,
            high_watermark=self.high_watermark,
            log_end_offset=self.log_end_offset,
            pinned=self._cleaning_pins,
        )
        if not deletable:
            return 0
        if len(deletable) == len(self._segments):
            new = self.roll()
            if deletable[-1] is new:
                deletable.pop()
        self._segments.remove(deletable)
        self._retire(deletable)
        self._increment_log_start_offset(self._segments[0].base_offset)
        return len(deletable)

    # --- truncation (followers) ---

    def truncate_to(self, offset: int) -> bool:
        """Remove every batch whose last offset is >= ``offset`` (a follower diverged from
        its leader). Returns whether anything was removed."""
        self._check_open()
        if offset < 0:
            raise ValueError("cannot truncate to a negative offset")
        if offset >= self.log_end_offset:
            return False
        if offset < self.log_start_offset:
            self.truncate_fully_and_start_at(offset)
            return True
        self.cleaning_aborted = True
        self._truncate_segments(offset)
        active = self._segments.active
        if active.next_offset < self.log_start_offset:
            # The batch holding the log start offset went: nothing readable is left.
            self.truncate_fully_and_start_at(self.log_start_offset)
            return True
        self.log_end_offset = active.next_offset
        leo = self.log_end_offset
        logger.info("%s: truncated to offset %d (log end offset now %d)", self.name, offset, leo)
        self.leader_epoch_cache.truncate_from_end(leo)
        if self.high_watermark > leo:
            self.high_watermark = leo
        if self.recovery_point > leo:
            self.recovery_point = leo
        ps = self.producer_state
        ps.delete_snapshots_above(leo)
        rebuild_producer_state(
            self.name,
            self._segments,
            ps,
            log_start_offset=self.log_start_offset,
            log_end_offset=leo,
            high_watermark=self.high_watermark,
        )
        return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete everything and restart the log, empty, at ``offset``."""
        self._check_open()
        self.cleaning_aborted = True
        self._restart_segments_at(offset)
        self.log_start_offset = offset
        self.high_watermark = offset
        self.leader_epoch_cache.clear()
        ps = self.producer_state
        ps.clear(offset)
        ps.delete_snapshots_above(-1)
        logger.info("%s: truncated fully, restarting at offset %d", self.name, offset)

    # --- compaction support ---

    def pin_segments(self, bases: list[int]) -> None:
        """Keep retention away from segments the cleaner is reading."""
        self._cleaning_pins.update(bases)
        self.cleaning_aborted = False

    def unpin_segments(self) -> None:
        self._cleaning_pins.clear()

    # --- producers ---

    def remove_expired_producers(self, now_ms: int | None = None) -> list[int]:
        return self.producer_state.remove_expired_producers(
            self._clock() if now_ms is None else now_ms
        )

    def producer_snapshot_horizon(self) -> int:
        """The oldest producer snapshot recovery can need: that of the segment before the
        one holding the recovery point, or of the segment before the active one if older."""
        segs = self._segments
        i_rp = segs.index_of(self.recovery_point)
        return min(segs[max(i_rp - 1, 0)].base_offset, segs[max(len(segs) - 2, 0)].base_offset)

    def prune_producer_snapshots(self) -> int:
        """Delete snapshots no recovery can need (below :meth:`producer_snapshot_horizon`),
        as Kafka does after checkpointing recovery points. Returns the oldest offset kept."""
        keep_from = self.producer_snapshot_horizon()
        self.producer_state.delete_snapshots_below(keep_from)
        return keep_from

    def take_producer_snapshot(self) -> None:
        self.producer_state.map_end_offset = self.log_end_offset
        self.producer_state.take_snapshot()

    # --- lifecycle ---

    def close(self) -> None:
        """Snapshot producer state, write final index entries, trim and close files. A log
        that holds no batch, no producer and no snapshot gets no snapshot either: a load
        replays nothing there (Kafka too snapshots only past the last snapshot)."""
        if self._closed:
            return
        ps = self.producer_state
        if not (
            self.log_end_offset == self.log_start_offset
            and ps.is_empty
            and not ps.snapshot_offsets()
        ):
            self.take_producer_snapshot()
        super().close()

    def __repr__(self) -> str:
        return (
            f"Log({self.name}, start={self.log_start_offset}, end={self.log_end_offset}, "
            f"hw={self.high_watermark}, segments={len(self._segments)})"
        )
