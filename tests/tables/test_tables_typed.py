"""The typed modes of topics as tables on a real in-process broker with a real schema registry
(Gregor's, served on the broker's loop, which the broker names in confluent.schema.registry.url):
values confluent-kafka's AvroSerializer and ProtobufSerializer wrote land in the table's
``value`` struct as they were written; a second, compatible schema version adds a column
(older rows null); records that do not convert (no prefix, an unknown id, garbage, a type the
table cannot take) land in the dead-letter table ``<topic>~dlq`` with their offsets and the
error, the rest in the topic's table, and the two together are the topic, record by record,
each once; a broker restarted mid-stream keeps both exact; the modes are refused without a
registry."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from tables_support import (
    CommittedOffsets,
    create_table_topic,
    end_offsets,
    open_table,
    topic_rows,
    wait_until,
)

from gregor.launch.ports import free_port
from gregor.schema_registry.server import SchemaRegistryServer
from gregor.tables.faults import ENV
from gregor.testing import BrokerProcess, InProcessBroker

pytestmark = [pytest.mark.timeout(300)]

V1 = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "qty", "type": "int"},
        {"name": "price", "type": "double"},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
    ],
}
V2 = {  # compatible (backward): a field with a default, qty widened to long
    **V1,
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "qty", "type": "long"},
        {"name": "price", "type": "double"},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
}
CLASH = {  # qty as a string: a type change Iceberg cannot make (registered under another subject)
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [{"name": "id", "type": "string"}, {"name": "qty", "type": "string"}],
}


class Served:
    """An in-process broker whose registry is served on its loop at a port chosen first."""

    def __init__(self, data_dir: Any = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.broker = InProcessBroker(
            {"confluent.schema.registry.url": self.url}, data_dir=data_dir
        ).start()
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

    def restart(self) -> None:
        self.stop_registry()
        self.broker.restart()
        self.start_registry()

    def close(self) -> None:
        self.stop_registry()
        self.broker.close()


@pytest.fixture
def served() -> Iterator[Served]:
    s = Served()
    try:
        yield s
    finally:
        s.close()


def produce(bootstrap: str, topic: str, values: list[bytes | None]) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i, v in enumerate(values):
        p.produce(topic, v, f"k{i}".encode())
    assert p.flush(30) == 0


def serializer(url: str, schema: dict[str, Any]) -> AvroSerializer:
    return AvroSerializer(
        SchemaRegistryClient({"url": url}), json.dumps(schema), conf={"auto.register.schemas": True}
    )


def both_caught_up(s: Served, topic: str) -> bool:
    ends = end_offsets(s.broker.bootstrap_servers, topic, 1)
    data = s.broker.data_dir / "logs"
    return CommittedOffsets(data, topic)().get(0) == ends[0]


def scan(s: Served, name: str) -> list[dict[str, Any]]:
    rows = open_table(s.broker.data_dir / "logs", name).scan().to_arrow().to_pylist()
    return sorted(rows, key=lambda r: r["offset"])


def order(i: int, note: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"id": f"o{i}", "qty": i, "price": i / 4, "tags": [f"t{i}"] * (i % 3)}
    if note:
        out["note"] = f"n{i}" if i % 2 else None
    return out


def test_avro_values_typed_evolved_and_dead_lettered_exactly(served: Served) -> None:
    topic = "orders"
    bootstrap = served.broker.bootstrap_servers
    create_table_topic(bootstrap, topic, 1, **{"iceberg.mode": "value_schema_id_prefix"})
    ctx = SerializationContext(topic, MessageField.VALUE)
    v1, v2 = serializer(served.url, V1), serializer(served.url, V2)
    other = SerializationContext("elsewhere", MessageField.VALUE)
    clash = serializer(served.url, CLASH)({"id": "c", "qty": "lots"}, other)
    valid = v1(order(0), ctx)
    values: list[bytes | None] = [v1(order(i), ctx) for i in range(5)]
    values += [
        b"plain text, no prefix",  # 5: not framed
        b"\0\0\0\x7f\xffnot a schema",  # 6: an id the registry does not have
        valid[:5] + b"\xff\xff\xff",  # 7: framed, known id, a payload that does not decode
        None,  # 8: a tombstone: a row whose value is null
    ]
    produce(bootstrap, topic, values)
    wait_until(lambda: both_caught_up(served, topic))
    # a second, compatible version: a new column, qty widened; then a clashing writer
    later = [v2(order(i, note=True), ctx) for i in range(9, 13)] + [clash]
    produce(bootstrap, topic, later)
    wait_until(lambda: both_caught_up(served, topic))

    main = scan(served, topic)
    dead = scan(served, topic + "~dlq")
    assert [r["offset"] for r in main] == [0, 1, 2, 3, 4, 8, 9, 10, 11, 12]
    clash_id = int.from_bytes(clash[1:5], "big")
    # qty is int in the table until v2's rows widen it (in the same read or before it)
    clash_error = {
        f"schema id {clash_id}: value: the table's type {t} cannot take string"
        for t in ("int32", "int64")
    }
    assert [(r["offset"], r["error"]) for r in dead][:3] == [
        (5, "the value is not framed with a schema id (magic byte 0, 4-byte id)"),
        (6, "schema id 32767 is not in the schema registry"),
        (7, f"the value does not decode with schema id {int.from_bytes(valid[1:5], 'big')}"),
    ]
    assert len(dead) == 4 and dead[3]["offset"] == 13 and dead[3]["error"] in clash_error
    # the typed rows: exactly what the serializers wrote (older rows' new column null)
    expected = [{**order(i), "note": None} for i in range(5)]
    expected += [None] + [order(i, note=True) for i in range(9, 13)]
    assert [r["value"] for r in main] == expected
    table = open_table(served.broker.data_dir / "logs", topic)
    value = table.schema().find_field("value").field_type
    assert [(f.name, str(f.field_type)) for f in value.fields] == [
        ("id", "string"),
        ("qty", "long"),
        ("price", "double"),
        ("tags", "list<string>"),
        ("note", "string"),
    ]
    # main ∪ dead-letters == the topic, record by record (key, value bytes, offsets)
    topic_side = {(r[1], r[2], r[3]) for r in topic_rows(bootstrap, topic, 1)}
    assert len(topic_side) == 14
    dead_side = {(r["offset"], r["key"], r["value"]) for r in dead}
    main_keys = {(r["offset"], r["key"]) for r in main}
    assert {(o, k) for o, k, _ in topic_side} == main_keys | {(o, k) for o, k, _ in dead_side}
    assert not main_keys & {(o, k) for o, k, _ in dead_side}
    assert dead_side <= topic_side
    # the tables as DuckDB-free readers see them: polars reads the typed column
    import polars as pl

    frame = pl.from_arrow(table.scan().to_arrow())
    assert isinstance(frame, pl.DataFrame)
    assert frame.sort("offset")["value"].struct.field("qty").to_list() == [
        0,
        1,
        2,
        3,
        4,
        None,
        9,
        10,
        11,
        12,
    ]

    # the dead-letter table is maintained beside the topic's, with the topic's settings: two
    # commits of dead letters (two files of one hour) compact into one, the rows unchanged
    async def maintained() -> list[str]:
        assert served.broker.broker is not None and served.broker.broker.tables is not None
        return sorted(served.broker.broker.tables.maintainers)

    assert served.broker.call(maintained) == [topic, topic + "~dlq"]
    dlq = open_table(served.broker.data_dir / "logs", topic + "~dlq")
    assert len(list(dlq.scan().plan_files())) >= 2
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entry = ConfigEntry(
        "iceberg.compaction.min.input.files", "2", incremental_operation=AlterConfigOpType.SET
    )
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[entry])
    admin.incremental_alter_configs([resource])[resource].result(30)

    def dead_letters_compacted() -> bool:
        t = open_table(served.broker.data_dir / "logs", topic + "~dlq")
        return len(list(t.scan().plan_files())) == 1

    wait_until(dead_letters_compacted)
    assert scan(served, topic + "~dlq") == dead
    current = open_table(served.broker.data_dir / "logs", topic + "~dlq").current_snapshot()
    assert current.summary.additional_properties["gregor.maintenance"] == "compaction"


def test_value_schema_latest_types_bare_payloads_with_the_subjects_latest_schema(
    served: Served,
) -> None:
    """``value_schema_latest``: the values are bare Avro payloads (no frame), read with the
    latest schema of ``<topic>-value``; one that does not decode is a dead letter; a tombstone
    is a row whose value is null."""
    import io

    import fastavro

    topic = "bare"
    bootstrap = served.broker.bootstrap_servers
    SchemaRegistryClient({"url": served.url}).register_schema(
        f"{topic}-value", Schema(json.dumps(V1), "AVRO")
    )
    create_table_topic(bootstrap, topic, 1, **{"iceberg.mode": "value_schema_latest"})
    parsed = fastavro.parse_schema(V1)

    def bare(i: int) -> bytes:
        out = io.BytesIO()
        fastavro.schemaless_writer(out, parsed, order(i))
        return out.getvalue()

    values: list[bytes | None] = [bare(i) for i in range(4)]
    values += [b"\x01", None, bare(6)]  # 4: no record decodes from it; 5: a tombstone
    produce(bootstrap, topic, values)
    wait_until(lambda: both_caught_up(served, topic))

    main = scan(served, topic)
    dead = scan(served, topic + "~dlq")
    schema_id = SchemaRegistryClient({"url": served.url}).get_latest_version(f"{topic}-value")
    assert [(r["offset"], r["error"]) for r in dead] == [
        (4, f"the value does not decode with schema id {schema_id.schema_id}")
    ]
    assert dead[0]["value"] == b"\x01" and dead[0]["key"] == b"k4"
    assert [r["offset"] for r in main] == [0, 1, 2, 3, 5, 6]
    assert [r["value"] for r in main] == [order(i) for i in range(4)] + [None, order(6)]
    assert [r["key"] for r in main] == [f"k{i}".encode() for i in (0, 1, 2, 3, 5, 6)]


def test_json_schema_values_are_typed(served: Served) -> None:
    """``value_schema_id_prefix`` with JSON Schema: confluent-kafka's JSONSerializer's values
    land in the ``value`` struct as written."""
    from confluent_kafka.schema_registry.json_schema import JSONSerializer

    topic = "json-orders"
    bootstrap = served.broker.bootstrap_servers
    create_table_topic(bootstrap, topic, 1, **{"iceberg.mode": "value_schema_id_prefix"})
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "Order",
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "qty": {"type": "integer"},
            "price": {"type": "number"},
        },
        "required": ["id", "qty", "price"],
    }
    serialize = JSONSerializer(
        json.dumps(schema),
        SchemaRegistryClient({"url": served.url}),
        conf={"auto.register.schemas": True},
    )
    ctx = SerializationContext(topic, MessageField.VALUE)
    orders = [{"id": f"o{i}", "qty": i, "price": i / 4} for i in range(5)]
    produce(bootstrap, topic, [serialize(o, ctx) for o in orders])
    wait_until(lambda: both_caught_up(served, topic))
    main = scan(served, topic)
    assert scan(served, topic + "~dlq") == []
    assert [r["offset"] for r in main] == list(range(5))
    assert [r["value"] for r in main] == orders


def test_a_typed_mode_without_a_registry_is_refused() -> None:
    with InProcessBroker() as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        for mode in ("value_schema_id_prefix", "value_schema_latest"):
            futures = admin.create_topics([NewTopic("typed", 1, 1, config={"iceberg.mode": mode})])
            with pytest.raises(KafkaException) as info:
                futures["typed"].result(30)
            error = info.value.args[0]
            assert error.name() == "INVALID_CONFIG"
            assert error.str() == (
                f"Invalid value {mode} for configuration iceberg.mode: this broker has no "
                "schema registry to read the value's schemas from (set "
                "confluent.schema.registry.url, or schema.registry.listener to serve one)"
            )


@pytest.mark.slow
def test_a_crash_between_the_two_commits_keeps_both_tables_exact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGKILL right after the dead-letter table's commit, before the topic table's: the
    restarted broker re-reads that range, skips what the dead-letter table holds, and the two
    tables end as the topic, each record once."""
    topic = "crashing-typed"
    data_dir = tmp_path / "logs"
    broker = BrokerProcess(
        data_dir=tmp_path, config={"schema.registry.listener": "http://127.0.0.1:0"}
    )
    monkeypatch.setenv(ENV, "dead-letters.done:1")
    try:
        broker.start()
        registry = broker.wait_schema_registry()
        assert broker.proc is not None
        create_table_topic(
            broker.bootstrap_servers,
            topic,
            1,
            lag_ms=200,
            **{"iceberg.mode": "value_schema_id_prefix"},
        )
        ctx = SerializationContext(topic, MessageField.VALUE)
        v1 = serializer(registry, V1)
        values: list[bytes | None] = []
        for i in range(40):
            values.append(b"not framed %d" % i if i % 5 == 2 else v1(order(i), ctx))
        produce(broker.bootstrap_servers, topic, values)
        wait_until(lambda: broker.proc is not None and broker.proc.poll() is not None)
        assert broker.proc.poll() == -signal.SIGKILL
        # the crash left the dead letters committed and the typed rows not
        dead_at_kill = CommittedOffsets(data_dir, topic + "~dlq")()
        assert dead_at_kill.get(0, 0) > CommittedOffsets(data_dir, topic)().get(0, 0)
        broker.kill()
        monkeypatch.delenv(ENV)
        broker.start()
        ends = end_offsets(broker.bootstrap_servers, topic, 1)
        assert ends[0] == 40
        wait_until(lambda: CommittedOffsets(data_dir, topic)().get(0) == 40)
        main = [r["offset"] for r in open_table(data_dir, topic).scan().to_arrow().to_pylist()]
        dead = [
            r["offset"] for r in open_table(data_dir, topic + "~dlq").scan().to_arrow().to_pylist()
        ]
        assert sorted(dead) == [i for i in range(40) if i % 5 == 2]
        assert sorted(main) == [i for i in range(40) if i % 5 != 2]
    finally:
        broker.stop()
