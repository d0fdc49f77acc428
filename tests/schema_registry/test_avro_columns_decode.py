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

from gregor.columns import avro_columns as ac  # noqa: E402
from gregor.columns.avro_schema import (  # noqa: E402
    AvroUnsupported,
    arrow_type,
    check_readable,
    parse,
)
from gregor.spark.avro_schema import spark_type  # noqa: E402

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
    with pytest.raises(AvroUnsupported, match="a union in a union"):
        parse(json.dumps(["null", "string", ["long", "int"]]))
    with pytest.raises(AvroUnsupported, match="a union of string, long cannot be read as a long"):
        check_readable(parse(json.dumps(["string", "long"])), parse(json.dumps("long")))
    with pytest.raises(AvroUnsupported, match="the recursive record 'N'"):
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


MAPS_AND_UNIONS = {
    "type": "record",
    "name": "M",
    "fields": [
        {"name": "counts", "type": {"type": "map", "values": "long"}},
        {
            "name": "nested",
            "type": [
                "null",
                {
                    "type": "map",
                    "values": {
                        "type": "record",
                        "name": "In",
                        "fields": [{"name": "x", "type": "int"}],
                    },
                },
            ],
        },
        {
            "name": "either",
            "type": [
                "null",
                "string",
                "long",
                {"type": "enum", "name": "E", "symbols": ["A", "B"]},
                "In",
            ],
        },
        {"name": "number", "type": ["int", "long"]},
        {"name": "tagged", "type": {"type": "map", "values": {"type": "array", "items": "E"}}},
    ],
}


def test_maps_and_unions() -> None:
    # Spark's from_avro shape: map<string, T>; a union of several types a struct of members,
    # int with long a long.
    assert spark_type(parse(json.dumps(MAPS_AND_UNIONS))).simpleString() == (
        "struct<counts:map<string,bigint>,nested:map<string,struct<x:int>>,"
        "either:struct<member0:string,member1:bigint,member2:string,member3:struct<x:int>>,"
        "number:bigint,tagged:map<string,array<string>>>"
    )
    rows = [
        {"counts": {"a": 1, "b": -2}, "nested": None, "either": "s", "number": 1, "tagged": {}},
        {"counts": {}, "nested": {"k": {"x": 3}}, "either": 2**40, "number": 2**40, "tagged": {}},
        {"counts": {}, "nested": {}, "either": ("E", "B"), "number": -1, "tagged": {"t": ["A"]}},
        {"counts": {}, "nested": None, "either": None, "number": 0, "tagged": {}},
        {"counts": {}, "nested": None, "either": {"x": 9}, "number": 0, "tagged": {}},
    ]
    members = [
        {"member0": "s", "member1": None, "member2": None, "member3": None},
        {"member0": None, "member1": 2**40, "member2": None, "member3": None},
        {"member0": None, "member1": None, "member2": "B", "member3": None},
        None,
        {"member0": None, "member1": None, "member2": None, "member3": {"x": 9}},
    ]
    expected = [
        {
            **r,
            "counts": list(r["counts"].items()),
            "nested": None if r["nested"] is None else list(r["nested"].items()),
            "tagged": list(r["tagged"].items()),
            "either": m,
        }
        for r, m in zip(rows, members, strict=True)
    ]
    values: list[bytes | None] = [frame(1, MAPS_AND_UNIONS, r) for r in rows]
    spec = decoder(MAPS_AND_UNIONS, {1: MAPS_AND_UNIONS}, ac.PERMISSIVE)
    assert decode(spec, [*values, (values[0] or b"")[:-3], None]) == [*expected, None, None]
    spec = decoder(MAPS_AND_UNIONS, {1: MAPS_AND_UNIONS}, ac.FAILFAST)
    with pytest.raises(ac.MalformedRecord, match=r"at t-0 offset 5 "):
        decode(spec, [*values, b"\x00\x00\x00\x00\x01\x02\x02a\x7f"])

    # Maps without unions decode through polars, in one block when every datum is canonical.
    only_maps = {
        "type": "record",
        "name": "OnlyMaps",
        "fields": [MAPS_AND_UNIONS["fields"][0], MAPS_AND_UNIONS["fields"][1]],  # type: ignore[index]
    }
    spec = decoder(only_maps, {2: only_maps}, ac.FAILFAST)
    got = decode(
        spec, [frame(2, only_maps, {"counts": r["counts"], "nested": r["nested"]}) for r in rows]
    )
    assert got == [{"counts": e["counts"], "nested": e["nested"]} for e in expected]


def test_the_sink_encodes_maps_and_unions() -> None:
    from gregor.spark.avro_encode import encode_column

    rows = [
        {
            "counts": [("a", 1)],
            "nested": None,
            "either": {"member0": None, "member1": None, "member2": "B", "member3": None},
            "number": 5,
            "tagged": [("t", ["A"])],
        },
        {"counts": [], "nested": [("k", {"x": 1})], "either": None, "number": 2**40, "tagged": []},
    ]
    spec = decoder(MAPS_AND_UNIONS, {1: MAPS_AND_UNIONS}, ac.FAILFAST)
    encoded = encode_column(pa.array(rows, type=arrow_type(parse(spec.schema))), spec)
    # the enum's branch (member2), not the string's, though "B" is a string
    assert fastavro.schemaless_reader(
        io.BytesIO((encoded[0].as_py() or b"")[5:]),
        fastavro.parse_schema(MAPS_AND_UNIONS),
        return_named_type=True,
    )["either"] == ("E", "B")  # type: ignore[index,call-overload]
    assert decode(spec, encoded.to_pylist()) == rows
