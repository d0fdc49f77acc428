"""The ``_schemas`` topic as the store: a restarted registry rebuilds every schema with the same
ids, versions, deletes, configs and modes; the records on the topic are Confluent's layout; a
topic written in that layout by someone else is read as such; a topic that cannot hold the
registry's history stops it."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from gregor.schema_registry.store import StoreConfigError
from gregor.testing import InProcessBroker

from .conftest import Registry, avro_record


def topic_records(broker: InProcessBroker, topic: str) -> list[tuple[dict[str, object], object]]:
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": f"dump-{topic}",
            "enable.auto.commit": False,
        }
    )
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
        consumer.assign([TopicPartition(topic, 0, 0)])
        out = []
        while len(out) < high:
            msg = consumer.poll(5)
            if msg is None:
                continue
            assert msg.error() is None
            value = msg.value()
            out.append((json.loads(msg.key()), json.loads(value) if value is not None else None))
        return out
    finally:
        consumer.close()


def test_a_restarted_registry_rebuilds_everything(registry: Registry) -> None:
    schemas = [avro_record("R", ("a", "int")), avro_record("R", ("a", "int"), ("b", "int", 1))]
    ids = [registry.post("/subjects/s/versions", {"schema": s}).body["id"] for s in schemas]
    js = json.dumps({"type": "object"})
    jid = registry.post("/subjects/j/versions", {"schema": js, "schemaType": "JSON"}).body["id"]
    proto = 'syntax = "proto3";\nmessage M { int32 x = 1; }\n'
    pid = registry.post("/subjects/p/versions", {"schema": proto, "schemaType": "PROTOBUF"}).body[
        "id"
    ]
    registry.post("/subjects/gone/versions", {"schema": avro_record("G", ("g", "int"))})
    assert registry.delete("/subjects/gone").status == 200
    assert registry.put("/config/s", {"compatibility": "FULL"}).status == 200
    assert registry.put("/mode/j", {"mode": "READONLY"}).status == 200
    before = {
        path: registry.get(path).body
        for path in (
            "/subjects",
            "/subjects?deleted=true",
            "/schemas?deleted=true",
            f"/schemas/ids/{ids[0]}",
            f"/schemas/ids/{ids[1]}",
            f"/schemas/ids/{jid}",
            f"/schemas/ids/{pid}",
            "/config/s",
            "/mode/j",
            "/config",
        )
    }
    registry.restart()
    after = {path: registry.get(path).body for path in before}
    assert after == before
    assert ids == [1, 2] and (jid, pid) == (3, 4)
    # and ids go on from the highest one read
    assert registry.post(
        "/subjects/new/versions", {"schema": avro_record("N", ("n", "int"))}
    ).body == {"id": 6, "version": 1}


def test_the_topic_holds_confluents_layout(broker: InProcessBroker, registry: Registry) -> None:
    schema = avro_record("R", ("a", "int"))
    registry.post("/subjects/s/versions", {"schema": schema})
    registry.put("/config/s", {"compatibility": "NONE"})
    registry.delete("/subjects/s/versions/1")
    registry.delete("/subjects/s/versions/1?permanent=true")
    records = [r for r in topic_records(broker, registry.topic) if r[0]["keytype"] != "NOOP"]
    compact = json.dumps(json.loads(schema), separators=(",", ":"))
    assert records == [
        (
            {"keytype": "SCHEMA", "subject": "s", "version": 1, "magic": 1},
            {"subject": "s", "version": 1, "id": 1, "schema": compact, "deleted": False},
        ),
        ({"keytype": "CONFIG", "subject": "s", "magic": 0}, {"compatibilityLevel": "NONE"}),
        (
            {"keytype": "SCHEMA", "subject": "s", "version": 1, "magic": 1},
            {"subject": "s", "version": 1, "id": 1, "schema": compact, "deleted": True},
        ),
        ({"keytype": "SCHEMA", "subject": "s", "version": 1, "magic": 1}, None),
    ]
    configs = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    from confluent_kafka.admin import ConfigResource

    resource = ConfigResource(ConfigResource.Type.TOPIC, registry.topic)
    described = configs.describe_configs([resource])[resource].result(30)
    assert described["cleanup.policy"].value == "compact"


def test_a_topic_written_by_another_registry_is_read(broker: InProcessBroker) -> None:
    topic = "_schemas_foreign"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 1, config={"cleanup.policy": "compact"})])[
        topic
    ].result(30)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    schema = '{"type":"record","name":"X","fields":[{"name":"a","type":"string"}]}'
    for key, value in [
        (
            {"keytype": "SCHEMA", "subject": "x", "version": 1, "magic": 1},
            {"subject": "x", "version": 1, "id": 21, "schema": schema, "deleted": False},
        ),
        ({"keytype": "NOOP", "magic": 0}, None),
        ({"keytype": "SOMETHING_NEW", "magic": 0}, {"future": True}),
        ({"keytype": "CONFIG", "subject": None, "magic": 0}, {"compatibilityLevel": "FORWARD"}),
        ({"keytype": "DELETE_SUBJECT", "subject": "x", "magic": 0}, {"subject": "x", "version": 1}),
    ]:
        producer.produce(
            topic, key=json.dumps(key), value=json.dumps(value) if value is not None else None
        )
    producer.produce(topic, key=b"not json at all", value=b"\x00\x01")
    assert producer.flush(30) == 0
    reg = Registry(broker, topic).start()
    try:
        assert reg.get("/config").body == {"compatibilityLevel": "FORWARD"}
        assert reg.get("/subjects").body == [] and reg.get("/subjects?deleted=true").body == ["x"]
        assert json.loads(reg.get("/schemas/ids/21").body["schema"]) == json.loads(schema)
        assert reg.post("/subjects/y/versions", {"schema": schema}).body == {"id": 21, "version": 1}
        assert reg.post("/subjects/z/versions", {"schema": '"string"'}).body == {
            "id": 22,
            "version": 1,
        }
    finally:
        reg.stop()


def test_a_topic_with_two_partitions_stops_the_registry(broker: InProcessBroker) -> None:
    topic = "_schemas_two"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 2, 1, config={"cleanup.policy": "compact"})])[
        topic
    ].result(30)
    with pytest.raises(StoreConfigError, match="2 partitions"):
        Registry(broker, topic).start()


def test_a_deleting_topic_stops_the_registry(broker: InProcessBroker) -> None:
    topic = "_schemas_delete"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 1, config={"cleanup.policy": "delete"})])[topic].result(
        30
    )
    with pytest.raises(StoreConfigError, match="cleanup.policy=delete"):
        Registry(broker, topic).start()
