"""Schema ID validation on produce (Confluent Server's ``confluent.value.schema.validation``):
a real in-process broker asks a real registry (served on the broker's loop, at the port the
broker's ``confluent.schema.registry.url`` names) which subjects each record's schema id is
registered under. confluent-kafka's SchemaRegistryClient and AvroSerializer register and frame
the records; the refusals are read from raw Produce frames (``record_errors``, the message)
and from confluent-kafka's producer (its delivery error)."""

from __future__ import annotations

import itertools
import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from confluent_kafka.schema_registry import (
    Schema,
    SchemaRegistryClient,
    record_subject_name_strategy,
    topic_record_subject_name_strategy,
)
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from gregor.broker.config.broker_config import BrokerConfig, ConfigError
from gregor.broker.replication.schema_registry_lookup import LOOKUP_BURST, LOOKUPS_PER_SECOND
from gregor.launch.ports import free_port
from gregor.protocol.connection import ClientConnection
from gregor.protocol.errors import ErrorCode
from gregor.protocol.messages.produce import ProduceRequest
from gregor.protocol.records.batch import build_batch
from gregor.schema_registry.server import SchemaRegistryServer
from gregor.testing import InProcessBroker

from .conftest import avro_record

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

_names = itertools.count()


def order(space: str) -> str:
    """An Avro record schema of its own per test (ids are per schema text: a schema shared
    between tests would share its id and the broker's cached facts of it)."""
    return avro_record(f"{space}.Order", ("id", "string"), ("qty", "int"))


def other(space: str) -> str:
    return avro_record(f"{space}.Other", ("x", "long"))


SET = AlterConfigOpType.SET
VALIDATE = {"confluent.value.schema.validation": "true"}


