"""One log segment: ``<base_offset>.log`` and its offset, time and transaction indexes.

Theory of operation. A segment holds whole v2 batches, back to back, exactly as they arrived
(after the leader rewrote their offsets). Appends go to the end of the file with one ``write``
per append; while appending, the segment adds an offset-index entry (batch last offset, batch
position) and a time-index entry (max timestamp so far, its offset) each time more than
``index.interval.bytes`` were written since the last entry. That rule is applied per batch and
is deterministic given the batch positions, which is what :meth:`check_indexes` relies on to
tell a complete index from a cut one. The produce fast path appends through
``SegmentCore.append_unchecked`` (``storage.fast_append``), which also decides (without I/O) whether the segment must roll first.
When the segment stops being the active one, its indexes are trimmed (``seal``) and its time
index gets the final (max timestamp, offset) entry, as Kafka's roll does.

Reads never copy batches: :meth:`read` turns an offset into a file position (index lookup, then
a short walk over batch headers) and returns a :class:`FileRegion` the broker can hand to
``os.sendfile``. The segment's file descriptor stays open until the segment is deleted, and
deletion first renames the files to ``.deleted`` (see ``Log``), so a region handed out just
before a retention run stays readable.

A segment is not thread-safe; its log owns it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

from gregor.protocol.records.header import HEADER_SIZE, BatchHeader, crc_ok
from gregor.storage.errors import KafkaStorageError
from gregor.storage.fast_append import SegmentCore
from gregor.storage.file_records import (
    READ_CHUNK,
    BatchPosition,
    FileRegion,
    first_record_at,
    offset_of_timestamp,
    pread_fully,
    read_header_at,
    scan_batches,
    walk_to_offset,
)
from gregor.storage.files import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    file_name,
)
from gregor.storage.index import (
    NO_TIMESTAMP,
    CorruptIndexError,
    OffsetIndex,
    TimeIndex,
)
from gregor.storage.transaction_index import TransactionIndex

OnBatch = Callable[[int, BatchHeader, memoryview], None]
"""``on_batch(position, header, batch bytes)``: what :meth:`LogSegment.recover` reports."""


class LogSegment(SegmentCore):
    # The fields the produce fast path touches are SegmentCore's (storage.fast_append).
    __slots__ = ("dir", "log_path", "txn_index", "_suffix")

    def __init__(
        self,
        directory: str,
        base_offset: int,
        *,
        index_interval_bytes: int,
        max_index_size: int,
        now_ms: int,
        suffix: str = "",
        preallocate_indexes: bool = False,
    ) -> None:
        """Open (creating if absent) the segment's files. ``suffix`` is ``.cleaned`` or
        ``.swap`` for a segment the cleaner is building."""
        self.dir = directory
        self.base_offset = base_offset
        self._suffix = suffix
        self.log_path = os.path.join(directory, file_name(base_offset, LOG_SUFFIX) + suffix)
        self.fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        self.size = os.fstat(self.fd).st_size
        self.offset_index = OffsetIndex(self._path(INDEX_SUFFIX), base_offset, max_index_size)
        self.time_index = TimeIndex(self._path(TIME_INDEX_SUFFIX), base_offset, max_index_size)
        self.txn_index = TransactionIndex(self._path(TXN_INDEX_SUFFIX), base_offset)
        self.index_interval_bytes = index_interval_bytes
        self.bytes_since_last_index_entry = 0
        self.max_timestamp_so_far = NO_TIMESTAMP
        self.offset_of_max_timestamp_so_far = base_offset
        self.next_offset = base_offset
        self.created_ms = now_ms
        self._rolling_based_timestamp: int | None = None
        if preallocate_indexes:
            self.offset_index.make_writable()
            self.time_index.make_writable()

    def _path(self, suffix: str) -> str:
        return os.path.join(self.dir, file_name(self.base_offset, suffix) + self._suffix)

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self.size})"

    # --- state after open ---

    def load_state(self) -> None:
        """Derive next_offset, the max timestamp and the index-interval counter from the
        indexes and the tail of the log (trusted: call after the indexes were checked or
        rebuilt)."""
        ts, off = self.time_index.last_entry()
        self.max_timestamp_so_far = ts
        self.offset_of_max_timestamp_so_far = off
        start = self.offset_index.lookup(1 << 62)[1] if self.offset_index.entries else 0
        next_offset = self.base_offset
        for bp in self.iter_batches(start):
            next_offset = bp.last_offset + 1
            if bp.max_timestamp > self.max_timestamp_so_far:
                self.max_timestamp_so_far = bp.max_timestamp
                self.offset_of_max_timestamp_so_far = bp.last_offset
        self.next_offset = next_offset
        self.bytes_since_last_index_entry = self.size - start

    # --- appending ---

    def append(self, data: bytes | bytearray | memoryview, batches: list[BatchPosition]) -> None:
        """Write ``data`` (whole batches, offsets assigned) and index it. ``batches`` gives
        each batch's size, last offset and max timestamp, positions relative to ``data``."""
        start = self.size
        self._write(data)
        interval = self.index_interval_bytes
        since = self.bytes_since_last_index_entry
        max_ts = self.max_timestamp_so_far
        for bp in batches:
            if bp.max_timestamp > max_ts:
                max_ts = self.max_timestamp_so_far = bp.max_timestamp
                self.offset_of_max_timestamp_so_far = bp.last_offset
            if since > interval:
                self.offset_index.append(bp.last_offset, start + bp.position)
                self.time_index.maybe_append(max_ts, self.offset_of_max_timestamp_so_far)
                since = 0
            since += bp.size
        self.bytes_since_last_index_entry = since
        self.next_offset = batches[-1].last_offset + 1
        if self._rolling_based_timestamp is None and start == 0:
            self._rolling_based_timestamp = batches[0].max_timestamp

    def append_one(
        self, data: bytes | bytearray | memoryview, last_offset: int, max_timestamp: int
    ) -> None:
        """:meth:`append` for a single batch (the produce fast path)."""
        start = self.size
        self._write(data)
        if max_timestamp > self.max_timestamp_so_far:
            self.max_timestamp_so_far = max_timestamp
            self.offset_of_max_timestamp_so_far = last_offset
        since = self.bytes_since_last_index_entry
        if since > self.index_interval_bytes:
            self.offset_index.append(last_offset, start)
            self.time_index.maybe_append(
                self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far
            )
            since = 0
        self.bytes_since_last_index_entry = since + len(data)
        self.next_offset = last_offset + 1
        if start == 0 and self._rolling_based_timestamp is None:
            self._rolling_based_timestamp = max_timestamp

    def _write(self, data: bytes | bytearray | memoryview) -> None:
        start = self.size
        try:
            n = os.write(self.fd, data)
            total = len(data)
            while n < total:
                written = os.write(self.fd, memoryview(data)[n:])
                if written <= 0:
                    raise OSError("write returned no progress")
                n += written
        except OSError as e:
            self._undo_write(start)
            raise KafkaStorageError(f"write to {self.log_path} failed: {e}") from e
        self.size = start + total

    def _undo_write(self, size: int) -> None:
        try:
            os.ftruncate(self.fd, size)
        except OSError:
            pass

    @property
    def rolling_based_timestamp(self) -> int | None:
        """The first batch's max timestamp (what segment.ms counts from), if any."""
        if self._rolling_based_timestamp is None and self.size >= HEADER_SIZE:
            h = read_header_at(self.fd, 0)
            if h is not None:
                self._rolling_based_timestamp = h.max_timestamp
        return self._rolling_based_timestamp

    def time_waited_for_roll(self, now_ms: int, message_timestamp: int) -> int:
        ts = self.rolling_based_timestamp
        if ts is not None and ts >= 0:
            return message_timestamp - ts
        return now_ms - self.created_ms

    @property
    def largest_timestamp(self) -> int:
        """The max timestamp in the segment, or its file's mtime when no batch has one."""
        if self.max_timestamp_so_far >= 0:
            return self.max_timestamp_so_far
        return self.last_modified_ms

    @property
    def last_modified_ms(self) -> int:
        return os.fstat(self.fd).st_mtime_ns // 1_000_000

    # --- reading ---

    def iter_batches(
        self, start: int = 0, end: int | None = None, *, chunk: int = READ_CHUNK
    ) -> Iterator[BatchPosition]:
        """Batch positions from ``start`` (a batch boundary) to ``end``, reading headers in
        chunks. Stops quietly at a header that does not parse or runs past ``end``."""
        stop = self.size if end is None else end
        for pos, h, _ in scan_batches(self.fd, start, stop, with_data=False, chunk=chunk):
            yield BatchPosition(pos, h.size, h.base_offset, h.last_offset, h.max_timestamp)

    def iter_batch_data(
        self, start: int = 0, end: int | None = None, *, chunk: int = 1024 * 1024
    ) -> Iterator[tuple[int, BatchHeader, memoryview]]:
        """(position, header, whole batch bytes) from ``start``; the memoryview is only valid
        until the next step. Stops quietly at the first batch that does not parse or is
        incomplete (the CRC is not checked here)."""
        stop = self.size if end is None else end
        return scan_batches(self.fd, start, stop, with_data=True, chunk=chunk)

    def translate_offset(self, offset: int, starting_position: int = 0) -> BatchPosition | None:
        """The first batch whose last offset is >= ``offset``, or None."""
        _, pos = self.offset_index.lookup(offset)
        if pos < starting_position:
            pos = starting_position
        return walk_to_offset(self.fd, pos, self.size, offset, None)

    def read(
        self,
        start_offset: int,
        max_size: int,
        max_position: int | None = None,
        min_one_message: bool = True,
    ) -> tuple[FileRegion, BatchPosition] | None:
        """The region from the batch holding ``start_offset`` up to ``max_size`` bytes (or the
        whole first batch if ``min_one_message``), never past ``max_position``. None when
        the segment has no batch at or after the offset."""
        if max_position is None:
            max_position = self.size
        first = self.translate_offset(start_offset)
        if first is None or first.position >= max_position:
            return None
        limit = max(max_size, first.size) if min_one_message else max_size
        length = min(max_position - first.position, limit)
        if length <= 0:
            return None
        return FileRegion(self.log_path, self.fd, first.position, length), first

    def find_offset_by_timestamp(
        self, timestamp: int, starting_offset: int
    ) -> BatchPosition | None:
        """The first batch at or after ``starting_offset`` whose max timestamp is >=
        ``timestamp`` (:meth:`find_record_at_timestamp` decodes it); None if none."""
        _, offset = self.time_index.lookup(timestamp)
        _, pos = self.offset_index.lookup(max(offset, starting_offset))
        return walk_to_offset(self.fd, pos, self.size, starting_offset, timestamp)

    def find_record_at_timestamp(self, timestamp: int, min_offset: int) -> tuple[int, int] | None:
        """(timestamp, offset) of the first record at or after ``min_offset`` whose timestamp
        is >= ``timestamp`` (Kafka's LogSegment.findOffsetByTimestamp): the time and offset
        indexes lead to a batch, whose records are then scanned."""
        if self.max_timestamp_so_far < timestamp:
            return None
        starting = min_offset
        while True:
            bp = self.find_offset_by_timestamp(timestamp, starting)
            if bp is None:
                return None
            found = first_record_at(self.read_batch(bp.position, bp.size), timestamp, min_offset)
            if found is not None:
                return found
            starting = bp.last_offset + 1

    def max_timestamp_and_offset(self) -> tuple[int, int]:
        """The segment's max timestamp and the offset of the record carrying it (the first
        such record of the batch the time index points at)."""
        ts = self.max_timestamp_so_far
        offset = self.offset_of_max_timestamp_so_far
        bp = self.translate_offset(offset)
        if bp is not None:
            offset = offset_of_timestamp(self.read_batch(bp.position, bp.size), ts, offset)
        return ts, offset

    def read_batch(self, position: int, size: int) -> bytes:
        return pread_fully(self.fd, size, position)

    # --- recovery and checks ---

    def recover(self, on_batch: OnBatch | None = None, *, reset_txn_index: bool = True) -> int:
        """Re-validate every batch, rebuild the offset and time indexes (the caller rebuilds
        the transaction index by replaying producer state) and cut the file after the last
        valid batch. ``on_batch(position, header, data)`` sees each valid batch. Returns the
        number of bytes truncated."""
        self.offset_index.reset()
        self.time_index.reset()
        if reset_txn_index:
            self.txn_index.reset()
        self.offset_index.make_writable()
        self.time_index.make_writable()
        self.bytes_since_last_index_entry = 0
        self.max_timestamp_so_far = NO_TIMESTAMP
        self.offset_of_max_timestamp_so_far = self.base_offset
        self._rolling_based_timestamp = None
        valid = 0
        next_offset = self.base_offset
        interval = self.index_interval_bytes
        for pos, h, data in self.iter_batch_data(0):
            if (
                h.base_offset < next_offset
                or h.last_offset - self.base_offset > 0x7FFFFFFF
                or not crc_ok(data, 0, h)
            ):
                break
            if h.max_timestamp > self.max_timestamp_so_far:
                self.max_timestamp_so_far = h.max_timestamp
                self.offset_of_max_timestamp_so_far = h.last_offset
            if self.bytes_since_last_index_entry > interval:
                self.offset_index.append(h.last_offset, pos)
                self.time_index.maybe_append(
                    self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far
                )
                self.bytes_since_last_index_entry = 0
            self.bytes_since_last_index_entry += h.size
            if on_batch is not None:
                on_batch(pos, h, data)
            next_offset = h.last_offset + 1
            valid = pos + h.size
        truncated = self.size - valid
        if truncated:
            os.ftruncate(self.fd, valid)
            self.size = valid
        self.next_offset = next_offset
        return truncated

    def check_indexes(self) -> None:
        """Kafka's index sanity checks plus a completeness check: the last offset-index
        entry must point at the batch it names, and no batch after it may start more than
        ``index.interval.bytes`` past it (else entries were lost). Raises CorruptIndexError."""
        self.offset_index.sanity_check()
        self.time_index.sanity_check()
        self.txn_index.sanity_check()
        n = self.offset_index.entries
        if n:
            last_off, last_pos = self.offset_index.entry(n - 1)
            if last_pos >= self.size:
                raise CorruptIndexError(
                    f"{self.offset_index.path}: entry position {last_pos} is past the log end"
                )
            h = read_header_at(self.fd, last_pos)
            if h is None or h.last_offset != last_off:
                raise CorruptIndexError(
                    f"{self.offset_index.path}: entry ({last_off}, {last_pos}) does not "
                    "point at its batch"
                )
        else:
            last_pos = 0
        last_ts, _ = self.time_index.last_entry()
        end = last_pos
        for bp in self.iter_batches(last_pos):
            if bp.position - last_pos > self.index_interval_bytes:
                raise CorruptIndexError(
                    f"{self.offset_index.path}: no entry for the batch at position "
                    f"{bp.position} (the index is incomplete)"
                )
            if bp.max_timestamp > last_ts:
                raise CorruptIndexError(
                    f"{self.time_index.path}: batch at {bp.position} has a timestamp above "
                    "the last time index entry"
                )
            end = bp.position + bp.size
        if end != self.size:
            raise CorruptIndexError(f"{self.log_path}: batches end at {end}, not {self.size}")

    def rebuild_indexes(self) -> None:
        """Rebuild the offset and time indexes from the log (keeping the transaction index)."""
        writable = self.offset_index.writable
        self.recover(reset_txn_index=False)
        if not writable:
            self.on_become_inactive()

    # --- truncation ---

    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset is >= ``offset``. Returns bytes removed."""
        bp = self.translate_offset(offset)
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        self.offset_index.make_writable()
        self.time_index.make_writable()
        if bp is None:
            return 0
        removed = self.size - bp.position
        os.ftruncate(self.fd, bp.position)
        self.size = bp.position
        if self.size == 0:
            self._rolling_based_timestamp = None
        self.load_state()
        return removed

    # --- lifecycle ---

    def on_become_inactive(self) -> None:
        """The segment rolled: write its final time-index entry and trim the indexes."""
        self.time_index.seal_with(self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far)
        self.offset_index.seal()

    def release_index_maps(self) -> None:
        """Unmap an inactive segment's indexes (they map again on the next lookup)."""
        self.offset_index.release()
        self.time_index.release()

    def flush(self) -> None:
        os.fsync(self.fd)
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def close(self) -> None:
        """Close cleanly: final time-index entry, trimmed indexes, files closed."""
        if self.fd < 0:
            return
        self.on_become_inactive()
        self.offset_index.close()
        self.time_index.close()
        os.close(self.fd)
        self.fd = -1

    def close_handles(self) -> None:
        """Close without touching the files (the segment is being deleted)."""
        self.offset_index.close()
        self.time_index.close()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def all_paths(self) -> list[str]:
        return [
            self.log_path,
            self.offset_index.path,
            self.time_index.path,
            self.txn_index.path,
        ]

    def change_suffix(self, old: str, new: str) -> None:
        """Rename every file of the segment from suffix ``old`` to ``new`` (indexes first,
        the log last, so a ``.log`` with the new suffix implies its indexes have it)."""

        def renamed(path: str) -> str:
            if old and path.endswith(old):
                path = path[: -len(old)]
            return path + new

        self.offset_index.rename(renamed(self.offset_index.path))
        self.time_index.rename(renamed(self.time_index.path))
        self.txn_index.rename(renamed(self.txn_index.path))
        new_log = renamed(self.log_path)
        os.replace(self.log_path, new_log)
        self.log_path = new_log
        self._suffix = new

    def delete_files(self) -> None:
        self.close_handles()
        for path in self.all_paths():
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
