"""The log: append, read, timestamps, roll, retention, DeleteRecords, truncation, flushing."""

from __future__ import annotations

import os
import struct

import pytest
from storage_helpers import T0, batch, check_log, config, kv, read_batches, read_records

from gregor.protocol.records import decode_batches
from gregor.protocol.records.header import read_header
from gregor.storage import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    Log,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
)
from gregor.storage.errors import UnexpectedAppendOffsetError


def open_log(log_dir, clock, **props):
    return Log(log_dir, config(**props), clock=clock)


# --- append ---


def test_append_assigns_offsets_epoch_and_returns_info(log_dir, clock):
    log = open_log(log_dir, clock)
    a = log.append(kv(3), leader_epoch=4)
    b = log.append(kv(2, T0 + 5), leader_epoch=4)
    assert (a.first_offset, a.last_offset, a.log_append_time, a.log_start_offset) == (0, 2, -1, 0)
    assert (b.first_offset, b.last_offset, b.records_count) == (3, 4, 2)
    assert b.max_timestamp == T0 + 5 and b.offset_of_max_timestamp == 4
    assert log.log_end_offset == 5
    batches = read_batches(log)
    assert [(x.base_offset, x.last_offset) for x in batches] == [(0, 2), (3, 4)]
    assert {x.partition_leader_epoch for x in batches} == {4}
    assert [r.offset for r in read_records(log)] == [0, 1, 2, 3, 4]
    assert log.leader_epoch_cache.entries == [(4, 0)]
    check_log(log)


def test_append_rewrites_a_bytearray_in_place_and_copies_bytes(log_dir, clock):
    log = open_log(log_dir, clock)
    log.append(kv(1))
    raw = kv(2)
    buf = bytearray(raw)
    log.append(buf, leader_epoch=2)
    assert read_header(buf).base_offset == 1 and read_header(buf).partition_leader_epoch == 2
    log.append(raw)
    assert read_header(raw).base_offset == 0  # immutable input untouched
    assert log.log_end_offset == 5


def test_several_batches_in_one_append(log_dir, clock):
    log = open_log(log_dir, clock, index_interval_bytes=0)
    records = kv(2) + kv(3) + kv(1)
    info = log.append(records, leader_epoch=1)
    assert (info.first_offset, info.last_offset, info.records_count) == (0, 5, 6)
    assert [(b.base_offset, len(b)) for b in read_batches(log)] == [(0, 2), (2, 3), (5, 1)]
    check_log(log)


def test_log_append_time(log_dir, clock):
    log = open_log(log_dir, clock, message_timestamp_type="LogAppendTime")
    info = log.append(kv(2, ts=5))
    assert info.log_append_time == clock.now
    (b,) = read_batches(log)
    assert b.timestamp_type == 1 and b.max_timestamp == clock.now
    assert [r.timestamp for r in b.records] == [clock.now, clock.now]
    check_log(log)  # CRC still valid after the rewrite


def test_rejects_corrupt_oversized_and_malformed_batches(log_dir, clock):
    log = open_log(log_dir, clock, max_message_bytes=300, segment_bytes=1000)
    good = kv(1)
    bad_crc = bytearray(good)
    bad_crc[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError) as e:
        log.append(bytes(bad_crc))
    assert e.value.error_code == 2
    with pytest.raises(CorruptRecordError):
        log.append(good[:-3])  # truncated
    with pytest.raises(CorruptRecordError):
        log.append(b"")
    with pytest.raises(RecordTooLargeError) as e:
        log.append(kv(1, value=b"x" * 400))
    assert e.value.error_code == 10
    with pytest.raises(RecordBatchTooLargeError) as e:
        log.append(kv(1) * 15)
    assert e.value.error_code == 18
    wrong_count = bytearray(kv(2))
    struct.pack_into(">i", wrong_count, 57, 3)  # records_count 3, offset delta 1
    with pytest.raises(InvalidRecordError) as e:
        log.append(_fix_crc(wrong_count))
    assert e.value.error_code == 87
    assert log.log_end_offset == 0 and log.active_segment.size == 0


def _fix_crc(buf: bytearray) -> bytes:
    from crc32c import crc32c

    struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))
    return bytes(buf)


