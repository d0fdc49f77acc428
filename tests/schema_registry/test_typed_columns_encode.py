"""The sink's JSON Schema and Protobuf encoders underneath ``valueFormat`` / ``keyFormat``
``json`` and ``protobuf`` on ``df.write``, without Spark: struct columns as Arrow gives them
encoded against schemas registered in Gregor's registry (the columns planned by the sink's own
option parsing), read back by confluent-kafka's ``JSONDeserializer`` / ``ProtobufDeserializer``
and by the source's decoders (a round trip is exact), with the exact bytes of confluent-kafka's
``JSONSerializer``; rows that do not fit the schema fail with the column and the reason."""

from __future__ import annotations

import datetime
import json
import re
from typing import Any

import pyarrow as pa
import pytest

pytest.importorskip("pyspark")

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient  # noqa: E402
from confluent_kafka.schema_registry.json_schema import (  # noqa: E402
    JSONDeserializer,
    JSONSerializer,
)
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer  # noqa: E402
from confluent_kafka.serialization import MessageField, SerializationContext  # noqa: E402
from pyspark.sql.types import LongType, StringType, StructField, StructType  # noqa: E402

from gregor.columns import json_columns, json_schema, protobuf_columns, protobuf_schema  # noqa: E402
from gregor.columns.framing import TypedColumn  # noqa: E402
from gregor.spark.avro_options import check_sink_columns, parse_columns  # noqa: E402
from gregor.spark.options import OptionError  # noqa: E402
from gregor.spark.sink_encode import encode_batches, encode_column  # noqa: E402

from .conftest import Registry  # noqa: E402

UTC = datetime.UTC

