"""Typed columns beyond flat Avro records, read (and written) through the data source: Avro maps
and unions of several types (Spark's ``from_avro`` shapes), JSON Schema values and Protobuf
values, produced by confluent-kafka's serializers through Gregor's schema registry, read back
exactly, with Spark's FAILFAST and PERMISSIVE modes for a corrupt payload; and the sink writing
JSON Schema and Protobuf keys and values that confluent-kafka's deserializers read exactly. One
broker with its registry for the module; the columns' decoders and encoders are tested without
Spark in tests/schema_registry/test_typed_columns_decode.py and test_typed_columns_encode.py."""

from __future__ import annotations

import datetime
import json
import re
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.serialization import MessageField, SerializationContext

from gregor.testing import BrokerProcess


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[str, str]]:
    """A broker with the schema registry beside it: (bootstrap servers, registry URL)."""
    with BrokerProcess(config={"schema.registry.listener": "http://127.0.0.1:0"}) as b:
        m = None
        while m is None:
            m = re.search(r"event=schema_registry\.started url=(\S+)", b.read_log())
            assert b.proc is not None and b.proc.poll() is None, b.read_log()[-2000:]
            if m is None:
                time.sleep(0.05)
        yield b.bootstrap_servers, m.group(1)


def produce(
    bootstrap: str,
    topic: str,
    serialize: Callable[[Any, SerializationContext], Any],
    values: list[Any],
) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    ctx = SerializationContext(topic, MessageField.VALUE)
    for v in values:
        p.produce(topic, value=v if isinstance(v, bytes) else serialize(v, ctx), partition=0)
    assert p.flush(30) == 0


def read(spark: Any, bootstrap: str, topic: str, **opts: str) -> Any:
    r = (
        spark.read.format("gregor")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
    )
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load()


def rows(df: Any) -> list[Any]:
    return [r.value and r.value.asDict(recursive=True) for r in df.orderBy("offset").collect()]


AVRO = {
    "type": "record",
    "name": "Reading",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "counts", "type": {"type": "map", "values": "long"}},
        {
            "name": "labels",
            "type": [
                "null",
                {"type": "map", "values": {"type": "array", "items": "string"}},
            ],
        },
        {
            "name": "reading",
            "type": [
                "null",
                "string",
                "double",
                {"type": "enum", "name": "Level", "symbols": ["LOW", "HIGH"]},
                {"type": "record", "name": "Pair", "fields": [{"name": "a", "type": "int"}]},
            ],
        },
        {"name": "size", "type": ["int", "long"]},
    ],
}


def test_avro_maps_and_unions(spark: Any, served: tuple[str, str]) -> None:
    from confluent_kafka.schema_registry.avro import AvroSerializer

    bootstrap, url = served
    topic = f"avro-mu-{uuid.uuid4().hex[:8]}"
    ser = AvroSerializer(SchemaRegistryClient({"url": url}), json.dumps(AVRO))
    values = [
        {"id": 0, "counts": {"a": 1, "b": 2}, "labels": None, "reading": "x", "size": 1},
        {"id": 1, "counts": {}, "labels": {"k": ["v", "w"]}, "reading": 2.5, "size": 2**40},
        {"id": 2, "counts": {}, "labels": {}, "reading": ("Level", "HIGH"), "size": -3},
        {"id": 3, "counts": {"z": -1}, "labels": None, "reading": {"a": 7}, "size": 0},
        {"id": 4, "counts": {}, "labels": None, "reading": None, "size": 0},
    ]
    produce(bootstrap, topic, ser, [*values, b"\x00\x00\x00\x00\x01\x02"])
    df = read(spark, bootstrap, topic, valueFormat="avro", schemaRegistry=url, mode="PERMISSIVE")
    assert df.schema["value"].dataType.simpleString() == (
        "struct<id:bigint,counts:map<string,bigint>,labels:map<string,array<string>>,"
        "reading:struct<member0:string,member1:double,member2:string,member3:struct<a:int>>,"
        "size:bigint>"
    )
    member = {"member0": None, "member1": None, "member2": None, "member3": None}
    assert rows(df) == [
        {**values[0], "reading": {**member, "member0": "x"}},
        {**values[1], "reading": {**member, "member1": 2.5}},
        {**values[2], "reading": {**member, "member2": "HIGH"}},
        {**values[3], "reading": {**member, "member3": {"a": 7}}},
        values[4],
        None,  # the corrupt payload, read as null
    ]
    with pytest.raises(Exception, match=rf"Malformed records .* {topic}-0 offset 5\b"):
        read(spark, bootstrap, topic, valueFormat="avro", schemaRegistry=url).collect()

    # The sink writes the same shapes back as the registered schema's maps and union branches.
    out = f"avro-mu-out-{uuid.uuid4().hex[:8]}"
    SchemaRegistryClient({"url": url}).register_schema(
        f"{out}-value", Schema(json.dumps(AVRO), "AVRO")
    )
    (
        df.where("value IS NOT NULL")
        .select("value")
        .write.format("gregor")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", out)
        .option("valueFormat", "avro")
        .option("schemaRegistry", url)
        .save()
    )
    back = read(spark, bootstrap, out, valueFormat="avro", schemaRegistry=url)
    assert sorted(rows(back), key=lambda v: v["id"]) == rows(df)[:5]


