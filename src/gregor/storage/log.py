"""The log of one topic-partition: an ordered list of segments in ``<topic>-<partition>/``.

Theory of operation. Offsets grow without bound; the log keeps them in segments named by their
base offset, only the last (active) one taking appends. An append validates the incoming
batches by their headers and CRCs (records are decoded only for compacted topics and for
transaction markers), checks producer state, rewrites each batch's base offset and partition
leader epoch in place (and for LogAppendTime topics the timestamp, which changes the CRC), and
writes the whole record set with one ``write``. Before writing, the active segment rolls when
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

Threading: a Log is not thread-safe. One owner per partition serializes every call (the
broker's per-partition task or lock); the owner may make a call from an executor thread as long
as calls never overlap. :func:`delete_segment_files` is the exception: it only touches segments
already detached from the log and may run anywhere.
"""

from __future__ import annotations

import logging
import os
import struct
import time
from bisect import bisect_right
from collections.abc import Callable, Iterator
from typing import NamedTuple

from crc32c import crc32c

from gregor.protocol.exceptions import ProtocolError
from gregor.protocol.records.batch import decode_batch
from gregor.protocol.records.control import (
    ControlRecordType,
    build_control_batch,
    parse_control_record,
)
from gregor.protocol.records.header import (
    ATTRIBUTES_OFFSET,
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    read_header,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
)
from gregor.storage.config import LogConfig
from gregor.storage.epoch import LeaderEpochCache
from gregor.storage.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    KafkaStorageError,
    LogClosedError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    UnexpectedAppendOffsetError,
)
from gregor.storage.index import AbortedTxn
from gregor.storage.producer_state import (
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    AppendOrigin,
    CompletedTxn,
    ProducerAppend,
    ProducerStateManager,
)
from gregor.storage.segment import (
    DELETED_SUFFIX,
    BatchPosition,
    FileRegion,
    LogSegment,
)

logger = logging.getLogger(__name__)

INT32_MAX = 0x7FFFFFFF
NO_TIMESTAMP = -1
_HEADER = struct.Struct(">qiibIhiqqqhii")  # the v2 batch header (see records.header)
_PREFIX = struct.Struct(">qii")  # base_offset, batch_length, partition_leader_epoch
_COPY_LIMIT = 16 * 1024  # above this, writev the header apart instead of copying the batch
_new_tuple = tuple.__new__


_time_ns = time.time_ns


def _now_ms() -> int:
    return _time_ns() // 1_000_000


class LogAppendInfo(NamedTuple):
    first_offset: int
    last_offset: int
    log_append_time: int  # -1 for CreateTime
    log_start_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    records_count: int
    valid_bytes: int
    duplicate: bool = False  # a retried batch answered with its original offsets


class FetchDataInfo(NamedTuple):
    fetch_offset: int
    region: FileRegion | None  # None: nothing to return
    first_batch_offset: int  # base offset of the first batch in the region (-1 if none)
    aborted_transactions: list[AbortedTxn] | None = None

    @property
    def size(self) -> int:
        return self.region.length if self.region else 0

    def read_bytes(self) -> bytes:
        return self.region.read() if self.region else b""


class TimestampAndOffset(NamedTuple):
    timestamp: int
    offset: int
    leader_epoch: int | None


def parse_topic_partition(dir_name: str) -> tuple[str, int] | None:
    """``orders-3`` -> ("orders", 3); None for names that are not a partition directory."""
    topic, sep, part = dir_name.rpartition("-")
    if not sep or not topic or not part.isdigit() or "." in part:
        return None
    return topic, int(part)


def delete_segment_files(segments: list[LogSegment]) -> None:
    """Close and unlink segments already detached from their log (any thread)."""
    for seg in segments:
        seg.delete_files()


