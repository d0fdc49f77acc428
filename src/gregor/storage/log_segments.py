"""The segments of one log, sorted by base offset (Kafka's LogSegments).

Theory of operation. A log's segments never overlap: segment ``i`` holds offsets from its base
offset up to the next segment's base. Finding the segment for an offset is a bisect over the
base offsets, kept in a list beside the segments. The last segment is the *active* one, the only
one appended to. The list changes only by a roll (:meth:`append`), by retention, truncation and
compaction (:meth:`remove`, :meth:`replace`) and by a load (:meth:`reset`); each change drops
the cached read position (see :meth:`position_bound`).

Reads that walk several segments live here too (Kafka's LocalLog): a fetch (:meth:`read`), the
aborted transactions of a READ_COMMITTED fetch, the latest timestamp and fsyncing a range.

The loader, the log and (through the log) the cleaner share this API; like the log that owns
it, it is not thread-safe.
"""

from __future__ import annotations

import os
from bisect import bisect_right
from collections.abc import Iterable, Iterator

from gregor.protocol.records.header import BatchHeader
from gregor.storage.fast_append import SegmentsCore
from gregor.storage.log_info import FetchDataInfo
from gregor.storage.segment import LogSegment
from gregor.storage.transaction_index import AbortedTxn


class LogSegments(SegmentsCore):
    __slots__ = ("_segments", "_bases", "_pos_cache")

    active: LogSegment
    """The last segment, the one appends go to (a field of the base for the append path)."""

    def __init__(self, segments: Iterable[LogSegment] = ()) -> None:
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []
        self._pos_cache: tuple[int, int, int] | None = None  # (segment base, offset, position)
        self.reset(segments)

    def reset(self, segments: Iterable[LogSegment]) -> None:
        """Replace every segment (sorted here by base offset)."""
        self._segments = sorted(segments, key=lambda s: s.base_offset)
        self._bases = [s.base_offset for s in self._segments]
        self._pos_cache = None
        if self._segments:
            self.active = self._segments[-1]

    # --- queries ---

    def __len__(self) -> int:
        return len(self._segments)

    def __iter__(self) -> Iterator[LogSegment]:
        return iter(self._segments)

    def __getitem__(self, i: int) -> LogSegment:
        return self._segments[i]

    def to_list(self) -> list[LogSegment]:
        return list(self._segments)

    @property
    def size(self) -> int:
        """Bytes in every segment."""
        return sum(s.size for s in self._segments)

    def index_of(self, offset: int) -> int:
        """Index of the segment whose range holds ``offset`` (floor by base offset; the first
        segment for offsets below every base)."""
        return max(bisect_right(self._bases, offset) - 1, 0)

    def floor(self, offset: int) -> LogSegment:
        """The segment whose range holds ``offset``."""
        return self._segments[self.index_of(offset)]

    def from_offset(self, offset: int) -> list[LogSegment]:
        """The segment holding ``offset`` and every later one."""
        return self._segments[self.index_of(offset) :]

    def next_base(self, i: int) -> int | None:
        """Base offset of the segment after segment ``i`` (None for the active one)."""
        return self._bases[i + 1] if i + 1 < len(self._bases) else None

    def position_bound(self, seg: LogSegment, max_offset: int) -> int:
        """File position in ``seg`` where batches reaching ``max_offset`` begin (the segment's
        size when none do). The last answer is cached: consecutive fetches ask the same."""
        if max_offset >= seg.next_offset:
            return seg.size
        cache = self._pos_cache
        if cache is not None and cache[0] == seg.base_offset and cache[1] == max_offset:
            return cache[2]
        bp = seg.translate_offset(max_offset)
        pos = bp.position if bp is not None else seg.size
        self._pos_cache = (seg.base_offset, max_offset, pos)
        return pos

    # --- reads across segments ---

    def read(
        self,
        offset: int,
        max_bytes: int,
        max_offset: int,
        min_one_message: bool,
        include_aborted_txns: bool,
        log_end_offset: int,
    ) -> FetchDataInfo:
        """The fetch from ``offset`` (in range, below ``max_offset``): the region of the
        first segment with a batch there, at most ``max_bytes`` (or the whole first batch if
        ``min_one_message``), ending before ``max_offset``."""
        i = self.index_of(offset)
        while i < len(self._segments):
            seg = self._segments[i]
            if seg.base_offset >= max_offset:
                break
            max_pos = self.position_bound(seg, max_offset)
            result = seg.read(offset, max_bytes, max_pos, min_one_message)
            if result is not None:
                region, first = result
                aborted = None
                if include_aborted_txns:
                    upper = seg.offset_index.lookup_by_position(region.position + region.length)
                    if upper is None:
                        nxt = self.next_base(i)
                        upper = nxt if nxt is not None else log_end_offset
                    aborted = self.collect_aborted_transactions(offset, upper)
                return FetchDataInfo(offset, region, first.base_offset, aborted)
            i += 1
        return FetchDataInfo(offset, None, -1, [] if include_aborted_txns else None)

    def collect_aborted_transactions(
        self, start_offset: int, upper_bound_offset: int
    ) -> list[AbortedTxn]:
        """Aborted transactions overlapping [start_offset, upper_bound_offset)."""
        out: list[AbortedTxn] = []
        for seg in self.from_offset(start_offset):
            found, complete = seg.txn_index.collect(start_offset, upper_bound_offset)
            out.extend(found)
            if complete:
                break
        return out

    def iter_batches(self, start_offset: int) -> Iterator[tuple[BatchHeader, bytes]]:
        """Every batch from the one holding ``start_offset`` to the end, with its bytes."""
        for seg in self.from_offset(start_offset):
            for _, h, data in seg.iter_batch_data(0):
                if h.last_offset >= start_offset:
                    yield h, bytes(data)

    def latest_timestamp(self) -> tuple[int, int] | None:
        """The largest timestamp and the offset of the record carrying it, if any."""
        best: LogSegment | None = None
        for seg in self._segments:
            if seg.size and (best is None or seg.max_timestamp_so_far > best.max_timestamp_so_far):
                best = seg
        if best is None or best.max_timestamp_so_far < 0:
            return None
        return best.max_timestamp_and_offset()

    def flush(self, from_offset: int, to_offset: int) -> None:
        """Fsync the segments holding [from_offset, to_offset): the active one's data only
        (its indexes are rebuilt by recovery), the others whole."""
        active = self._segments[-1]
        for seg in self.from_offset(from_offset):
            if seg.base_offset >= to_offset and seg is not active:
                break
            if seg is active:
                os.fdatasync(seg.fd)
            else:
                seg.flush()

    # --- changes ---

    def append(self, seg: LogSegment) -> None:
        """Add a new active segment (a roll); its base is above every other."""
        self._segments.append(seg)
        self._bases.append(seg.base_offset)
        self.active = seg

    def remove(self, gone: Iterable[LogSegment]) -> None:
        """Drop ``gone`` from the list (their files are the caller's business)."""
        ids = {id(s) for s in gone}
        self.reset(s for s in self._segments if id(s) not in ids)

    def replace(self, new: LogSegment, old: Iterable[LogSegment]) -> None:
        """Put ``new`` (a cleaned segment) in place of ``old``."""
        ids = {id(s) for s in old}
        self.reset([*(s for s in self._segments if id(s) not in ids), new])