def test_timestamp_bounds(log_dir, clock):
    log = Log(
        log_dir,
        config(message_timestamp_before_max_ms=1000, message_timestamp_after_max_ms=100),
        clock=clock,
    )
    log.append(kv(1, ts=clock.now - 1000))
    log.append(kv(1, ts=clock.now + 100))
    with pytest.raises(InvalidTimestampError) as e:
        log.append(kv(1, ts=clock.now - 1001))
    assert e.value.error_code == 32
    with pytest.raises(InvalidTimestampError):
        log.append(kv(1, ts=clock.now + 101))
    assert log.log_end_offset == 2


def test_compacted_topic_rejects_keyless_records(log_dir, clock):
    log = open_log(log_dir, clock, cleanup_policy="compact")
    log.append(batch([(T0, b"k", b"v")]))
    with pytest.raises(InvalidRecordError) as e:
        log.append(batch([(T0, b"k", b"v"), (T0, None, b"v")]))
    assert e.value.error_code == 87
    assert log.log_end_offset == 1


def test_clients_cannot_write_control_batches(log_dir, clock):
    from storage_helpers import marker

    log = open_log(log_dir, clock)
    with pytest.raises(InvalidRecordError):
        log.append(marker(1, 0, True))


# --- read ---


def test_read_regions_max_bytes_and_kip74(log_dir, clock):
    log = open_log(log_dir, clock, index_interval_bytes=100)
    sizes = []
    for i in range(10):
        sizes.append(log.append(kv(2, value=bytes(50 + i))).valid_bytes)
    info = log.read(5, 10)  # smaller than a batch: the whole first batch anyway
    assert info.first_batch_offset == 4 and info.size == sizes[2]
    partial = log.read(5, 10, min_one_message=False)  # Kafka returns the partial bytes
    assert partial.size == 10 and partial.region.position == info.region.position
    info = log.read(5, sizes[2] + sizes[3] + 7)
    assert info.size == sizes[2] + sizes[3] + 7  # ends inside a batch, as Kafka's slices do
    whole = decode_batches(info.read_bytes(), allow_partial_tail=True)
    assert [b.base_offset for b in whole] == [4, 6]
    # max_offset (a high watermark) ends the region at a batch boundary
    info = log.read(0, 10**6, max_offset=6)
    assert info.size == sum(sizes[:3])
    assert log.read(6, 10**6, max_offset=6).region is None
    assert log.read(20, 100).region is None  # the log end: empty, not an error
    with pytest.raises(OffsetOutOfRangeError) as e:
        log.read(21, 100)
    assert e.value.error_code == 1 and "[0, 20)" in str(e.value)
    region = log.read(0, 100).region
    assert os.pread(region.fd, region.length, region.position) == region.read()


def test_read_stays_in_one_segment_and_crosses_to_the_next(log_dir, clock):
    log = open_log(log_dir, clock, segment_bytes=500)
    for _ in range(12):
        log.append(kv(1, value=bytes(100)))
    assert log.num_segments > 2
    seg0 = log.segments[0]
    info = log.read(0, 10**6)
    assert info.region.path == seg0.log_path and info.size == seg0.size
    assert [r.offset for r in read_records(log)] == list(range(12))
    check_log(log)


def test_offset_for_timestamp_and_latest_timestamp(log_dir, clock):
    log = open_log(log_dir, clock, segment_bytes=400, index_interval_bytes=50)
    stamps = [100, 100, 300, 200, 500, 400, 900, 700]
    for i in range(0, len(stamps), 2):
        log.append(batch([(stamps[i], b"a", b"x" * 40), (stamps[i + 1], b"b", b"x" * 40)]))
    assert log.num_segments > 1
    for target in [0, 100, 101, 200, 250, 300, 450, 500, 600, 900]:
        want = next((o for o, ts in enumerate(stamps) if ts >= target), None)
        got = log.offset_for_timestamp(target)
        assert (got.offset if got else None) == want, target
        if got:
            assert got.timestamp == stamps[want] and got.leader_epoch == 0
    assert log.offset_for_timestamp(901) is None
    latest = log.latest_timestamp()
    assert (latest.timestamp, latest.offset) == (900, 6)


# --- roll ---


