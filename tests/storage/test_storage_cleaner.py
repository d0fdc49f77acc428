"""Compaction: latest record per key, tombstones, transactions, producer state, crash-safe swap."""

from __future__ import annotations

import logging
import os

import pytest
from storage_helpers import T0, batch, check_log, config, idempotent, read_batches, read_records

from gregor.protocol.records.header import DELETE_HORIZON_MASK
from gregor.storage import Log, LogCleaner
from gregor.storage.files import CLEANED_SUFFIX, DELETED_SUFFIX, SWAP_SUFFIX

VALUE = b"x" * 60


def compacted(log_dir, clock, **props):
    props.setdefault("cleanup_policy", "compact")
    props.setdefault("segment_bytes", 600)
    props.setdefault("index_interval_bytes", 100)
    props.setdefault("min_cleanable_dirty_ratio", 0.0)
    props.setdefault("file_delete_delay_ms", 0)
    return Log(log_dir, config(**props), clock=clock)


def put(log, *pairs, ts=T0, **kw):
    info = log.append(batch([(ts, k, v) for k, v in pairs], **kw))
    log.update_high_watermark(log.log_end_offset)
    return info


def latest_view(records, end):
    """What compaction of [0, end) must leave: per key the last record below end, plus all
    records from end on."""
    last = {}
    for r in records:
        if r.offset < end:
            last[r.key] = r.offset
    return [r for r in records if r.offset >= end or last.get(r.key) == r.offset]


def kvs(records):
    return [(r.offset, r.key, r.value) for r in records]


def test_keeps_the_latest_record_per_key(log_dir, clock):
    log = compacted(log_dir, clock)
    for i in range(30):
        put(log, (b"k%d" % (i % 4), b"%d" % i + VALUE))
    before = read_records(log)
    active_base = log.active_segment.base_offset
    n_segments = log.num_segments
    log.config = log.config.with_overrides({"segment.bytes": 5000})  # groups of segments
    result = LogCleaner().clean(log, 0)
    assert result is not None and result.end_offset == active_base
    after = read_records(log)
    assert kvs(after) == kvs(latest_view(before, active_base))
    assert log.num_segments < n_segments
    assert log.log_end_offset == 30
    check_log(log)
    # the cleaned range is clean now: nothing to do until more is written
    assert LogCleaner().clean(log, result.end_offset) is None


def test_batch_boundaries_and_offsets_are_kept(log_dir, clock):
    log = compacted(log_dir, clock, segment_bytes=2000)
    put(log, (b"a", b"1"), (b"b", b"1"), (b"c", b"1"))  # 0-2
    put(log, (b"a", b"2"), (b"d", b"1"))  # 3-4
    log.roll()
    put(log, (b"z", b"z"))
    LogCleaner().clean(log, 0)
    batches = read_batches(log)
    assert [(b.base_offset, b.last_offset, [r.offset for r in b]) for b in batches] == [
        (0, 2, [1, 2]),  # the batch keeps its base and last offset
        (3, 4, [3, 4]),
        (5, 5, [5]),
    ]
    check_log(log)


def test_dirty_ratio(log_dir, clock):
    size = len(batch([(T0, b"u0000", VALUE)]))
    log = compacted(log_dir, clock, min_cleanable_dirty_ratio=0.5, segment_bytes=4 * size)
    cleaner = LogCleaner()
    n = 0

    def write_segments(count):
        nonlocal n
        for _ in range(4 * count):
            put(log, (b"u%04d" % n, VALUE))  # unique keys: cleaning removes nothing
            n += 1

    write_segments(4)
    first = cleaner.clean(log, 0)  # everything is dirty: ratio 1
    assert first is not None and first.end_offset == 12  # 3 whole segments, the 4th active
    for dirty in (1, 2):  # segment 12 (active at the first cleaning) and newer ones
        write_segments(1)
        _, _, ratio = cleaner.cleanable_range(log, first.end_offset, clock.now)
        assert ratio == pytest.approx(dirty / (3 + dirty))
        assert cleaner.clean(log, first.end_offset) is None  # below 0.5
    write_segments(1)
    second = cleaner.clean(log, first.end_offset)  # 3 / 6 reaches it
    assert second is not None and second.end_offset == 24
    assert [r.offset for r in read_records(log)] == list(range(n))
    check_log(log)


def test_does_not_clean_past_the_last_stable_offset(log_dir, clock):
    log = compacted(log_dir, clock)
    for i in range(6):
        put(log, (b"k", b"%d" % i + VALUE))
    open_at = log.log_end_offset
    put(log, (b"k", b"txn" + VALUE), producer_id=1, producer_epoch=0, base_sequence=0,
        is_transactional=True)  # fmt: skip
    for i in range(10):
        put(log, (b"k", b"late%d" % i + VALUE))
    assert log.last_stable_offset == open_at
    result = LogCleaner().clean(log, 0)
    assert result.end_offset <= open_at
    assert all(r.offset >= result.end_offset - 1 for r in read_records(log))
    offsets = [r.offset for r in read_records(log)]
    assert open_at in offsets and offsets[-1] == log.log_end_offset - 1