class Served:
    """A broker validating against a registry served on its own loop."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.broker = InProcessBroker({"confluent.schema.registry.url": self.url}).start()
        self.server: SchemaRegistryServer | None = None
        self.start_registry()

    def start_registry(self) -> None:
        server = SchemaRegistryServer(
            {"bootstrap.servers": self.broker.bootstrap_servers}, self.url, topic="_schemas"
        )

        async def go() -> SchemaRegistryServer:
            return await server.start()

        self.server = self.broker.call(go)

    def stop_registry(self) -> None:
        server, self.server = self.server, None
        if server is not None:
            self.broker.call(server.stop)

    @property
    def lookups(self) -> int:
        assert self.broker.broker is not None
        validator = self.broker.broker.replicas.schema_ids
        assert validator is not None and validator.lookup is not None
        return validator.lookup.requests

    def close(self) -> None:
        self.stop_registry()
        self.broker.close()


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    s = Served()
    try:
        yield s
    finally:
        s.close()


def topic_name(prefix: str) -> str:
    return f"{prefix}-{next(_names)}"


def create(bootstrap: str, topic: str, configs: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic].result(60)


def create_error(bootstrap: str, topic: str, configs: dict[str, str]) -> Any:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    with pytest.raises(Exception) as info:
        admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic].result(60)
    return info.value.args[0]


def raw_produce(bootstrap: str, topic: str, records: bytes) -> Any:
    """One Produce v9 request with ``records`` for partition 0; its partition response."""
    host, port = bootstrap.rsplit(":", 1)
    conn = ClientConnection(client_id="schema-validation-test")
    request = ProduceRequest(
        acks=-1,
        timeout_ms=30000,
        topic_data=[
            ProduceRequest.TopicData(
                name=topic,
                partition_data=[ProduceRequest.TopicData.PartitionData(index=0, records=records)],
            )
        ],
    )
    with socket.create_connection((host, int(port)), timeout=120) as s:
        _, data = conn.send_request(request, 9)
        s.sendall(data)
        while True:
            chunk = s.recv(65536)
            assert chunk, "broker closed the connection"
            responses = conn.receive_data(chunk)
            if responses:
                return responses[0].response.responses[0].partition_responses[0]


def batch(values: list[bytes | None], keys: list[bytes | None] | None = None, **kw: Any) -> bytes:
    keys = keys or [None] * len(values)
    return build_batch([(1_700_000_000_000, k, v) for k, v in zip(keys, values, strict=True)], **kw)


def consume(bootstrap: str, topic: str, count: int) -> list[tuple[bytes | None, bytes | None]]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"g-{topic}", "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        out: list[tuple[bytes | None, bytes | None]] = []
        while len(out) < count:
            msg = consumer.poll(5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            out.append((msg.key(), msg.value()))
        return out
    finally:
        consumer.close()


def end_offset(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"w-{topic}"})
    try:
        return int(consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=60)[1])
    finally:
        consumer.close()


def framed(schema_id: int, body: bytes = b"\x02a\x02") -> bytes:
    return b"\x00" + schema_id.to_bytes(4, "big") + body


def serializer(served: Served, schema: str, **conf: Any) -> AvroSerializer:
    return AvroSerializer(SchemaRegistryClient({"url": served.url}), schema, conf=conf or None)


# --- TopicNameStrategy (the default) ---


def test_avro_records_are_accepted_and_read_back(served: Served) -> None:
    bs = served.broker.bootstrap_servers
    topic = topic_name("orders")
    create(bs, topic, VALIDATE)
    ctx = SerializationContext(topic, MessageField.VALUE)
    ser = serializer(served, order(topic.replace("-", "_")))
    orders = [{"id": f"o{i}", "qty": i} for i in range(5)]
    producer = Producer({"bootstrap.servers": bs, "acks": "all"})
    for o in orders:
        producer.produce(topic, value=ser(o, ctx))
    producer.produce(topic, value=None)  # a null value (a tombstone) is not checked
    assert producer.flush(60) == 0
    got = consume(bs, topic, 6)
    reader = AvroDeserializer(SchemaRegistryClient({"url": served.url}))
    assert [reader(v, ctx) for _, v in got[:5]] == orders
    assert got[5] == (None, None)


def test_bad_values_are_refused_with_their_record_index(served: Served) -> None:
    bs = served.broker.bootstrap_servers
    topic, elsewhere = topic_name("checked"), topic_name("elsewhere")
    create(bs, topic, VALIDATE)
    client = SchemaRegistryClient({"url": served.url})
    space = topic.replace("-", "_")
    good = serializer(served, order(space))(
        {"id": "a", "qty": 1}, SerializationContext(topic, "value")
    )
    wrong = AvroSerializer(client, other(space))({"x": 1}, SerializationContext(elsewhere, "value"))
    other_id = int.from_bytes(wrong[1:5], "big")
    good_id = int.from_bytes(good[1:5], "big")
    assert other_id != good_id
    unregistered = framed(999_999)
    plain_json = json.dumps({"id": "a", "qty": 1}).encode()
    for codec in (0, 1, 4):  # none, gzip, zstd
        p = raw_produce(
            bs,
            topic,
            batch([good, unregistered, plain_json, wrong, b"\x00\x01"], compression=codec),
        )
        assert (p.error_code, p.base_offset) == (ErrorCode.INVALID_RECORD, -1)
        errors = [(e.batch_index, e.batch_index_error_message) for e in p.record_errors]
        assert errors == [
            (1, "Schema id 999999 of the value is not registered"),
            (
                2,
                "The value has no schema id: it does not start with magic byte 0 and a 4-byte "
                "schema id (Confluent's wire format)",
            ),
            (
                3,
                f"Schema id {other_id} of the value is not registered under subject "
                f"{topic}-value (TopicNameStrategy)",
            ),
            (
                4,
                "The value has no schema id: it does not start with magic byte 0 and a 4-byte "
                "schema id (Confluent's wire format)",
            ),
        ]
        assert p.error_message.startswith(
            "One or more records have been rejected due to 4 record errors in total, and only "
            "showing the first three errors at most: [RecordError(batchIndex=1, message='Schema "
            "id 999999 of the value is not registered')"
        )
    assert end_offset(bs, topic) == 0  # nothing of any refused batch was stored
    assert raw_produce(bs, topic, batch([good, None], compression=1)).error_code == 0
    assert end_offset(bs, topic) == 2


def test_confluent_producer_gets_invalid_record(served: Served) -> None:
    bs = served.broker.bootstrap_servers
    topic = topic_name("plain")
    create(bs, topic, VALIDATE)
    errors: list[Any] = []
    producer = Producer({"bootstrap.servers": bs, "acks": "all", "retries": 0})
    producer.produce(topic, value=b'{"id": "a"}', on_delivery=lambda err, _m: errors.append(err))
    assert producer.flush(60) == 0
    assert [e.code() for e in errors] == [KafkaError.INVALID_RECORD]
    # and JSON Schema records framed by confluent-kafka's JSONSerializer go in
    schema = json.dumps(
        {"title": "Ping", "type": "object", "properties": {"n": {"type": "integer"}}}
    )
    ser = JSONSerializer(schema, SchemaRegistryClient({"url": served.url}))
    errors.clear()
    producer.produce(
        topic,
        value=ser({"n": 1}, SerializationContext(topic, MessageField.VALUE)),
        on_delivery=lambda err, _m: errors.append(err),
    )
    assert producer.flush(60) == 0
    assert errors == [None]


def test_key_validation_checks_keys_only(served: Served) -> None:
    bs = served.broker.bootstrap_servers
    topic = topic_name("keyed")
    create(bs, topic, {"confluent.key.schema.validation": "true"})
    key = serializer(served, other(topic.replace("-", "_")))(
        {"x": 7}, SerializationContext(topic, MessageField.KEY)
    )
    p = raw_produce(bs, topic, batch([b"not framed", b"free"], keys=[key, b"raw key"]))
    assert p.error_code == ErrorCode.INVALID_RECORD
    assert [e.batch_index for e in p.record_errors] == [1]
    assert "key has no schema id" in p.record_errors[0].batch_index_error_message
    assert raw_produce(bs, topic, batch([b"any value", None], keys=[key, None])).error_code == 0
    assert consume(bs, topic, 2) == [(key, b"any value"), (None, None)]


# --- the record name strategies ---


@pytest.mark.parametrize(
    ("strategy", "confluent_strategy", "subject"),
    [
        ("RecordNameStrategy", record_subject_name_strategy, "{record}"),
        (
            "io.confluent.kafka.serializers.subject.TopicRecordNameStrategy",
            topic_record_subject_name_strategy,
            "{topic}-{record}",
        ),
    ],
)
def test_record_name_strategies(
    served: Served, strategy: str, confluent_strategy: Any, subject: str
) -> None:
    bs = served.broker.bootstrap_servers
    topic = topic_name("named")
    create(bs, topic, {**VALIDATE, "confluent.value.subject.name.strategy": strategy})
    ctx = SerializationContext(topic, MessageField.VALUE)
    space = topic.replace("-", "_")
    named = serializer(served, order(space), **{"subject.name.strategy": confluent_strategy})
    by_topic = serializer(served, other(space))  # registered under <topic>-value only
    good = named({"id": "n", "qty": 3}, ctx)
    wrong = by_topic({"x": 1}, ctx)
    wrong_id = int.from_bytes(wrong[1:5], "big")
    expected = subject.format(topic=topic, record=f"{space}.Other")
    p = raw_produce(bs, topic, batch([good, wrong]))
    assert p.error_code == ErrorCode.INVALID_RECORD
    assert [(e.batch_index, e.batch_index_error_message) for e in p.record_errors] == [
        (
            1,
            f"Schema id {wrong_id} of the value is not registered under subject {expected} "
            f"({strategy.rsplit('.', 1)[-1]})",
        )
    ]
    assert raw_produce(bs, topic, batch([good])).error_code == 0
    reader = AvroDeserializer(SchemaRegistryClient({"url": served.url}))
    assert [reader(v, ctx) for _, v in consume(bs, topic, 1)] == [{"id": "n", "qty": 3}]


# --- the configs ---


def test_strategy_and_flag_values_are_validated_and_described(served: Served) -> None:
    bs = served.broker.bootstrap_servers
    bad = create_error(
        bs, topic_name("bad"), {**VALIDATE, "confluent.value.subject.name.strategy": "Nope"}
    )
    assert bad.code() == KafkaError.INVALID_CONFIG
    assert "confluent.value.subject.name.strategy" in bad.str()
    bad = create_error(bs, topic_name("bad"), {"confluent.key.schema.validation": "yes"})
    assert bad.code() == KafkaError.INVALID_CONFIG
    topic = topic_name("described")
    create(bs, topic, {})
    admin = AdminClient({"bootstrap.servers": bs})
    resource = ConfigResource("topic", topic)
    entries = admin.describe_configs([resource])[resource].result(60)
    assert entries["confluent.value.schema.validation"].value == "false"
    assert entries["confluent.value.subject.name.strategy"].value == "TopicNameStrategy"
    # turned on by AlterConfigs: the next produce is checked
    assert raw_produce(bs, topic, batch([b"plain"])).error_code == 0
    altered = ConfigResource(
        "topic",
        topic,
        incremental_configs=[
            ConfigEntry("confluent.value.schema.validation", "true", incremental_operation=SET),
            ConfigEntry(
                "confluent.value.subject.name.strategy",
                "io.confluent.kafka.serializers.subject.RecordNameStrategy",
                incremental_operation=SET,
            ),
        ],
    )
    admin.incremental_alter_configs([altered])[altered].result(60)
    entries = admin.describe_configs([resource])[resource].result(60)
    assert entries["confluent.value.schema.validation"].value == "true"
    p = raw_produce(bs, topic, batch([b"plain"]))
    assert (p.error_code, [e.batch_index for e in p.record_errors]) == (
        ErrorCode.INVALID_RECORD,
        [0],
    )
    wrong = ConfigResource(
        "topic",
        topic,
        incremental_configs=[
            ConfigEntry(
                "confluent.value.subject.name.strategy",
                "io.confluent.kafka.serializers.Nope",
                incremental_operation=SET,
            )
        ],
    )
    with pytest.raises(Exception) as info:
        admin.incremental_alter_configs([wrong])[wrong].result(60)
    assert info.value.args[0].code() == KafkaError.INVALID_CONFIG


def test_validation_needs_a_registry() -> None:
    with InProcessBroker() as broker:
        err = create_error(broker.bootstrap_servers, "t", VALIDATE)
        assert err.code() == KafkaError.INVALID_CONFIG
        assert "this broker has no schema registry" in err.str()
        create(broker.bootstrap_servers, "t", {"confluent.value.schema.validation": "false"})


def test_registry_url_settings() -> None:
    served = BrokerConfig({"schema.registry.listener": "http://127.0.0.1:8081"})
    assert served.schema_registry_urls == ("http://127.0.0.1:8081",)
    named = BrokerConfig(
        {
            "schema.registry.listener": "http://127.0.0.1:8081",
            "confluent.schema.registry.url": "http://sr1:8081/, https://sr2:8443",
        }
    )
    assert named.schema_registry_urls == ("http://sr1:8081", "https://sr2:8443")
    assert BrokerConfig({}).schema_registry_urls == ()
    for bad in ("sr:8081", "ftp://sr:1", "http://user:secret@sr:8081", "http://sr:99999"):
        with pytest.raises(ConfigError, match="confluent.schema.registry.url"):
            BrokerConfig({"confluent.schema.registry.url": bad})


# --- the registry's answers: cached, bounded, and fail closed ---


def test_unknown_ids_are_cached_and_bounded(served: Served) -> None:
    bs = served.broker.bootstrap_servers
    topic = topic_name("strangers")
    create(bs, topic, VALIDATE)
    before = served.lookups
    for _ in range(3):
        p = raw_produce(bs, topic, batch([framed(777_777)] * 5))
        assert p.error_code == ErrorCode.INVALID_RECORD
    assert served.lookups == before + 1  # one lookup, then the negative cache answers
    # a stranger's many random ids: the registry is asked a bounded number of times, and the
    # ids past the budget are refused with a retriable error, never accepted
    started = time.monotonic()
    before = served.lookups
    p = raw_produce(bs, topic, batch([framed(2_000_000 + i) for i in range(1000)]))
    elapsed = time.monotonic() - started
    assert p.error_code == ErrorCode.REQUEST_TIMED_OUT
    assert "too many lookups of unknown schema ids" in p.error_message
    assert served.lookups - before <= LOOKUP_BURST + LOOKUPS_PER_SECOND * elapsed
    assert end_offset(bs, topic) == 0


def test_registry_down_is_a_retriable_refusal() -> None:
    s = Served()
    try:
        bs = s.broker.bootstrap_servers
        topic = topic_name("down")
        create(bs, topic, VALIDATE)
        good = serializer(s, order("down"))(
            {"id": "d", "qty": 1}, SerializationContext(topic, "value")
        )
        s.stop_registry()
        p = raw_produce(bs, topic, batch([good]))
        assert p.error_code == ErrorCode.REQUEST_TIMED_OUT
        assert p.error_message.startswith(f"Schema validation of {topic} could not complete")
        assert end_offset(bs, topic) == 0
        s.start_registry()
        assert raw_produce(bs, topic, batch([good])).error_code == 0
        assert end_offset(bs, topic) == 1
    finally:
        s.close()


def test_record_names_of_each_format(served: Served) -> None:
    """RecordNameStrategy's subject is Avro's full name, Protobuf's first message (with its
    package) and JSON Schema's title; a schema without one is refused, saying why."""
    bs = served.broker.bootstrap_servers
    topic = topic_name("formats")
    space = topic.replace("-", "_")
    create(bs, topic, {**VALIDATE, "confluent.value.subject.name.strategy": "RecordNameStrategy"})
    client = SchemaRegistryClient({"url": served.url})
    proto = (
        f'syntax = "proto3";\npackage {space};\n'
        "message Ping {\n  int32 n = 1;\n}\nmessage Pong {\n  int32 m = 1;\n}\n"
    )
    proto_id = client.register_schema(f"{space}.Ping", Schema(proto, "PROTOBUF"))
    title = f"Reading_{space}"
    json_schema = json.dumps({"title": title, "type": "object"})
    json_id = client.register_schema(title, Schema(json_schema, "JSON"))
    avro_id = client.register_schema(f"{space}.Order", Schema(order(space), "AVRO"))
    nameless_id = client.register_schema(f"{space}-plain", Schema('"string"', "AVRO"))
    # Protobuf's framing has message indexes after the id; only the id is checked
    good = [framed(proto_id, b"\x00\x08\x01"), framed(json_id, b"{}"), framed(avro_id)]
    assert raw_produce(bs, topic, batch(good)).error_code == 0
    p = raw_produce(bs, topic, batch([*good, framed(nameless_id)]))
    assert p.error_code == ErrorCode.INVALID_RECORD
    assert [(e.batch_index, e.batch_index_error_message) for e in p.record_errors] == [
        (
            3,
            f"Schema id {nameless_id} of the value has no record name, which RecordNameStrategy needs",
        )
    ]
    assert end_offset(bs, topic) == 3


