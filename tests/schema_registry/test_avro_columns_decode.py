"""The Avro column decoder underneath the Spark source's ``valueFormat avro``, without Spark:
frames checked, datums of every length framed into one container (one to five byte length
varints), schema resolution, and malformed records found by halving. Writers' schemas are
fed to the decoder directly (the registry is tested on its own); datums come from fastavro."""

from __future__ import annotations

import io
import json
import struct
from typing import Any

import fastavro
import pyarrow as pa
import pytest

pytest.importorskip("pyspark")
pytest.importorskip("polars")

from gregor.spark import avro_columns as ac  # noqa: E402
from gregor.spark.avro_schema import (  # noqa: E402
    AvroUnsupported,
    arrow_type,
    check_readable,
    parse,
    spark_type,
)

V1 = {
    "type": "record",
    "name": "R",
    "namespace": "t",
    "fields": [
        {"name": "id", "type": "int"},
        {"name": "blob", "type": "bytes"},
        {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}},
        {"name": "again", "type": ["null", "Kind"]},
        {
            "name": "amount",
            "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2},
        },
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    ],
}
V2 = {
    "type": "record",
    "name": "R",
    "namespace": "t",
    "fields": [
        {"name": "id", "type": "long"},  # int -> long
        {"name": "blob", "type": "bytes"},
        {"name": "count", "type": "int", "default": 7},
        {"name": "label", "type": "string", "default": "none"},
        {"name": "maybe", "type": ["null", "double"], "default": None},
    ],
}


def frame(schema_id: int, schema: dict[str, Any], value: Any) -> bytes:
    out = io.BytesIO()
    out.write(b"\x00" + struct.pack(">I", schema_id))
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), value)
    return out.getvalue()


def decoder(reader: dict[str, Any], writers: dict[int, dict[str, Any]], mode: str) -> ac.AvroColumn:
    spec = ac.AvroColumn("value", "http://unused", "s", 1, 1, json.dumps(reader), mode)
    d = ac._decoder(spec)
    for schema_id, schema in writers.items():
        d.writers[schema_id] = (
            parse(json.dumps(schema)),
            ac._container_header(json.dumps(schema), d.sync),
        )
    return spec


def decode(spec: ac.AvroColumn, values: list[bytes | None]) -> list[Any]:
    arr = pa.array(values, pa.binary())
    out = ac.decode_column(arr, spec, "t", 0, pa.array(range(len(values)), pa.int64()))
    assert out.type == arrow_type(parse(spec.schema))
    return out.to_pylist()


def test_every_length_of_a_datum() -> None:
    # Datum lengths around each varint width: 63/64 (1 -> 2 bytes), 8191/8192, 1048575/1048576.
    sizes = [0, 1, 60, 61, 62, 63, 64, 65, 8189, 8190, 8191, 8192, 1048570, 1048576]
    values = [
        {"id": i, "blob": b"x" * n, "count": 1, "label": "l", "maybe": None}
        for i, n in enumerate(sizes)
    ]
    spec = decoder(V2, {5: V2}, ac.FAILFAST)
    assert decode(spec, [frame(5, V2, v) for v in values]) == values


def test_types_and_resolution() -> None:
    import datetime
    import decimal

    assert spark_type(parse(json.dumps(V1))).simpleString() == (
        "struct<id:int,blob:binary,kind:string,again:string,amount:decimal(9,2),day:date>"
    )
    check_readable(parse(json.dumps(V1)), parse(json.dumps(V2)))
    v = {
        "id": 3,
        "blob": b"\x00\xff",
        "kind": "B",
        "again": None,
        "amount": decimal.Decimal("12.34"),
        "day": datetime.date(2024, 2, 29),
    }
    spec = decoder(V1, {1: V1}, ac.FAILFAST)
    assert decode(spec, [frame(1, V1, v), None]) == [v, None]
    spec = decoder(V2, {1: V1}, ac.FAILFAST)
    assert decode(spec, [frame(1, V1, v)]) == [
        {"id": 3, "blob": b"\x00\xff", "count": 7, "label": "none", "maybe": None}
    ]


def test_unreadable_and_unsupported_schemas() -> None:
    with pytest.raises(AvroUnsupported, match="maps"):
        parse(json.dumps({"type": "map", "values": "long"}))
    with pytest.raises(AvroUnsupported, match="union"):
        parse(json.dumps(["null", "string", "long"]))
    with pytest.raises(AvroUnsupported, match="recursive"):
        parse(
            json.dumps(
                {"type": "record", "name": "N", "fields": [{"name": "next", "type": ["null", "N"]}]}
            )
        )
    needs = {"type": "record", "name": "R", "fields": [{"name": "new", "type": "int"}]}
    with pytest.raises(AvroUnsupported, match="no default"):
        check_readable(parse(json.dumps(V1)), parse(json.dumps(needs)))
    with pytest.raises(AvroUnsupported, match="a bytes cannot be read as a int"):
        check_readable(
            parse(json.dumps(V1)),
            parse(
                json.dumps(
                    {"type": "record", "name": "R", "fields": [{"name": "blob", "type": "int"}]}
                )
            ),
        )


def test_malformed_records_are_found_one_by_one() -> None:
    good = [
        frame(5, V2, {"id": i, "blob": b"b" * i, "count": i, "label": "x", "maybe": 0.5})
        for i in range(40)
    ]
    values: list[bytes | None] = list(good)
    values[3] = good[3][:-4]  # truncated
    values[17] = b"\x00\x00\x00\x00\x09" + good[17][5:]  # an id the registry has no schema for
    values[18] = b"\x01" + good[18][1:]  # not a frame: magic byte 1
    values[19] = b"\x00\x00"  # shorter than a frame
    values[20] = None  # a null value stays null, no error
    values[33] = good[33][:5] + b"\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01"  # a varint too long
    spec = decoder(V2, {5: V2}, ac.PERMISSIVE)
    ac._decoder(spec).writers[9] = None  # the registry has no schema 9
    got = decode(spec, values)
    bad = {3, 17, 18, 19, 20, 33}
    assert [i for i, g in enumerate(got) if g is None] == sorted(bad)
    assert [g["id"] for g in got if g is not None] == [i for i in range(40) if i not in bad]

    spec = decoder(V2, {5: V2}, ac.FAILFAST)
    ac._decoder(spec).writers[9] = None
    with pytest.raises(ac.MalformedRecord, match=r"at t-0 offset 3 "):
        decode(spec, values)


def test_datums_longer_than_canonical_decode_exactly() -> None:
    # One block for a batch is only right when every datum is read from its own bytes; a
    # writer's overlong varint, or bytes after a datum (which Confluent's deserializer
    # ignores), must not shift the rows after it.
    rows = [{"id": i, "blob": b"b", "count": i, "label": "x", "maybe": None} for i in range(6)]
    values: list[bytes | None] = [frame(5, V2, r) for r in rows]
    assert values[1] is not None and values[1][5] == 0x02  # id 1: zigzag 2, one byte
    values[1] = values[1][:5] + b"\x82\x00" + values[1][6:]  # the same id in two bytes
    values[4] = (values[4] or b"") + b"\x02\x04trailing"
    spec = decoder(V2, {5: V2}, ac.FAILFAST)
    assert decode(spec, values) == rows
