"""Shared helpers for the storage tests: batches, a settable clock, whole-log checks."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

from gregor.protocol.records import (
    Record,
    RecordBatch,
    build_batch,
    build_control_batch,
    decode_batches,
)
from gregor.protocol.records.header import crc_ok, iter_batches
from gregor.storage import Log, LogConfig

T0 = 1_700_000_000_000  # a fixed "now" in ms


class Clock:
    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> int:
        self.now += ms
        return self.now


def config(**props: object) -> LogConfig:
    """A LogConfig from Kafka names written with underscores: segment_bytes=... ->
    segment.bytes. Timestamps far from the test clock are allowed unless given."""
    base = {"message.timestamp.after.max.ms": str(1 << 62)}
    base.update({k.replace("_", "."): v for k, v in props.items()})
    return LogConfig.from_props(base)


def batch(
    records: Sequence[tuple[int, bytes | None, bytes | None]],
    **kwargs: object,
) -> bytes:
    """A v2 batch of (timestamp, key, value) records (builder keyword arguments pass on)."""
    return build_batch(list(records), **kwargs)


def kv(n: int, ts: int = T0, *, prefix: bytes = b"k", value: bytes = b"v" * 20) -> bytes:
    """A batch of ``n`` records with keys prefix0.. and one timestamp."""
    return batch([(ts, prefix + str(i).encode(), value) for i in range(n)])


def idempotent(
    n: int, pid: int, epoch: int, seq: int, ts: int = T0, *, transactional: bool = False
) -> bytes:
    return batch(
        [(ts, b"k%d" % (seq + i), b"v") for i in range(n)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=transactional,
    )


def marker(pid: int, epoch: int, commit: bool, coordinator_epoch: int = 0, ts: int = T0) -> bytes:
    return build_control_batch(pid, epoch, commit, coordinator_epoch, timestamp=ts)


def read_batches(
    log: Log, start: int | None = None, max_offset: int | None = None
) -> list[RecordBatch]:
    """Every batch from ``start`` by successive fetches (as a consumer would)."""
    offset = log.log_start_offset if start is None else start
    out: list[RecordBatch] = []
    end = log.log_end_offset if max_offset is None else max_offset
    while offset < end:
        info = log.read(offset, 64 * 1024, max_offset=max_offset)
        if info.region is None:
            break
        batches = decode_batches(info.read_bytes(), allow_partial_tail=True)
        assert batches, "a fetch returned no whole batch"
        out.extend(b for b in batches if b.last_offset >= offset)
        offset = batches[-1].last_offset + 1
    return out


def read_records(log: Log, start: int | None = None, *, skip_control: bool = True) -> list[Record]:
    offset = log.log_start_offset if start is None else start
    return [
        r
        for b in read_batches(log, start)
        if not (skip_control and b.is_control)
        for r in b.records
        if r.offset >= offset
    ]


def segment_batches(seg) -> list[tuple[int, object]]:  # noqa: ANN001
    with open(seg.log_path, "rb") as f:
        data = f.read()
    return list(iter_batches(data)), data


def check_log(log: Log) -> None:
    """Every invariant that ties a log's data, indexes and offsets together."""
    segs = log.segments
    assert segs, "a log always has a segment"
    assert log.log_start_offset <= log.high_watermark <= log.log_end_offset
    assert log.recovery_point <= log.log_end_offset
    prev_next = None
    interval = log.config.index_interval_bytes
    for i, seg in enumerate(segs):
        with open(seg.log_path, "rb") as f:
            data = f.read()
        assert len(data) == seg.size == os.fstat(seg.fd).st_size
        batches = list(iter_batches(data))
        upper = segs[i + 1].base_offset if i + 1 < len(segs) else None
        expected_offsets = []
        since = 0
        max_ts = -1
        max_off = seg.base_offset
        for pos, h in batches:
            assert crc_ok(data, pos, h), f"bad CRC at {seg.base_offset}:{pos}"
            assert h.base_offset >= seg.base_offset
            if prev_next is not None:
                assert h.base_offset >= prev_next, "offsets must increase"
            if upper is not None:
                assert h.last_offset < upper
            prev_next = h.last_offset + 1
            if h.max_timestamp > max_ts:
                max_ts, max_off = h.max_timestamp, h.last_offset
            if since > interval:
                expected_offsets.append((h.last_offset, pos))
                since = 0
            since += h.size
        idx = seg.offset_index
        entries = [idx.entry(n) for n in range(idx.entries)]
        assert entries == expected_offsets, f"offset index of segment {seg.base_offset}"
        tidx = seg.time_index
        times = [tidx.entry(n) for n in range(tidx.entries)]
        is_active = i == len(segs) - 1
        running = {}
        m = -1
        for _, h in batches:
            m = max(m, h.max_timestamp)
            running[h.last_offset] = (m, h.max_timestamp)
        for n, (ts, off) in enumerate(times):
            assert off in running, f"time index entry {ts, off} names no batch"
            assert running[off] == (ts, ts), f"time index entry {ts, off} is not a running max"
            if n:
                assert ts > times[n - 1][0] and off >= times[n - 1][1]
        if not is_active and max_ts >= 0:
            assert times and times[-1] == (max_ts, max_off), "rolled segment lacks its final entry"
        if not is_active:
            assert idx.file_size == idx.entries * 8, "inactive offset index must be trimmed"
            assert tidx.file_size == tidx.entries * 12, "inactive time index must be trimmed"
        assert seg.max_timestamp_so_far == max_ts
        next_offset = batches[-1][1].last_offset + 1 if batches else seg.base_offset
        assert seg.next_offset == next_offset
    assert log.log_end_offset == segs[-1].next_offset


def offsets_of(records: Iterable[Record]) -> list[int]:
    return [r.offset for r in records]
