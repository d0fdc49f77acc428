"""The JSON Schema and Protobuf column decoders underneath the Spark source's ``valueFormat``
``json`` and ``protobuf``, without Spark: schema conversion (and what is refused), values framed
as Confluent's serializers frame them decoded in bulk, and malformed payloads found one by one.
Writers' ids are fed to the decoders directly (the registry is tested on its own)."""

from __future__ import annotations

import base64
import datetime
import json
import re
import struct
from typing import Any

import pyarrow as pa
import pytest

pytest.importorskip("pyspark")

from gregor.columns import json_columns, protobuf_columns  # noqa: E402
from gregor.columns.framing import FAILFAST, PERMISSIVE, MalformedRecord, TypedColumn  # noqa: E402
from gregor.columns.json_schema import JsonSchemaUnsupported  # noqa: E402
from gregor.columns.json_schema import parse as parse_json  # noqa: E402
from gregor.columns.protobuf_schema import ProtobufUnsupported, reader_message  # noqa: E402
from gregor.spark.json_schema import spark_type as json_spark_type  # noqa: E402
from gregor.spark.protobuf_schema import spark_type as proto_spark_type  # noqa: E402

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


def _order_file() -> Any:
    """The compiled descriptor of::

    syntax = "proto3"; package shop; import "google/protobuf/timestamp.proto";
    enum Status { NEW = 0; PAID = 1; }
    message Order {
      string id = 1; Item item = 2; repeated Item items = 3; map<string, int64> counts = 4;
      Status status = 5; google.protobuf.Timestamp at = 6; repeated sint32 nums = 7;
      optional string note = 8; uint64 big = 9; map<string, Item> by_sku = 10;
    }
    message Item { string sku = 1; double price = 2; }
    """
    from google.protobuf import descriptor_pb2 as d

    f = d.FieldDescriptorProto
    fdp = d.FileDescriptorProto(
        name="shop.proto",
        package="shop",
        syntax="proto3",
        dependency=["google/protobuf/timestamp.proto"],
    )
    fdp.enum_type.add(name="Status").value.extend(
        [
            d.EnumValueDescriptorProto(name="NEW", number=0),
            d.EnumValueDescriptorProto(name="PAID", number=1),
        ]
    )
    order = fdp.message_type.add(name="Order")

    def field(msg: Any, name: str, number: int, kind: int, label: int = 1, ref: str = "") -> Any:
        out = msg.field.add(name=name, number=number, type=kind, label=label)
        if ref:
            out.type_name = ref
        return out

    field(order, "id", 1, f.TYPE_STRING)
    field(order, "item", 2, f.TYPE_MESSAGE, ref=".shop.Item")
    field(order, "items", 3, f.TYPE_MESSAGE, f.LABEL_REPEATED, ".shop.Item")
    field(order, "counts", 4, f.TYPE_MESSAGE, f.LABEL_REPEATED, ".shop.Order.CountsEntry")
    field(order, "status", 5, f.TYPE_ENUM, ref=".shop.Status")
    field(order, "at", 6, f.TYPE_MESSAGE, ref=".google.protobuf.Timestamp")
    field(order, "nums", 7, f.TYPE_SINT32, f.LABEL_REPEATED)
    note = field(order, "note", 8, f.TYPE_STRING)
    note.proto3_optional = True
    note.oneof_index = 0
    order.oneof_decl.add(name="_note")
    field(order, "big", 9, f.TYPE_UINT64)
    field(order, "by_sku", 10, f.TYPE_MESSAGE, f.LABEL_REPEATED, ".shop.Order.BySkuEntry")
    for entry, value, ref in (
        ("CountsEntry", f.TYPE_INT64, ""),
        ("BySkuEntry", f.TYPE_MESSAGE, ".shop.Item"),
    ):
        e = order.nested_type.add(name=entry)
        e.options.map_entry = True
        field(e, "key", 1, f.TYPE_STRING)
        field(e, "value", 2, value, ref=ref)
    item = fdp.message_type.add(name="Item")
    field(item, "sku", 1, f.TYPE_STRING)
    field(item, "price", 2, f.TYPE_DOUBLE)
    return fdp


def proto_spec(mode: str) -> tuple[TypedColumn, Any]:
    from google.protobuf import message_factory

    schema = base64.b64encode(_order_file().SerializeToString()).decode()
    spec = TypedColumn("value", "http://unused", "s", 1, 1, schema, mode, "protobuf")
    protobuf_columns._decoder(spec).writers.update({1: True, 2: False})
    return spec, message_factory.GetMessageClass(reader_message(schema))


