"""The segments of one partition directory and the offsets that belong to them (Kafka's
LocalLog).

Theory of operation. A ``LocalLog`` owns the directory's :class:`LogSegments`, the log end
offset (the next offset to assign) and the recovery point (everything below it was fsynced).
It rolls the active segment (:meth:`roll` when ``segment.bytes``, ``segment.ms``, a full index
or an offset that no longer fits a relative offset say so), fsyncs ranges (:meth:`flush`,
``flush.ms``) and takes segments out: a segment leaving the log is renamed ``.deleted`` and its
files are unlinked ``file.delete.delay.ms`` later (:meth:`take_due_deletions`), so a region
handed out just before stays readable.

``Log`` adds what Kafka's UnifiedLog adds on top: the log start offset, high watermark and last
stable offset, validation, producer state and the leader-epoch cache. Like ``Log``, a
``LocalLog`` is not thread-safe: one owner serializes every call.
"""

from __future__ import annotations

import os

from gregor.storage.clock import Clock
from gregor.storage.config import LogConfig
from gregor.storage.errors import LogClosedError
from gregor.storage.fast_append import LogCore
from gregor.storage.files import SWAP_SUFFIX, parse_topic_partition
from gregor.storage.log_segments import LogSegments
from gregor.storage.retention import RetiredSegments
from gregor.storage.segment import LogSegment
from gregor.storage.transaction_index import AbortedTxn

INT32_MAX = 0x7FFFFFFF


class LocalLog(LogCore):
    _segments: LogSegments

    def __init__(
        self,
        directory: str,
        config: LogConfig,
        segments: LogSegments,
        *,
        log_end_offset: int,
        recovery_point: int,
        clock: Clock,
        last_flush_ms: int,
    ) -> None:
        self.dir = os.path.abspath(directory)
        self.name = os.path.basename(self.dir)
        tp = parse_topic_partition(self.name)
        self.topic, self.partition = tp if tp else (self.name, 0)
        self.config = config
        self._clock = clock
        self._segments = segments
        self._retired = RetiredSegments()
        self._closed = False
        self.log_end_offset = log_end_offset
        self.recovery_point = recovery_point
        self.last_flush_ms = last_flush_ms

    @property
    def config(self) -> LogConfig:
        return self._config

    @config.setter
    def config(self, config: LogConfig) -> None:
        self._set_fast_config(config)

    @property
    def clock(self) -> Clock:
        """The clock the log reads (milliseconds)."""
        return self._clock

    # --- segments ---

    @property
    def segments(self) -> list[LogSegment]:
        return self._segments.to_list()

    @property
    def active_segment(self) -> LogSegment:
        return self._segments.active

    @property
    def num_segments(self) -> int:
        return len(self._segments)

    @property
    def size(self) -> int:
        return self._segments.size

    def segment_for(self, offset: int) -> LogSegment:
        return self._segments.floor(offset)

    def _new_segment(self, base_offset: int) -> LogSegment:
        cfg = self.config
        return LogSegment(
            self.dir,
            base_offset,
            index_interval_bytes=cfg.index_interval_bytes,
            max_index_size=cfg.segment_index_bytes,
            now_ms=self._clock(),
            preallocate_indexes=True,
        )

    def _check_open(self) -> None:
        if self._closed:
            raise LogClosedError(f"log {self.name} is closed")

    @property
    def closed(self) -> bool:
        return self._closed

    # --- rolling ---

    def _maybe_roll(
        self, size: int, max_timestamp: int, first_offset: int, last_offset: int, now_ms: int
    ) -> LogSegment:
        """The segment ``size`` new bytes go to: the active one, or a new one when it must
        roll first."""
        seg = self._segments.active
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
        """Start a new active segment at the log end offset (the active one, if it is empty
        and already there)."""
        self._check_open()
        new_base = max(self.log_end_offset, expected_next_offset or 0)
        old = self._segments.active
        if old.base_offset == new_base and old.size == 0:
            return old
        old.on_become_inactive()
        seg = self._new_segment(new_base)
        self._segments.append(seg)
        if self.recovery_point >= new_base:
            old.flush()
        old.release_index_maps()
        return seg

    # --- flushing ---

    @property
    def unflushed_messages(self) -> int:
        return self.log_end_offset - self.recovery_point

    def flush(self, offset: int | None = None) -> None:
        """Fsync everything below ``offset`` (default: the log end offset) and advance the
        recovery point to it."""
        self._check_open()
        if offset is None or offset > self.log_end_offset:
            offset = self.log_end_offset
        if offset <= self.recovery_point:
            return
        self._segments.flush(self.recovery_point, offset)
        self.recovery_point = offset
        self.last_flush_ms = self._clock()

    def maybe_flush_on_time(self, now_ms: int) -> bool:
        """flush.ms: fsync if the last flush is older than that."""
        if self.unflushed_messages > 0 and now_ms - self.last_flush_ms >= self.config.flush_ms:
            self.flush()
            return True
        return False

    # --- reading ---

    def collect_aborted_transactions(
        self, start_offset: int, upper_bound_offset: int
    ) -> list[AbortedTxn]:
        """Aborted transactions overlapping [start_offset, upper_bound_offset), for a
        READ_COMMITTED fetch."""
        return self._segments.collect_aborted_transactions(start_offset, upper_bound_offset)

    # --- taking segments out ---

    def _retire(self, segments: list[LogSegment]) -> None:
        """Rename detached segments to .deleted; unlink now or after file.delete.delay.ms."""
        self._retired.retire(segments, self._clock(), self.config.file_delete_delay_ms)

    def take_due_deletions(self, now_ms: int | None = None) -> list[LogSegment]:
        """Segments whose delete delay passed; pass them to ``delete_segment_files``."""
        return self._retired.take_due(self._clock() if now_ms is None else now_ms)

    def _truncate_segments(self, offset: int) -> None:
        """Drop the segments above ``offset`` and cut the one holding it there; the log end
        offset is the caller's to set."""
        later = [s for s in self._segments if s.base_offset > offset]
        self._segments.remove(later)
        self._retire(later)
        self._segments.active.truncate_to(offset)

    def _restart_segments_at(self, offset: int) -> None:
        """Drop every segment and start again with an empty one at ``offset``."""
        old = self._segments.to_list()
        self._segments.reset([])
        self._retire(old)
        self._segments.reset([self._new_segment(offset)])
        self.log_end_offset = offset
        self.recovery_point = offset

    def replace_segments(self, new: LogSegment, old: list[LogSegment]) -> None:
        """Swap cleaned segment ``new`` (files suffixed ``.swap``) for ``old``, crash-safely:
        old files are renamed ``.deleted`` before the swap files lose their suffix; a crash
        in between is completed at the next load."""
        self._retire(old)
        new.change_suffix(SWAP_SUFFIX, "")
        self._segments.replace(new, old)

    # --- lifecycle ---

    def close(self) -> None:
        """Write final index entries, trim and close every file; unlink retired segments."""
        if self._closed:
            return
        for seg in self._segments:
            seg.close()
        self._retired.delete_all()
        self._closed = True

    def close_handles(self) -> None:
        """Close every file without writing anything (the directory is being deleted)."""
        for seg in self._segments:
            seg.close_handles()
        self._retired.close_handles()
        self._closed = True
