"""Decoding a batch of Confluent-framed Avro values into typed Arrow columns (the Spark source's
``valueFormat avro``), against parsing the same records as JSON with Arrow's compiled JSON reader
(the fastest JSON-to-columns path in Python) and against fastavro row by row.

    .venv/bin/python bench/avro_columns.py [--records N] [--rounds R]

Prints rows/s for each (median of the rounds) and Avro's ratio to JSON. No broker and no
registry: the writer's schema is handed to the decoder, as a Spark task has it after its first
lookup.
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import struct
import time

import fastavro
import pyarrow as pa
import pyarrow.json as pj

from gregor.columns import avro_columns as ac
from gregor.columns.avro_schema import parse

ORDER = {
    "type": "record",
    "name": "Order",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "customer", "type": "string"},
        {"name": "item", "type": "string"},
        {"name": "price", "type": "double"},
        {"name": "quantity", "type": "int"},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
    ],
}


def records(n: int, pad: int) -> list[dict[str, object]]:
    return [
        {
            "id": i,
            "customer": f"customer-{i % 1000}",
            "item": f"item-{i % 97}-" + "x" * pad,
            "price": i * 0.25,
            "quantity": i % 10,
            "note": None if i % 3 else "gift",
            "tags": ["a", "b"] if i % 2 else [],
        }
        for i in range(n)
    ]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    parsed = fastavro.parse_schema(ORDER)
    spec = ac.AvroColumn("value", "http://unused", "orders-value", 1, 1, json.dumps(ORDER))
    dec = ac._decoder(spec)
    dec.writers[1] = (parse(json.dumps(ORDER)), ac._container_header(json.dumps(ORDER), dec.sync))
    print(f"{args.records} records, median of {args.rounds} rounds")
    print(
        f"{'size':>8} {'avro (gregor)':>14} {'json (arrow)':>13} {'fastavro/row':>13} {'avro/json':>10}"
    )
    for pad in (0, 900):
        measure(records(args.records, pad), parsed, spec, args.rounds)


def measure(
    rows: list[dict[str, object]], parsed: object, spec: ac.AvroColumn, rounds: int
) -> None:
    framed = []
    for r in rows:
        out = io.BytesIO()
        out.write(b"\x00" + struct.pack(">I", 1))
        fastavro.schemaless_writer(out, parsed, r)
        framed.append(out.getvalue())
    avro_values = pa.array(framed, pa.binary())
    json_values = pa.array([json.dumps(r).encode() for r in rows], pa.binary())
    offsets = pa.array(range(len(rows)), pa.int64())
    size = sum(len(v) for v in framed) // len(framed)

    def avro() -> None:
        col = ac.decode_column(avro_values, spec, "orders", 0, offsets)
        assert len(col) == len(rows) and col.null_count == 0

    def as_json() -> None:
        # the values joined as JSON lines (what a JSON path must do first), then parsed
        text = b"\n".join(json_values.to_pylist())
        table = pj.read_json(io.BytesIO(text))
        assert table.num_rows == len(rows)

    def per_row() -> None:
        out = [fastavro.schemaless_reader(io.BytesIO(v[5:]), parsed) for v in framed]
        assert len(out) == len(rows)

    rates = {}
    for name, fn in (("avro", avro), ("json", as_json), ("row", per_row)):
        times = []
        for _ in range(rounds if name != "row" else max(1, rounds // 2)):
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
        rates[name] = len(rows) / statistics.median(times)
    print(
        f"{size:>6} B {rates['avro']:>14,.0f} {rates['json']:>13,.0f} "
        f"{rates['row']:>13,.0f} {rates['avro'] / rates['json']:>10.2f}"
    )


if __name__ == "__main__":
    main()