def test_roll_on_segment_bytes_and_segment_ms(log_dir, clock):
    log = open_log(log_dir, clock, segment_bytes=1000, segment_ms=60_000)
    for _ in range(10):
        log.append(kv(1, clock.now, value=bytes(200)))
    assert [s.base_offset for s in log.segments] == [0, 3, 6, 9]
    # segment.ms counts from the first batch's timestamp of the active segment
    log2 = open_log(log_dir + "b", clock, segment_ms=60_000)
    log2.append(kv(1, clock.now))
    log2.append(kv(1, clock.now + 60_000))
    assert log2.num_segments == 1
    log2.append(kv(1, clock.now + 60_001))
    assert [s.base_offset for s in log2.segments] == [0, 2]
    assert os.path.exists(os.path.join(log2.dir, "00000000000000000002.snapshot"))
    check_log(log)
    check_log(log2)


def test_roll_when_the_offset_index_is_full(log_dir, clock):
    # 48 bytes: 6 offset entries; an entry for every batch but a segment's first
    log = open_log(log_dir, clock, index_interval_bytes=0, segment_index_bytes=48)
    for _ in range(9):
        log.append(kv(1))
    assert [s.base_offset for s in log.segments] == [0, 7]
    seg0 = log.segments[0]
    assert seg0.offset_index.entries == 6
    assert os.path.getsize(seg0.offset_index.path) == 48
    check_log(log)


# --- retention ---


SIZE = len(kv(1, value=bytes(150)))  # each test batch below; segments hold three


def test_retention_by_time_renames_then_deletes(log_dir, clock):
    log = open_log(
        log_dir, clock, segment_bytes=3 * SIZE, retention_ms=10_000, file_delete_delay_ms=1000
    )
    for i in range(9):
        log.append(kv(1, clock.now + i * 1000, value=bytes(150)))
    log.update_high_watermark(log.log_end_offset)
    assert [s.base_offset for s in log.segments] == [0, 3, 6]
    clock.advance(10_000 + 2_500)  # segment 0's max timestamp (now+2000) is past retention
    assert log.delete_old_segments() == 1
    assert log.log_start_offset == 3
    old = os.path.join(log.dir, "00000000000000000000.log")
    assert not os.path.exists(old) and os.path.exists(old + ".deleted")
    with pytest.raises(OffsetOutOfRangeError):
        log.read(2, 100)
    assert log.take_due_deletions() == []
    clock.advance(1000)
    due = log.take_due_deletions()
    assert [s.base_offset for s in due] == [0]
    from gregor.storage import delete_segment_files

    delete_segment_files(due)
    assert not os.path.exists(old + ".deleted")
    check_log(log)


def test_retention_by_bytes_and_never_past_the_high_watermark(log_dir, clock):
    log = open_log(
        log_dir, clock, segment_bytes=3 * SIZE, retention_bytes=4 * SIZE, file_delete_delay_ms=0
    )
    for _ in range(12):
        log.append(kv(1, value=bytes(150)))
    assert [s.base_offset for s in log.segments] == [0, 3, 6, 9]
    assert log.delete_old_segments() == 0  # the high watermark is still 0
    log.update_high_watermark(log.log_end_offset)
    # 12 batches, 4 allowed: deleting 0 and 3 leaves 6; deleting 6 too would leave 3
    assert log.delete_old_segments() == 2
    assert log.log_start_offset == 6 and log.size == 6 * SIZE
    assert read_records(log)[0].offset == 6
    check_log(log)


def test_retention_deleting_everything_rolls_a_fresh_segment(log_dir, clock):
    log = open_log(log_dir, clock, retention_ms=1000, file_delete_delay_ms=0)
    log.append(kv(3, clock.now))
    log.update_high_watermark(3)
    clock.advance(5000)
    assert log.delete_old_segments() == 1
    assert [s.base_offset for s in log.segments] == [3]
    assert log.log_start_offset == 3 and log.log_end_offset == 3
    assert log.append(kv(1)).first_offset == 3
    check_log(log)


def test_delete_records(log_dir, clock):
    log = open_log(log_dir, clock, segment_bytes=3 * SIZE, file_delete_delay_ms=0)
    for _ in range(9):
        log.append(kv(1, value=bytes(150)))
    log.update_high_watermark(8)
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records(9)
    assert log.delete_records(4) == 4
    assert [s.base_offset for s in log.segments] == [3, 6]
    with pytest.raises(OffsetOutOfRangeError):
        log.read(3, 100)
    assert read_records(log)[0].offset == 4
    assert log.delete_records(-1) == 8  # -1: up to the high watermark
    assert [s.base_offset for s in log.segments] == [6]
    check_log(log)


# --- truncation ---