#: The value with its timestamp as text (the session's time zone is UTC; Spark's datetime
#: objects are the process's local time); a null value stays null.
AT_UTC = "IF(value IS NULL, NULL, struct(value.*, CAST(value.at AS STRING) AS at_utc)) AS value"

JSON_SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "name": {"type": ["string", "null"]},
        "at": {"type": "string", "format": "date-time"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "pos": {
            "type": "object",
            "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
        },
        "stock": {"type": "object", "additionalProperties": {"type": "integer"}},
    },
    "required": ["id"],
}


def test_json_schema_values(spark: Any, served: tuple[str, str]) -> None:
    from confluent_kafka.schema_registry.json_schema import JSONSerializer

    bootstrap, url = served
    topic = f"json-{uuid.uuid4().hex[:8]}"
    ser = JSONSerializer(json.dumps(JSON_SCHEMA), SchemaRegistryClient({"url": url}))
    values = [
        {
            "id": 1,
            "name": "a",
            "at": "2024-05-06T07:08:09Z",
            "tags": ["x", "y"],
            "pos": {"x": 1.5, "y": -2},
            "stock": {"eu": 3, "us": 0},
        },
        {"id": 2, "name": None, "tags": [], "stock": {}},
        {"id": 3},
    ]
    produce(bootstrap, topic, ser, values)
    registered = SchemaRegistryClient({"url": url}).get_latest_version(f"{topic}-value")
    corrupt = b"\x00" + registered.schema_id.to_bytes(4, "big") + b'{"id": '
    produce(bootstrap, topic, ser, [corrupt])

    df = read(spark, bootstrap, topic, valueFormat="json", schemaRegistry=url, mode="PERMISSIVE")
    assert df.schema["value"].dataType.simpleString() == (
        "struct<id:bigint,name:string,at:timestamp,tags:array<string>,"
        "pos:struct<x:double,y:double>,stock:map<string,bigint>>"
    )
    got = rows(df.selectExpr("offset", AT_UTC))
    none = {"name": None, "at": None, "at_utc": None, "tags": None, "pos": None, "stock": None}
    assert got == [
        {
            **values[0],
            "at": got[0]["at"],
            "at_utc": "2024-05-06 07:08:09",
            "pos": {"x": 1.5, "y": -2.0},
        },
        {**none, "id": 2, "tags": [], "stock": {}},
        {**none, "id": 3},
        None,  # the corrupt payload, read as null
    ]
    with pytest.raises(Exception, match=rf"Malformed records .* {topic}-0 offset 3\b"):
        read(spark, bootstrap, topic, valueFormat="json", schemaRegistry=url).collect()
    with pytest.raises(Exception, match=r"subject '.*-value' version 1 is a JSON schema"):
        read(spark, bootstrap, topic, valueFormat="avro", schemaRegistry=url).schema  # noqa: B018


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
}
message Item {
  string sku = 1;
  double price = 2;
}
"""


def test_protobuf_values(spark: Any, served: tuple[str, str]) -> None:
    import datetime

    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from google.protobuf import message_factory

    from gregor.columns.protobuf_schema import reader_message

    bootstrap, url = served
    topic = f"proto-{uuid.uuid4().hex[:8]}"
    client = SchemaRegistryClient({"url": url})
    schema_id = client.register_schema(f"{topic}-value", Schema(PROTO, "PROTOBUF"))
    # the message class from the registry's compiled descriptor
    served_schema = client.get_schema(schema_id, fmt="serialized").schema_str
    order = message_factory.GetMessageClass(reader_message(served_schema))
    ser = ProtobufSerializer(
        order,
        client,
        {
            "use.deprecated.format": False,
            "auto.register.schemas": False,
            "use.latest.version": True,
        },
    )
    first = order(
        id="o1",
        item={"sku": "a", "price": 1.5},
        items=[{"sku": "b", "price": 2.0}, {"sku": "c"}],
        counts={"x": 1, "y": -2},
        status=1,
    )
    first.at.FromDatetime(datetime.datetime(2024, 5, 6, 7, 8, 9))
    bare = order(id="o2")
    corrupt = b"\x00" + schema_id.to_bytes(4, "big") + b"\x00\x0a\xff"
    produce(bootstrap, topic, ser, [first, bare, corrupt])

    df = read(
        spark, bootstrap, topic, valueFormat="protobuf", schemaRegistry=url, mode="PERMISSIVE"
    )
    assert df.schema["value"].dataType.simpleString() == (
        "struct<id:string,item:struct<sku:string,price:double>,"
        "items:array<struct<sku:string,price:double>>,counts:map<string,bigint>,status:string,"
        "at:timestamp>"
    )
    got = rows(df.selectExpr("offset", AT_UTC))
    at = got[0]["at"]
    assert got == [
        {
            "id": "o1",
            "item": {"sku": "a", "price": 1.5},
            "items": [{"sku": "b", "price": 2.0}, {"sku": "c", "price": 0.0}],
            "counts": {"x": 1, "y": -2},
            "status": "PAID",
            "at": at,
            "at_utc": "2024-05-06 07:08:09",
        },
        {
            "id": "o2",
            "item": None,
            "items": [],
            "counts": {},
            "status": "NEW",
            "at": None,
            "at_utc": None,
        },
        None,  # the corrupt payload, read as null
    ]
    with pytest.raises(Exception, match=rf"Malformed records .* {topic}-0 offset 2\b"):
        read(spark, bootstrap, topic, valueFormat="protobuf", schemaRegistry=url).collect()


def consume(bootstrap: str, topic: str, n: int) -> list[tuple[bytes | None, bytes | None]]:
    """The first ``n`` records' (key, value) of ``topic``, read with confluent-kafka."""
    from confluent_kafka import Consumer

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": topic, "auto.offset.reset": "earliest"}
    )
    got: list[tuple[bytes | None, bytes | None]] = []
    try:
        consumer.subscribe([topic])
        for _ in range(300):
            if len(got) >= n:
                break
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            got.append((msg.key(), msg.value()))
    finally:
        consumer.close()
    assert len(got) == n, got
    return got


