"""Typed Avro columns from the data source (``valueFormat`` / ``keyFormat`` ``avro``): records
written by confluent-kafka's Avro serializer through a schema registry read back as struct
columns, exactly, across schema versions within one read, and malformed records as Spark's
``from_avro`` treats them (FAILFAST fails the query naming the offset, PERMISSIVE reads null)."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from gregor.testing import BrokerProcess

V1 = {
    "type": "record",
    "name": "Order",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "item", "type": "string"},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
    ],
}
V2 = {
    "type": "record",
    "name": "Order",
    "fields": [
        *V1["fields"],  # type: ignore[list-item]
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "qty", "type": "double", "default": 1.5},
    ],
}
KEY = {"type": "record", "name": "OrderKey", "fields": [{"name": "region", "type": "string"}]}


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
    url: str,
    topic: str,
    schema: dict[str, Any],
    values: list[Any],
    key_schema: dict[str, Any] | None = None,
    keys: list[Any] | None = None,
) -> None:
    client = SchemaRegistryClient({"url": url})
    ser = AvroSerializer(client, json.dumps(schema))
    key_ser = AvroSerializer(client, json.dumps(key_schema)) if key_schema else None
    p = Producer({"bootstrap.servers": bootstrap})
    for i, v in enumerate(values):
        raw = v if isinstance(v, bytes) else ser(v, SerializationContext(topic, MessageField.VALUE))
        key = None
        if key_ser is not None and keys is not None:
            key = key_ser(keys[i], SerializationContext(topic, MessageField.KEY))
        p.produce(topic, value=raw, key=key, partition=0)
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


def test_values_across_schema_versions(spark: Any, served: tuple[str, str]) -> None:
    bootstrap, url = served
    topic = f"orders-{uuid.uuid4().hex[:8]}"
    v1 = [{"id": i, "item": f"item-{i}", "tags": ["a"] * i} for i in range(3)]
    produce(bootstrap, url, topic, V1, v1)
    v2 = [
        {"id": 10, "item": "x" * 300, "tags": [], "note": "late", "qty": 2.0},
        {"id": 11, "item": "y", "tags": ["b", "c"], "note": None, "qty": 0.5},
    ]
    produce(bootstrap, url, topic, V2, v2)

    df = read(spark, bootstrap, topic, valueFormat="avro", schemaRegistry=url)
    assert df.schema["value"].dataType == StructType(
        [
            StructField("id", LongType()),
            StructField("item", StringType()),
            StructField("tags", ArrayType(StringType())),
            StructField("note", StringType()),
            StructField("qty", DoubleType()),
        ]
    )
    assert df.schema["key"].dataType == BinaryType()
    got = [(r.offset, r.value.asDict(recursive=True)) for r in df.orderBy("offset").collect()]
    assert got == [
        *((i, {**v, "note": None, "qty": 1.5}) for i, v in enumerate(v1)),
        (3, v2[0]),
        (4, v2[1]),
    ]
    # Pinned to version 1: the later records read without the fields version 1 lacks.
    df = read(
        spark, bootstrap, topic, valueFormat="avro", schemaRegistry=url, valueSchemaVersion="1"
    )
    assert [f.name for f in df.schema["value"].dataType.fields] == ["id", "item", "tags"]
    got = [r.value.asDict(recursive=True) for r in df.orderBy("offset").collect()]
    assert got == [*v1, *({k: v[k] for k in ("id", "item", "tags")} for v in v2)]
    # Typed columns are columns: filter and project in Spark.
    assert [r.id for r in df.where("value.id >= 2").select("value.id").collect()] == [2, 10, 11]


def test_keys_and_values(spark: Any, served: tuple[str, str]) -> None:
    bootstrap, url = served
    topic = f"keyed-{uuid.uuid4().hex[:8]}"
    keys = [{"region": r} for r in ("eu", "us", "eu")]
    values = [{"id": i, "item": "i", "tags": []} for i in range(3)]
    produce(bootstrap, url, topic, V1, values, KEY, keys)
    df = read(spark, bootstrap, topic, valueFormat="avro", keyFormat="avro", schemaRegistry=url)
    got = [
        (r.key.region, r.value.id) for r in df.orderBy("offset").select("key", "value").collect()
    ]
    assert got == [("eu", 0), ("us", 1), ("eu", 2)]


def test_malformed_records(spark: Any, served: tuple[str, str]) -> None:
    bootstrap, url = served
    topic = f"bad-{uuid.uuid4().hex[:8]}"
    good = {"id": 1, "item": "ok", "tags": []}
    # not a frame, an unknown schema id, a truncated datum, then a good record
    unknown = b"\x00\x00\x01\x86\xa0" + b"\x02"
    produce(bootstrap, url, topic, V1, [good])
    truncated = SerializationContext(topic, MessageField.VALUE)
    whole = AvroSerializer(SchemaRegistryClient({"url": url}), json.dumps(V1))(
        {"id": 2, "item": "z" * 50, "tags": []}, truncated
    )
    assert whole is not None
    produce(bootstrap, url, topic, V1, [b"plain text", unknown, whole[:-20], good])

    df = read(spark, bootstrap, topic, valueFormat="avro", schemaRegistry=url, mode="PERMISSIVE")
    got = [(r.offset, r.value and r.value.id) for r in df.orderBy("offset").collect()]
    assert got == [(0, 1), (1, None), (2, None), (3, None), (4, 1)]

    with pytest.raises(Exception, match=rf"Malformed records .* {topic}-0 offset 1\b"):
        read(spark, bootstrap, topic, valueFormat="avro", schemaRegistry=url).collect()


@pytest.mark.parametrize(
    ("opts", "message"),
    [
        ({"valueFormat": "xml"}, "valueFormat must be binary, avro, json or protobuf"),
        ({"valueFormat": "avro", "schemaRegistry": ""}, "needs the option schemaRegistry"),
        ({"valueFormat": "avro", "valueSubject": "nope-value"}, "Subject 'nope-value' not found"),
        ({"valueSubject": "x"}, "needs valueFormat 'avro'"),
        ({"valueFormat": "avro", "mode": "DROPMALFORMED"}, "mode must be FAILFAST or PERMISSIVE"),
    ],
)
def test_options_refused_at_planning(
    spark: Any, served: tuple[str, str], opts: dict[str, str], message: str
) -> None:
    bootstrap, url = served
    with pytest.raises(Exception, match=re.escape(message)):
        read(spark, bootstrap, "t", **{"schemaRegistry": url, **opts}).schema  # noqa: B018


def test_the_sink_encodes_struct_columns(spark: Any, served: tuple[str, str]) -> None:
    from confluent_kafka import Consumer
    from confluent_kafka.schema_registry.avro import AvroDeserializer

    bootstrap, url = served
    topic = f"written-{uuid.uuid4().hex[:8]}"
    client = SchemaRegistryClient({"url": url})
    from confluent_kafka.schema_registry import Schema

    schema_id = client.register_schema(f"{topic}-value", Schema(json.dumps(V2), "AVRO"))
    rows = [(i, f"item-{i}", ["t"] * (i % 3), None if i % 2 else "n", i / 4) for i in range(50)]
    df = spark.createDataFrame(
        rows, "id long, item string, tags array<string>, note string, qty double"
    ).selectExpr("struct(id, item, tags, note, qty) AS value")
    (
        df.write.format("gregor")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .option("valueFormat", "avro")
        .option("schemaRegistry", url)
        .save()
    )
    expected = [
        {"id": i, "item": item, "tags": tags, "note": note, "qty": qty}
        for i, item, tags, note, qty in rows
    ]
    # Confluent's deserializer reads what the sink wrote, framed with the registered id.
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": topic, "auto.offset.reset": "earliest"}
    )
    de = AvroDeserializer(client)
    got = []
    try:
        consumer.subscribe([topic])
        while len(got) < len(rows):
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            assert msg.value()[:5] == b"\x00" + schema_id.to_bytes(4, "big")
            got.append(de(msg.value(), SerializationContext(topic, MessageField.VALUE)))
    finally:
        consumer.close()
    assert sorted(got, key=lambda v: v["id"]) == expected
    # ... and so does the source.
    back = read(spark, bootstrap, topic, valueFormat="avro", schemaRegistry=url)
    assert (
        sorted((r.value.asDict(recursive=True) for r in back.collect()), key=lambda v: v["id"])
        == expected
    )

    missing = spark.createDataFrame([(1,)], "id long").selectExpr("struct(id) AS value")
    with pytest.raises(Exception, match=r"the value column lacks \['item', 'tags'\]"):
        (
            missing.write.format("gregor")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", topic)
            .option("valueFormat", "avro")
            .option("schemaRegistry", url)
            .save()
        )
