"""Leader-epoch cache (OffsetForLeaderEpoch answers) and checkpoint file formats."""

from __future__ import annotations

import os

import pytest

from gregor.storage.checkpoint import (
    CheckpointError,
    read_epochs,
    read_offsets,
    write_epochs,
    write_offsets,
)
from gregor.storage.epoch import LeaderEpochCache


def cache_with(tmp_path, entries):
    c = LeaderEpochCache(str(tmp_path))
    for e, o in entries:
        c.assign(e, o)
    return c


def test_assign_persists_in_kafka_format(tmp_path):
    c = cache_with(tmp_path, [(1, 0), (1, 5), (3, 10), (4, 20)])
    assert c.entries == [(1, 0), (3, 10), (4, 20)]  # (1, 5) is not a new start
    with open(tmp_path / "leader-epoch-checkpoint") as f:
        assert f.read() == "0\n3\n1 0\n3 10\n4 20\n"
    assert LeaderEpochCache(str(tmp_path)).entries == c.entries
    c.assign(4, 15)  # the same epoch starting earlier replaces the entry
    assert c.entries == [(1, 0), (3, 10), (4, 15)]
    c.assign(2, 12)  # an older epoch past newer starts truncates them, as in Kafka
    assert c.entries == [(1, 0), (2, 12)]


def test_end_offset_for(tmp_path):
    c = cache_with(tmp_path, [(1, 0), (3, 10), (4, 20)])
    leo = 30
    assert c.end_offset_for(4, leo) == (4, 30)  # the latest epoch ends at the log end
    assert c.end_offset_for(3, leo) == (3, 20)
    assert c.end_offset_for(2, leo) == (1, 10)  # an unknown epoch between: the one below
    assert c.end_offset_for(0, leo) == (0, 0)  # below everything: the first start offset
    assert c.end_offset_for(5, leo) == (-1, -1)
    assert c.end_offset_for(-1, leo) == (-1, -1)
    assert LeaderEpochCache(None).end_offset_for(1, leo) == (-1, -1)
    assert (
        c.epoch_for_offset(9) == 1 and c.epoch_for_offset(10) == 3 and c.epoch_for_offset(99) == 4
    )


def test_truncation(tmp_path):
    c = cache_with(tmp_path, [(1, 0), (3, 10), (4, 20)])
    c.truncate_from_end(20)
    assert c.entries == [(1, 0), (3, 10)]
    c.truncate_from_start(15)
    assert c.entries == [(3, 15)]
    c.truncate_from_start(5)  # below the first entry: nothing changes
    assert c.entries == [(3, 15)]
    c.clear()
    assert c.entries == [] and read_epochs(str(tmp_path / "leader-epoch-checkpoint")) == []


def test_offset_checkpoint_roundtrip_and_errors(tmp_path):
    path = str(tmp_path / "recovery-point-offset-checkpoint")
    assert read_offsets(path) == {}
    write_offsets(path, [("b", 1, 7), ("a-b.c", 0, 100)])
    with open(path) as f:
        assert f.read() == "0\n2\na-b.c 0 100\nb 1 7\n"
    assert read_offsets(path) == {("a-b.c", 0): 100, ("b", 1): 7}
    assert not os.path.exists(path + ".tmp")
    for bad in ["1\n0\n", "0\n2\nt 0 1\n", "0\n1\nt x 1\n", ""]:
        with open(path, "w") as f:
            f.write(bad)
        with pytest.raises(CheckpointError):
            read_offsets(path)
    write_epochs(str(tmp_path / "e"), [(2, 5)])
    assert read_epochs(str(tmp_path / "e")) == [(2, 5)]