def write(df: Any, bootstrap: str, topic: str, **opts: str) -> None:
    w = (
        df.write.format("gregor")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
    )
    for k, v in opts.items():
        w = w.option(k, v)
    w.save()


def test_the_sink_writes_json_and_protobuf(spark: Any, served: tuple[str, str]) -> None:
    """``valueFormat`` / ``keyFormat`` ``json`` and ``protobuf`` on the sink: the rows written in
    the subjects' registered schemas, read exactly by confluent-kafka's deserializers (and by the
    source); a row that does not fit fails the write naming the column and the reason."""
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
    from google.protobuf import message_factory

    from gregor.columns.protobuf_schema import reader_message

    bootstrap, url = served
    client = SchemaRegistryClient({"url": url})
    key_schema = {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}

    # JSON Schema keys and values
    topic = f"json-out-{uuid.uuid4().hex[:8]}"
    client.register_schema(f"{topic}-key", Schema(json.dumps(key_schema), "JSON"))
    value_id = client.register_schema(f"{topic}-value", Schema(json.dumps(JSON_SCHEMA), "JSON"))
    df = spark.range(3).selectExpr(
        "struct(id) AS key",
        "struct(id, IF(id = 1, NULL, concat('n', id)) AS name,"
        " TIMESTAMP '2024-05-06 07:08:09.5' + make_interval(0, 0, 0, 0, 0, 0, id) AS at,"
        " array('x', CAST(id AS STRING)) AS tags, named_struct('x', id / 2, 'y', -1.5D) AS pos,"
        " map('eu', id) AS stock) AS value",
    )
    write(df, bootstrap, topic, keyFormat="json", valueFormat="json", schemaRegistry=url)
    de = JSONDeserializer(None, schema_registry_client=SchemaRegistryClient({"url": url}))
    got = consume(bootstrap, topic, 3)
    assert all((v or b"")[:5] == b"\x00" + value_id.to_bytes(4, "big") for _, v in got)
    key_ctx = SerializationContext(topic, MessageField.KEY)
    value_ctx = SerializationContext(topic, MessageField.VALUE)
    assert sorted(
        ((de(k, key_ctx), de(v, value_ctx)) for k, v in got), key=lambda kv: kv[0]["id"]
    ) == [
        (
            {"id": i},
            {
                "id": i,
                **({} if i == 1 else {"name": f"n{i}"}),  # a null left out, as to_json does
                "at": f"2024-05-06T07:08:{9 + i:02d}.500000Z",
                "tags": ["x", str(i)],
                "pos": {"x": i / 2, "y": -1.5},
                "stock": {"eu": i},
            },
        )
        for i in range(3)
    ]
    back = read(spark, bootstrap, topic, valueFormat="json", schemaRegistry=url)
    assert sorted(rows(back.selectExpr("offset", AT_UTC)), key=lambda v: v["id"]) == sorted(
        rows(df.selectExpr("0 AS offset", "value").selectExpr("offset", AT_UTC)),
        key=lambda v: v["id"],
    )

    # Protobuf values
    ptopic = f"proto-out-{uuid.uuid4().hex[:8]}"
    schema_id = client.register_schema(f"{ptopic}-value", Schema(PROTO, "PROTOBUF"))
    served_schema = client.get_schema(schema_id, fmt="serialized").schema_str
    order = message_factory.GetMessageClass(reader_message(served_schema))
    pdf = spark.range(2).selectExpr(
        "struct(concat('o', id) AS id, IF(id = 0, named_struct('sku', 'a', 'price', 1.5D), NULL)"
        " AS item, array(named_struct('sku', 'b', 'price', 2.0D)) AS items,"
        " map('x', id, 'y', -2L) AS counts, IF(id = 0, 'NEW', 'PAID') AS status,"
        " TIMESTAMP '2024-05-06 07:08:09.123456' AS at) AS value"
    )
    write(pdf, bootstrap, ptopic, valueFormat="protobuf", schemaRegistry=url)
    pde = ProtobufDeserializer(order, {"use.deprecated.format": False})
    pctx = SerializationContext(ptopic, MessageField.VALUE)
    header = b"\x00" + schema_id.to_bytes(4, "big") + b"\x00"
    written = [v for _, v in consume(bootstrap, ptopic, 2)]
    assert all((v or b"").startswith(header) for v in written)
    expected = []
    for i in range(2):
        m = order(
            id=f"o{i}",
            items=[{"sku": "b", "price": 2.0}],
            counts={"x": i, "y": -2},
            status=i,
        )
        if i == 0:
            m.item.sku, m.item.price = "a", 1.5
        m.at.FromDatetime(datetime.datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=datetime.UTC))
        expected.append(m)
    assert sorted((pde(v, pctx) for v in written), key=lambda m: m.id) == expected

    # rows that do not fit their schema fail the write, naming the column and the reason
    bad = spark.range(1).selectExpr("struct(CAST(NULL AS BIGINT) AS id) AS value")
    with pytest.raises(
        Exception,
        match=re.escape(
            f"the value column does not fit the subject {topic}-value version 1: "
            "None is not of type 'integer' (at id)"
        ),
    ):
        write(bad, bootstrap, topic, valueFormat="json", schemaRegistry=url)
    lost = spark.range(1).selectExpr("struct('LOST' AS status) AS value")
    with pytest.raises(
        Exception,
        match=re.escape(
            f"the value column does not fit the subject {ptopic}-value version 1: "
            "status: the enum shop.Order.Status has no value 'LOST'"
        ),
    ):
        write(lost, bootstrap, ptopic, valueFormat="protobuf", schemaRegistry=url)
