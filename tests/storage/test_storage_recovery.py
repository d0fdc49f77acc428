"""Recovery at load: torn and corrupt tails, damaged or missing indexes, leftovers."""

from __future__ import annotations

import logging
import os

import pytest
from storage_helpers import T0, check_log, config, idempotent, kv, read_records

from gregor.protocol.records.header import iter_batches
from gregor.storage import Log
from gregor.storage.loader import load


@pytest.fixture
def caplog_storage(caplog):
    caplog.set_level(logging.INFO, logger="gregor.storage")
    return caplog


def fill(log_dir, clock, n=30, **props):
    props.setdefault("segment_bytes", 2000)
    props.setdefault("index_interval_bytes", 150)
    log = Log(log_dir, config(**props), clock=clock)
    for i in range(n):
        log.append(kv(2, T0 + i, value=bytes(30 + i % 7)), leader_epoch=1 + i // 10)
    return log


def contents(log):
    return [(r.offset, r.timestamp, r.key, r.value) for r in read_records(log)]


def crash(log):
    """Drop the log as a killed process would: no trimming, no snapshot, no checkpoint."""
    log.close_handles()


def reopen(log, clock, *, clean=False, recovery_point=0):
    return Log(
        log.dir, log.config, clock=clock, had_clean_shutdown=clean, recovery_point=recovery_point
    )


def batch_positions(path):
    with open(path, "rb") as f:
        data = f.read()
    return [(pos, h) for pos, h in iter_batches(data)]


def test_flipped_byte_in_the_tail_is_cut_with_a_log_line(log_dir, clock, caplog_storage):
    log = fill(log_dir, clock)
    before = contents(log)
    active = log.active_segment.log_path
    positions = batch_positions(active)
    last_pos, last = positions[-1]
    crash(log)
    with open(active, "r+b") as f:
        f.seek(last_pos + 70)
        b = f.read(1)
        f.seek(last_pos + 70)
        f.write(bytes([b[0] ^ 0x01]))
    again = reopen(log, clock)
    assert again.log_end_offset == last.base_offset
    assert contents(again) == [r for r in before if r[0] < last.base_offset]
    assert "invalid byte(s)" in caplog_storage.text
    assert f"truncated it to {last_pos} bytes" in caplog_storage.text
    check_log(again)
    assert again.append(kv(1)).first_offset == last.base_offset


def test_torn_write_at_the_end_is_cut(log_dir, clock, caplog_storage):
    log = fill(log_dir, clock)
    before = contents(log)
    leo = log.log_end_offset
    active = log.active_segment.log_path
    size = os.path.getsize(active)
    half = kv(3)[:50]
    crash(log)
    with open(active, "ab") as f:
        f.write(half)
    again = reopen(log, clock)
    assert again.log_end_offset == leo and contents(again) == before
    assert f"had 50 invalid byte(s) after position {size}" in caplog_storage.text
    check_log(again)


def test_corruption_in_an_unflushed_middle_segment_drops_what_follows(
    log_dir, clock, caplog_storage
):
    log = fill(log_dir, clock)
    segs = log.segments
    assert len(segs) >= 3
    mid = segs[1]
    positions = batch_positions(mid.log_path)
    bad_pos, bad = positions[len(positions) // 2]
    before = contents(log)
    crash(log)
    with open(mid.log_path, "r+b") as f:
        f.seek(bad_pos + 30)
        f.write(b"\xff\xff")
    again = reopen(log, clock, recovery_point=segs[1].base_offset)
    assert again.log_end_offset == bad.base_offset
    assert [s.base_offset for s in again.segments] == [segs[0].base_offset, mid.base_offset]
    assert contents(again) == [r for r in before if r[0] < bad.base_offset]
    assert "deleting" in caplog_storage.text and str(segs[2].base_offset) in caplog_storage.text
    check_log(again)


def test_segments_below_the_recovery_point_are_not_rescanned(log_dir, clock, caplog_storage):
    log = fill(log_dir, clock)
    rp = log.active_segment.base_offset
    crash(log)
    reopen(log, clock, recovery_point=rp)
    assert "recovering 1 segment(s)" in caplog_storage.text


def test_clean_shutdown_skips_recovery(log_dir, clock, caplog_storage):
    log = fill(log_dir, clock)
    before = contents(log)
    log.close()
    caplog_storage.clear()
    again = reopen(log, clock, clean=True)
    assert contents(again) == before
    assert "recover" not in caplog_storage.text
    assert again.recovery_point == again.log_end_offset
    check_log(again)


def test_index_cut_mid_entry_is_rebuilt(log_dir, clock, caplog_storage):
    log = fill(log_dir, clock)
    before = contents(log)
    seg0 = log.segments[0]
    path = seg0.offset_index.path
    entries = seg0.offset_index.entries
    log.close()
    os.truncate(path, os.path.getsize(path) - 3)
    caplog_storage.clear()
    again = reopen(log, clock, clean=True)
    assert "corrupt index for segment 0" in caplog_storage.text
    assert "not a multiple of 8" in caplog_storage.text
    assert again.segments[0].offset_index.entries == entries
    assert contents(again) == before
    check_log(again)


def test_index_missing_entries_is_rebuilt(log_dir, clock, caplog_storage):
    log = fill(log_dir, clock)
    before = contents(log)
    seg0 = log.segments[0]
    path = seg0.offset_index.path
    entries = seg0.offset_index.entries
    assert entries >= 3
    log.close()
    os.truncate(path, 8)  # whole entries, but only the first
    caplog_storage.clear()
    again = reopen(log, clock, clean=True)
    assert "the index is incomplete" in caplog_storage.text
    assert again.segments[0].offset_index.entries == entries
    assert contents(again) == before
    for off, _, _, _ in before:
        assert again.read(off, 1).first_batch_offset <= off
    check_log(again)


def test_missing_indexes_are_rebuilt(log_dir, clock, caplog_storage):
    log = fill(log_dir, clock)
    before = contents(log)
    seg1 = log.segments[1]
    log.close()
    os.unlink(seg1.offset_index.path)
    os.unlink(seg1.time_index.path)
    caplog_storage.clear()
    again = reopen(log, clock, clean=True)
    assert f"index files of segment {seg1.base_offset} are missing" in caplog_storage.text
    assert contents(again) == before
    assert again.offset_for_timestamp(T0 + 15).timestamp == T0 + 15
    check_log(again)


def test_time_index_garbage_is_rebuilt(log_dir, clock, caplog_storage):
    log = fill(log_dir, clock)
    seg0 = log.segments[0]
    path = seg0.time_index.path
    log.close()
    with open(path, "r+b") as f:
        f.seek(0)
        f.write(b"\x7f" * 8)  # a first timestamp far above the last
    again = reopen(log, clock, clean=True)
    assert "rebuilding its indexes" in caplog_storage.text
    assert again.offset_for_timestamp(T0).offset == 0
    check_log(again)


def test_leftover_deleted_and_tmp_files_are_removed(log_dir, clock):
    log = fill(log_dir, clock, n=5)
    log.close()
    junk = [
        os.path.join(log.dir, "00000000000000000999.log.deleted"),
        os.path.join(log.dir, "leader-epoch-checkpoint.tmp"),
        os.path.join(log.dir, "00000000000000000777.index"),  # an index without its log
    ]
    for p in junk:
        with open(p, "wb") as f:
            f.write(b"x" * 16)
    again = reopen(log, clock, clean=True)
    assert not any(os.path.exists(p) for p in junk)
    check_log(again)


def test_lost_epoch_checkpoint_is_rebuilt_by_recovery(log_dir, clock):
    log = fill(log_dir, clock)
    entries = log.leader_epoch_cache.entries
    assert entries == [(1, 0), (2, 20), (3, 40)]
    crash(log)
    os.unlink(os.path.join(log.dir, "leader-epoch-checkpoint"))
    again = reopen(log, clock, recovery_point=0)
    assert again.leader_epoch_cache.entries == entries


def test_the_loader_returns_what_a_log_is_built_from(log_dir, clock):
    log = fill(log_dir, clock)
    log.append(idempotent(2, pid=9, epoch=0, seq=0), leader_epoch=4)
    bases = [s.base_offset for s in log.segments]
    epochs = log.leader_epoch_cache.entries
    crash(log)
    loaded = load(
        log.dir,
        log.config,
        log_start_offset=0,
        recovery_point=bases[1],
        had_clean_shutdown=False,
        clock=clock,
        producer_id_expiration_ms=3600_000,
        sync_metadata=False,
    )
    assert [s.base_offset for s in loaded.segments] == bases
    assert (loaded.log_start_offset, loaded.log_end_offset, loaded.recovery_point) == (
        0,
        62,
        bases[1],
    )
    assert loaded.leader_epoch_cache.entries == epochs == [(1, 0), (2, 20), (3, 40), (4, 60)]
    entry = loaded.producer_state.last_entry(9)
    assert entry is not None and (entry.last_seq, entry.last_data_offset) == (1, 61)
    for seg in loaded.segments:
        seg.close()
    again = reopen(log, clock, clean=True)  # the loader left the directory as a Log expects
    check_log(again)
    assert again.log_end_offset == 62
