"""Producer state: duplicates, gaps, fencing, snapshots, transaction index and LSO."""

from __future__ import annotations

import logging
import os

import pytest
from storage_helpers import T0, check_log, config, idempotent, kv, marker, read_batches

from gregor.storage import (
    AbortedTxn,
    AppendOrigin,
    DuplicateSequenceError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    Log,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from gregor.storage.producer_state import ProducerStateManager


def open_log(log_dir, clock, **props):
    return Log(log_dir, config(**props), clock=clock)


def leader_append(log, data, **kw):
    info = log.append(data, **kw)
    log.update_high_watermark(log.log_end_offset)
    return info


def write_marker(log, pid, epoch, commit, coordinator_epoch=0):
    info = log.append_end_txn_marker(pid, epoch, commit=commit, coordinator_epoch=coordinator_epoch)
    log.update_high_watermark(log.log_end_offset)
    return info


# --- idempotence ---


def test_a_retried_batch_gets_its_original_offsets(log_dir, clock):
    log = open_log(log_dir, clock)
    log.append(kv(2))
    first = log.append(idempotent(3, pid=7, epoch=0, seq=0))
    log.append(idempotent(2, pid=7, epoch=0, seq=3))
    again = log.append(idempotent(3, pid=7, epoch=0, seq=0))
    assert again.duplicate
    assert (
        (again.first_offset, again.last_offset) == (first.first_offset, first.last_offset) == (2, 4)
    )
    assert log.log_end_offset == 7


def test_only_five_batches_are_remembered(log_dir, clock):
    log = open_log(log_dir, clock)
    infos = [log.append(idempotent(1, pid=1, epoch=0, seq=s)) for s in range(6)]
    for s in range(1, 6):
        dup = log.append(idempotent(1, pid=1, epoch=0, seq=s))
        assert dup.duplicate and dup.first_offset == infos[s].first_offset
    with pytest.raises(DuplicateSequenceError) as e:
        log.append(idempotent(1, pid=1, epoch=0, seq=0))
    assert e.value.error_code == 46
    assert log.log_end_offset == 6


def test_gaps_and_overlaps_are_out_of_order(log_dir, clock):
    log = open_log(log_dir, clock)
    log.append(idempotent(3, pid=1, epoch=0, seq=0))  # seqs 0..2
    for seq, n in [(4, 1), (2, 2), (1, 5)]:
        with pytest.raises(OutOfOrderSequenceError) as e:
            log.append(idempotent(n, pid=1, epoch=0, seq=seq))
        assert e.value.error_code == 45
    assert log.log_end_offset == 3
    assert log.append(idempotent(1, pid=1, epoch=0, seq=3)).first_offset == 3


def test_a_producer_without_state_may_start_at_any_sequence(log_dir, clock):
    # Kafka since KIP-360 (2.5): no state (retention removed it, or it never wrote here) is
    # not UNKNOWN_PRODUCER_ID; the sequence carries on from what the producer sends.
    log = open_log(log_dir, clock)
    assert log.append(idempotent(1, pid=9, epoch=0, seq=5)).first_offset == 0
    assert log.producer_state.last_entry(9).last_seq == 5
    assert log.append(idempotent(1, pid=9, epoch=0, seq=6)).first_offset == 1
    with pytest.raises(OutOfOrderSequenceError):
        log.append(idempotent(1, pid=9, epoch=0, seq=9))


def test_epoch_fencing(log_dir, clock):
    log = open_log(log_dir, clock)
    log.append(idempotent(2, pid=1, epoch=0, seq=0))
    with pytest.raises(OutOfOrderSequenceError):
        log.append(idempotent(1, pid=1, epoch=1, seq=2))  # a new epoch restarts at 0
    log.append(idempotent(1, pid=1, epoch=1, seq=0))
    with pytest.raises(InvalidProducerEpochError) as e:
        log.append(idempotent(1, pid=1, epoch=0, seq=2))
    assert e.value.error_code == 47
    entry = log.producer_state.last_entry(1)
    assert (entry.producer_epoch, entry.last_seq, entry.last_data_offset) == (1, 0, 2)


def test_sequence_wraps_around(log_dir, clock):
    log = open_log(log_dir, clock)
    log.append(idempotent(1, pid=1, epoch=0, seq=0))
    # jump the state to the top of the int32 range, as a long-lived producer gets there
    entry = log.producer_state.last_entry(1)
    b = entry.batches[-1]
    entry.batches[-1] = b._replace(first_seq=2**31 - 2, last_seq=2**31 - 1)
    log.append(idempotent(1, pid=1, epoch=0, seq=0))
    assert log.producer_state.last_entry(1).last_seq == 0


# --- transactions ---


def test_transaction_commit_and_lso(log_dir, clock):
    log = open_log(log_dir, clock)
    leader_append(log, kv(2))
    leader_append(log, idempotent(2, pid=5, epoch=0, seq=0, transactional=True))
    leader_append(log, kv(1))
    assert log.high_watermark == 5 and log.last_stable_offset == 2
    info = write_marker(log, 5, 0, commit=True)
    assert info.first_offset == 5
    assert log.last_stable_offset == log.high_watermark == 6
    assert log.collect_aborted_transactions(0, 6) == []
    batches = read_batches(log, max_offset=log.last_stable_offset)
    assert batches[-1].is_control and batches[-1].producer_id == 5


def test_abort_goes_to_the_transaction_index(log_dir, clock):
    log = open_log(log_dir, clock)
    leader_append(log, idempotent(2, pid=1, epoch=0, seq=0, transactional=True))  # 0-1
    leader_append(log, idempotent(1, pid=2, epoch=0, seq=0, transactional=True))  # 2
    assert log.last_stable_offset == 0
    write_marker(log, 1, 0, commit=False)  # 3: pid 2 still open at 2
    assert log.last_stable_offset == 2
    write_marker(log, 2, 0, commit=False)  # 4
    assert log.last_stable_offset == 5
    expected = [AbortedTxn(1, 0, 3, 2), AbortedTxn(2, 2, 4, 5)]
    assert log.active_segment.txn_index.entries == expected
    assert log.collect_aborted_transactions(0, 5) == expected
    assert log.collect_aborted_transactions(4, 5) == expected[1:]
    info = log.read(0, 10**6, include_aborted_txns=True)
    assert info.aborted_transactions == expected
    with open(log.active_segment.txn_index.path, "rb") as f:
        assert len(f.read()) == 68


def test_lso_waits_for_the_high_watermark_to_pass_the_marker(log_dir, clock):
    log = open_log(log_dir, clock)
    log.append(idempotent(1, pid=1, epoch=0, seq=0, transactional=True))
    log.update_high_watermark(1)
    log.append_end_txn_marker(1, 0, commit=True, coordinator_epoch=0)
    assert log.last_stable_offset == 0  # marker at 1 not replicated yet
    log.update_high_watermark(2)
    assert log.last_stable_offset == 2


def test_non_transactional_write_inside_a_transaction(log_dir, clock):
    log = open_log(log_dir, clock)
    log.append(idempotent(1, pid=1, epoch=0, seq=0, transactional=True))
    with pytest.raises(InvalidTxnStateError) as e:
        log.append(idempotent(1, pid=1, epoch=0, seq=1))
    assert e.value.error_code == 48
    assert log.log_end_offset == 1


def test_markers_from_a_fenced_coordinator_or_an_old_epoch(log_dir, clock):
    log = open_log(log_dir, clock)
    log.append(idempotent(1, pid=1, epoch=0, seq=0, transactional=True))
    log.append_end_txn_marker(1, 0, commit=True, coordinator_epoch=3)
    log.append(idempotent(1, pid=1, epoch=0, seq=1, transactional=True))
    with pytest.raises(TransactionCoordinatorFencedError) as e:
        log.append_end_txn_marker(1, 0, commit=True, coordinator_epoch=2)
    assert e.value.error_code == 52
    # the coordinator aborts with a bumped epoch; a late marker of the old epoch is refused
    log.append_end_txn_marker(1, 1, commit=False, coordinator_epoch=3)
    with pytest.raises(InvalidProducerEpochError):
        log.append_end_txn_marker(1, 0, commit=True, coordinator_epoch=3)
    # a replica copies whatever the leader wrote
    follower = open_log(log_dir + "f", clock)
    data = log.read(0, 10**6).read_bytes()
    follower.append_as_follower(data)
    assert follower.producer_state.last_entry(1).producer_epoch == 1
    assert log.append(marker(1, 1, True, 3), origin=AppendOrigin.COORDINATOR).first_offset == 4


# --- snapshots and restarts ---


def _state(log):
    ps = log.producer_state
    return (
        {pid: (e.producer_epoch, list(e.batches), e.current_txn_first_offset, e.coordinator_epoch)
         for pid, e in ps.entries.items()},
        dict(ps.ongoing_txns),
    )  # fmt: skip


def _workload(log):
    for i in range(12):
        log.append(idempotent(2, pid=1, epoch=0, seq=2 * i, ts=T0 + i))
        if i == 5:
            log.append(idempotent(1, pid=2, epoch=3, seq=0, transactional=True))
    log.append(idempotent(1, pid=3, epoch=0, seq=0, transactional=True))
    log.append_end_txn_marker(3, 0, commit=False, coordinator_epoch=1)
    log.update_high_watermark(log.log_end_offset)


def test_snapshot_on_roll_and_close_restores_state(log_dir, clock):
    log = open_log(log_dir, clock, segment_bytes=400)
    _workload(log)
    assert log.num_segments > 2
    snaps = sorted(f for f in os.listdir(log.dir) if f.endswith(".snapshot"))
    assert [int(s.split(".")[0]) for s in snaps] == [s.base_offset for s in log.segments[1:]]
    state = _state(log)
    txns = log.collect_aborted_transactions(0, log.log_end_offset)
    log.close()
    again = Log(log_dir, log.config, clock=clock, had_clean_shutdown=True, high_watermark=10**9)
    assert _state(again) == state
    assert again.last_stable_offset == 12  # pid 2's open transaction
    assert again.collect_aborted_transactions(0, again.log_end_offset) == txns
    dup = again.append(idempotent(2, pid=1, epoch=0, seq=22, ts=T0 + 11))
    assert dup.duplicate


def test_crash_rebuilds_state_and_transaction_index_by_replay(log_dir, clock, caplog):
    caplog.set_level(logging.INFO, logger="gregor.storage")
    log = open_log(log_dir, clock, segment_bytes=400)
    _workload(log)
    state = _state(log)
    txns = log.collect_aborted_transactions(0, log.log_end_offset)
    assert txns
    log.close_handles()  # a crash: no snapshot at the end, unflushed txn index
    for seg in log.segments:
        try:
            os.unlink(seg.txn_index.path)
        except FileNotFoundError:
            pass
    again = Log(log_dir, log.config, clock=clock, high_watermark=10**9)
    assert _state(again) == state
    assert again.collect_aborted_transactions(0, again.log_end_offset) == txns
    assert "rebuilt producer state" in caplog.text
    check_log(again)


def test_unreadable_snapshot_is_replaced_by_replay(log_dir, clock, caplog):
    log = open_log(log_dir, clock, segment_bytes=400)
    _workload(log)
    state = _state(log)
    log.close()
    snap = os.path.join(log.dir, f"{log.log_end_offset:020d}.snapshot")
    with open(snap, "r+b") as f:
        f.seek(10)
        f.write(b"\xee")
    again = Log(log_dir, log.config, clock=clock, had_clean_shutdown=True, high_watermark=10**9)
    assert "unreadable producer snapshot" in caplog.text
    assert _state(again) == state


def test_snapshot_layout_roundtrip_and_crc():
    ps = ProducerStateManager(None)
    staged = ps.stage()
    staged.append_data_batch(11, 2, 0, 4, 100, 104, T0, True)
    ps.commit(staged, 105)
    data = ps.encode_snapshot()
    entries = ProducerStateManager.decode_snapshot(data)
    assert len(entries) == 1
    e = entries[0]
    assert (e.producer_id, e.producer_epoch, e.current_txn_first_offset) == (11, 2, 100)
    assert [tuple(b) for b in e.batches] == [(0, 4, 104, 4, T0)]
    assert data[:2] == b"\x00\x01"  # version 1
    with pytest.raises(ValueError, match="CRC"):
        ProducerStateManager.decode_snapshot(data[:-1] + bytes([data[-1] ^ 1]))


# --- expiry and retention ---


def test_an_expired_producer_is_forgotten_and_accepted_again(log_dir, clock):
    log = open_log(log_dir, clock)
    log.append(idempotent(1, pid=4, epoch=0, seq=0, ts=clock.now))
    assert log.remove_expired_producers(clock.now + 86_400_000 - 1) == []
    assert log.remove_expired_producers(clock.now + 86_400_000) == [4]
    assert log.producer_state.last_entry(4) is None
    assert log.append(idempotent(1, pid=4, epoch=0, seq=1)).first_offset == 1  # accepted again


def test_producers_whose_batches_were_deleted_are_forgotten(log_dir, clock):
    log = open_log(log_dir, clock, segment_bytes=300, file_delete_delay_ms=0)
    log.append(idempotent(1, pid=4, epoch=0, seq=0))
    for _ in range(6):
        log.append(kv(1, value=bytes(150)))
    log.update_high_watermark(log.log_end_offset)
    log.delete_records(3)
    assert log.producer_state.last_entry(4) is None
    end = log.log_end_offset
    assert log.append(idempotent(1, pid=4, epoch=0, seq=1)).first_offset == end  # accepted again