def test_min_compaction_lag(log_dir, clock):
    log = compacted(log_dir, clock, min_compaction_lag_ms=10_000)
    for i in range(8):
        put(log, (b"k", b"%d" % i + VALUE), ts=clock.now - 20_000)
    for i in range(8):
        put(log, (b"k", b"%d" % i + VALUE), ts=clock.now)
    young = next(s.base_offset for s in log.segments if s.largest_timestamp > clock.now - 10_000)
    result = LogCleaner().clean(log, 0)
    assert result.end_offset <= young
    assert len([r for r in read_records(log) if r.offset >= young]) == 16 - young


def test_tombstones_live_for_delete_retention_after_the_first_cleaning(log_dir, clock):
    log = compacted(log_dir, clock, delete_retention_ms=1000)
    put(log, (b"a", VALUE), (b"b", VALUE))
    put(log, (b"a", None))  # tombstone at 2
    log.roll()
    put(log, (b"c", VALUE))
    cleaner = LogCleaner()
    cleaner.clean(log, 0, force=True)
    assert kvs(read_records(log)) == [(1, b"b", VALUE), (2, b"a", None), (3, b"c", VALUE)]
    tomb_batch = next(b for b in read_batches(log) if b.base_offset == 2)
    assert tomb_batch.header.attributes & DELETE_HORIZON_MASK
    assert tomb_batch.base_timestamp == clock.now + 1000  # the delete horizon
    assert tomb_batch.records[0].timestamp == T0  # record timestamps are unchanged
    clock.advance(999)
    cleaner.clean(log, 0, force=True)
    assert (2, b"a", None) in kvs(read_records(log))
    clock.advance(1)
    cleaner.clean(log, 0, force=True)
    assert kvs(read_records(log)) == [(1, b"b", VALUE), (3, b"c", VALUE)]
    check_log(log)


def test_aborted_transactions_and_their_markers_are_removed(log_dir, clock):
    log = compacted(log_dir, clock, delete_retention_ms=500, segment_bytes=5000)
    put(log, (b"a", b"committed"))  # 0
    put(log, (b"a", b"aborted"), producer_id=7, producer_epoch=0, base_sequence=0,
        is_transactional=True)  # 1  # fmt: skip
    log.append_end_txn_marker(7, 0, commit=False, coordinator_epoch=0)  # 2
    put(log, (b"b", b"txn"), producer_id=8, producer_epoch=0, base_sequence=0,
        is_transactional=True)  # 3  # fmt: skip
    log.append_end_txn_marker(8, 0, commit=True, coordinator_epoch=0)  # 4
    put(log, (b"c", b"later"), producer_id=7, producer_epoch=0, base_sequence=1)  # 5
    log.roll()
    put(log, (b"z", b"z"))  # 6
    cleaner = LogCleaner()
    cleaner.clean(log, 0, force=True)
    # pass 1: aborted data gone; its marker stays (with its txn index entry) for this pass
    data = [(r.offset, r.key, r.value) for r in read_records(log)]
    assert data == [
        (0, b"a", b"committed"),
        (3, b"b", b"txn"),
        (5, b"c", b"later"),
        (6, b"z", b"z"),
    ]
    assert [b.base_offset for b in read_batches(log) if b.is_control] == [2, 4]
    assert [t.producer_id for t in log.collect_aborted_transactions(0, 6)] == [7]
    # pass 2: no data left for the abort marker: it gets a delete horizon, the entry goes
    cleaner.clean(log, 0, force=True)
    assert log.collect_aborted_transactions(0, 6) == []
    abort = next(b for b in read_batches(log) if b.base_offset == 2)
    assert abort.header.attributes & DELETE_HORIZON_MASK
    # pass 3, past the horizon: the abort marker is gone, the commit marker (data left) stays
    clock.advance(500)
    cleaner.clean(log, 0, force=True)
    assert [b.base_offset for b in read_batches(log) if b.is_control] == [4]
    check_log(log)


def test_an_aborted_producer_keeps_an_empty_batch_and_its_marker(log_dir, clock):
    # Kafka keeps a producer's last data batch (emptied) and so its abort marker too
    log = compacted(log_dir, clock, delete_retention_ms=0, segment_bytes=5000)
    put(log, (b"a", b"aborted"), producer_id=7, producer_epoch=0, base_sequence=0,
        is_transactional=True)  # fmt: skip
    log.append_end_txn_marker(7, 0, commit=False, coordinator_epoch=0)
    log.roll()
    put(log, (b"z", b"z"))
    for _ in range(3):
        LogCleaner().clean(log, 0, force=True)
    batches = [(b.base_offset, b.is_control, len(b)) for b in read_batches(log)]
    assert batches == [(0, False, 0), (1, True, 1), (2, False, 1)]
    assert log.producer_state.last_entry(7).last_data_offset == 0


