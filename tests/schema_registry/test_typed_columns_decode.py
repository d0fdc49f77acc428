"""The JSON Schema column decoder underneath the Spark source's ``valueFormat json``, without
Spark: schema conversion (and what is refused), values framed as Confluent's serializers frame
them decoded in bulk, and malformed payloads found one by one. Writers' ids are fed to the
decoder directly (the registry is tested on its own)."""

from __future__ import annotations

import datetime
import json
import re
import struct
from typing import Any

import pyarrow as pa
import pytest

pytest.importorskip("pyspark")

from gregor.spark import json_columns  # noqa: E402
from gregor.spark.framing import FAILFAST, PERMISSIVE, MalformedRecord, TypedColumn  # noqa: E402
from gregor.spark.json_schema import JsonSchemaUnsupported  # noqa: E402
from gregor.spark.json_schema import parse as parse_json  # noqa: E402
from gregor.spark.json_schema import spark_type as json_spark_type  # noqa: E402

UTC = datetime.UTC

ORDER_JSON = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "name": {"type": ["string", "null"]},
        "at": {"type": "string", "format": "date-time"},
        "day": {"type": "string", "format": "date"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "pos": {"$ref": "#/definitions/Pos"},
        "attrs": {"type": "object", "additionalProperties": {"type": "number"}},
        "maybe": {"oneOf": [{"type": "null"}, {"$ref": "#/definitions/Pos"}]},
        "ok": {"type": "boolean"},
    },
    "required": ["id"],
    "definitions": {
        "Pos": {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}}}
    },
}


def json_frame(value: Any, schema_id: int = 1) -> bytes:
    body = value if isinstance(value, bytes) else json.dumps(value).encode()
    return b"\x00" + struct.pack(">I", schema_id) + body


def json_spec(mode: str) -> TypedColumn:
    spec = TypedColumn("value", "http://unused", "s", 1, 1, json.dumps(ORDER_JSON), mode, "json")
    json_columns._decoder(spec).writers.update({1: True, 2: False})  # 2: not a JSON schema
    return spec


def decode_json(spec: TypedColumn, values: list[bytes | None]) -> list[Any]:
    out = json_columns.decode_column(
        pa.array(values, pa.binary()), spec, "t", 0, pa.array(range(len(values)), pa.int64())
    )
    return out.to_pylist()


def test_json_schema_conversion() -> None:
    assert json_spark_type(parse_json(json.dumps(ORDER_JSON))).simpleString() == (
        "struct<id:bigint,name:string,at:timestamp,day:date,tags:array<string>,"
        "pos:struct<x:double,y:double>,attrs:map<string,double>,"
        "maybe:struct<x:double,y:double>,ok:boolean>"
    )
    refused = {
        "a top level of string": {"type": "string"},
        "oneOf of 2 types": {
            "type": "object",
            "properties": {"a": {"oneOf": [{"type": "string"}, {"type": "integer"}]}},
        },
        "the types ['string', 'integer']": {
            "type": "object",
            "properties": {"a": {"type": ["string", "integer"]}},
        },
        "the recursive $ref '#/definitions/N'": {
            "$ref": "#/definitions/N",
            "definitions": {
                "N": {"type": "object", "properties": {"next": {"$ref": "#/definitions/N"}}}
            },
        },
        "the $ref 'other.json' to another document": {
            "type": "object",
            "properties": {"a": {"$ref": "other.json"}},
        },
        "an array without an items schema": {
            "type": "object",
            "properties": {"a": {"type": "array"}},
        },
        "an object with neither properties": {
            "type": "object",
            "properties": {"a": {"type": "object"}},
        },
    }
    for message, schema in refused.items():
        with pytest.raises(JsonSchemaUnsupported, match=re.escape(message)):
            parse_json(json.dumps(schema))


def test_json_values() -> None:
    first = {
        "id": 1,
        "name": "a",
        "at": "2024-01-02T03:04:05.5+02:00",
        "day": "2024-02-29",
        "tags": ["x", "y"],
        "pos": {"x": 1, "y": 2.5},
        "attrs": {"k": 1, "j": 2.5},
        "maybe": None,
        "ok": True,
        "unknown": {"z": [1]},  # not in the schema: left out
    }
    # pretty-printed over lines, keys the schema lacks, nested objects absent
    second = b'{\n  "id": 2,\r\n  "attrs": {},\n  "maybe": {"x": 3},\n  "name": "line\\nbreak"\n}'
    got = decode_json(json_spec(PERMISSIVE), [json_frame(first), json_frame(second), None])
    assert got == [
        {
            "id": 1,
            "name": "a",
            "at": datetime.datetime(2024, 1, 2, 1, 4, 5, 500000, tzinfo=UTC),
            "day": datetime.date(2024, 2, 29),
            "tags": ["x", "y"],
            "pos": {"x": 1.0, "y": 2.5},
            "attrs": [("k", 1.0), ("j", 2.5)],
            "maybe": None,
            "ok": True,
        },
        {
            "id": 2,
            "name": "line\nbreak",
            "at": None,
            "day": None,
            "tags": None,
            "pos": None,
            "attrs": [],
            "maybe": {"x": 3.0, "y": None},
            "ok": None,
        },
        None,
    ]


def test_json_malformed_payloads() -> None:
    good = [json_frame({"id": i, "attrs": {}}) for i in range(12)]
    values: list[bytes | None] = list(good)
    values[2] = json_frame(b'{"id": "two"}')  # a string for an integer
    values[3] = json_frame(b"null")  # not an object
    values[4] = json_frame(b'{"id": 4} {"id": 5}')  # two values in one
    values[5] = json_frame(b'{"id": 5')  # truncated
    values[6] = json_frame(b"")  # nothing after the frame
    values[7] = json_frame({"id": 7}, schema_id=2)  # an id that is not a JSON schema
    values[8] = b"{}"  # not a frame
    values[9] = json_frame(b'{"id": 9, "day": "2024-02-30"}')  # no such date
    got = decode_json(json_spec(PERMISSIVE), values)
    assert [i for i, g in enumerate(got) if g is None] == [2, 3, 4, 5, 6, 7, 8, 9]
    assert [g["id"] for g in got if g is not None] == [0, 1, 10, 11]
    with pytest.raises(MalformedRecord, match=r"of value at t-0 offset 2 .*FAILFAST"):
        decode_json(json_spec(FAILFAST), values)
