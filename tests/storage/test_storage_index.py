"""Offset, time and transaction indexes: Kafka's byte layout, lookups, truncation, trimming."""

from __future__ import annotations

import os
import struct

import pytest

from gregor.storage.index import (
    CorruptIndexError,
    OffsetIndex,
    TimeIndex,
)
from gregor.storage.transaction_index import AbortedTxn, TransactionIndex


def test_offset_index_layout_lookup_and_trim(tmp_path):
    path = str(tmp_path / "00000000000000000100.index")
    idx = OffsetIndex(path, 100, 8 * 10)
    idx.make_writable()
    assert os.path.getsize(path) == 80  # preallocated
    for rel, pos in [(3, 0), (9, 4100), (20, 8300)]:
        idx.append(100 + rel, pos)
    assert idx.entries == 3
    assert idx.lookup(99) == (100, 0)  # below every entry: the segment start
    assert idx.lookup(103) == (103, 0)
    assert idx.lookup(108) == (103, 0)
    assert idx.lookup(109) == (109, 4100)
    assert idx.lookup(10**9) == (120, 8300)
    assert idx.lookup_by_position(4100) == 109
    assert idx.lookup_by_position(4101) == 120
    assert idx.lookup_by_position(9000) is None
    with pytest.raises(ValueError):
        idx.append(120, 9000)  # offsets must grow
    idx.trim_to_valid_size()
    idx.close()
    with open(path, "rb") as f:
        raw = f.read()
    assert raw == struct.pack(">iiiiii", 3, 0, 9, 4100, 20, 8300)
    reopened = OffsetIndex(path, 100, 80)
    assert reopened.entries == 3 and reopened.last_offset == 120
    reopened.sanity_check()
    reopened.close()


def test_offset_index_truncate_and_full(tmp_path):
    idx = OffsetIndex(str(tmp_path / "0.index"), 0, 8 * 4)
    idx.make_writable()
    for i in range(4):
        idx.append(i * 10, i * 100)
    assert idx.is_full()
    idx.truncate_to(20)  # removes entries with offset >= 20
    assert [idx.entry(n) for n in range(idx.entries)] == [(0, 0), (10, 100)]
    assert not idx.is_full()
    idx.truncate_to(0)
    assert idx.entries == 0
    assert idx.lookup(5) == (0, 0)
    idx.close()


def test_offset_index_sanity_check_rejects_torn_files(tmp_path):
    path = str(tmp_path / "00000000000000000000.index")
    with open(path, "wb") as f:
        f.write(struct.pack(">ii", 5, 0) + b"\x00\x00\x00")  # 11 bytes: a torn entry
    idx = OffsetIndex(path, 0, 1024)
    with pytest.raises(CorruptIndexError):
        idx.sanity_check()
    idx.close()


def test_time_index_layout_and_lookup(tmp_path):
    path = str(tmp_path / "00000000000000000050.timeindex")
    idx = TimeIndex(path, 50, 12 * 10)
    idx.make_writable()
    idx.maybe_append(1000, 55)
    idx.maybe_append(1000, 60)  # not larger: skipped
    idx.maybe_append(2000, 70)
    idx.maybe_append(1500, 80)  # smaller: skipped
    assert idx.entries == 2
    assert idx.lookup(999) == (-1, 50)
    assert idx.lookup(1000) == (1000, 55)
    assert idx.lookup(1999) == (1000, 55)
    assert idx.lookup(2500) == (2000, 70)
    assert idx.last_entry() == (2000, 70)
    idx.truncate_to(70)
    assert idx.last_entry() == (1000, 55)
    idx.trim_to_valid_size()
    idx.close()
    with open(path, "rb") as f:
        assert f.read() == struct.pack(">qi", 1000, 5)


def test_time_index_keeps_a_slot_for_the_roll_entry(tmp_path):
    idx = TimeIndex(str(tmp_path / "0.timeindex"), 0, 12 * 3)
    idx.make_writable()
    idx.maybe_append(1, 1)
    assert not idx.is_full()
    idx.maybe_append(2, 2)
    assert idx.is_full()  # the third slot is for on_become_inactive
    idx.maybe_append(3, 3)
    assert idx.entries == 3
    idx.close()


def test_transaction_index_layout_collect_truncate(tmp_path):
    path = str(tmp_path / "00000000000000000000.txnindex")
    idx = TransactionIndex(path, 0)
    assert not os.path.exists(path)  # created lazily
    # b was open when a aborted, so a's last stable offset is b's first offset
    a = AbortedTxn(producer_id=7, first_offset=10, last_offset=20, last_stable_offset=15)
    b = AbortedTxn(producer_id=8, first_offset=15, last_offset=30, last_stable_offset=31)
    idx.append(a)
    idx.append(b)
    with open(path, "rb") as f:
        raw = f.read()
    assert len(raw) == 68
    assert raw[:34] == struct.pack(">hqqqq", 0, 7, 10, 20, 15)
    assert TransactionIndex(path, 0).entries == [a, b]
    assert idx.collect(0, 12) == ([a], True)  # a's LSO 15 passed the bound: nothing later
    assert idx.collect(21, 100) == ([b], False)  # later segments may hold more
    assert idx.collect(0, 21) == ([a, b], True)
    with pytest.raises(ValueError):
        idx.append(AbortedTxn(9, 1, 25, 26))
    idx.truncate_to(30)
    assert idx.entries == [a]
    assert os.path.getsize(path) == 34
    idx.truncate_to(0)
    assert not os.path.exists(path)


def test_sealing_trims_the_file_and_writes_the_final_time_entry(tmp_path):
    path = str(tmp_path / "00000000000000000050.timeindex")
    idx = TimeIndex(path, 50, 12 * 10)
    idx.make_writable()
    idx.maybe_append(1000, 55)
    assert os.path.getsize(path) == 120  # preallocated
    idx.seal_with(2000, 70)  # the roll's entry: written after trimming, not through the map
    assert os.path.getsize(path) == 24 and not idx.writable
    assert (idx.entries, idx.last_entry()) == (2, (2000, 70))
    assert idx.lookup(2500) == (2000, 70)  # mapped again on use
    idx.seal_with(1500, 80)  # not above the last entry: nothing to add
    assert idx.entries == 2 and os.path.getsize(path) == 24
    idx.close()
    with open(path, "rb") as f:
        assert f.read() == struct.pack(">qiqi", 1000, 5, 2000, 20)
