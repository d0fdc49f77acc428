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
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

from gregor.storage.errors import CorruptRecordError
from gregor.storage.index import CorruptIndexError
from gregor.storage.producer_state import AppendOrigin
from gregor.storage.segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    INDEX_SUFFIXES,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
    file_name,
    parse_base_offset,
)

if TYPE_CHECKING:
    from gregor.storage.log import Log

logger = logging.getLogger(__name__)


def load(log: Log, *, had_clean_shutdown: bool) -> None:
    d = log.dir
    _remove_leftovers(log)
    txn_rebuild: set[int] = set()
    _complete_swaps(log, txn_rebuild)

    bases = sorted(
        b
        for name in os.listdir(d)
        if name.endswith(LOG_SUFFIX)
        and (b := parse_base_offset(name)) is not None
        and name == file_name(b, LOG_SUFFIX)
    )
    segments: list[LogSegment] = []
    missing: set[int] = set()
    for base in bases:
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            if not os.path.exists(os.path.join(d, file_name(base, suffix))):
                missing.add(base)
        segments.append(_open_segment(log, base))

    new_log = not segments
    if new_log:
        seg = _open_segment(log, log.log_start_offset)
        seg.offset_index.make_writable()
        seg.time_index.make_writable()
        segments.append(seg)

    recover_from = len(segments)
    if not had_clean_shutdown and not new_log:
        rp = log.recovery_point
        recover_from = 0
        for i, seg in enumerate(segments):
            if seg.base_offset <= rp:
                recover_from = i

    # Check the segments we trust, rebuilding what is broken.
    for seg in segments[:recover_from]:
        _check_segment(log, seg, seg.base_offset in missing and seg.size > 0, txn_rebuild)

    # Recover the rest.
    if recover_from < len(segments):
        cache = log.leader_epoch_cache
        first = segments[recover_from]
        logger.info(
            "%s: unclean shutdown, recovering %d segment(s) from offset %d (recovery point %d)",
            log.name,
            len(segments) - recover_from,
            first.base_offset,
            log.recovery_point,
        )

        def on_batch(pos, h, data) -> None:  # noqa: ANN001
            e = h.partition_leader_epoch
            if e >= 0 and (cache.latest_epoch is None or e > cache.latest_epoch):
                cache.assign(e, h.base_offset)

        for i in range(recover_from, len(segments)):
            seg = segments[i]
            size_before = seg.size
            truncated = seg.recover(on_batch)
            txn_rebuild.add(seg.base_offset)
            if truncated:
                logger.warning(
                    "%s: segment %d had %d invalid byte(s) after position %d (a torn write or "
                    "corruption); truncated it to %d bytes, log end offset now %d",
                    log.name,
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
                        log.name,
                        len(later),
                        [s.base_offset for s in later],
                    )
                    for s in later:
                        s.delete_files()
                        txn_rebuild.discard(s.base_offset)
                    del segments[i + 1 :]
                break

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
    log._set_segments(segments)

    # Offsets.
    leo = active.next_offset
    if log.log_start_offset > leo:
        logger.warning(
            "%s: log start offset %d is past the data (log end %d); restarting the log there",
            log.name,
            log.log_start_offset,
            leo,
        )
        for seg in segments:
            seg.delete_files()
        txn_rebuild.clear()
        seg = _open_segment(log, log.log_start_offset)
        seg.offset_index.make_writable()
        seg.time_index.make_writable()
        seg.load_state()
        log._set_segments([seg])
        leo = log.log_start_offset
    log.log_end_offset = leo
    log.log_start_offset = max(log.log_start_offset, log._segments[0].base_offset)
    if had_clean_shutdown:
        log.recovery_point = leo
    else:
        log.recovery_point = min(log.recovery_point, leo)
    log.leader_epoch_cache.truncate_from_end(leo)
    log.leader_epoch_cache.truncate_from_start(log.log_start_offset)
    rebuild_producer_state(log, txn_rebuild)


def _open_segment(log: Log, base: int, suffix: str = "") -> LogSegment:
    cfg = log.config
    return LogSegment(
        log.dir,
        base,
        index_interval_bytes=cfg.index_interval_bytes,
        max_index_size=cfg.segment_index_bytes,
        now_ms=log._clock(),
        suffix=suffix,
    )


