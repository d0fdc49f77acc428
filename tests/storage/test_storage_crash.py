"""Kill -9 a process appending in fsync mode, reopen, and check nothing acknowledged is lost.

Each round starts ``crash_child.py`` on the same log directory, lets it append for a random
moment, kills it with SIGKILL and then checks a copy of the directory (so the next child does
its own recovery on the original): the log is a valid prefix of what the child wrote (its
batches, in sequence order, with their exact records), every acknowledged batch is there at
its acknowledged offsets, the indexes agree with the data, producer state answers a retried
batch with its original offsets, and appends continue at the log end offset.
"""

from __future__ import annotations

import os
import random
import select
import shutil
import signal
import subprocess
import sys
import time

import crash_child
from storage_helpers import check_log, read_batches

from gregor.storage import Log, LogConfig

ROUNDS = 4


def run_child(log_dir: str, rng: random.Random) -> tuple[int, int, list[tuple[int, int, int]]]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.Popen(
        [sys.executable, os.path.join(os.path.dirname(__file__), "crash_child.py"), log_dir],
        stdout=subprocess.PIPE,
        env=env,
    )
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    buf = b""
    acks: list[tuple[int, int, int]] = []
    ready = None
    kill_at = None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if kill_at is not None and time.monotonic() >= kill_at:
            break
        r, _, _ = select.select([fd], [], [], 0.01)
        if r:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            buf += chunk
        if ready is None and b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            _, leo, seq = line.split()
            ready = (int(leo), int(seq))
            kill_at = time.monotonic() + rng.uniform(0.05, 0.4)
    proc.send_signal(signal.SIGKILL)
    buf += proc.stdout.read()  # acknowledgements written before the kill count too
    proc.wait()
    assert ready is not None, "the child never opened its log"
    for line in buf.split(b"\n"):
        parts = line.split()
        if len(parts) == 4 and parts[0] == b"ack":
            acks.append((int(parts[1]), int(parts[2]), int(parts[3])))
    return ready[0], ready[1], acks


def verify(copy_dir: str, acked: dict[int, tuple[int, int]]) -> tuple[int, int]:
    """Check the recovered copy; returns (log end offset, next sequence)."""
    cfg = LogConfig.from_props(crash_child.CONFIG)
    log = Log(os.path.join(copy_dir, "crash-0"), cfg)  # unclean: no marker, so recovery runs
    batches = read_batches(log)
    expected_offset = 0
    for seq, b in enumerate(batches):
        assert b.base_sequence == crash_child.base_sequence(seq), "the child's batches in order"
        assert b.base_offset == expected_offset
        want = crash_child.records_for(seq)
        assert [(r.timestamp, r.key, r.value) for r in b.records] == want
        expected_offset = b.last_offset + 1
    on_disk = {i: (b.base_offset, b.last_offset) for i, b in enumerate(batches)}
    for seq, offsets in acked.items():
        assert on_disk.get(seq) == offsets, f"acknowledged batch {seq} lost or moved"
    assert log.log_end_offset == expected_offset
    check_log(log)
    next_seq = len(batches)
    if batches:
        last = batches[-1]
        dup = log.append(crash_child.batch_for(next_seq - 1))
        assert dup.duplicate and (dup.first_offset, dup.last_offset) == (
            last.base_offset,
            last.last_offset,
        )
    info = log.append(crash_child.batch_for(next_seq))
    assert info.first_offset == expected_offset
    log.close_handles()
    return expected_offset, next_seq


def test_kill_minus_nine_loses_nothing_acknowledged(tmp_path):
    rng = random.Random(20240601)
    data = str(tmp_path / "data")
    acked: dict[int, tuple[int, int]] = {}
    expected_leo, expected_seq = 0, 0
    total = 0
    for round_no in range(ROUNDS):
        leo, seq, acks = run_child(data, rng)
        # the child resumes where the recovered log ends
        assert (leo, seq) == (expected_leo, expected_seq), f"round {round_no}"
        for s, first, last in acks:
            acked[s] = (first, last)
        total += len(acks)
        copy = str(tmp_path / f"copy{round_no}")
        shutil.copytree(data, copy)
        expected_leo, expected_seq = verify(copy, acked)
        assert expected_seq >= max(acked, default=-1) + 1
        shutil.rmtree(copy)
    assert total > ROUNDS, "the children should have acknowledged some batches"