def test_a_producers_last_batch_survives_as_an_empty_batch(log_dir, clock):
    log = compacted(log_dir, clock, segment_bytes=5000)
    put(log, (b"k", b"1"), producer_id=3, producer_epoch=0, base_sequence=0)
    put(log, (b"k", b"2"))
    log.roll()
    put(log, (b"z", b"z"))
    LogCleaner().clean(log, 0, force=True)
    batches = read_batches(log)
    empty = batches[0]
    assert (empty.base_offset, empty.last_offset, len(empty)) == (0, 0, 0)
    assert (empty.producer_id, empty.base_sequence) == (3, 0)
    # the producer's sequence still continues, also after a restart
    log.close()
    again = Log(log_dir, log.config, clock=clock, had_clean_shutdown=True, high_watermark=3)
    assert again.append(idempotent(1, pid=3, epoch=0, seq=1)).first_offset == 3
    check_log(again)


def test_compressed_batches_stay_compressed(log_dir, clock):
    log = compacted(log_dir, clock, segment_bytes=5000)
    put(log, *[(b"k%d" % (i % 3), b"v%d" % i) for i in range(9)], compression=1)
    log.roll()
    put(log, (b"z", b"z"))
    LogCleaner().clean(log, 0, force=True)
    (b, _) = read_batches(log)
    assert b.compression == 1
    assert kvs(b.records) == [(6, b"k0", b"v6"), (7, b"k1", b"v7"), (8, b"k2", b"v8")]
    check_log(log)


# --- crash-safe swap ---


def _prepared(log_dir, clock):
    log = compacted(log_dir, clock)
    for i in range(30):
        put(log, (b"k%d" % (i % 3), b"%d" % i + VALUE))
    before = read_records(log)
    log.config = log.config.with_overrides({"segment.bytes": 5000})  # groups of segments
    cleaner = LogCleaner()
    plan = cleaner.plan(log, 0, force=True)
    work = cleaner.build(plan)
    assert len(work.cleaned) >= 1 and len(work.cleaned[0][1]) >= 2
    return log, before, work


def _reopen(log, clock):
    log.close_handles()  # the process died here
    return Log(
        log.dir, log.config, clock=clock, recovery_point=log.recovery_point, high_watermark=10**9
    )


def test_crash_before_the_swap_rolls_back(log_dir, clock, caplog):
    caplog.set_level(logging.INFO, logger="gregor.storage")
    log, before, work = _prepared(log_dir, clock)
    assert any(n.endswith(CLEANED_SUFFIX) for n in os.listdir(log.dir))
    again = _reopen(log, clock)  # died with the .cleaned files written, nothing renamed
    assert "rolled back an interrupted log cleaning" in caplog.text
    assert kvs(read_records(again)) == kvs(before)
    assert not any(n.endswith((CLEANED_SUFFIX, SWAP_SUFFIX)) for n in os.listdir(again.dir))
    check_log(again)


def test_crash_with_index_swaps_but_no_log_swap_rolls_back(log_dir, clock, caplog):
    caplog.set_level(logging.INFO, logger="gregor.storage")
    log, before, work = _prepared(log_dir, clock)
    seg, _ = work.cleaned[0]
    seg.offset_index.rename(seg.offset_index.path.replace(CLEANED_SUFFIX, SWAP_SUFFIX))
    seg.time_index.rename(seg.time_index.path.replace(CLEANED_SUFFIX, SWAP_SUFFIX))
    again = _reopen(log, clock)
    assert "rolled back" in caplog.text
    assert kvs(read_records(again)) == kvs(before)
    check_log(again)


@pytest.mark.parametrize("retired", [0, 1, 2])
def test_crash_after_the_log_swap_completes_it(log_dir, clock, caplog, retired):
    caplog.set_level(logging.INFO, logger="gregor.storage")
    log, before, work = _prepared(log_dir, clock)
    seg, group = work.cleaned[0]
    seg.change_suffix(CLEANED_SUFFIX, SWAP_SUFFIX)
    for old in group[:retired]:  # some old segments already renamed .deleted
        old.change_suffix("", DELETED_SUFFIX)
    end = work.end_offset
    expected = kvs(latest_view(before, end))
    again = _reopen(log, clock)
    assert "completed an interrupted segment swap" in caplog.text
    assert kvs(read_records(again)) == expected
    names = os.listdir(again.dir)
    assert not any(n.endswith((CLEANED_SUFFIX, SWAP_SUFFIX, DELETED_SUFFIX)) for n in names)
    check_log(again)


def test_truncation_during_cleaning_aborts_the_commit(log_dir, clock):
    log, before, work = _prepared(log_dir, clock)
    log.truncate_to(log.log_end_offset - 1)
    result = LogCleaner().commit(log, work)
    assert result.aborted
    assert kvs(read_records(log)) == kvs(before[:-1])
    assert not any(n.endswith(CLEANED_SUFFIX) for n in os.listdir(log.dir))
    check_log(log)
