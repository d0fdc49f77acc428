"""confluent-kafka's SchemaRegistryClient and its Avro, JSON Schema and Protobuf serializers
against the registry, round-tripping records through a real Gregor broker with
confluent-kafka's producer and consumer."""

from __future__ import annotations

import json
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from gregor.schema_registry.formats.protobuf import ProtobufSchema
from gregor.testing import InProcessBroker

from .conftest import Registry, avro_record

pytestmark = pytest.mark.interop


def produce(broker: InProcessBroker, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "acks": "all"})
    for v in values:
        producer.produce(topic, value=v)
    assert producer.flush(60) == 0


def consume(broker: InProcessBroker, topic: str, count: int) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": f"g-{topic}",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        out: list[bytes] = []
        while len(out) < count:
            msg = consumer.poll(5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            out.append(msg.value())
        return out
    finally:
        consumer.close()


def test_avro_serializer_round_trip_and_evolution(
    broker: InProcessBroker, registry: Registry
) -> None:
    client = SchemaRegistryClient({"url": registry.url})
    v1 = avro_record("com.acme.Order", ("id", "string"), ("qty", "int"))
    v2 = avro_record(
        "com.acme.Order", ("id", "string"), ("qty", "long"), ("note", "string", "none")
    )
    topic = f"orders-avro-{registry.topic}"
    ctx = SerializationContext(topic, MessageField.VALUE)
    records = [{"id": f"o{i}", "qty": i} for i in range(5)]
    produce(broker, topic, [AvroSerializer(client, v1)(r, ctx) for r in records])
    produce(
        broker, topic, [AvroSerializer(client, v2)({"id": "o5", "qty": 2**40, "note": "big"}, ctx)]
    )
    raw = consume(broker, topic, 6)
    assert [int.from_bytes(r[1:5], "big") for r in raw] == [1] * 5 + [2]
    # a fresh client: every schema comes from the registry
    reader = AvroDeserializer(SchemaRegistryClient({"url": registry.url}))
    assert [reader(r, ctx) for r in raw] == records + [{"id": "o5", "qty": 2**40, "note": "big"}]
    # a v2 reader reads v1 records with the default filled in
    evolved = AvroDeserializer(SchemaRegistryClient({"url": registry.url}), v2)
    assert evolved(raw[0], ctx) == {"id": "o0", "qty": 0, "note": "none"}
    latest = client.get_latest_version(f"{topic}-value")
    assert (latest.version, latest.schema_id) == (2, 2)
    assert client.get_subjects() == [f"{topic}-value"]
    # an incompatible schema: the serializer's registration fails with the registry's 409
    with pytest.raises(SchemaRegistryError) as err:
        AvroSerializer(client, avro_record("com.acme.Order", ("id", "int")))({"id": 1}, ctx)
    assert err.value.http_status_code == 409 and err.value.error_code == 409


def test_schema_registry_client_calls(registry: Registry) -> None:
    client = SchemaRegistryClient({"url": registry.url})
    schema = Schema(avro_record("R", ("a", "int")), "AVRO")
    sid = client.register_schema("calls", schema)
    assert client.get_schema(sid).schema_str == json.dumps(
        json.loads(schema.schema_str), separators=(",", ":")
    )
    assert client.lookup_schema("calls", schema).version == 1
    assert client.get_versions("calls") == [1]
    assert client.get_schema_types() == ["JSON", "PROTOBUF", "AVRO"]
    assert (
        client.test_compatibility("calls", Schema(avro_record("R", ("a", "long")), "AVRO")) is True
    )
    assert (
        client.test_compatibility("calls", Schema(avro_record("R", ("a", "string")), "AVRO"))
        is False
    )
    assert client.set_compatibility("calls", "FULL") == {"compatibility": "FULL"}
    assert client.get_compatibility("calls") == "FULL"
    from confluent_kafka.schema_registry import ConfigCompatibilityLevel, ServerConfig

    client.set_config("calls", ServerConfig(compatibility_level=ConfigCompatibilityLevel.FORWARD))
    assert client.get_config("calls").compatibility_level == ConfigCompatibilityLevel.FORWARD
    assert client.update_mode("calls", "READONLY") == "READONLY"
    assert client.get_mode("calls") == "READONLY"
    assert client.delete_mode("calls") == "READONLY"
    assert client.get_contexts() == ["."]
    assert client.delete_version("calls", 1) == 1
    assert client.delete_subject("calls", permanent=True) == [1]
    with pytest.raises(SchemaRegistryError) as err:
        client.get_latest_version("calls")
    assert err.value.error_code == 40401


def test_json_serializer_round_trip(broker: InProcessBroker, registry: Registry) -> None:
    client = SchemaRegistryClient({"url": registry.url})
    schema = json.dumps(
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "title": "Reading",
            "type": "object",
            "properties": {"sensor": {"type": "string"}, "value": {"type": "number"}},
            "required": ["sensor", "value"],
        }
    )
    topic = f"readings-json-{registry.topic}"
    ctx = SerializationContext(topic, MessageField.VALUE)
    serializer = JSONSerializer(schema, client)
    records: list[dict[str, Any]] = [{"sensor": f"s{i}", "value": i / 2} for i in range(4)]
    produce(broker, topic, [serializer(r, ctx) for r in records])
    reader = JSONDeserializer(
        None, schema_registry_client=SchemaRegistryClient({"url": registry.url})
    )
    assert [reader(r, ctx) for r in consume(broker, topic, 4)] == records
    assert client.get_latest_version(f"{topic}-value").schema.schema_type == "JSON"