ORDER_JSON = {
    "type": "object",
    "properties": {
        "id": {"type": "integer", "minimum": 0},
        "name": {"type": ["string", "null"]},
        "at": {"type": "string", "format": "date-time"},
        "day": {"type": "string", "format": "date"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "pos": {"$ref": "#/definitions/Pos"},
        "attrs": {"type": "object", "additionalProperties": {"type": "number"}},
        "maybe": {"oneOf": [{"type": "null"}, {"$ref": "#/definitions/Pos"}]},
        "ok": {"type": "boolean"},
    },
    "required": ["id", "name"],
    "definitions": {
        "Pos": {
            "type": "object",
            "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
            "required": ["x"],
        }
    },
}

PROTO = """syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";

message Order {
  enum Status {
    NEW = 0;
    PAID = 1;
  }
  string id = 1;
  Item item = 2;
  repeated Item items = 3;
  map<string, int64> counts = 4;
  Status status = 5;
  google.protobuf.Timestamp at = 6;
  repeated sint32 nums = 7;
  optional string note = 8;
  uint64 big = 9;
  map<string, Item> by_sku = 10;
  bytes blob = 11;
  int32 small = 12;
  oneof pay {
    string card = 13;
    string cash = 14;
  }
  map<int32, Status> by_num = 15;
}
message Item {
  string sku = 1;
  double price = 2;
}
"""


def planned(registry: Registry, topic: str, fmt: str, schema: str, column: str = "value") -> Any:
    """The sink's column of ``topic`` as the sink plans it, ``schema`` registered first."""
    kind = {"json": "JSON", "protobuf": "PROTOBUF"}[fmt]
    client = SchemaRegistryClient({"url": registry.url})
    client.register_schema(f"{topic}-{column}", Schema(schema, kind))
    opts = {f"{column}Format": fmt, "schemaRegistry": registry.url, "topic": topic}
    (spec,) = parse_columns(opts, sink_topic=topic, sink=True)
    return spec


def decoded(module: Any, spec: TypedColumn, values: pa.Array) -> list[Any]:
    offsets = pa.array(range(len(values)), pa.int64())
    return module.decode_column(values, spec, "t", 0, offsets).to_pylist()


def test_json_rows_as_confluents_serializer_writes_them(registry: Registry) -> None:
    topic = f"json-out-{registry.topic}"
    spec = planned(registry, topic, "json", json.dumps(ORDER_JSON))
    client = SchemaRegistryClient({"url": registry.url})
    rows = [
        {
            "id": 1,
            "name": "Zoë ☃",
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
            "name": None,  # required and nullable: written as null
            "at": datetime.datetime(1969, 12, 31, 23, 59, 59, tzinfo=UTC),
            "day": None,
            "tags": [],
            "pos": None,
            "attrs": [],
            "maybe": {"x": -3.0, "y": None},
            "ok": False,
        },
        None,
    ]
    array = pa.array(rows, type=json_schema.arrow_type(json_schema.parse(spec.schema)))
    encoded = encode_column(array, spec)
    docs = [
        {
            "id": 1,
            "name": "Zoë ☃",
            "at": "2024-01-02T01:04:05.500000Z",
            "day": "2024-02-29",
            "tags": ["x", "y"],
            "pos": {"x": 1.0, "y": 2.5},
            "attrs": {"k": 1.0, "j": 2.5},
            "ok": True,
        },
        {
            "id": 2,
            "name": None,
            "at": "1969-12-31T23:59:59Z",
            "tags": [],
            "attrs": {},
            "maybe": {"x": -3.0},
            "ok": False,
        },
    ]
    ctx = SerializationContext(topic, MessageField.VALUE)
    serializer = JSONSerializer(
        json.dumps(ORDER_JSON),
        client,
        conf={"auto.register.schemas": False, "use.latest.version": True},
    )
    # byte for byte what confluent-kafka's serializer writes for the same documents
    assert encoded.to_pylist() == [serializer(d, ctx) for d in docs] + [None]
    assert (encoded[0].as_py() or b"")[:5] == b"\x00" + spec.schema_id.to_bytes(4, "big")
    reader = JSONDeserializer(
        None, schema_registry_client=SchemaRegistryClient({"url": registry.url})
    )
    assert [reader(v, ctx) for v in encoded.to_pylist()[:2]] == docs
    # the source reads back exactly what was written
    assert decoded(json_columns, spec, encoded) == rows


def test_json_values_spark_gives_as_other_types(registry: Registry) -> None:
    import decimal

    schema = {
        "type": "object",
        "properties": {
            "n": {"type": "integer"},
            "d": {"type": "number"},
            "blob": {"type": "string"},
            "local": {"type": "string", "format": "date-time"},
            "extra": {"type": "object", "additionalProperties": {"type": "integer"}},
        },
    }
    spec = planned(registry, f"json-types-{registry.topic}", "json", json.dumps(schema))
    array = pa.array(
        [
            {
                "n": decimal.Decimal("12"),
                "d": decimal.Decimal("0.25"),
                "blob": b"\x00\xff",
                "local": datetime.datetime(2024, 5, 6, 7, 8, 9, 10),  # no zone: UTC
                "extra": [("a", 1)],
                "more": "kept",  # not in the schema: additionalProperties allows it
            }
        ],
        pa.struct(
            [
                ("n", pa.decimal128(10, 0)),
                ("d", pa.decimal128(10, 2)),
                ("blob", pa.binary()),
                ("local", pa.timestamp("us")),
                ("extra", pa.map_(pa.string(), pa.int64())),
                ("more", pa.string()),
            ]
        ),
    )
    (value,) = encode_column(array, spec).to_pylist()
    assert value[5:] == (
        b'{"n":12,"d":0.25,"blob":"AP8=","local":"2024-05-06T07:08:09.000010Z",'
        b'"extra":{"a":1},"more":"kept"}'
    )


def test_json_rows_that_do_not_validate_fail(registry: Registry) -> None:
    topic = f"json-bad-{registry.topic}"
    spec = planned(registry, topic, "json", json.dumps(ORDER_JSON))
    target = json_schema.arrow_type(json_schema.parse(spec.schema))
    fit = f"the value column does not fit the subject {topic}-value version 1: "
    cases = {
        "-1 is less than the minimum of 0 (at id)": {"id": -1, "name": "a"},
        "None is not of type 'integer' (at id)": {"id": None, "name": "a"},
        "None is not of type 'number' (at pos/x)": {"id": 1, "name": "a", "pos": {"x": None}},
        "Out of range float values are not JSON compliant": {
            "id": 1,
            "name": "a",
            "attrs": [("k", float("nan"))],
        },
    }
    for reason, row in cases.items():
        with pytest.raises(OptionError, match=re.escape(fit + reason)):
            encode_column(pa.array([row], type=target), spec)


def test_protobuf_rows_read_by_confluents_deserializer(registry: Registry) -> None:
    from google.protobuf import message_factory

    topic = f"proto-out-{registry.topic}"
    spec = planned(registry, topic, "protobuf", PROTO)
    client = SchemaRegistryClient({"url": registry.url})
    # an independent message class: compiled from the registered text by the registry's client
    served = client.get_schema(spec.schema_id, fmt="serialized").schema_str
    order = message_factory.GetMessageClass(protobuf_schema.reader_message(served))
    message = protobuf_schema.reader_message(spec.schema)
    at = datetime.datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)
    full = {
        "id": "o1",
        "item": {"sku": "a", "price": 1.5},
        "items": [{"sku": "b", "price": 0.0}, {"sku": "c", "price": 2.0}],
        "counts": [("x", 1), ("y", -2)],
        "status": "PAID",
        "at": at,
        "nums": [-1, 0, 300],
        "note": "",  # present though empty: optional keeps presence
        "big": -1,  # uint64's bits as a signed long, as Spark reads it
        "by_sku": [("k", {"sku": "k", "price": 0.5})],
        "blob": b"\x00\x01",
        "small": -(2**31),
        "card": None,
        "cash": "eur",
        "by_num": [(7, "PAID"), (8, "9")],  # 9: a number the enum does not name
    }
    bare = {
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
        "blob": b"",
        "small": 0,
        "card": None,
        "cash": None,
        "by_num": [],
    }
    array = pa.array([full, bare, None], type=protobuf_schema.arrow_type(message))
    encoded = encode_column(array, spec)
    header = b"\x00" + spec.schema_id.to_bytes(4, "big") + b"\x00"  # the first message: [0]
    assert all((v or b"").startswith(header) for v in encoded.to_pylist()[:2])
    assert encoded[2].as_py() is None

    expected = order(
        id="o1",
        item={"sku": "a", "price": 1.5},
        items=[{"sku": "b"}, {"sku": "c", "price": 2.0}],
        counts={"x": 1, "y": -2},
        status=1,
        nums=[-1, 0, 300],
        note="",
        big=2**64 - 1,
        by_sku={"k": {"sku": "k", "price": 0.5}},
        blob=b"\x00\x01",
        small=-(2**31),
        cash="eur",
        by_num={7: 1, 8: 9},
    )
    expected.at.FromDatetime(at)
    ctx = SerializationContext(topic, MessageField.VALUE)
    reader = ProtobufDeserializer(order, {"use.deprecated.format": False})
    got = [reader(v, ctx) for v in encoded.to_pylist()[:2]]
    assert got == [expected, order(id="o2")]
    assert got[0].HasField("note") and not got[1].HasField("note")
    assert got[0].WhichOneof("pay") == "cash"
    assert (encoded[1].as_py() or b"")[6:] == order(id="o2").SerializeToString()

    back = decoded(protobuf_columns, spec, encoded)
    for row in back[:2]:
        for name in ("counts", "by_sku", "by_num"):
            row[name].sort()
    assert back == [full, bare, None]


