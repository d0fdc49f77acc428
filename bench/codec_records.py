"""Build and parse a 1,000-record v2 batch: Gregor vs kafka-python vs kio.

Each row is (name, ours_us, kafka_python_us, kio_us_or_None): the best of several timed
rounds, in microseconds per whole batch. kio's records module has no compression, so its
compressed rows are None. Records: 100-byte values, keys like b"key-123", no headers.
Gregor's column uses the record walk in use (compiled unless GREGOR_NO_EXTENSIONS=1); when the
compiled one is in use, a second column times the pure-Python reference on the same rows.
The "arrow" rows fill Arrow column buffers (the bulk reader's sink) instead of Records.

Run: .venv/bin/python bench/codec_records.py
"""

from __future__ import annotations

import datetime
import io
import os
import time
from collections.abc import Callable

from gregor.protocol.records import Compression, RecordBatchBuilder, decode_batch, scan
from gregor.protocol.records.columns import ArrowColumns

N_RECORDS = 1000
BASE_TS = 1_700_000_000_000


def _inputs() -> list[tuple[int, bytes, bytes]]:
    rnd = os.urandom(50).hex().encode()  # 100 bytes, mildly compressible as hex
    return [(BASE_TS + i, b"key-%d" % i, rnd) for i in range(N_RECORDS)]


def _best_us(fn: Callable[[], object], rounds: int = 7, min_time: float = 0.05) -> float:
    fn()
    best = float("inf")
    for _ in range(rounds):
        n = 0
        start = time.perf_counter()
        while True:
            fn()
            n += 1
            elapsed = time.perf_counter() - start
            if elapsed >= min_time:
                break
        best = min(best, elapsed / n)
    return best * 1e6


# --- Gregor ---


def _ours_build(records: list[tuple[int, bytes, bytes]], codec: int) -> bytes:
    b = RecordBatchBuilder(compression=codec)
    append = b.append
    for ts, key, value in records:
        append(ts, key, value)
    return b.build()


def _ours_parse(raw: bytes) -> int:
    return len(decode_batch(raw).records)


def _ours_arrow(raw: bytes) -> int:
    columns = ArrowColumns()
    scan.arrow_columns_from(raw, columns, include_headers=True)
    return len(columns)


# --- kafka-python ---


def _kp_build(records: list[tuple[int, bytes, bytes]], codec: int) -> bytes:
    from kafka.record.default_records import DefaultRecordBatchBuilder

    b = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 30,
    )
    for i, (ts, key, value) in enumerate(records):
        b.append(i, ts, key, value, [])
    return bytes(b.build())


def _kp_parse(raw: bytes) -> int:
    from kafka.record.default_records import DefaultRecordBatch

    batch = DefaultRecordBatch(raw)
    if not batch.validate_crc():
        raise RuntimeError("kafka-python rejects the batch CRC")
    return sum(1 for _ in batch)


# --- kio ---


def _kio_records(records: list[tuple[int, bytes, bytes]]) -> tuple:
    from kio.records.schema import Record as KioRecord
    from kio.static.primitive import TZAwareMicros, i8, i64

    return tuple(
        KioRecord(
            attributes=i8(0),
            timestamp=TZAwareMicros.parse(datetime.datetime.fromtimestamp(ts / 1000, datetime.UTC)),
            offset=i64(i),
            key=key,
            value=value,
            headers=(),
        )
        for i, (ts, key, value) in enumerate(records)
    )


def _kio_build(kio_records: tuple) -> bytes:
    from kio.records.schema import NewRecordBatch
    from kio.records.writers import write_new_batch
    from kio.static.primitive import i16, i32, i64

    buf = io.BytesIO()
    write_new_batch(
        buf,
        NewRecordBatch(
            producer_id=i64(-1),
            producer_epoch=i16(-1),
            base_sequence=i32(-1),
            records=kio_records,
            attributes=i16(0),
        ),
    )
    return buf.getvalue()


def _kio_parse(raw: bytes) -> int:
    from kio.records.readers import read_batch

    batch, _ = read_batch(raw, 0)
    return len(batch.records)


def rows() -> list[tuple[str, float, float, float | None]]:
    records = _inputs()
    out: list[tuple[str, float, float, float | None]] = []
    kio_records = _kio_records(records)
    for codec in (Compression.NONE, Compression.GZIP):
        name = codec.name.lower()
        ours_raw = _ours_build(records, codec)
        kp_raw = _kp_build(records, codec)
        # Each reader parses the batch the other library built, proving interop on the way.
        assert _ours_parse(kp_raw) == N_RECORDS and _kp_parse(ours_raw) == N_RECORDS
        kio_build = kio_parse = None
        if codec == Compression.NONE:
            kio_raw = _kio_build(kio_records)
            assert _ours_parse(kio_raw) == N_RECORDS and _kio_parse(ours_raw) == N_RECORDS
            kio_build = _best_us(lambda: _kio_build(kio_records))
            kio_parse = _best_us(lambda r=ours_raw: _kio_parse(r))
        out.append(
            (
                f"build 1000 records, {name}",
                _best_us(lambda c=codec: _ours_build(records, c)),
                _best_us(lambda c=codec: _kp_build(records, c)),
                kio_build,
            )
        )
        out.append(
            (
                f"parse 1000 records, {name}",
                _best_us(lambda r=ours_raw: _ours_parse(r)),
                _best_us(lambda r=ours_raw: _kp_parse(r)),
                kio_parse,
            )
        )
        assert _ours_arrow(ours_raw) == N_RECORDS
        out.append(
            (
                f"arrow 1000 records, {name}",
                _best_us(lambda r=ours_raw: _ours_arrow(r)),
                float("nan"),
                None,
            )
        )
    return out


def main() -> None:
    impl = scan.implementation()
    table = rows()
    reference: list[float] | None = None
    if impl != "python":
        scan.set_implementation("python")
        reference = [ours for _, ours, _, _ in rows()]
        scan.set_implementation(impl)
    print(f"record walk in use: {impl}")
    ref_head = f" {'gregor-py us':>12}" if reference is not None else ""
    print(f"{'case':32} {'gregor us':>10}{ref_head} {'kafka-python us':>16} {'kio us':>10}  ratios")
    for i, (name, ours, kp, kio) in enumerate(table):
        kio_s = f"{kio:10.0f}" if kio is not None else f"{'-':>10}"
        ref_s = f" {reference[i]:12.0f}" if reference is not None else ""
        kp_s = f"{kp:16.0f}" if kp == kp else f"{'-':>16}"
        ratios = []
        if kp == kp:
            ratios.append(f"kafka-python/gregor {kp / ours:4.1f}x")
        if kio is not None:
            ratios.append(f"kio/gregor {kio / ours:4.1f}x")
        if reference is not None:
            ratios.append(f"python/{impl} {reference[i] / ours:4.1f}x")
        print(f"{name:32} {ours:10.0f}{ref_s} {kp_s} {kio_s}  {', '.join(ratios)}")


if __name__ == "__main__":
    main()