def test_an_id_registered_under_a_new_subject_is_seen(served: Served) -> None:
    """Ids are per schema: the same schema registered for a second topic keeps its id, which
    the broker has cached with the first topic's subject only; it asks again (at most once a
    second per id) rather than refusing the second topic's records for the cache's lifetime."""
    bs = served.broker.bootstrap_servers
    first, second = topic_name("first"), topic_name("second")
    create(bs, first, VALIDATE)
    create(bs, second, VALIDATE)
    ser = serializer(served, order(first.replace("-", "_")))
    value = ser({"id": "x", "qty": 1}, SerializationContext(first, MessageField.VALUE))
    assert raw_produce(bs, first, batch([value])).error_code == 0  # cached: {first-value}
    again = ser({"id": "x", "qty": 1}, SerializationContext(second, MessageField.VALUE))
    assert again == value  # registered under second-value with the same id
    for _ in range(1000):  # each refusal returns at once; the broker asks again within 1 s
        p = raw_produce(bs, second, batch([value]))
        if p.error_code == 0:
            break
        assert p.error_code == ErrorCode.INVALID_RECORD
        assert (
            f"not registered under subject {second}-value"
            in p.record_errors[0].batch_index_error_message
        )
        time.sleep(0.1)
    else:
        pytest.fail(f"{second}'s records were refused after the id's subjects were asked again")
    assert end_offset(bs, second) == 1