def test_protobuf_rows_that_do_not_fit_fail(registry: Registry) -> None:
    topic = f"proto-bad-{registry.topic}"
    spec = planned(registry, topic, "protobuf", PROTO)
    target = protobuf_schema.arrow_type(protobuf_schema.reader_message(spec.schema))
    fit = f"the value column does not fit the subject {topic}-value version 1: "
    cases = {
        "status: the enum shop.Order.Status has no value 'LOST'": {"status": "LOST"},
        "by_num[1]: the enum shop.Order.Status has no value 'GONE'": {"by_num": [(1, "GONE")]},
        "nums[1]: an element of a repeated field cannot be null in Protobuf": {"nums": [1, None]},
        "items[0]: an element of a repeated field cannot be null in Protobuf": {"items": [None]},
        "by_sku['k']: a map value cannot be null in Protobuf": {"by_sku": [("k", None)]},
        "cash: the oneof pay has card set already": {"card": "visa", "cash": "eur"},
    }
    for reason, row in cases.items():
        with pytest.raises(OptionError, match=re.escape(fit + reason)):
            encode_column(pa.array([row], type=target), spec)
    # a long column into an int32 field: protobuf's own range check, named by the field
    with pytest.raises(OptionError, match=re.escape(fit + "small: Value out of range: 2147483648")):
        encode_column(pa.array([{"small": 2**31}], pa.struct([("small", pa.int64())])), spec)


def test_keys_and_values_of_a_batch(registry: Registry) -> None:
    topic = f"keyed-{registry.topic}"
    key_schema = {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}
    key = planned(registry, topic, "json", json.dumps(key_schema), column="key")
    value = planned(registry, topic, "protobuf", PROTO)
    batch = pa.RecordBatch.from_pydict(
        {
            "key": pa.array([{"id": 5}], pa.struct([("id", pa.int64())])),
            "value": pa.array(
                [{"id": "o5", "status": "PAID"}],
                pa.struct([("id", pa.string()), ("status", pa.string())]),
            ),
            "partition": pa.array([0], pa.int32()),
        }
    )
    (out,) = encode_batches(iter([batch]), (key, value))
    assert out.schema.names == ["key", "value", "partition"]
    assert out.schema.field("key").type == pa.binary() == out.schema.field("value").type
    assert out.column(0).to_pylist() == [b"\x00" + key.schema_id.to_bytes(4, "big") + b'{"id":5}']
    assert decoded(protobuf_columns, value, out.column(1))[0]["status"] == "PAID"
    assert out.column(2).to_pylist() == [0]


def test_the_sink_checks_struct_columns_at_planning(registry: Registry) -> None:
    topic = f"planned-{registry.topic}"
    as_json = planned(registry, topic, "json", json.dumps(ORDER_JSON))
    as_proto = planned(registry, f"{topic}-p", "protobuf", PROTO)

    def schema(value: Any) -> StructType:
        return StructType([StructField("value", value)])

    fine = schema(StructType([StructField("id", LongType()), StructField("name", StringType())]))
    assert check_sink_columns(fine, (as_json,)).simpleString() == "struct<value:binary>"
    refused = {
        f"the value column lacks ['name'] of subject {topic}-value version 1": (
            as_json,
            schema(StructType([StructField("id", LongType())])),
        ),
        f"valueFormat 'json' writes a struct column as the object of subject {topic}-value; "
        "the value column is string": (as_json, schema(StringType())),
        f"the value column has ['nope'], which the message of subject {topic}-p-value version 1 "
        "lacks": (as_proto, schema(StructType([StructField("nope", StringType())]))),
    }
    for message, (spec, input_schema) in refused.items():
        with pytest.raises(OptionError, match=re.escape(message)):
            check_sink_columns(input_schema, (spec,))
