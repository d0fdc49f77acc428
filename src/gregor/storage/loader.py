"""Opening a log: leftovers of interrupted operations, recovery, producer state.

Theory of operation. Loading a partition directory runs these steps, logging each repair with
one clear line (logger ``gregor.storage.loader``):

1. Leftovers. ``*.deleted`` files (segments retired before the crash) and ``*.tmp`` files
   (half-written checkpoints) are removed. The cleaner's output is rolled back or completed:
   ``.cleaned`` files mean the swap had not begun (removed); a ``.log.swap`` means it had (the
   cleaner renames a segment's indexes to ``.swap`` before its log), so the old segments it
   covers are deleted and the swap files renamed to their final names. Index ``.swap`` files
   without a ``.log.swap`` are the rolled-back case too.
2. Segments. Every ``<base>.log`` is opened with its indexes. After a clean shutdown (the log
   directory's ``.kafka_cleanshutdown`` marker) every segment's indexes are sanity-checked
   (Kafka's checks plus completeness: see ``LogSegment.check_indexes``) and rebuilt when
   missing or corrupt. After a crash, segments below the recovery point get the same check;
   the segment holding the recovery point and every later one are *recovered*: each batch is
   re-validated (header, CRC, increasing offsets), the indexes are rebuilt, and the file is cut
   after the last valid batch. If bytes had to be cut, every later segment is deleted, since
   data after a torn write cannot be trusted.
3. Offsets. The log end offset is the last segment's next offset; the log start offset is the
   checkpointed one or the first segment's base; the recovery point stays at the checkpoint
   after a crash (only a flush advances it) and moves to the log end after a clean shutdown.
4. Producer state. The newest snapshot at or below the log end is loaded (snapshots above it
   are deleted) and the batches after it are replayed. Where a segment's transaction index had
   to be rebuilt, the replay starts at or before that segment and re-adds its aborted
   transactions.

:func:`load` returns the result as a :class:`LoadedLog` (Kafka's LoadedLogOffsets plus the
segments, epoch cache and producer state) that ``Log`` is built from; the loader never sees a
half-built log.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass

from gregor.protocol.records.header import BatchHeader
from gregor.storage.clock import Clock
from gregor.storage.config import LogConfig
from gregor.storage.epoch import LeaderEpochCache
from gregor.storage.files import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    INDEX_SUFFIXES,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    file_name,
    parse_base_offset,
)
from gregor.storage.index import CorruptIndexError
from gregor.storage.log_segments import LogSegments
from gregor.storage.producer_replay import rebuild_producer_state
from gregor.storage.producer_state import ProducerStateManager
from gregor.storage.segment import LogSegment

logger = logging.getLogger(__name__)

_SegmentOpener = Callable[[int, str], LogSegment]


@dataclass
class LoadedLog:
    """A partition directory, loaded: what a ``Log`` is built from."""

    segments: LogSegments
    log_start_offset: int
    log_end_offset: int
    recovery_point: int
    leader_epoch_cache: LeaderEpochCache
    producer_state: ProducerStateManager


def load(
    directory: str,
    config: LogConfig,
    *,
    log_start_offset: int,
    recovery_point: int,
    had_clean_shutdown: bool,
    clock: Clock,
    producer_id_expiration_ms: int,
    sync_metadata: bool = True,
) -> LoadedLog:
    """Load the partition in ``directory`` (which must exist), repairing what a crash left;
    ``log_start_offset`` and ``recovery_point`` are the checkpointed ones."""
    d = directory
    log_name = os.path.basename(d)
    cache = LeaderEpochCache(d, sync=sync_metadata)
    producer_state = ProducerStateManager(
        d, producer_id_expiration_ms=producer_id_expiration_ms, sync=sync_metadata
    )

    def opener(base: int, suffix: str = "") -> LogSegment:
        return LogSegment(
            d,
            base,
            index_interval_bytes=config.index_interval_bytes,
            max_index_size=config.segment_index_bytes,
            now_ms=clock(),
            suffix=suffix,
        )

    def new_active(base: int) -> LogSegment:
        seg = opener(base)
        seg.offset_index.make_writable()
        seg.time_index.make_writable()
        return seg

    _remove_leftovers(d, log_name)
    txn_rebuild: set[int] = set()
    _complete_swaps(d, log_name, opener, txn_rebuild)

    bases = sorted(
        b
        for n in os.listdir(d)
        if n.endswith(LOG_SUFFIX)
        and (b := parse_base_offset(n)) is not None
        and n == file_name(b, LOG_SUFFIX)
    )
    segments: list[LogSegment] = []
    missing: set[int] = set()
    for base in bases:
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            if not os.path.exists(os.path.join(d, file_name(base, suffix))):
                missing.add(base)
        segments.append(opener(base))

    new_log = not segments
    if new_log:
        segments.append(new_active(log_start_offset))

    recover_from = len(segments)
    if not had_clean_shutdown and not new_log:
        recover_from = 0
        for i, seg in enumerate(segments):
            if seg.base_offset <= recovery_point:
                recover_from = i

    # Check the segments we trust, rebuilding what is broken.
    for seg in segments[:recover_from]:
        _check_segment(log_name, seg, seg.base_offset in missing and seg.size > 0, txn_rebuild)

    # Recover the rest.
    if recover_from < len(segments):
        _recover(log_name, segments, recover_from, recovery_point, cache, txn_rebuild)

    # Non-active segments: final time-index entry and trimmed indexes; active: preallocated.
    for seg in segments[:-1]:
        if seg.offset_index.writable or seg.time_index.writable:
            seg.on_become_inactive()
    active = segments[-1]
    active.offset_index.make_writable()
    active.time_index.make_writable()
    for seg in segments:
        seg.load_state()
    for seg in segments[:-1]:
        seg.release_index_maps()

    # Offsets.
    leo = active.next_offset
    if log_start_offset > leo:
        logger.warning(
            "%s: log start offset %d is past the data (log end %d); restarting the log there",
            log_name,
            log_start_offset,
            leo,
        )
        for seg in segments:
            seg.delete_files()
        txn_rebuild.clear()
        seg = new_active(log_start_offset)
        seg.load_state()
        segments = [seg]
        leo = log_start_offset
    log_segments = LogSegments(segments)
    log_start_offset = max(log_start_offset, log_segments[0].base_offset)
    recovery_point = leo if had_clean_shutdown else min(recovery_point, leo)
    cache.truncate_from_end(leo)
    cache.truncate_from_start(log_start_offset)
    rebuild_producer_state(
        log_name,
        log_segments,
        producer_state,
        log_start_offset=log_start_offset,
        log_end_offset=leo,
        high_watermark=log_start_offset,
        txn_rebuild=txn_rebuild,
    )
    return LoadedLog(log_segments, log_start_offset, leo, recovery_point, cache, producer_state)


def _recover(
    log_name: str,
    segments: list[LogSegment],
    recover_from: int,
    recovery_point: int,
    cache: LeaderEpochCache,
    txn_rebuild: set[int],
) -> None:
    """Re-validate segments from ``recover_from`` on (the leader-epoch cache learns the epochs
    of their batches); after a torn write, cut there and delete every later segment."""
    first = segments[recover_from]
    logger.info(
        "%s: unclean shutdown, recovering %d segment(s) from offset %d (recovery point %d)",
        log_name,
        len(segments) - recover_from,
        first.base_offset,
        recovery_point,
    )

    def on_batch(pos: int, h: BatchHeader, data: memoryview) -> None:
        cache.assign_if_newer(h.partition_leader_epoch, h.base_offset)

    for i in range(recover_from, len(segments)):
        seg = segments[i]
        size_before = seg.size
        truncated = seg.recover(on_batch)
        txn_rebuild.add(seg.base_offset)
        if truncated:
            logger.warning(
                "%s: segment %d had %d invalid byte(s) after position %d (a torn write or "
                "corruption); truncated it to %d bytes, log end offset now %d",
                log_name,
                seg.base_offset,
                truncated,
                size_before - truncated,
                seg.size,
                seg.next_offset,
            )
            later = segments[i + 1 :]
            if later:
                logger.warning(
                    "%s: deleting %d segment(s) after the truncation point: %s",
                    log_name,
                    len(later),
                    [s.base_offset for s in later],
                )
                for s in later:
                    s.delete_files()
                    txn_rebuild.discard(s.base_offset)
                del segments[i + 1 :]
            break


def _check_segment(log_name: str, seg: LogSegment, missing: bool, txn_rebuild: set[int]) -> None:
    try:
        seg.txn_index.sanity_check()
    except CorruptIndexError as e:
        logger.warning("%s: %s; rebuilding the transaction index", log_name, e)
        seg.txn_index.reset()
        txn_rebuild.add(seg.base_offset)
    if missing:
        logger.warning(
            "%s: index files of segment %d are missing; rebuilding them", log_name, seg.base_offset
        )
        seg.rebuild_indexes()
        return
    try:
        seg.check_indexes()
    except CorruptIndexError as e:
        logger.warning(
            "%s: corrupt index for segment %d (%s); rebuilding its indexes",
            log_name,
            seg.base_offset,
            e,
        )
        size = seg.size
        seg.rebuild_indexes()
        if seg.size != size:
            logger.warning(
                "%s: segment %d had %d invalid byte(s) at its end; truncated to %d bytes",
                log_name,
                seg.base_offset,
                size - seg.size,
                seg.size,
            )


def _remove_leftovers(d: str, log_name: str) -> None:
    names = os.listdir(d)
    swap_logs = {
        b
        for n in names
        if n.endswith(LOG_SUFFIX + SWAP_SUFFIX) and (b := parse_base_offset(n)) is not None
    }
    rolled_back = False
    for name in names:
        path = os.path.join(d, name)
        if name.endswith(DELETED_SUFFIX) or name.endswith(".tmp"):
            os.unlink(path)
        elif name.endswith(CLEANED_SUFFIX):
            os.unlink(path)
            rolled_back = True
        elif name.endswith(SWAP_SUFFIX) and parse_base_offset(name) not in swap_logs:
            os.unlink(path)
            rolled_back = True
        elif any(name.endswith(s) for s in INDEX_SUFFIXES):
            base = parse_base_offset(name)
            if base is not None and not os.path.exists(
                os.path.join(d, file_name(base, LOG_SUFFIX))
            ):
                if base not in swap_logs:
                    os.unlink(path)
    if rolled_back:
        logger.warning("%s: rolled back an interrupted log cleaning (removed its output)", log_name)


def _complete_swaps(d: str, log_name: str, opener: _SegmentOpener, txn_rebuild: set[int]) -> None:
    swaps = sorted(
        b
        for n in os.listdir(d)
        if n.endswith(LOG_SUFFIX + SWAP_SUFFIX) and (b := parse_base_offset(n)) is not None
    )
    for base in swaps:
        seg = opener(base, SWAP_SUFFIX)
        seg.recover()
        end = seg.next_offset
        replaced = []
        for name in os.listdir(d):
            b = parse_base_offset(name)
            if b is None or name.endswith(SWAP_SUFFIX) or not (base <= b < max(end, base + 1)):
                continue
            if name.endswith(LOG_SUFFIX) or any(name.endswith(s) for s in INDEX_SUFFIXES):
                os.unlink(os.path.join(d, name))
                if name.endswith(LOG_SUFFIX):
                    replaced.append(b)
        seg.on_become_inactive()
        seg.close()
        for suffix in (*INDEX_SUFFIXES, LOG_SUFFIX):
            src = os.path.join(d, file_name(base, suffix) + SWAP_SUFFIX)
            if os.path.exists(src):
                os.replace(src, os.path.join(d, file_name(base, suffix)))
        txn_rebuild.add(base)
        logger.warning(
            "%s: completed an interrupted segment swap: cleaned segment %d replaces %s",
            log_name,
            base,
            sorted(replaced),
        )