class Log:
    def __init__(
        self,
        directory: str,
        config: LogConfig | None = None,
        *,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        high_watermark: int | None = None,
        had_clean_shutdown: bool = False,
        clock: Callable[[], int] = _now_ms,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        sync_metadata: bool = True,
    ) -> None:
        """Open the log in ``directory`` (created if missing), recovering it unless
        ``had_clean_shutdown``. ``recovery_point``, ``log_start_offset`` and
        ``high_watermark`` come from the log directory's checkpoint files."""
        from gregor.storage import loader

        os.makedirs(directory, exist_ok=True)
        self.dir = os.path.abspath(directory)
        tp = parse_topic_partition(os.path.basename(self.dir))
        self.topic, self.partition = tp if tp else (os.path.basename(self.dir), 0)
        self.name = os.path.basename(self.dir)
        self.config = config or LogConfig()  # (a property: see below)
        self._clock = clock
        self._sync_metadata = sync_metadata
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []
        self._pending_deletes: list[tuple[int, LogSegment]] = []
        self._closed = False
        self._pos_cache: tuple[int, int, int] | None = None  # (segment base, offset, position)
        self._cleaning_pins: set[int] = set()
        self.cleaning_aborted = False
        self.log_start_offset = log_start_offset
        self.log_end_offset = 0
        self.recovery_point = recovery_point
        self.high_watermark = 0
        self.last_flush_ms = clock()
        self.leader_epoch_cache = LeaderEpochCache(self.dir, sync=sync_metadata)
        self.producer_state = ProducerStateManager(
            self.dir, producer_id_expiration_ms=producer_id_expiration_ms, sync=sync_metadata
        )
        loader.load(self, had_clean_shutdown=had_clean_shutdown)
        self.update_high_watermark(
            high_watermark if high_watermark is not None else self.log_start_offset
        )

    @property
    def config(self) -> LogConfig:
        return self._config

    @config.setter
    def config(self, config: LogConfig) -> None:
        self._config = config
        self._fast = not config.compact and not config.log_append_time

    # --- segments ---

    @property
    def segments(self) -> list[LogSegment]:
        return list(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def num_segments(self) -> int:
        return len(self._segments)

    @property
    def size(self) -> int:
        return sum(s.size for s in self._segments)

    def _segment_index(self, offset: int) -> int:
        """Index of the segment whose range holds ``offset`` (floor by base offset)."""
        return max(bisect_right(self._bases, offset) - 1, 0)

    def segment_for(self, offset: int) -> LogSegment:
        return self._segments[self._segment_index(offset)]

    def _set_segments(self, segments: list[LogSegment]) -> None:
        segments.sort(key=lambda s: s.base_offset)
        self._segments = segments
        self._bases = [s.base_offset for s in segments]
        self._pos_cache = None

    def _new_segment(self, base_offset: int, *, active: bool = True) -> LogSegment:
        cfg = self.config
        return LogSegment(
            self.dir,
            base_offset,
            index_interval_bytes=cfg.index_interval_bytes,
            max_index_size=cfg.segment_index_bytes,
            now_ms=self._clock(),
            preallocate_indexes=active,
        )

    def _check_open(self) -> None:
        if self._closed:
            raise LogClosedError(f"log {self.name} is closed")

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

    @property
    def unflushed_messages(self) -> int:
        return self.log_end_offset - self.recovery_point

    # --- appending ---

    def append(
        self,
        records: bytes | bytearray | memoryview,
        *,
        leader_epoch: int = 0,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        now_ms: int | None = None,
    ) -> LogAppendInfo:
        """Append as the leader: validate, assign offsets from the log end offset, stamp
        ``leader_epoch`` (and LogAppendTime if configured), write. A writable buffer
        (bytearray) is rewritten in place; other buffers are copied first (or, when large,
        written from two pieces with ``writev``)."""
        if origin is AppendOrigin.CLIENT and self._fast:
            info = self._append_fast(records, leader_epoch, now_ms)
            if info is not None:
                return info
        return self._append(records, origin, leader_epoch, True, now_ms)

    def _append_fast(
        self, records: bytes | bytearray | memoryview, leader_epoch: int, now_ms: int | None
    ) -> LogAppendInfo | None:
        """The common produce: one plain batch (no producer id, not transactional, not a
        compacted or LogAppendTime topic) that needs no roll. Does what ``_append`` does with
        the fewest steps; returns None (nothing done) whenever anything is unusual, and the
        general path then handles or rejects the batch."""
        n = len(records)
        if n < HEADER_SIZE:
            return None
        (_, blen, _, magic, crc, attributes, delta, base_ts, max_ts, pid, _, _, count) = (
            _HEADER.unpack_from(records)
        )
        cfg = self._config
        if (
            blen + LOG_OVERHEAD != n
            or magic != 2
            or pid >= 0
            or attributes & 0x30  # transactional or control
            or count != delta + 1
            or count <= 0
            or n > cfg.max_message_bytes
            or base_ts < 0
            or base_ts > max_ts
        ):
            return None
        if now_ms is None:
            now_ms = self._clock() if self._clock is not _now_ms else _time_ns() // 1_000_000
        if (
            now_ms - base_ts > cfg.message_timestamp_before_max_ms
            or max_ts - now_ms > cfg.message_timestamp_after_max_ms
        ):
            return None
        mv = records if type(records) is memoryview else memoryview(records)
        if crc32c(mv[ATTRIBUTES_OFFSET:]) != crc:
            return None
        offset = self.log_end_offset
        last = offset + delta
        seg = self._segments[-1]
        size = seg.size
        since = seg.bytes_since_last_index_entry
        index_now = since > seg.index_interval_bytes
        if (
            size + n > cfg.segment_bytes
            or last - seg.base_offset > INT32_MAX
            or (index_now and (seg.offset_index.is_full() or seg.time_index.is_full()))
        ):
            return None
        if size:
            rolling = seg._rolling_based_timestamp
            if rolling is None:
                return None
            waited = max_ts - rolling if rolling >= 0 else now_ms - seg.created_ms
            if waited > cfg.segment_ms:
                return None
        fd = seg.fd
        try:
            if not mv.readonly:
                _PREFIX.pack_into(mv, 0, offset, blen, leader_epoch)
                written = os.write(fd, mv)
            elif n <= _COPY_LIMIT:
                buf = bytearray(mv)
                _PREFIX.pack_into(buf, 0, offset, blen, leader_epoch)
                written = os.write(fd, buf)
            else:
                written = os.writev(fd, [_PREFIX.pack(offset, blen, leader_epoch), mv[16:]])
            if written != n:
                raise OSError(f"short write: {written} of {n} bytes")
        except OSError as e:
            seg._undo_write(size)
            raise KafkaStorageError(f"write to {seg.log_path} failed: {e}") from e
        seg.size = size + n
        if max_ts > seg.max_timestamp_so_far:
            seg.max_timestamp_so_far = max_ts
            seg.offset_of_max_timestamp_so_far = last
        if index_now:
            seg.offset_index.append(last, size)
            seg.time_index.maybe_append(
                seg.max_timestamp_so_far, seg.offset_of_max_timestamp_so_far
            )
            since = 0
        seg.bytes_since_last_index_entry = since + n
        seg.next_offset = last + 1
        if not size:
            seg._rolling_based_timestamp = max_ts
        self.log_end_offset = last + 1
        self.producer_state.map_end_offset = last + 1
        if leader_epoch > self.leader_epoch_cache.latest:
            self.leader_epoch_cache.assign(leader_epoch, offset)
        if last + 1 - self.recovery_point >= cfg.flush_messages:
            self.flush()
        return _new_tuple(
            LogAppendInfo, (offset, last, -1, self.log_start_offset, max_ts, last, count, n, False)
        )

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
    ) -> LogAppendInfo:
        if self._closed:
            raise LogClosedError(f"log {self.name} is closed")
        if now_ms is None:
            now_ms = self._clock()
        cfg = self.config
        mv = records if isinstance(records, memoryview) else memoryview(records)
        total = len(mv)
        headers = self._validate(mv, total, origin, assign, now_ms)
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
        staged: ProducerAppend | None = None
        for i, (pos, h) in enumerate(headers):
            if h.producer_id < 0:
                continue
            if staged is None:
                if origin is AppendOrigin.CLIENT:
                    dup = self._find_duplicate(headers)
                    if dup is not None:
                        return dup
                staged = self.producer_state.stage(origin)
            self._stage_batch(staged, mv, pos, h, bases[i], log_append_time)

        # Rewrite offsets, leader epoch and LogAppendTime in place.
        if assign:
            buf = mv if not mv.readonly else memoryview(bytearray(mv))
            for i, (pos, _) in enumerate(headers):
                set_base_offset(buf, pos, bases[i])
                set_partition_leader_epoch(buf, pos, leader_epoch)
                if log_append_time != NO_TIMESTAMP:
                    set_log_append_time(buf, pos, now_ms)
        else:
            buf = mv

        # Per-batch positions, offsets and timestamps for the segment's indexes.
        batches: list[BatchPosition] = []
        max_ts = NO_TIMESTAMP
        offset_of_max = first_offset
        count = 0
        for i, (pos, h) in enumerate(headers):
            last = bases[i] + h.last_offset_delta
            ts = h.max_timestamp if log_append_time == NO_TIMESTAMP else log_append_time
            if ts > max_ts:
                max_ts, offset_of_max = ts, last
            batches.append(BatchPosition(pos, h.batch_length + LOG_OVERHEAD, bases[i], last, ts))
            count += h.records_count
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

    def _validate(
        self, mv: memoryview, total: int, origin: AppendOrigin, assign: bool, now_ms: int
    ) -> list[tuple[int, BatchHeader]]:
        cfg = self.config
        if total == 0:
            raise CorruptRecordError("the record set is empty")
        if total > cfg.segment_bytes:
            raise RecordBatchTooLargeError(
                f"record set of {total} bytes is larger than segment.bytes {cfg.segment_bytes}"
            )
        check_ts = assign and not cfg.log_append_time
        before = cfg.message_timestamp_before_max_ms
        after = cfg.message_timestamp_after_max_ms
        max_size = cfg.max_message_bytes
        headers = []
        pos = 0
        prev_next = -1
        while pos < total:
            try:
                h = read_header(mv, pos)
            except ProtocolError as e:
                raise CorruptRecordError(f"record batch at byte {pos}: {e}") from None
            size = h.batch_length + LOG_OVERHEAD
            if pos + size > total:
                raise CorruptRecordError(f"record batch at byte {pos} is truncated")
            if size > max_size:
                raise RecordTooLargeError(
                    f"record batch of {size} bytes is larger than max.message.bytes {max_size}"
                )
            if crc32c(mv[pos + ATTRIBUTES_OFFSET : pos + size]) != h.crc:
                raise CorruptRecordError(f"record batch at byte {pos} fails its CRC32C check")
            if assign:
                if h.records_count <= 0 or h.records_count != h.last_offset_delta + 1:
                    raise InvalidRecordError(
                        f"record batch at byte {pos} has {h.records_count} records but an "
                        f"offset delta of {h.last_offset_delta}"
                    )
                if h.is_control and origin is AppendOrigin.CLIENT:
                    raise InvalidRecordError("clients may not write control batches")
                if h.producer_id >= 0 and h.base_sequence < 0 and not h.is_control:
                    raise InvalidRecordError(
                        f"batch from producer {h.producer_id} has no sequence number"
                    )
                if h.is_transactional and h.producer_id < 0:
                    raise InvalidRecordError("transactional batch without a producer id")
                if check_ts and not h.is_control:
                    for ts in (h.base_timestamp, h.max_timestamp):
                        if ts != NO_TIMESTAMP and (now_ms - ts > before or ts - now_ms > after):
                            raise InvalidTimestampError(
                                f"timestamp {ts} of the batch at byte {pos} is out of range: it "
                                f"must be within [{now_ms - before}, {now_ms + after}]"
                            )
            elif h.base_offset < prev_next:
                raise CorruptRecordError(
                    f"batch offsets go backwards ({h.base_offset} after {prev_next - 1})"
                )
            if cfg.compact and not h.is_control:
                self._check_keys(mv, pos, h)
            prev_next = h.last_offset + 1
            headers.append((pos, h))
            pos += size
        return headers

    @staticmethod
    def _check_keys(mv: memoryview, pos: int, h: BatchHeader) -> None:
        try:
            batch = decode_batch(mv, pos, verify_crc=False)
        except ProtocolError as e:
            raise CorruptRecordError(f"record batch at byte {pos}: {e}") from None
        for r in batch.records:
            if r.key is None:
                # INVALID_RECORD, as Kafka answers since KIP-467: CORRUPT_MESSAGE is retriable
                # and makes clients retry a batch that can never succeed.
                raise InvalidRecordError(
                    "a compacted topic cannot accept a record without a key"
                )

    def _find_duplicate(self, headers: list[tuple[int, BatchHeader]]) -> LogAppendInfo | None:
        ps = self.producer_state
        for _, h in headers:
            if h.producer_id < 0 or h.is_control:
                continue
            dup = ps.find_duplicate(
                h.producer_id, h.producer_epoch, h.base_sequence, h.last_sequence
            )
            if dup is not None:
                lat = dup.timestamp if self.config.log_append_time else NO_TIMESTAMP
                return LogAppendInfo(
                    dup.first_offset,
                    dup.last_offset,
                    lat,
                    self.log_start_offset,
                    dup.timestamp,
                    dup.last_offset,
                    dup.offset_delta + 1,
                    0,
                    duplicate=True,
                )
        return None

    def _stage_batch(
        self,
        staged: ProducerAppend,
        mv: memoryview,
        pos: int,
        h: BatchHeader,
        base_offset: int,
        log_append_time: int,
    ) -> None:
        last_offset = base_offset + h.last_offset_delta
        ts = log_append_time if log_append_time != NO_TIMESTAMP else h.max_timestamp
        if h.is_control:
            control = _read_control(mv, pos, h)
            if control is None:
                return
            commit, coordinator_epoch, marker_ts = control
            staged.append_end_txn_marker(
                h.producer_id,
                h.producer_epoch,
                commit,
                coordinator_epoch,
                base_offset,
                ts if log_append_time != NO_TIMESTAMP else marker_ts,
            )
        else:
            staged.append_data_batch(
                h.producer_id,
                h.producer_epoch,
                h.base_sequence,
                h.last_sequence,
                base_offset,
                last_offset,
                ts,
                h.is_transactional,
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
            if leader_epoch >= 0 and (cache.latest_epoch is None or leader_epoch > cache.latest_epoch):
                cache.assign(leader_epoch, first_offset)
        else:
            for _, h in headers:
                e = h.partition_leader_epoch
                if e >= 0 and (cache.latest_epoch is None or e > cache.latest_epoch):
                    cache.assign(e, h.base_offset)
        if staged is not None:
            ps = self.producer_state
            ps.commit(staged, self.log_end_offset)
            for completed in staged.completed_txns:
                self._complete_txn(completed, self.active_segment)
        else:
            self.producer_state.map_end_offset = self.log_end_offset

    def _complete_txn(self, completed: CompletedTxn, segment: LogSegment | None) -> None:
        ps = self.producer_state
        if completed.is_aborted and segment is not None:
            lso = ps.last_stable_offset_for(completed)
            segment.txn_index.append(
                AbortedTxn(
                    completed.producer_id, completed.first_offset, completed.last_offset, lso
                )
            )
        ps.complete_txn(completed)

    # --- rolling ---

    def _maybe_roll(
        self, size: int, max_timestamp: int, first_offset: int, last_offset: int, now_ms: int
    ) -> LogSegment:
        seg = self._segments[-1]
        cfg = self.config
        if (
            seg.size + size > cfg.segment_bytes
            or (seg.size > 0 and seg.time_waited_for_roll(now_ms, max_timestamp) > cfg.segment_ms)
            or seg.offset_index.is_full()
            or seg.time_index.is_full()
            or last_offset - seg.base_offset > INT32_MAX
        ):
            return self.roll(first_offset)
        return seg

    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment at the log end offset."""
        self._check_open()
        new_base = max(self.log_end_offset, expected_next_offset or 0)
        old = self._segments[-1]
        if old.base_offset == new_base and old.size == 0:
            return old
        old.on_become_inactive()
        seg = self._new_segment(new_base)
        self._segments.append(seg)
        self._bases.append(new_base)
        if self.recovery_point >= new_base:
            old.flush()
        old.release_index_maps()
        ps = self.producer_state
        ps.map_end_offset = self.log_end_offset
        ps.take_snapshot()
        return seg

    # --- flushing ---

    def flush(self, offset: int | None = None) -> None:
        """Fsync everything below ``offset`` (default: the log end offset) and advance the
        recovery point to it."""
        self._check_open()
        if offset is None or offset > self.log_end_offset:
            offset = self.log_end_offset
        if offset <= self.recovery_point:
            return
        active = self._segments[-1]
        for seg in self._segments[self._segment_index(self.recovery_point) :]:
            if seg.base_offset >= offset and seg is not active:
                break
            if seg is active:
                os.fdatasync(seg.fd)
            else:
                seg.flush()
        self.recovery_point = offset
        self.last_flush_ms = self._clock()

    def maybe_flush_on_time(self, now_ms: int) -> bool:
        """flush.ms: fsync if the last flush is older than that."""
        if self.unflushed_messages > 0 and now_ms - self.last_flush_ms >= self.config.flush_ms:
            self.flush()
            return True
        return False

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
        segments = self._segments
        i = self._segment_index(offset)
        while i < len(segments):
            seg = segments[i]
            if seg.base_offset >= max_offset:
                break
            max_pos = self._position_bound(seg, max_offset)
            result = seg.read(offset, max_bytes, max_pos, min_one_message)
            if result is not None:
                region, first = result
                aborted = None
                if include_aborted_txns:
                    upper = seg.offset_index.lookup_by_position(region.position + region.length)
                    if upper is None:
                        upper = segments[i + 1].base_offset if i + 1 < len(segments) else leo
                    aborted = self.collect_aborted_transactions(offset, upper)
                return FetchDataInfo(offset, region, first.base_offset, aborted)
            i += 1
        return FetchDataInfo(offset, None, -1, [] if include_aborted_txns else None)

    def _position_bound(self, seg: LogSegment, max_offset: int) -> int:
        """File position in ``seg`` where batches reaching ``max_offset`` begin."""
        if max_offset >= seg.next_offset:
            return seg.size
        cache = self._pos_cache
        if cache is not None and cache[0] == seg.base_offset and cache[1] == max_offset:
            return cache[2]
        bp = seg.translate_offset(max_offset)
        pos = bp.position if bp is not None else seg.size
        self._pos_cache = (seg.base_offset, max_offset, pos)
        return pos

    def collect_aborted_transactions(
        self, start_offset: int, upper_bound_offset: int
    ) -> list[AbortedTxn]:
        """Aborted transactions overlapping [start_offset, upper_bound_offset), for a
        READ_COMMITTED fetch."""
        out: list[AbortedTxn] = []
        for seg in self._segments[self._segment_index(start_offset) :]:
            found, complete = seg.txn_index.collect(start_offset, upper_bound_offset)
            out.extend(found)
            if complete:
                break
        return out

    def iter_batches(self, start_offset: int | None = None) -> Iterator[tuple[BatchHeader, bytes]]:
        """Every batch from the one holding ``start_offset`` (default the log start) to the
        end, with its bytes: for tests, tools and the cleaner's planning, not the fetch path."""
        if start_offset is None:
            start_offset = self.log_start_offset
        for seg in self._segments[self._segment_index(start_offset) :]:
            for _, h, data in seg.iter_batch_data(0):
                if h.last_offset >= start_offset:
                    yield h, bytes(data)

    # --- timestamps ---

    def offset_for_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """The first record with a timestamp >= ``timestamp`` (ListOffsets), via the time
        indexes; None when every record is older."""
        start = self.log_start_offset
        for seg in self._segments[self._segment_index(start) :]:
            if seg.max_timestamp_so_far < timestamp:
                continue
            starting = start
            while True:
                bp = seg.find_offset_by_timestamp(timestamp, starting)
                if bp is None:
                    break
                found = _first_record_at(seg.read_batch(bp.position, bp.size), timestamp, start)
                if found is not None:
                    ts, offset = found
                    return TimestampAndOffset(
                        ts, offset, self.leader_epoch_cache.epoch_for_offset(offset)
                    )
                starting = bp.last_offset + 1
        return None

    def latest_timestamp(self) -> TimestampAndOffset | None:
        """The largest timestamp in the log and the offset of the record carrying it
        (ListOffsets MAX_TIMESTAMP); None if the log has no timestamped record."""
        best: LogSegment | None = None
        for seg in self._segments:
            if seg.size and (best is None or seg.max_timestamp_so_far > best.max_timestamp_so_far):
                best = seg
        if best is None or best.max_timestamp_so_far < 0:
            return None
        ts = best.max_timestamp_so_far
        shallow = best.offset_of_max_timestamp_so_far
        offset = shallow
        bp = best.translate_offset(shallow)
        if bp is not None:
            try:
                batch = decode_batch(best.read_batch(bp.position, bp.size), 0, verify_crc=False)
                for r in batch.records:
                    if r.timestamp == ts:
                        offset = r.offset
                        break
            except ProtocolError:
                pass
        return TimestampAndOffset(ts, offset, self.leader_epoch_cache.epoch_for_offset(offset))

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
        self._delete_segments_while(lambda seg, nxt: nxt is not None and nxt.base_offset <= offset)
        return self.log_start_offset

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
        start = self.log_start_offset
        deleted = self._delete_segments_while(
            lambda seg, nxt: nxt is not None and nxt.base_offset <= start
        )
        cfg = self.config
        if not cfg.delete:
            return deleted
        if cfg.retention_bytes >= 0:
            excess = [self.size - cfg.retention_bytes]

            def over_size(seg: LogSegment, nxt: LogSegment | None) -> bool:
                if excess[0] - seg.size >= 0:
                    excess[0] -= seg.size
                    return True
                return False

            deleted += self._delete_segments_while(over_size)
        if cfg.retention_ms >= 0:
            deleted += self._delete_segments_while(
                lambda seg, nxt: now_ms - seg.largest_timestamp > cfg.retention_ms
            )
        return deleted

    def _delete_segments_while(
        self, predicate: Callable[[LogSegment, LogSegment | None], bool]
    ) -> int:
        segs = self._segments
        deletable: list[LogSegment] = []
        for i, seg in enumerate(segs):
            nxt = segs[i + 1] if i + 1 < len(segs) else None
            upper = nxt.base_offset if nxt is not None else self.log_end_offset
            if nxt is None and seg.size == 0:
                break
            if seg.base_offset in self._cleaning_pins:
                break
            if self.high_watermark < upper or not predicate(seg, nxt):
                break
            deletable.append(seg)
        if not deletable:
            return 0
        if len(deletable) == len(segs):
            new = self.roll()
            if deletable[-1] is new:
                deletable.pop()
        keep = [s for s in self._segments if s not in deletable]
        self._set_segments(keep)
        self._retire(deletable)
        self._increment_log_start_offset(self._segments[0].base_offset)
        return len(deletable)

    def _retire(self, segments: list[LogSegment]) -> None:
        """Rename detached segments to .deleted; unlink now or after file.delete.delay.ms."""
        due = self._clock() + self.config.file_delete_delay_ms
        for seg in segments:
            seg.change_suffix("", DELETED_SUFFIX)
            if self.config.file_delete_delay_ms == 0:
                seg.delete_files()
            else:
                self._pending_deletes.append((due, seg))

    def take_due_deletions(self, now_ms: int | None = None) -> list[LogSegment]:
        """Segments whose delete delay passed; pass them to :func:`delete_segment_files`."""
        if now_ms is None:
            now_ms = self._clock()
        due = [seg for t, seg in self._pending_deletes if t <= now_ms]
        if due:
            self._pending_deletes = [(t, s) for t, s in self._pending_deletes if t > now_ms]
        return due

    # --- truncation (followers) ---

    def truncate_to(self, offset: int) -> bool:
        """Remove every batch whose last offset is >= ``offset`` (a follower diverged from
        its leader). Returns whether anything was removed."""
        from gregor.storage import loader

        self._check_open()
        if offset < 0:
            raise ValueError("cannot truncate to a negative offset")
        if offset >= self.log_end_offset:
            return False
        if offset < self.log_start_offset:
            self.truncate_fully_and_start_at(offset)
            return True
        self.cleaning_aborted = True
        later = [s for s in self._segments if s.base_offset > offset]
        keep = [s for s in self._segments if s.base_offset <= offset]
        self._set_segments(keep)
        self._retire(later)
        active = self._segments[-1]
        active.truncate_to(offset)
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
        loader.rebuild_producer_state(self, None)
        return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete everything and restart the log, empty, at ``offset``."""
        self._check_open()
        self.cleaning_aborted = True
        old = list(self._segments)
        self._set_segments([])
        self._retire(old)
        self._set_segments([self._new_segment(offset)])
        self.log_start_offset = offset
        self.log_end_offset = offset
        self.high_watermark = offset
        self.recovery_point = offset
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

    def replace_segments(self, new: LogSegment, old: list[LogSegment]) -> None:
        """Swap cleaned segment ``new`` (files suffixed ``.swap``) for ``old``, crash-safely:
        old files are renamed ``.deleted`` before the swap files lose their suffix; a crash
        in between is completed at the next load."""
        from gregor.storage.segment import SWAP_SUFFIX

        keep = [s for s in self._segments if s not in old]
        self._retire(old)
        new.change_suffix(SWAP_SUFFIX, "")
        keep.append(new)
        self._set_segments(keep)

    # --- producers ---

    def remove_expired_producers(self, now_ms: int | None = None) -> list[int]:
        return self.producer_state.remove_expired_producers(
            self._clock() if now_ms is None else now_ms
        )

    def prune_producer_snapshots(self) -> int:
        """Delete snapshots no recovery can need, as Kafka does after checkpointing recovery
        points: those below both the segment before the one holding the recovery point and
        the segment before the active one. Returns the oldest offset kept."""
        segs = self._segments
        i_rp = self._segment_index(self.recovery_point)
        keep_from = min(
            segs[max(i_rp - 1, 0)].base_offset,
            segs[max(len(segs) - 2, 0)].base_offset,
        )
        self.producer_state.delete_snapshots_below(keep_from)
        return keep_from

    def take_producer_snapshot(self) -> None:
        self.producer_state.map_end_offset = self.log_end_offset
        self.producer_state.take_snapshot()

    # --- lifecycle ---

    def close(self) -> None:
        """Snapshot producer state, write final index entries, trim and close files."""
        if self._closed:
            return
        self.take_producer_snapshot()
        for seg in self._segments:
            seg.close()
        for _, seg in self._pending_deletes:
            seg.delete_files()
        self._pending_deletes = []
        self._closed = True

    def close_handles(self) -> None:
        """Close every file without writing anything (the directory is being deleted)."""
        for seg in self._segments:
            seg.close_handles()
        for _, seg in self._pending_deletes:
            seg.close_handles()
        self._closed = True

    @property
    def closed(self) -> bool:
        return self._closed

    def __repr__(self) -> str:
        return (
            f"Log({self.name}, start={self.log_start_offset}, end={self.log_end_offset}, "
            f"hw={self.high_watermark}, segments={len(self._segments)})"
        )


def _read_control(mv: memoryview, pos: int, h: BatchHeader) -> tuple[bool, int, int] | None:
    """(commit, coordinator_epoch, timestamp) of a control batch's transaction marker; None
    for an empty control batch or another control record type."""
    if h.records_count == 0:
        return None
    try:
        batch = decode_batch(mv, pos, verify_crc=False)
        if not batch.records:
            return None
        rec = batch.records[0]
        control = parse_control_record(rec)
    except ProtocolError as e:
        raise CorruptRecordError(f"control batch at byte {pos}: {e}") from None
    if control.type not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        return None
    return control.type == ControlRecordType.COMMIT, control.coordinator_epoch or 0, rec.timestamp


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """A zigzag varint at ``pos``: (value, next position)."""
    u = 0
    shift = 0
    while True:
        b = data[pos]
        pos += 1
        u |= (b & 0x7F) << shift
        if b < 0x80:
            return (u >> 1) ^ -(u & 1), pos
        shift += 7


def _first_record_at(batch: bytes, timestamp: int, min_offset: int) -> tuple[int, int] | None:
    """(timestamp, offset) of the batch's first record with a timestamp >= ``timestamp`` and
    an offset >= ``min_offset``. Uncompressed batches are scanned for the two fields only;
    compressed ones are decoded."""
    h = read_header(batch)
    if h.compression:
        for r in decode_batch(batch, 0, verify_crc=False).records:
            if r.timestamp >= timestamp and r.offset >= min_offset:
                return r.timestamp, r.offset
        return None
    log_append_time = h.max_timestamp if h.timestamp_type else None
    pos = HEADER_SIZE
    try:
        for _ in range(h.records_count):
            length, pos = _varint(batch, pos)
            end = pos + length
            ts_delta, p = _varint(batch, pos + 1)  # after the attributes byte
            offset_delta, _ = _varint(batch, p)
            ts = h.base_timestamp + ts_delta if log_append_time is None else log_append_time
            offset = h.base_offset + offset_delta
            if ts >= timestamp and offset >= min_offset:
                return ts, offset
            pos = end
    except IndexError:
        raise CorruptRecordError(f"batch at offset {h.base_offset} is truncated") from None
    return None
