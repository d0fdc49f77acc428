"""LogManager start and stop: a new directory is a clean start, a graceful stop of many logs
keeps every offset, and checkpoints can be written from another thread."""

from __future__ import annotations

import logging
import os
import threading
import time

from storage_helpers import idempotent, kv

from gregor.storage import LogManager, delete_files

FAR = {"message.timestamp.after.max.ms": str(1 << 62)}
N_LOGS = 1300


def read_checkpoint(path: str) -> dict[tuple[str, int], int]:
    with open(path) as f:
        lines = f.read().splitlines()
    return {(t, int(p)): int(o) for t, p, o in (line.split() for line in lines[2:])}


def test_a_new_log_directory_is_a_clean_start(tmp_path, clock, caplog):
    caplog.set_level(logging.INFO, logger="gregor.storage")
    d = str(tmp_path / "fresh")
    m = LogManager(d, FAR, clock=clock, sync_metadata=False)
    assert "unclean" not in caplog.text
    assert f"loaded 0 log(s) from {d} (no logs: a new log directory" in caplog.text
    m.get_or_create_log("t", 0).append(kv(1))
    m.close()
    caplog.clear()
    LogManager(d, FAR, clock=clock, sync_metadata=False)  # clean restart
    assert f"loaded 1 log(s) from {d} (clean shutdown)" in caplog.text
    caplog.clear()
    LogManager(d, FAR, clock=clock, sync_metadata=False)  # no close before: a crash
    assert f"loaded 1 log(s) from {d} (unclean shutdown)" in caplog.text


def test_graceful_stop_of_1300_logs_keeps_every_offset(tmp_path, clock, caplog):
    """The stop a broker with ~1,300 partitions makes: every log flushed and closed (in a
    thread pool), checkpoints and markers written, fsyncs on; then a restart finds every
    offset and producer without recovering anything."""
    caplog.set_level(logging.INFO, logger="gregor.storage")
    d = str(tmp_path / "data")
    # Lay the logs out without fsyncs (each log's first leader-epoch checkpoint would cost
    # one), then reopen them as a broker does and append to most before the timed stop.
    setup = LogManager(d, FAR, clock=clock, sync_metadata=False)
    for i in range(N_LOGS):
        setup.get_or_create_log(f"topic{i % 26}", i // 26).append(kv(1))
    setup.close()
    m = LogManager(d, FAR, clock=clock)
    expected: dict[tuple[str, int], int] = {}
    producers: dict[tuple[str, int], int] = {}  # partition -> the producer id that wrote to it
    for i in range(N_LOGS):
        tp = (f"topic{i % 26}", i // 26)
        log = m.get_log(*tp)
        assert log is not None
        for _ in range(i % 3):  # a third of the logs get nothing more
            log.append(kv(2))
        if i % 100 == 7:
            log.append(idempotent(3, pid=1000 + i, epoch=0, seq=0))
            producers[tp] = 1000 + i
        log.update_high_watermark(log.log_end_offset)
        expected[tp] = log.log_end_offset
    started = time.monotonic()
    m.close()
    print(f"closed {N_LOGS} logs in {time.monotonic() - started:.2f} s")
    assert read_checkpoint(os.path.join(d, "recovery-point-offset-checkpoint")) == expected
    assert read_checkpoint(os.path.join(d, "replication-offset-checkpoint")) == expected

    caplog.clear()
    again = LogManager(d, FAR, clock=clock, sync_metadata=False)
    offsets = {
        tp: (log.log_end_offset, log.high_watermark, log.recovery_point)
        for tp, log in again.logs.items()
    }
    assert offsets == {tp: (n, n, n) for tp, n in expected.items()}
    for tp, pid in producers.items():
        entry = again.logs[tp].producer_state.last_entry(pid)
        assert entry is not None and (entry.last_seq, entry.last_data_offset) == (
            2,
            expected[tp] - 1,
        )
    assert f"loaded {N_LOGS} log(s) from {d} (clean shutdown)" in caplog.text
    assert "recovering" not in caplog.text and "rebuilt producer state" not in caplog.text
    again.close()


def test_a_checkpoint_is_written_off_the_owner_thread(tmp_path, clock):
    d = str(tmp_path / "data")
    m = LogManager(d, FAR, clock=clock, sync_metadata=False)
    log = m.get_or_create_log("t", 0)
    log.append(kv(3))
    log.flush()
    files = m.prepare_checkpoint()  # the owner takes the offsets...
    log.append(kv(2))  # ...and goes on appending while a thread writes them
    worker = threading.Thread(target=m.write_checkpoint, args=(files,))
    worker.start()
    worker.join()
    path = os.path.join(d, "recovery-point-offset-checkpoint")
    assert read_checkpoint(path) == {("t", 0): 3}
    log.flush()
    newer = m.prepare_checkpoint()
    assert m.write_checkpoint(newer)
    assert not m.write_checkpoint(files)  # an older set never overwrites a newer one
    assert read_checkpoint(path) == {("t", 0): 5}


def test_run_periodic_can_leave_the_checkpoint_to_delete_files(tmp_path, clock):
    d = str(tmp_path / "data")
    m = LogManager(d, FAR, clock=clock, sync_metadata=False, checkpoint_interval_ms=1000)
    log = m.get_or_create_log("t", 0)
    log.append(kv(4))
    log.flush()
    path = os.path.join(d, "recovery-point-offset-checkpoint")
    clock.advance(1000)
    pending = m.run_periodic(background_checkpoint=True)
    assert pending and pending.checkpoint is not None
    assert not os.path.exists(path)  # not written on the caller's thread
    worker = threading.Thread(target=delete_files, args=(pending,))
    worker.start()
    worker.join()
    assert read_checkpoint(path) == {("t", 0): 4}
    clock.advance(1000)
    assert m.run_periodic().checkpoint is None  # by default it is written right there
    assert read_checkpoint(path) == {("t", 0): 4}