def test_truncate_to_and_fully(log_dir, clock):
    log = open_log(
        log_dir, clock, segment_bytes=500, index_interval_bytes=100, file_delete_delay_ms=0
    )
    for i in range(12):
        log.append(kv(2, T0 + i, value=bytes(60)), leader_epoch=i // 4)
    assert log.leader_epoch_cache.entries == [(0, 0), (1, 8), (2, 16)]
    log.update_high_watermark(log.log_end_offset)
    assert log.truncate_to(11)  # cuts the batch 10..11 whole
    assert log.log_end_offset == 10 and log.high_watermark == 10
    assert log.leader_epoch_cache.entries == [(0, 0), (1, 8)]
    assert [r.offset for r in read_records(log)] == list(range(10))
    check_log(log)
    info = log.append(kv(1, T0 + 50), leader_epoch=3)
    assert info.first_offset == 10
    assert not log.truncate_to(100)
    log.truncate_fully_and_start_at(40)
    assert (log.log_start_offset, log.log_end_offset, log.num_segments) == (40, 40, 1)
    assert log.leader_epoch_cache.entries == []
    assert log.append(kv(1)).first_offset == 40
    check_log(log)


def test_follower_append_keeps_offsets_and_epochs(log_dir, clock):
    leader = open_log(log_dir, clock)
    leader.append(kv(2), leader_epoch=1)
    leader.append(kv(1), leader_epoch=3)
    data = leader.read(0, 10**6).read_bytes()
    follower = open_log(log_dir + "f", clock)
    info = follower.append_as_follower(data)
    assert (info.first_offset, info.last_offset) == (0, 2)
    assert follower.leader_epoch_cache.entries == [(1, 0), (3, 2)]
    with pytest.raises(UnexpectedAppendOffsetError):
        follower.append_as_follower(data)
    assert follower.leader_epoch_cache.end_offset_for(1, follower.log_end_offset) == (1, 2)
    assert follower.leader_epoch_cache.end_offset_for(3, follower.log_end_offset) == (3, 3)
    check_log(follower)


# --- flushing ---


def test_flush_messages_and_flush_ms_move_the_recovery_point(log_dir, clock):
    log = open_log(log_dir, clock, flush_messages=3, flush_ms=10_000)
    log.append(kv(1))
    log.append(kv(1))
    assert log.recovery_point == 0
    log.append(kv(1))
    assert log.recovery_point == 3
    log.append(kv(1))
    assert not log.maybe_flush_on_time(clock.now)
    clock.advance(10_000)
    assert log.maybe_flush_on_time(clock.now)
    assert log.recovery_point == 4


def test_fsync_mode_acknowledges_flushed_data(log_dir, clock):
    log = open_log(log_dir, clock, flush_messages=1, segment_bytes=300)
    for _ in range(5):
        log.append(kv(1, value=bytes(100)))
        assert log.recovery_point == log.log_end_offset
    check_log(log)


def test_close_and_reopen_clean(log_dir, clock):
    log = open_log(log_dir, clock, segment_bytes=600, index_interval_bytes=100)
    for i in range(10):
        log.append(kv(2, T0 + i, value=bytes(40)), leader_epoch=1)
    before = [(r.offset, r.key, r.value) for r in read_records(log)]
    log.close()
    for seg in log.segments:
        assert os.path.getsize(seg.offset_index.path) == seg.offset_index.entries * 8
    again = Log(log_dir, log.config, clock=clock, had_clean_shutdown=True)
    assert [(r.offset, r.key, r.value) for r in read_records(again)] == before
    assert again.log_end_offset == 20 and again.recovery_point == 20
    assert again.append(kv(1)).first_offset == 20
    check_log(again)


def test_follower_keeps_the_leaders_log_append_time(log_dir, clock):
    leader = open_log(log_dir, clock, message_timestamp_type="LogAppendTime")
    stamped = clock.now
    leader.append(kv(2, ts=5))
    clock.advance(60_000)
    follower = open_log(log_dir + "f", clock, message_timestamp_type="LogAppendTime")
    follower.append_as_follower(leader.read(0, 10**6).read_bytes())
    assert leader.read(0, 10**6).read_bytes() == follower.read(0, 10**6).read_bytes()
    assert follower.latest_timestamp().timestamp == stamped
    assert follower.offset_for_timestamp(stamped).offset == 0
    check_log(follower)
