"""The commit log against the machine's own limit: Gregor's Log vs a plain file, same bytes.

Rows (best of several rounds, each on a fresh file):
  append       Log.append, one call per batch (validate header + CRC, assign offsets, write,
               index) vs os.write of the same batch bytes to a plain file
  append+fsync flush.messages=1 (fdatasync before each append returns) vs write + fdatasync
  read         sequential fetches of up to 1 MiB (Log.read, then one pread of the region) vs
               sequential 1 MiB preads of the same bytes in a plain file
  ts lookup    Log.offset_for_timestamp for random timestamps (time index, offset index, one
               batch decoded) vs one pread of a batch at a random position
  codec        Log.append of batches of 10 JSON-like records (about 1 KB of record bytes before
               compression) in each codec: none, gzip, snappy, lz4, zstd, vs os.write of the
               same (compressed) batch bytes: what checking every record of a batch (after
               decompressing it) costs per codec
Each ratio is Gregor's throughput over the plain file's (for latencies, the plain file's time
over Gregor's): 1.0 means as fast as the file. Rounds of the two alternate, after ``os.sync``,
and the best round of each counts, to keep other load on the machine out of the comparison
(five rounds per append row, two with fsync: with three, the disk's own background work, such
as the journal committing the last round's deletes, moved the 1 KB ratio by up to 0.2).

Run: .venv/bin/python bench/log.py [--mb 64] [--dir /path/on/the/disk/to/test] [--validation]
(``--dir /dev/shm`` takes the disk out and shows the CPU cost alone; ``--validation`` runs only
the rows a leader's record checks cost in: the 1 KB append and the codec rows.)
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import tempfile
import time

from gregor.protocol.records import Compression, build_batch
from gregor.storage import Log, LogConfig

BASE_TS = 1_700_000_000_000
FETCH = 1024 * 1024


def make_batches(batch_size: int, count: int) -> tuple[list[bytes], int]:
    """``count`` distinct batches of exactly ``batch_size`` bytes, 10 records each; returns
    (batches, records per batch)."""
    per = 10
    rnd = random.Random(7)

    def build(n: int, sizes: list[int]) -> bytes:
        return build_batch(
            [(BASE_TS + n, b"key-%04d" % i, rnd.randbytes(sizes[i])) for i in range(per)]
        )

    out = []
    for n in range(count):
        sizes = [max((batch_size - 61) // per - 16, 0)] * per
        b = build(n, sizes)
        while len(b) != batch_size:  # varint lengths shift a byte or two: adjust record 0
            sizes[0] += batch_size - len(b)
            b = build(n, sizes)
        out.append(b)
    return out, per


def make_codec_batches(codec: int, count: int) -> list[bytes]:
    """``count`` distinct batches of 10 JSON-like records (about 100 B each, so about 1 KB of
    record bytes), compressed with ``codec``."""
    rnd = random.Random(13)
    out = []
    for n in range(count):
        records = []
        for i in range(10):
            value = (
                b'{"id": %d, "user": "user-%05d", "event": "page_view", "path": "/shop/item/%d", '
                b'"ms": %d}'
                % (n * 10 + i, rnd.randrange(100000), rnd.randrange(1000), rnd.randrange(10**6))
            )
            records.append((BASE_TS + n, b"user-%05d" % rnd.randrange(100000), value))
        out.append(build_batch(records, compression=codec))
    return out


def bench_append(
    workdir: str, batches: list[bytes], total: int, fsync: bool
) -> tuple[float, float]:
    """Seconds to append ``total`` batches: (Gregor, plain file)."""
    n_distinct = len(batches)
    props = {"message.timestamp.after.max.ms": str(1 << 62), "segment.bytes": str(1 << 30)}
    if fsync:
        props["flush.messages"] = "1"
    cfg = LogConfig.from_props(props)

    def ours() -> float:
        d = os.path.join(workdir, "bench-0")
        shutil.rmtree(d, ignore_errors=True)
        log = Log(d, cfg, sync_metadata=False)
        append = log.append
        start = time.perf_counter()
        for i in range(total):
            append(batches[i % n_distinct])
        elapsed = time.perf_counter() - start
        log.close()
        return elapsed

    def plain() -> float:
        path = os.path.join(workdir, "plain.bin")
        if os.path.exists(path):
            os.unlink(path)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        write = os.write
        sync = os.fdatasync
        start = time.perf_counter()
        if fsync:
            for i in range(total):
                write(fd, batches[i % n_distinct])
                sync(fd)
        else:
            for i in range(total):
                write(fd, batches[i % n_distinct])
        elapsed = time.perf_counter() - start
        os.close(fd)
        return elapsed

    t_plain = t_ours = float("inf")
    for _ in range(5 if not fsync else 2):  # alternate, each after writeback settled
        os.sync()
        t_plain = min(t_plain, plain())
        os.sync()
        t_ours = min(t_ours, ours())
    return t_ours, t_plain


def bench_read(workdir: str, batch_size: int, per: int) -> tuple[float, float, int]:
    """Seconds to read the whole log written by the last append run: (Gregor, plain, bytes)."""
    d = os.path.join(workdir, "bench-0")
    cfg = LogConfig.from_props({"segment.bytes": str(1 << 30)})
    log = Log(d, cfg, had_clean_shutdown=True, sync_metadata=False)
    log.update_high_watermark(log.log_end_offset)
    leo = log.log_end_offset
    path = log.active_segment.log_path
    size = os.path.getsize(path)

    def ours() -> float:
        offset = 0
        got = 0
        read = log.read
        pread = os.pread
        start = time.perf_counter()
        while offset < leo:
            info = read(offset, FETCH, log.high_watermark)
            r = info.region
            data = pread(r.fd, r.length, r.position)
            got += len(data)
            offset = info.first_batch_offset + (len(data) // batch_size) * per
        elapsed = time.perf_counter() - start
        assert got >= size
        return elapsed

    def plain() -> float:
        fd = os.open(path, os.O_RDONLY)
        pread = os.pread
        pos = 0
        start = time.perf_counter()
        while pos < size:
            data = pread(fd, FETCH - FETCH % batch_size, pos)
            pos += len(data)
        elapsed = time.perf_counter() - start
        os.close(fd)
        return elapsed

    ours(), plain()  # warm the page cache
    t_plain = t_ours = float("inf")
    for _ in range(15):  # alternate, so both see the same background load
        t_plain = min(t_plain, plain())
        t_ours = min(t_ours, ours())
    log.close()
    return t_ours, t_plain, size


def bench_lookup(
    workdir: str, batch_size: int, distinct: int, lookups: int = 2000
) -> tuple[float, float]:
    """Seconds per lookup: (offset_for_timestamp, one pread of a batch)."""
    d = os.path.join(workdir, "bench-0")
    log = Log(d, LogConfig.from_props({"segment.bytes": str(1 << 30)}), had_clean_shutdown=True,
              sync_metadata=False)  # fmt: skip
    n_batches = log.active_segment.size // batch_size
    rnd = random.Random(11)
    # timestamps repeat every ``distinct`` batches in the append run
    targets = [BASE_TS + rnd.randrange(0, min(n_batches, distinct)) for _ in range(lookups)]
    positions = [rnd.randrange(0, n_batches) * batch_size for _ in range(lookups)]
    for t in targets[:20]:
        assert log.offset_for_timestamp(t).timestamp == t
    fd = log.active_segment.fd

    def ours() -> float:
        f = log.offset_for_timestamp
        start = time.perf_counter()
        for t in targets:
            f(t)
        return (time.perf_counter() - start) / lookups

    def plain() -> float:
        pread = os.pread
        start = time.perf_counter()
        for p in positions:
            pread(fd, batch_size, p)
        return (time.perf_counter() - start) / lookups

    t_plain = t_ours = float("inf")
    for _ in range(5):
        t_plain = min(t_plain, plain())
        t_ours = min(t_ours, ours())
    log.close()
    return t_ours, t_plain


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=int, default=64, help="MiB appended per throughput row")
    ap.add_argument("--fsync-appends", type=int, default=300, help="appends per fsync row")
    ap.add_argument("--dir", default=None, help="where to write (default: a temp dir)")
    ap.add_argument(
        "--validation", action="store_true", help="only the 1 KB append and the codec rows"
    )
    args = ap.parse_args()
    workdir = tempfile.mkdtemp(prefix="gregor-bench-", dir=args.dir)
    rows = []
    try:
        for batch_size in (1024,) if args.validation else (1024, 64 * 1024):
            label = f"{batch_size // 1024} KB"
            total = args.mb * 1024 * 1024 // batch_size
            batches, per = make_batches(batch_size, min(total, 1024 if batch_size < 8192 else 64))
            mb = total * batch_size / 1e6
            t_ours, t_plain = bench_append(workdir, batches, total, fsync=False)
            rows.append((f"append {label} batches", mb / t_ours, mb / t_plain, "MB/s"))
            if args.validation:
                break
            t_ours, t_plain, size = bench_read(workdir, batch_size, per)
            rows.append((f"read {label} batches (1 MiB fetches)", size / 1e6 / t_ours,
                         size / 1e6 / t_plain, "MB/s"))  # fmt: skip
            t_ours, t_plain = bench_lookup(workdir, batch_size, len(batches))
            rows.append((f"timestamp lookup, {label} batches", t_ours * 1e6, t_plain * 1e6, "us"))
            n = args.fsync_appends
            t_ours, t_plain = bench_append(workdir, batches, n, fsync=True)
            mb = n * batch_size / 1e6
            rows.append((f"append+fsync {label} batches", mb / t_ours, mb / t_plain, "MB/s"))
        total = args.mb * 1024 * 1024 // 1024
        for codec in Compression:
            batches = make_codec_batches(codec, 1024)
            size = sum(len(b) for b in batches) / len(batches)
            t_ours, t_plain = bench_append(workdir, batches, total, fsync=False)
            rows.append((f"append 1 KB of records, {codec.name.lower()} ({size:.0f} B)",
                         total / t_ours / 1e3, total / t_plain / 1e3, "k/s"))  # fmt: skip
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"directory: {args.dir or tempfile.gettempdir()}")
    print(f"{'':40} {'gregor':>12} {'plain file':>12} {'ratio':>7}")
    for name, ours, plain, unit in rows:
        ratio = plain / ours if unit == "us" else ours / plain
        print(f"{name:40} {ours:9.1f} {unit:<3}{plain:9.1f} {unit:<3}{ratio:6.2f}")
    print("ratio: Gregor's throughput (or speed) as a fraction of the plain file's")


if __name__ == "__main__":
    main()
