"""Child process for the fast-path differential test: one fixed run of appends, its outcomes
printed as JSON on stdout. The parent runs it with the compiled and with the pure-Python
produce fast path (``GREGOR_NO_EXTENSIONS``) and compares outputs and the files left behind.

    python fast_append_child.py <log_dir>
"""

from __future__ import annotations

import json
import struct
import sys
from typing import Any

from crc32c import crc32c

from gregor.protocol.records import build_batch
from gregor.protocol.records.compression import compress
from gregor.protocol.records.varint import encode_varint
from gregor.storage import Log, LogConfig
from gregor.storage.fast_append import implementation

NOW = 1_700_000_000_000


def batches() -> list[tuple[str, Any, int]]:
    """(label, records buffer, leader epoch): every kind the fast path takes or hands on."""
    out: list[tuple[str, Any, int]] = []
    for i in range(40):
        recs = [
            (NOW + i * 10 + j, b"k%d" % j, b"v" * (20 + (i * 37 + j) % 300))
            for j in range(1 + i % 4)
        ]
        raw = build_batch(recs)
        kind = ("bytes", "bytearray", "memoryview")[i % 3]
        buf: Any = (
            raw if kind == "bytes" else bytearray(raw) if kind == "bytearray" else memoryview(raw)
        )
        out.append((f"plain-{kind}-{i}", buf, i // 10))
    big = build_batch([(NOW + 500, b"big", b"B" * 17000)])  # read-only, above the copy limit
    out.append(("big-bytes", big, 4))
    out.append(("big-bytearray", bytearray(big), 4))
    idem = build_batch(
        [(NOW + 600, None, b"idempotent")], producer_id=7, producer_epoch=0, base_sequence=0
    )
    out.append(("producer-id", idem, 4))
    bad = bytearray(build_batch([(NOW + 700, None, b"crc")]))
    bad[-1] ^= 1
    out.append(("bad-crc", bytes(bad), 4))
    out.append(("too-old", build_batch([(1000, None, b"old")]), 4))
    out.append(("future", build_batch([(NOW + 10**12, None, b"new")]), 4))
    out.append(("short", b"\x00" * 30, 4))
    # Issue 35: what the records say, not only the header (both paths must refuse alike, and
    # take a batch whose max timestamp is not its records' through the general path).
    three = b"".join(_record(i, b"r%d" % i) for i in range(3))
    out.append(("count-1-holds-3", _raw(three, 1, NOW + 750), 4))
    out.append(("count-5-holds-3", _raw(three, 5, NOW + 750), 4))
    out.append(
        (
            "deltas-0-2-1",
            _raw(_record(0, b"a") + _record(2, b"b") + _record(1, b"c"), 3, NOW + 750),
            4,
        )
    )
    out.append(
        ("record-too-old", _raw(_record(0, b"a") + _record(1, b"b", -(10**13)), 2, NOW + 750), 4)
    )
    out.append(("max-ts-lies", _raw(three, 3, NOW + 760, max_ts=NOW + 900), 4))
    out.append(("log-append-time-bit", _raw(three, 3, NOW + 770, attributes=0x08), 4))
    out.append(("gzip", build_batch([(NOW + 780, b"z", b"gz" * 50)], compression=1), 4))
    out.append(("lz4-count-1-holds-3", _raw(compress(3, three), 1, NOW + 790, attributes=3), 4))
    out.append(
        ("zstd-junk", _raw(b"\x28\xb5\x2f\xfd" + bytes(range(60)), 1, NOW + 790, attributes=4), 4)
    )
    out.append(
        (
            "zstd",
            build_batch([(NOW + 795, b"z", b"zs" * 50), (NOW + 796, None, b"z")], compression=4),
            4,
        )
    )
    out.append(("after-errors", build_batch([(NOW + 800, None, b"last")]), 5))
    for i in range(30):  # timestamps that stop growing (the time index skips them), then grow
        ts = NOW + 900 + (i if i < 10 or i >= 20 else 0)
        out.append((f"late-{i}", build_batch([(ts, None, b"L" * (300 + i))]), 5))
    return out


def _record(offset_delta: int, value: bytes, ts_delta: int = 0) -> bytes:
    body = b"\x00" + encode_varint(ts_delta) + encode_varint(offset_delta) + b"\x01"
    body += encode_varint(len(value)) + value + b"\x00"
    return encode_varint(len(body)) + body


def _raw(
    records: bytes, count: int, ts: int, max_ts: int | None = None, attributes: int = 0
) -> bytes:
    """A batch whose header says what it is told, with a correct CRC."""
    out = bytearray(61) + records
    struct.pack_into(
        ">qiibIhiqqqhii",
        out,
        0,
        0,
        len(out) - 12,
        -1,
        2,
        0,
        attributes,
        count - 1,
        ts,
        ts if max_ts is None else max_ts,
        -1,
        -1,
        -1,
        count,
    )
    struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
    return bytes(out)


def main() -> None:
    cfg = LogConfig.from_props(
        {
            "segment.bytes": "24000",
            "index.interval.bytes": "500",
            "message.timestamp.before.max.ms": str(10**12),
            "message.timestamp.after.max.ms": str(10**9),
            "max.message.bytes": "1048576",
            "segment.index.bytes": "96",  # 12 offset entries, 7 time entries: full indexes roll
        }
    )
    log = Log(sys.argv[1], cfg, clock=lambda: NOW + 1000, sync_metadata=False)
    results = []
    for label, buf, epoch in batches():
        if label == "late-5":  # lookups build the offset index's in-memory keys, kept by appends
            active = log.active_segment
            results.append(
                [
                    label + "-lookups",
                    [
                        list(active.offset_index.lookup(o))
                        for o in range(active.base_offset - 1, log.log_end_offset)
                    ],
                ]
            )
        try:
            info = log.append(buf, leader_epoch=epoch)
            results.append([label, list(info)])
        except Exception as e:  # the error (class and message) is part of what must agree
            results.append([label, type(e).__name__, str(e)])
        if isinstance(buf, bytearray):  # a writable buffer is stamped in place
            results.append([label + "-buffer", bytes(buf).hex()])
    state = {
        "log_end_offset": log.log_end_offset,
        "segments": [
            (
                s.base_offset,
                s.size,
                s.next_offset,
                s.max_timestamp_so_far,
                s.offset_of_max_timestamp_so_far,
                s.bytes_since_last_index_entry,
            )
            for s in log.segments
        ],
        "epochs": [list(e) for e in log.leader_epoch_cache.entries],
        "latest_epoch": log.leader_epoch_cache.latest,
        "map_end_offset": log.producer_state.map_end_offset,
        "indexes": [
            (
                s.offset_index.entries,
                s.offset_index._last,
                s.time_index.entries,
                s.time_index._last,
                [list(s.offset_index.lookup(o)) for o in range(s.base_offset, s.next_offset)],
                [list(s.time_index.lookup(NOW + t)) for t in range(0, 1000, 7)],
            )
            for s in log.segments
        ],
    }
    log.close()
    print(json.dumps({"implementation": implementation(), "results": results, "state": state}))


if __name__ == "__main__":
    main()
