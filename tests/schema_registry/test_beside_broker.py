"""The schema registry served beside a broker (``schema.registry.listener``): confluent-kafka's
Avro serializer and deserializer round-trip records through it, the schemas outlive a restart
of the broker (rebuilt from the topic), and the settings it cannot honour stop the broker."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from gregor.broker.config.broker_config import BrokerConfig, ConfigError
from gregor.testing import BrokerProcess
from gregor.testing.ports import free_port

from .conftest import avro_record

pytestmark = pytest.mark.interop  # a broker process

ORDER = avro_record("Order", ("id", "long"), ("item", "string"))


def registry_url(b: BrokerProcess) -> str:
    m = None
    while m is None:  # the registry starts right after the broker's started line
        m = re.search(r"event=schema_registry\.started url=(\S+)", b.read_log())
        assert b.proc is not None and b.proc.poll() is None, b.read_log()[-2000:]
        if m is None:
            time.sleep(0.05)
    return m.group(1)


def test_avro_round_trip_through_the_registry_beside_the_broker() -> None:
    port = free_port()
    config = {
        "schema.registry.listener": f"http://127.0.0.1:{port}",
        "schema.registry.topic": "_schemas_beside",
    }
    with BrokerProcess(config=config) as b:
        url = registry_url(b)
        assert url == f"http://127.0.0.1:{port}"
        client = SchemaRegistryClient({"url": url})
        ser = AvroSerializer(client, ORDER)
        producer = Producer({"bootstrap.servers": b.bootstrap_servers})
        values = [{"id": i, "item": f"item-{i}"} for i in range(5)]
        for v in values:
            ctx = SerializationContext("orders", MessageField.VALUE)
            producer.produce("orders", value=ser(v, ctx))
        assert producer.flush(30) == 0
        registered = client.get_latest_version("orders-value")
        assert registered.version == 1

        b.restart()
        url = registry_url(b)
        # A new client (no cache): the registry rebuilt its state from _schemas_beside.
        client = SchemaRegistryClient({"url": url})
        assert client.get_latest_version("orders-value").schema_id == registered.schema_id
        de = AvroDeserializer(client)
        consumer = Consumer(
            {
                "bootstrap.servers": b.bootstrap_servers,
                "group.id": "beside",
                "auto.offset.reset": "earliest",
            }
        )
        try:
            consumer.subscribe(["orders"])
            got = []
            while len(got) < len(values):
                msg = consumer.poll(1.0)
                if msg is None:
                    continue
                assert msg.error() is None, msg.error()
                ctx = SerializationContext("orders", MessageField.VALUE)
                got.append(de(msg.value(), ctx))
        finally:
            consumer.close()
        assert got == values


def test_validation_asks_the_registry_beside_the_broker_at_its_bound_port() -> None:
    # schema.registry.listener on port 0: the broker's own schema ID validation must ask the
    # port the registry bound, not port 0
    config = {"schema.registry.listener": "http://127.0.0.1:0"}
    with BrokerProcess(config=config) as b:
        url = registry_url(b)
        assert not url.endswith(":0")
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        topic = NewTopic("checked", 1, 1, config={"confluent.value.schema.validation": "true"})
        admin.create_topics([topic])["checked"].result(30)
        ser = AvroSerializer(SchemaRegistryClient({"url": url}), ORDER)
        ctx = SerializationContext("checked", MessageField.VALUE)
        good = ser({"id": 1, "item": "a"}, ctx)
        delivered: list[Any] = []
        producer = Producer({"bootstrap.servers": b.bootstrap_servers, "retries": 0})
        producer.produce("checked", good, on_delivery=lambda e, m: delivered.append(e))
        producer.flush(30)
        unknown = b"\x00" + (999_999).to_bytes(4, "big") + good[5:]
        producer.produce("checked", unknown, on_delivery=lambda e, m: delivered.append(e))
        producer.flush(30)
        assert delivered[0] is None
        assert delivered[1] is not None and delivered[1].name() == "INVALID_RECORD"


def test_a_port_in_use_stops_the_broker_in_one_line() -> None:
    with BrokerProcess(config={}) as other:
        taken = other.port
        b = BrokerProcess(config={"schema.registry.listener": f"http://127.0.0.1:{taken}"})
        try:
            b.start()  # returns at the broker's started line; the registry starts after it
            assert b.proc is not None
            while b.proc.poll() is None:
                time.sleep(0.05)
            assert b.proc.returncode == 1
            errors = [line for line in b.read_log().splitlines() if line.startswith("Error: ")]
            assert errors == [
                f"Error: schema.registry.listener: cannot listen on 127.0.0.1:{taken}: "
                "address already in use"
            ], b.read_log()[-2000:]
        finally:
            b.stop()


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"schema.registry.listener": "http://0.0.0.0:8081"}, "loopback address only"),
        (
            {"schema.registry.listener": "https://127.0.0.1:8081"},
            "https serves the broker's own certificate, and this broker has none",
        ),
        ({"schema.registry.listener": "somewhere"}, "use http://host:port"),
        (
            {"schema.registry.listener": "http://127.0.0.1:8081", "schema.registry.topic": "a b"},
            "schema.registry.topic='a b'",
        ),
        (
            {
                "schema.registry.listener": "http://127.0.0.1:8081",
                "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
                "sasl.enabled.mechanisms": "PLAIN",
                "listener.name.sasl_plaintext.plain.sasl.jaas.config": (
                    "org.apache.kafka.common.security.plain.PlainLoginModule required "
                    'username="a" password="b" user_a="b";'
                ),
            },
            "needs a PLAINTEXT listener",
        ),
        (
            {
                "schema.registry.listener": "http://127.0.0.1:8081",
                "schema.registry.group.id": "",
            },
            "schema.registry.group.id: a group id",
        ),
    ],
)
def test_settings_it_cannot_honour_are_refused(settings: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        BrokerConfig.load(None, [f"{k}={v}" for k, v in settings.items()])