def _check_segment(log: Log, seg: LogSegment, missing: bool, txn_rebuild: set[int]) -> None:
    try:
        seg.txn_index.sanity_check()
    except CorruptIndexError as e:
        logger.warning("%s: %s; rebuilding the transaction index", log.name, e)
        seg.txn_index.reset()
        txn_rebuild.add(seg.base_offset)
    if missing:
        logger.warning(
            "%s: index files of segment %d are missing; rebuilding them", log.name, seg.base_offset
        )
        seg.rebuild_indexes()
        return
    try:
        seg.check_indexes()
    except CorruptIndexError as e:
        logger.warning(
            "%s: corrupt index for segment %d (%s); rebuilding its indexes",
            log.name,
            seg.base_offset,
            e,
        )
        size = seg.size
        seg.rebuild_indexes()
        if seg.size != size:
            logger.warning(
                "%s: segment %d had %d invalid byte(s) at its end; truncated to %d bytes",
                log.name,
                seg.base_offset,
                size - seg.size,
                seg.size,
            )


def _remove_leftovers(log: Log) -> None:
    d = log.dir
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
        logger.warning("%s: rolled back an interrupted log cleaning (removed its output)", log.name)


def _complete_swaps(log: Log, txn_rebuild: set[int]) -> None:
    d = log.dir
    swaps = sorted(
        b
        for n in os.listdir(d)
        if n.endswith(LOG_SUFFIX + SWAP_SUFFIX) and (b := parse_base_offset(n)) is not None
    )
    for base in swaps:
        seg = _open_segment(log, base, SWAP_SUFFIX)
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
            log.name,
            base,
            sorted(replaced),
        )


def rebuild_producer_state(log: Log, txn_rebuild: set[int] | None) -> None:
    """Load the newest usable producer snapshot and replay the log after it; re-add aborted
    transactions to the transaction indexes of the segments in ``txn_rebuild``."""
    from gregor.storage.log import _read_control

    ps = log.producer_state
    leo = log.log_end_offset
    start = log.log_start_offset
    txn_rebuild = txn_rebuild or set()
    limit = min([leo, *txn_rebuild])
    snap = ps.load_latest_snapshot(limit, start)
    replay_from = max(snap if snap is not None else start, start)
    ps.map_end_offset = replay_from
    replayed = 0
    if replay_from < leo:
        segs = log._segments
        for seg in segs[log._segment_index(replay_from) :]:
            rebuild = seg.base_offset in txn_rebuild
            for _, h, data in seg.iter_batch_data(0):
                if h.last_offset < replay_from:
                    continue
                replayed += 1
                if h.producer_id < 0:
                    continue
                staged = ps.stage(AppendOrigin.REPLICATION)
                if h.is_control:
                    try:
                        control = _read_control(data, 0, h)
                    except CorruptRecordError as e:
                        logger.warning("%s: unreadable control batch: %s", log.name, e)
                        control = None
                    if control is None:
                        continue
                    commit, coordinator_epoch, ts = control
                    staged.append_end_txn_marker(
                        h.producer_id, h.producer_epoch, commit, coordinator_epoch,
                        h.base_offset, ts if not h.timestamp_type else h.max_timestamp,
                    )  # fmt: skip
                else:
                    staged.append_data_batch(
                        h.producer_id, h.producer_epoch, h.base_sequence, h.last_sequence,
                        h.base_offset, h.last_offset, h.max_timestamp, h.is_transactional,
                    )  # fmt: skip
                ps.commit(staged, h.last_offset + 1)
                for completed in staged.completed_txns:
                    log._complete_txn(completed, seg if rebuild else None)
    ps.map_end_offset = leo
    if replayed:
        logger.info(
            "%s: rebuilt producer state from %s by replaying %d batch(es) from offset %d",
            log.name,
            f"the snapshot at {snap}" if snap is not None else "the log start",
            replayed,
            replay_from,
        )
        ps.take_snapshot()
    ps.on_high_watermark_updated(log.high_watermark)
