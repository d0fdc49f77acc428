"""Log compaction (``cleanup.policy=compact``): keep the latest record per key.

Theory of operation, after Kafka's LogCleaner. A compacted log is split at the *first dirty
offset* (where the previous cleaning stopped, kept in ``cleaner-offset-checkpoint``) into a
clean head and a dirty tail. The cleanable range ends before the *first uncleanable offset*:
the active segment, the last stable offset (open transactions are never cleaned), and with
``min.compaction.lag.ms`` the first segment holding records younger than that. Only whole
segments below it are cleaned. A log is cleaned when dirty bytes / cleanable bytes reaches
``min.cleanable.dirty.ratio``.

A cleaning has three phases so that the owner of the log is blocked only briefly:

1. :meth:`LogCleaner.plan` (the log's owner): choose the segments, read the aborted
   transactions and the producers' last batches, pin the segments against retention.
2. :meth:`LogCleaner.build` (any thread; reads only the pinned segments): build the offset map
   (key -> latest offset over the dirty range, skipping control batches and aborted
   transactions), then rewrite each group of small segments (up to ``segment.bytes``) into
   one ``<base>.log.cleaned`` segment. A record is kept when it is the latest for its key;
   keyless records are dropped; a tombstone (null value) or a transaction marker is kept until
   ``delete.retention.ms`` after the first cleaning that saw it, which stamps that *delete
   horizon* into its batch (KIP-534: attribute bit 6, base timestamp = horizon); data of
   aborted transactions is dropped, and their markers once no data is left. Batches keep their
   base offset, last offset, producer id/epoch/base sequence and compression; an emptied batch
   that is a producer's last is kept as a bare header so its sequence state survives.
3. :meth:`LogCleaner.commit` (the owner): for each group, rename the cleaned files to
   ``.swap`` (indexes first, log last), rename the replaced segments to ``.deleted`` (oldest
   first), then drop the ``.swap`` suffix. A crash before the ``.log.swap`` exists rolls back
   at load; after, the load completes the swap (see ``loader``). Retiring the old segments
   oldest-first means a crash can at worst leave some of a group's *newest* old segments in
   place whose content was entirely removed by the cleaning: redundant records, never missing
   or reordered ones.

:meth:`LogCleaner.clean` runs the three phases in a row.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from gregor.storage.batch_filter import (
    AbortedRanges,
    CleanedTxnMetadata,
    batch_records,
    filter_batch,
    header_of,
)
from gregor.storage.clock import Clock
from gregor.storage.config import LogConfig
from gregor.storage.file_records import BatchPosition
from gregor.storage.files import CLEANED_SUFFIX, INDEX_SUFFIXES, LOG_SUFFIX, SWAP_SUFFIX, file_name
from gregor.storage.producer_state import ProducerStateManager
from gregor.storage.segment import LogSegment
from gregor.storage.transaction_index import AbortedTxn

logger = logging.getLogger(__name__)

INT32_MAX = 0x7FFFFFFF
DEFAULT_MAX_MAP_ENTRIES = 4_000_000


class CleanableLog(Protocol):
    """What the cleaner needs of a log (``Log`` is one)."""

    dir: str
    name: str
    log_start_offset: int
    cleaning_aborted: bool
    producer_state: ProducerStateManager

    @property
    def config(self) -> LogConfig: ...

    @property
    def segments(self) -> list[LogSegment]: ...

    @property
    def last_stable_offset(self) -> int: ...

    @property
    def closed(self) -> bool: ...

    @property
    def clock(self) -> Clock: ...

    def collect_aborted_transactions(
        self, start_offset: int, upper_bound_offset: int
    ) -> list[AbortedTxn]: ...

    def pin_segments(self, bases: list[int]) -> None: ...

    def unpin_segments(self) -> None: ...

    def replace_segments(self, new: LogSegment, old: list[LogSegment]) -> None: ...


@dataclass
class CleanPlan:
    log: CleanableLog
    segments: list[LogSegment]  # the cleanable segments, oldest first
    first_dirty_offset: int
    end_offset: int  # first offset after the cleanable segments
    now_ms: int
    map_aborted: list[AbortedTxn]  # aborted transactions over the dirty range
    group_aborted: list[list[AbortedTxn]] = field(default_factory=list)
    groups: list[list[LogSegment]] = field(default_factory=list)
    last_records: dict[int, tuple[int, int]] = field(
        default_factory=dict
    )  # pid -> (last data offset, epoch)
    dirty_ratio: float = 0.0


@dataclass
class CleanResult:
    log_name: str
    first_dirty_offset: int
    end_offset: int  # the new first dirty offset
    bytes_before: int
    bytes_after: int
    records_read: int
    records_kept: int
    segments_before: int
    segments_after: int
    aborted: bool = False


@dataclass
class CleanWork:
    plan: CleanPlan
    end_offset: int
    cleaned: list[tuple[LogSegment, list[LogSegment]]]
    records_read: int
    records_kept: int


class LogCleaner:
    def __init__(
        self,
        *,
        clock: Callable[[], int] | None = None,
        max_map_entries: int = DEFAULT_MAX_MAP_ENTRIES,
    ) -> None:
        self._clock = clock
        self.max_map_entries = max_map_entries

    # --- phase 1: plan ---

    def cleanable_range(
        self, log: CleanableLog, first_dirty_offset: int, now_ms: int
    ) -> tuple[list[LogSegment], int, float]:
        """(cleanable segments, first dirty offset, dirty ratio)."""
        segs = log.segments
        first_uncleanable = min(segs[-1].base_offset, log.last_stable_offset)
        lag = log.config.min_compaction_lag_ms
        if lag > 0:
            for s in segs:
                if s.largest_timestamp > now_ms - lag:
                    first_uncleanable = min(first_uncleanable, s.base_offset)
                    break
        cleanable = []
        for i, s in enumerate(segs[:-1]):
            if segs[i + 1].base_offset <= first_uncleanable:
                cleanable.append(s)
            else:
                break
        first_dirty = max(first_dirty_offset, log.log_start_offset)
        if not cleanable:
            return [], first_dirty, 0.0
        end = segs[len(cleanable)].base_offset
        if first_dirty >= end:
            return cleanable, first_dirty, 0.0
        total = sum(s.size for s in cleanable)
        dirty = 0
        for i, s in enumerate(cleanable):
            nxt = segs[i + 1].base_offset
            if nxt > first_dirty:
                dirty += s.size
        ratio = dirty / total if total else 0.0
        return cleanable, first_dirty, ratio

    def plan(
        self,
        log: CleanableLog,
        first_dirty_offset: int,
        *,
        now_ms: int | None = None,
        force: bool = False,
    ) -> CleanPlan | None:
        """What to clean, or None when the log is not (dirty enough to be) cleanable."""
        if not log.config.compact or log.closed:
            return None
        if now_ms is None:
            now_ms = self._clock() if self._clock else log.clock()
        cleanable, first_dirty, ratio = self.cleanable_range(log, first_dirty_offset, now_ms)
        if not cleanable:
            return None
        end = log.segments[len(cleanable)].base_offset
        if first_dirty >= end or (not force and ratio < log.config.min_cleanable_dirty_ratio):
            return None
        plan = CleanPlan(
            log=log,
            segments=cleanable,
            first_dirty_offset=first_dirty,
            end_offset=end,
            now_ms=now_ms,
            map_aborted=log.collect_aborted_transactions(first_dirty, end),
            dirty_ratio=ratio,
        )
        plan.groups = _group_segments(
            cleanable, log.config.segment_bytes, log.config.segment_index_bytes, end
        )
        segs = log.segments
        for g in plan.groups:
            idx = segs.index(g[-1])
            upper = segs[idx + 1].base_offset
            plan.group_aborted.append(
                sorted(
                    log.collect_aborted_transactions(g[0].base_offset, upper),
                    key=lambda t: t.first_offset,
                )
            )
        plan.last_records = {
            pid: (e.last_data_offset, e.producer_epoch)
            for pid, e in log.producer_state.entries.items()
        }
        log.pin_segments([s.base_offset for s in cleanable])
        return plan

    # --- phase 2: build ---

    def build(self, plan: CleanPlan) -> CleanWork:
        offset_map, map_end, read = self._build_offset_map(plan)
        cleaned: list[tuple[LogSegment, list[LogSegment]]] = []
        kept = 0
        try:
            for group, aborted in zip(plan.groups, plan.group_aborted, strict=True):
                if group[0].base_offset >= map_end:
                    break
                seg, n = self._clean_group(plan, group, aborted, offset_map, map_end)
                cleaned.append((seg, group))
                kept += n
        except BaseException:
            for seg, _ in cleaned:
                seg.delete_files()
            raise
        return CleanWork(plan, map_end, cleaned, read, kept)

    def _build_offset_map(self, plan: CleanPlan) -> tuple[dict[bytes, int], int, int]:
        """key -> last offset over [first dirty, end). Stops at a segment boundary when the
        map holds ``max_map_entries``; returns (map, offset it covers up to, records read)."""
        offset_map: dict[bytes, int] = {}
        aborted = AbortedRanges(plan.map_aborted)
        start = plan.first_dirty_offset
        segs = plan.segments
        read = 0
        map_end = plan.end_offset
        for i, seg in enumerate(segs):
            upper = segs[i + 1].base_offset if i + 1 < len(segs) else plan.end_offset
            if upper <= start:
                continue
            if len(offset_map) >= self.max_map_entries:
                map_end = seg.base_offset
                break
            for _, h, data in seg.iter_batch_data(0):
                if h.last_offset < start or h.is_control:
                    continue
                if h.is_transactional and aborted.contains(h.producer_id, h.base_offset):
                    continue
                for r in batch_records(data, h) or ():
                    read += 1
                    if r.offset >= start and r.key is not None:
                        offset_map[r.key] = r.offset
        return offset_map, map_end, read

    def _clean_group(
        self,
        plan: CleanPlan,
        group: list[LogSegment],
        aborted: list[AbortedTxn],
        offset_map: dict[bytes, int],
        map_end: int,
    ) -> tuple[LogSegment, int]:
        log = plan.log
        cfg = log.config
        now = plan.now_ms
        base = group[0].base_offset
        for suffix in (CLEANED_SUFFIX, SWAP_SUFFIX):
            _remove_files(log.dir, base, suffix)
        out = LogSegment(
            log.dir,
            base,
            index_interval_bytes=cfg.index_interval_bytes,
            max_index_size=cfg.segment_index_bytes,
            now_ms=now,
            suffix=CLEANED_SUFFIX,
            preallocate_indexes=True,
        )
        txn = CleanedTxnMetadata(aborted)
        horizon = now + cfg.delete_retention_ms
        kept = 0
        try:
            for seg in group:
                for _, h, data in seg.iter_batch_data(0):
                    batch_bytes, n = filter_batch(
                        h, data, txn, offset_map, map_end, now, horizon, plan.last_records
                    )
                    kept += n
                    if batch_bytes is not None:
                        size = len(batch_bytes)
                        nh = header_of(batch_bytes)
                        out.append(
                            batch_bytes,
                            [
                                BatchPosition(
                                    0, size, nh.base_offset, nh.last_offset, nh.max_timestamp
                                )
                            ],
                        )
            for t in txn.cleaned_index:
                out.txn_index.append(t)
            out.on_become_inactive()
            out.flush()
            mtime = max(s.last_modified_ms for s in group)
            os.utime(out.log_path, ns=(mtime * 1_000_000, mtime * 1_000_000))
        except BaseException:
            out.delete_files()
            raise
        return out, kept

    # --- phase 3: commit ---

    def commit(self, log: CleanableLog, work: CleanWork) -> CleanResult:
        plan = work.plan
        before = sum(s.size for _, g in work.cleaned for s in g)
        segs_before = sum(len(g) for _, g in work.cleaned)
        try:
            if log.cleaning_aborted or log.closed:
                for seg, _ in work.cleaned:
                    seg.delete_files()
                logger.info("%s: cleaning aborted (the log was truncated or closed)", log.name)
                return CleanResult(
                    log.name, plan.first_dirty_offset, plan.first_dirty_offset, before, before,
                    work.records_read, work.records_kept, segs_before, segs_before, aborted=True,
                )  # fmt: skip
            for seg, group in work.cleaned:
                seg.change_suffix(CLEANED_SUFFIX, SWAP_SUFFIX)
                log.replace_segments(seg, group)
        finally:
            log.unpin_segments()
        after = sum(s.size for s, _ in work.cleaned)
        result = CleanResult(
            log.name,
            plan.first_dirty_offset,
            work.end_offset,
            before,
            after,
            work.records_read,
            work.records_kept,
            segs_before,
            len(work.cleaned),
        )
        logger.info(
            "%s: cleaned offsets [%d, %d): %d -> %d bytes, %d of %d records kept, "
            "%d -> %d segments",
            log.name,
            plan.first_dirty_offset,
            work.end_offset,
            before,
            after,
            work.records_kept,
            work.records_read,
            segs_before,
            len(work.cleaned),
        )
        return result

    def abort(self, log: CleanableLog, work: CleanWork) -> None:
        for seg, _ in work.cleaned:
            seg.delete_files()
        log.unpin_segments()

    # --- all three ---

    def clean(
        self,
        log: CleanableLog,
        first_dirty_offset: int = 0,
        *,
        now_ms: int | None = None,
        force: bool = False,
    ) -> CleanResult | None:
        """Plan, build and commit in one call; None if there was nothing to clean."""
        plan = self.plan(log, first_dirty_offset, now_ms=now_ms, force=force)
        if plan is None:
            return None
        try:
            work = self.build(plan)
        except BaseException:
            log.unpin_segments()
            raise
        return self.commit(log, work)


# --- helpers ---


def _group_segments(
    segments: list[LogSegment], max_size: int, max_index_size: int, end_offset: int
) -> list[list[LogSegment]]:
    """Consecutive segments merged while the sum of their sizes and index sizes fits and
    their offsets fit a relative (int32) offset from the group's base."""
    groups: list[list[LogSegment]] = []
    i = 0
    n = len(segments)
    while i < n:
        group = [segments[i]]
        size = segments[i].size
        index_size = segments[i].offset_index.size_in_bytes
        time_size = segments[i].time_index.size_in_bytes
        i += 1
        while i < n:
            s = segments[i]
            upper = segments[i + 1].base_offset if i + 1 < n else end_offset
            if (
                size + s.size > max_size
                or index_size + s.offset_index.size_in_bytes > max_index_size
                or time_size + s.time_index.size_in_bytes > max_index_size - 12
                or upper - 1 - group[0].base_offset > INT32_MAX
            ):
                break
            group.append(s)
            size += s.size
            index_size += s.offset_index.size_in_bytes
            time_size += s.time_index.size_in_bytes
            i += 1
        groups.append(group)
    return groups


def _remove_files(directory: str, base: int, suffix: str) -> None:
    for s in (LOG_SUFFIX, *INDEX_SUFFIXES):
        try:
            os.unlink(os.path.join(directory, file_name(base, s) + suffix))
        except FileNotFoundError:
            pass
