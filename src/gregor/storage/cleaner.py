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
import struct
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from gregor.protocol.exceptions import ProtocolError
from gregor.protocol.records.batch import Record, decode_batch
from gregor.protocol.records.compression import compress
from gregor.protocol.records.control import ControlRecordType, parse_control_key
from gregor.protocol.records.header import (
    CONTROL_MASK,
    DELETE_HORIZON_MASK,
    HEADER_SIZE,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    BatchHeader,
)
from gregor.storage.index import AbortedTxn
from gregor.storage.segment import CLEANED_SUFFIX, SWAP_SUFFIX, BatchPosition, LogSegment

logger = logging.getLogger(__name__)

INT32_MAX = 0x7FFFFFFF
DEFAULT_MAX_MAP_ENTRIES = 4_000_000


@dataclass
class CleanPlan:
    log: object  # gregor.storage.log.Log
    segments: list[LogSegment]  # the cleanable segments, oldest first
    first_dirty_offset: int
    end_offset: int  # first offset after the cleanable segments
    now_ms: int
    map_aborted: list[AbortedTxn]  # aborted transactions over the dirty range
    group_aborted: list[list[AbortedTxn]] = field(default_factory=list)
    groups: list[list[LogSegment]] = field(default_factory=list)
    last_records: dict[int, tuple[int, int]] = field(default_factory=dict)  # pid -> (last data offset, epoch)
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

    def cleanable_range(self, log, first_dirty_offset: int, now_ms: int):  # noqa: ANN001, ANN201
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
        self, log, first_dirty_offset: int, *, now_ms: int | None = None, force: bool = False
    ) -> CleanPlan | None:  # noqa: ANN001
        """What to clean, or None when the log is not (dirty enough to be) cleanable."""
        if not log.config.compact or log.closed:
            return None
        if now_ms is None:
            now_ms = self._clock() if self._clock else log._clock()
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
        aborted = _AbortedRanges(plan.map_aborted)
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
                for r in _records(data, h) or ():
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
        txn = _CleanedTxnMetadata(aborted)
        horizon = now + cfg.delete_retention_ms
        kept = 0
        try:
            for seg in group:
                for _, h, data in seg.iter_batch_data(0):
                    batch_bytes, n = self._filter_batch(
                        plan, h, data, txn, offset_map, map_end, now, horizon
                    )
                    kept += n
                    if batch_bytes is not None:
                        size = len(batch_bytes)
                        nh = _header_of(batch_bytes)
                        out.append(
                            batch_bytes,
                            [BatchPosition(0, size, nh.base_offset, nh.last_offset, nh.max_timestamp)],
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

    def _filter_batch(
        self,
        plan: CleanPlan,
        h: BatchHeader,
        data: memoryview,
        txn: _CleanedTxnMetadata,
        offset_map: dict[bytes, int],
        map_end: int,
        now: int,
        horizon: int,
    ) -> tuple[bytes | None, int]:
        """The batch as it goes into the cleaned segment (None: dropped), and its record
        count."""
        records = _records(data, h) if h.records_count else []
        if records is None:
            return bytes(data), h.records_count  # unreadable: keep it as it is
        has_horizon = bool(h.attributes & DELETE_HORIZON_MASK)
        batch_horizon = h.base_timestamp if has_horizon else None
        if h.is_control:
            control_type = None
            if records:
                try:
                    control_type = parse_control_key(records[0].key)[1]
                except ProtocolError:
                    control_type = None
            can_discard = txn.on_control_batch_read(h, control_type)
            discard_records = (
                can_discard and batch_horizon is not None and batch_horizon <= now
            )
        else:
            can_discard = txn.on_batch_read(h)
            discard_records = can_discard

        last = plan.last_records.get(h.producer_id) if h.producer_id >= 0 else None
        is_last_of_producer = False
        if last is not None:
            last_data_offset, epoch = last
            if last_data_offset >= 0:
                is_last_of_producer = h.last_offset == last_data_offset
            else:
                is_last_of_producer = h.is_control and h.producer_epoch == epoch

        if discard_records:
            retained: list[Record] = []
        elif h.is_control:
            retained = records
        else:
            retain_deletes = batch_horizon is None or now < batch_horizon
            retained = []
            for r in records:
                if r.offset >= map_end:
                    retained.append(r)
                elif r.key is None:
                    continue
                elif r.offset >= offset_map.get(r.key, -1) and (
                    r.value is not None or retain_deletes
                ):
                    retained.append(r)

        needs_horizon = not has_horizon and h.last_offset < map_end and (
            (h.is_control and can_discard and bool(retained))
            or any(r.value is None for r in retained if not h.is_control)
        )
        if retained:
            if len(retained) == len(records) and not needs_horizon:
                return bytes(data), len(retained)
            new_horizon = horizon if needs_horizon else batch_horizon
            return _rebuild_batch(h, retained, new_horizon), len(retained)
        if h.producer_id >= 0 and is_last_of_producer:
            return _empty_batch(h), 0
        return None, 0

    # --- phase 3: commit ---

    def commit(self, log, work: CleanWork) -> CleanResult:  # noqa: ANN001
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

    def abort(self, log, work: CleanWork) -> None:  # noqa: ANN001
        for seg, _ in work.cleaned:
            seg.delete_files()
        log.unpin_segments()

    # --- all three ---

    def clean(
        self, log, first_dirty_offset: int = 0, *, now_ms: int | None = None, force: bool = False
    ) -> CleanResult | None:  # noqa: ANN001
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


class _AbortedRanges:
    def __init__(self, aborted: list[AbortedTxn]) -> None:
        self._by_pid: dict[int, list[tuple[int, int]]] = {}
        for t in aborted:
            self._by_pid.setdefault(t.producer_id, []).append((t.first_offset, t.last_offset))

    def contains(self, producer_id: int, offset: int) -> bool:
        for first, last in self._by_pid.get(producer_id, ()):
            if first <= offset <= last:
                return True
        return False


class _CleanedTxnMetadata:
    """Kafka's CleanedTransactionMetadata: which transactional batches and markers a cleaning
    may drop, walking batches in offset order."""

    def __init__(self, aborted: list[AbortedTxn]) -> None:
        self._pending = deque(aborted)
        self._ongoing_aborted: dict[int, list] = {}  # pid -> [txn, last batch offset seen]
        self._ongoing_committed: set[int] = set()
        self.cleaned_index: list[AbortedTxn] = []

    def _consume_up_to(self, offset: int) -> None:
        while self._pending and self._pending[0].first_offset <= offset:
            t = self._pending.popleft()
            self._ongoing_aborted[t.producer_id] = [t, None]

    def on_control_batch_read(self, h: BatchHeader, control_type: int | None) -> bool:
        """Whether the marker may be dropped (once its delete horizon passes)."""
        self._consume_up_to(h.last_offset)
        if h.records_count == 0 or control_type is None:
            return True
        pid = h.producer_id
        if control_type == ControlRecordType.ABORT:
            entry = self._ongoing_aborted.pop(pid, None)
            if entry is not None and entry[1] is not None:
                # Data of this transaction is being removed in this pass: keep the marker
                # (and its index entry) until the next one.
                self.cleaned_index.append(entry[0])
                return False
            return True
        if control_type == ControlRecordType.COMMIT:
            if pid in self._ongoing_committed:
                self._ongoing_committed.discard(pid)
                return False
            return True
        return False

    def on_batch_read(self, h: BatchHeader) -> bool:
        """Whether the data batch belongs to an aborted transaction (and is dropped)."""
        self._consume_up_to(h.last_offset)
        if not h.is_transactional:
            return False
        entry = self._ongoing_aborted.get(h.producer_id)
        if entry is not None:
            entry[1] = h.last_offset
            return True
        self._ongoing_committed.add(h.producer_id)
        return False


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
    from gregor.storage.segment import INDEX_SUFFIXES, LOG_SUFFIX, file_name

    for s in (LOG_SUFFIX, *INDEX_SUFFIXES):
        try:
            os.unlink(os.path.join(directory, file_name(base, s) + suffix))
        except FileNotFoundError:
            pass


def _records(data: memoryview, h: BatchHeader) -> list[Record] | None:
    try:
        return decode_batch(data, 0, verify_crc=False).records
    except ProtocolError as e:
        logger.warning("cannot read the records of the batch at offset %d: %s",
                       h.base_offset, e)  # fmt: skip
        return None


_HEADER = struct.Struct(">qiibIhiqqqhii")


def _header_of(batch: bytes) -> BatchHeader:
    return BatchHeader._make(_HEADER.unpack_from(batch, 0))


def _varint(n: int) -> bytes:
    u = (n << 1) ^ (n >> 63)
    out = bytearray()
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def _encode_record(r: Record, base_offset: int, base_timestamp: int) -> bytes:
    parts = [
        b"\x00",
        _varint(r.timestamp - base_timestamp),
        _varint(r.offset - base_offset),
    ]
    for blob in (r.key, r.value):
        if blob is None:
            parts.append(_varint(-1))
        else:
            parts.append(_varint(len(blob)))
            parts.append(bytes(blob))
    parts.append(_varint(len(r.headers)))
    for hkey, hvalue in r.headers:
        kb = hkey.encode()
        parts.append(_varint(len(kb)))
        parts.append(kb)
        if hvalue is None:
            parts.append(_varint(-1))
        else:
            parts.append(_varint(len(hvalue)))
            parts.append(bytes(hvalue))
    body = b"".join(parts)
    return _varint(len(body)) + body


def _assemble(h: BatchHeader, attributes: int, base_ts: int, max_ts: int, count: int,
              payload: bytes) -> bytes:  # fmt: skip
    from crc32c import crc32c

    out = bytearray(HEADER_SIZE)
    out += payload
    _HEADER.pack_into(
        out, 0, h.base_offset, len(out) - LOG_OVERHEAD, h.partition_leader_epoch, 2, 0,
        attributes, h.last_offset_delta, base_ts, max_ts, h.producer_id, h.producer_epoch,
        h.base_sequence, count,
    )  # fmt: skip
    struct.pack_into(">I", out, 17, crc32c(memoryview(out)[21:]))
    return bytes(out)


def _rebuild_batch(h: BatchHeader, records: list[Record], delete_horizon: int | None) -> bytes:
    """``h``'s batch with only ``records``: same base and last offset, producer fields,
    compression and flags; with ``delete_horizon`` as base timestamp (and the flag) if set."""
    log_append_time = bool(h.attributes & TIMESTAMP_TYPE_MASK)
    attributes = h.attributes & ~DELETE_HORIZON_MASK
    if delete_horizon is not None:
        attributes |= DELETE_HORIZON_MASK
        base_ts = delete_horizon
    else:
        base_ts = records[0].timestamp
    if log_append_time:
        max_ts = h.max_timestamp
    else:
        max_ts = max(r.timestamp for r in records)
    payload = b"".join(_encode_record(r, h.base_offset, base_ts) for r in records)
    if h.compression:
        payload = compress(h.compression, payload, magic=2)
    return _assemble(h, attributes, base_ts, max_ts, len(records), payload)


def _empty_batch(h: BatchHeader) -> bytes:
    """A header-only batch keeping ``h``'s offsets and producer state (Kafka's
    writeEmptyHeader: no compression, no delete horizon, both timestamps the max)."""
    attributes = h.attributes & (TIMESTAMP_TYPE_MASK | TRANSACTIONAL_MASK | CONTROL_MASK)
    return _assemble(h, attributes, h.max_timestamp, h.max_timestamp, 0, b"")
