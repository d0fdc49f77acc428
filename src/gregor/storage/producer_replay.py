"""Producer state from batches: staging one batch, completing a transaction, replaying a log.

Theory of operation. Producer state (see ``producer_state``) changes with every batch that
carries a producer id. The same steps run when a leader appends and when state is rebuilt from
the segments (at load, and after a follower truncates): :func:`stage_batch` checks the batch
against a staged copy of its producer's entry (a transaction marker's control record is read
for its type and coordinator epoch), the caller installs it after the write, and
:func:`complete_txn` turns an aborted transaction into an entry of the segment's transaction
index before the transaction leaves the open set.

:func:`rebuild_producer_state` loads the newest usable snapshot at or below the log end (and
below every segment whose transaction index must be rebuilt) and replays the batches after it.
"""

from __future__ import annotations

import logging
from collections.abc import Collection

from gregor.protocol.records.header import BatchHeader
from gregor.storage.errors import CorruptRecordError
from gregor.storage.log_segments import LogSegments
from gregor.storage.producer_state import (
    AppendOrigin,
    BatchMetadata,
    CompletedTxn,
    ProducerAppend,
    ProducerStateManager,
)
from gregor.storage.segment import LogSegment
from gregor.storage.transaction_index import AbortedTxn
from gregor.storage.validator import read_control

logger = logging.getLogger(__name__)


def stage_batch(
    staged: ProducerAppend,
    data: bytes | memoryview,
    pos: int,
    h: BatchHeader,
    base_offset: int,
    timestamp: int | None,
) -> bool:
    """Stage the batch at ``pos`` of ``data`` (header ``h``, first offset ``base_offset``).
    ``timestamp`` is the LogAppendTime the batch gets or got; None means the batch's own (its
    max timestamp, or for a marker its control record's timestamp). Returns False, staging
    nothing, for a control batch that is not a transaction marker."""
    if h.is_control:
        control = read_control(data, pos, h)
        if control is None:
            return False
        commit, coordinator_epoch, marker_ts = control
        staged.append_end_txn_marker(
            h.producer_id,
            h.producer_epoch,
            commit,
            coordinator_epoch,
            base_offset,
            marker_ts if timestamp is None else timestamp,
        )
    else:
        staged.append_data_batch(
            h.producer_id,
            h.producer_epoch,
            h.base_sequence,
            h.last_sequence,
            base_offset,
            base_offset + h.last_offset_delta,
            h.max_timestamp if timestamp is None else timestamp,
            h.is_transactional,
        )
    return True


def stage_append(
    producer_state: ProducerStateManager,
    data: bytes | memoryview,
    headers: list[tuple[int, BatchHeader]],
    bases: list[int],
    origin: AppendOrigin,
    timestamp: int | None,
) -> ProducerAppend | BatchMetadata | None:
    """Stage the producer-state changes of an append (Kafka's analyzeAndValidateProducerState):
    None when no batch carries a producer id; for a client's retried batch that is one of
    its producer's last five, the metadata it was written with (the append is answered with
    those offsets and not written again); else the staged changes, to install with
    :func:`commit_append` once the bytes are written."""
    staged: ProducerAppend | None = None
    for i, (pos, h) in enumerate(headers):
        if h.producer_id < 0:
            continue
        if staged is None:
            if origin is AppendOrigin.CLIENT:
                dup = find_duplicate(producer_state, headers)
                if dup is not None:
                    return dup
            staged = producer_state.stage(origin)
        stage_batch(staged, data, pos, h, bases[i], timestamp)
    return staged


def find_duplicate(
    producer_state: ProducerStateManager, headers: list[tuple[int, BatchHeader]]
) -> BatchMetadata | None:
    """The remembered metadata of the first data batch its producer already wrote."""
    for _, h in headers:
        if h.producer_id < 0 or h.is_control:
            continue
        dup = producer_state.find_duplicate(
            h.producer_id, h.producer_epoch, h.base_sequence, h.last_sequence
        )
        if dup is not None:
            return dup
    return None


def commit_append(
    producer_state: ProducerStateManager,
    staged: ProducerAppend | None,
    end_offset: int,
    segment: LogSegment,
) -> None:
    """Install what :func:`stage_append` staged, now that the append (ending before
    ``end_offset``, its markers in ``segment``) is written."""
    if staged is None:
        producer_state.map_end_offset = end_offset
        return
    producer_state.commit(staged, end_offset)
    for completed in staged.completed_txns:
        complete_txn(producer_state, completed, segment)


def complete_txn(
    producer_state: ProducerStateManager, completed: CompletedTxn, segment: LogSegment | None
) -> None:
    """Finish a transaction whose marker was written (to ``segment``, whose transaction index
    records it if it aborted; None when the index already holds it)."""
    if completed.is_aborted and segment is not None:
        lso = producer_state.last_stable_offset_for(completed)
        segment.txn_index.append(
            AbortedTxn(completed.producer_id, completed.first_offset, completed.last_offset, lso)
        )
    producer_state.complete_txn(completed)


def rebuild_producer_state(
    name: str,
    segments: LogSegments,
    producer_state: ProducerStateManager,
    *,
    log_start_offset: int,
    log_end_offset: int,
    high_watermark: int,
    txn_rebuild: Collection[int] = (),
) -> None:
    """Load the newest usable producer snapshot and replay the segments after it; re-add
    aborted transactions to the transaction indexes of the segments whose base offsets are in
    ``txn_rebuild``."""
    ps = producer_state
    leo = log_end_offset
    start = log_start_offset
    limit = min([leo, *txn_rebuild])
    snap = ps.load_latest_snapshot(limit, start)
    replay_from = max(snap if snap is not None else start, start)
    ps.map_end_offset = replay_from
    replayed = 0
    if replay_from < leo:
        for seg in segments.from_offset(replay_from):
            rebuild = seg.base_offset in txn_rebuild
            for _, h, data in seg.iter_batch_data(0):
                if h.last_offset < replay_from:
                    continue
                replayed += 1
                if h.producer_id < 0:
                    continue
                staged = ps.stage(AppendOrigin.REPLICATION)
                lat = h.max_timestamp if h.timestamp_type else None
                try:
                    if not stage_batch(staged, data, 0, h, h.base_offset, lat):
                        continue
                except CorruptRecordError as e:
                    logger.warning("%s: unreadable control batch: %s", name, e)
                    continue
                ps.commit(staged, h.last_offset + 1)
                for completed in staged.completed_txns:
                    complete_txn(ps, completed, seg if rebuild else None)
    ps.map_end_offset = leo
    if replayed:
        logger.info(
            "%s: rebuilt producer state from %s by replaying %d batch(es) from offset %d",
            name,
            f"the snapshot at {snap}" if snap is not None else "the log start",
            replayed,
            replay_from,
        )
        ps.take_snapshot()
    ps.on_high_watermark_updated(high_watermark)