COMMON = 'syntax = "proto3";\npackage acme;\nmessage Money {\n  string currency = 1;\n  int64 units = 2;\n}\n'
ORDER = (
    'syntax = "proto3";\npackage acme;\nimport "acme/common.proto";\n'
    "message Order {\n  string id = 1;\n  acme.Money price = 2;\n  repeated string tags = 3;\n"
    "  map<string, int32> counts = 4;\n}\n"
)


def _message_class() -> Any:
    from google.protobuf import descriptor_pool, message_factory

    common = ProtobufSchema.parse(COMMON).file
    common.name = "acme/common.proto"
    from gregor.schema_registry.formats.base import Dependency

    order = ProtobufSchema.parse(ORDER, (Dependency("acme/common.proto", "PROTOBUF", COMMON),)).file
    order.name = "acme/order.proto"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(common)
    pool.Add(order)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("acme.Order"))


def test_protobuf_serializer_round_trip_with_a_reference(
    broker: InProcessBroker, registry: Registry
) -> None:
    order_cls = _message_class()
    client = SchemaRegistryClient({"url": registry.url})
    topic = f"orders-proto-{registry.topic}"
    ctx = SerializationContext(topic, MessageField.VALUE)
    serializer = ProtobufSerializer(order_cls, client, {"use.deprecated.format": False})
    messages = []
    for i in range(3):
        m = order_cls(id=f"o{i}", tags=["a", str(i)])
        m.price.currency = "EUR"
        m.price.units = 100 * i
        m.counts["x"] = i
        messages.append(m)
    produce(broker, topic, [serializer(m, ctx) for m in messages])
    # the dependency became its own subject, referenced by the order's schema
    assert sorted(client.get_subjects()) == ["acme/common.proto", f"{topic}-value"]
    latest = client.get_latest_version(f"{topic}-value")
    assert [(r.name, r.subject, r.version) for r in latest.schema.references] == [
        ("acme/common.proto", "acme/common.proto", 1)
    ]
    assert "message Order" in latest.schema.schema_str  # stored as .proto text
    deserializer = ProtobufDeserializer(
        order_cls, {"use.deprecated.format": False}, SchemaRegistryClient({"url": registry.url})
    )
    got = [deserializer(r, ctx) for r in consume(broker, topic, 3)]
    assert got == messages
