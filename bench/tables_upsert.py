"""What one upsert commit costs (``iceberg.upsert``, issue 39): seconds of
``TopicTable.commit(..., upsert=True)`` of ``--updates`` records over a table of ``--keys``
keys, in one partition, on pyiceberg's SQL catalog in a temporary directory (no broker: the
commit alone, as the translator's catalog thread runs it).

    .venv/bin/python bench/tables_upsert.py [--keys 100000] [--updates 10000] [--rounds 3]
                                            [--files 1] [--tombstones 0.1]

The table is loaded with ``--keys`` keys (``k000000`` ...) in ``--files`` commits (each an
upsert commit of its share, so as many data files), then each round commits ``--updates``
records of keys drawn at random (a share ``--tombstones`` of them tombstones), and its
seconds are printed with the data files before and after; the median last. Each round's
table is checked: one row per key, each key's latest value.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from datetime import UTC, datetime

import pyarrow as pa

from gregor.tables.catalog import TableCatalog, TopicTable
from gregor.tables.schema import ARROW_SCHEMA
from gregor.tables.settings import catalog_settings

VALUE = b"v" * 100


def records(keys: list[int], first: int, tombstones: float, rng: random.Random) -> pa.Table:
    """One partition's records of ``keys`` at offsets ``first``, ``first + 1``, ..."""
    now = datetime.now(UTC)
    n = len(keys)
    values = [None if rng.random() < tombstones else VALUE + b"%d" % (first + i) for i in range(n)]
    return pa.Table.from_arrays(
        [
            pa.array([b"k%06d" % k for k in keys], pa.binary()),
            pa.array(values, pa.binary()),
            pa.nulls(n, ARROW_SCHEMA.field("headers").type),
            pa.array([now] * n, ARROW_SCHEMA.field("timestamp").type),
            pa.array([0] * n, pa.int32()),
            pa.array(range(first, first + n), pa.int64()),
        ],
        schema=ARROW_SCHEMA,
    )


def data_files(table: TopicTable) -> int:
    return len(list(table.table.scan().plan_files()))


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--updates", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--files", type=int, default=1)
    ap.add_argument("--tombstones", type=float, default=0.1)
    args = ap.parse_args()
    rng = random.Random(39)
    with tempfile.TemporaryDirectory() as tmp:
        table = TableCatalog(catalog_settings({}, tmp)).open_table("bench", upsert=True)
        offset = 0
        latest: dict[int, bytes | None] = {}
        per_file = -(-args.keys // args.files)
        for start in range(0, args.keys, per_file):
            keys = list(range(start, min(start + per_file, args.keys)))
            rows = records(keys, offset, 0.0, rng)
            table.commit(0, offset or None, offset, offset + len(keys), rows, upsert=True)
            latest.update(zip(keys, rows.column("value").to_pylist(), strict=True))
            offset += len(keys)
        seconds = []
        for rnd in range(args.rounds):
            keys = [rng.randrange(args.keys) for _ in range(args.updates)]
            rows = records(keys, offset, args.tombstones, rng)
            before = data_files(table)
            t0 = time.perf_counter()
            table.commit(0, offset, offset, offset + len(keys), rows, upsert=True)
            seconds.append(time.perf_counter() - t0)
            offset += len(keys)
            for k, v in zip(keys, rows.column("value").to_pylist(), strict=True):
                latest[k] = v
            got = table.table.scan(selected_fields=("key", "value")).to_arrow()
            want = {b"k%06d" % k: v for k, v in latest.items() if v is not None}
            assert got.num_rows == len(want), (got.num_rows, len(want))
            vals = dict(
                zip(got.column("key").to_pylist(), got.column("value").to_pylist(), strict=True)
            )
            assert vals == want
            print(
                f"round {rnd}: {args.updates} updates over {len(want)} rows: "
                f"{seconds[-1]:.2f} s (data files {before} -> {data_files(table)})"
            )
        print(f"median {statistics.median(seconds):.2f} s per commit of {args.updates} updates")


if __name__ == "__main__":
    main()