def proto_frame(message: Any, indexes: bytes = b"\x00", schema_id: int = 1) -> bytes:
    body = message if isinstance(message, bytes) else message.SerializeToString()
    return b"\x00" + struct.pack(">I", schema_id) + indexes + body


def decode_proto(spec: TypedColumn, values: list[bytes | None]) -> list[Any]:
    out = protobuf_columns.decode_column(
        pa.array(values, pa.binary()), spec, "t", 0, pa.array(range(len(values)), pa.int64())
    )
    return out.to_pylist()


def test_protobuf_schema_conversion() -> None:
    spec, _ = proto_spec(FAILFAST)
    assert proto_spark_type(reader_message(spec.schema)).simpleString() == (
        "struct<id:string,item:struct<sku:string,price:double>,"
        "items:array<struct<sku:string,price:double>>,counts:map<string,bigint>,status:string,"
        "at:timestamp,nums:array<int>,note:string,big:bigint,"
        "by_sku:map<string,struct<sku:string,price:double>>>"
    )
    from google.protobuf import descriptor_pb2 as d

    f = d.FieldDescriptorProto
    node = d.FileDescriptorProto(name="n.proto", package="n", syntax="proto3")
    n = node.message_type.add(name="Node")
    n.field.add(name="next", number=1, type=f.TYPE_MESSAGE, label=1, type_name=".n.Node")
    with pytest.raises(ProtobufUnsupported, match="the recursive message 'n.Node'"):
        reader_message(base64.b64encode(node.SerializeToString()).decode())
    other = d.FileDescriptorProto(name="o.proto", package="o", dependency=["shared/money.proto"])
    other.message_type.add(name="O")
    with pytest.raises(ProtobufUnsupported, match="the import 'shared/money.proto'"):
        reader_message(base64.b64encode(other.SerializeToString()).decode())
    with pytest.raises(ProtobufUnsupported, match="not a compiled descriptor"):
        reader_message("not base64!")


def test_protobuf_values() -> None:
    spec, order = proto_spec(PERMISSIVE)
    full = order(
        id="o1",
        item={"sku": "a", "price": 1.5},
        items=[{"sku": "b"}, {"sku": "c", "price": 2.0}],
        counts={"x": 1, "y": -2},
        status=1,
        nums=[-1, 0, 300],
        note="hi",
        big=2**64 - 1,
        by_sku={"k": {"sku": "k", "price": 0.5}},
    )
    full.at.FromDatetime(datetime.datetime(2024, 1, 2, 3, 4, 5, 123456))
    bare = order(id="o2")  # proto3 defaults; absent messages and the unset optional are null
    got = decode_proto(spec, [proto_frame(full), proto_frame(bare, b"\x02\x00"), None])
    got[0]["counts"].sort()  # a map's entries come in no set order on the wire
    assert got == [
        {
            "id": "o1",
            "item": {"sku": "a", "price": 1.5},
            "items": [{"sku": "b", "price": 0.0}, {"sku": "c", "price": 2.0}],
            "counts": [("x", 1), ("y", -2)],
            "status": "PAID",
            "at": datetime.datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=UTC),
            "nums": [-1, 0, 300],
            "note": "hi",
            "big": -1,  # uint64's bits as a signed long, as Spark reads it
            "by_sku": [("k", {"sku": "k", "price": 0.5})],
        },
        {
            "id": "o2",
            "item": None,
            "items": [],
            "counts": [],
            "status": "NEW",
            "at": None,
            "nums": [],
            "note": None,
            "big": 0,
            "by_sku": [],
        },
        None,
    ]


def test_protobuf_malformed_payloads() -> None:
    spec, order = proto_spec(PERMISSIVE)
    good = [proto_frame(order(id=f"o{i}", nums=[i])) for i in range(10)]
    values: list[bytes | None] = list(good)
    values[1] = (good[1] or b"")[:-1]  # truncated
    values[4] = proto_frame(order(id="x"), b"\x02\x02")  # message index [1]: not the reader's
    values[5] = proto_frame(b"\x0a\xff")  # a string longer than the payload
    values[6] = proto_frame(order(id="y"), schema_id=2)  # an id that is not a Protobuf schema
    values[7] = b"\x00\x00\x00\x00\x01"  # no message indexes
    got = decode_proto(spec, values)
    assert [i for i, g in enumerate(got) if g is None] == [1, 4, 5, 6, 7]
    assert [g["id"] for g in got if g is not None] == ["o0", "o2", "o3", "o8", "o9"]
    spec, _ = proto_spec(FAILFAST)
    with pytest.raises(MalformedRecord, match=r"at t-0 offset 1 "):
        decode_proto(spec, values)
