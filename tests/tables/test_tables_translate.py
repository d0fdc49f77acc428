"""Topics as tables on a real in-process broker: what confluent-kafka produces appears in the
topic's Iceberg table (pyiceberg's SQL catalog on SQLite) exactly, record by record; aborted
transactions never do; a restarted broker resumes from the table's offsets without
duplicates."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import NewTopic
from tables_support import (
    committed_offsets,
    create_table_topic,
    end_offsets,
    table_rows,
    topic_rows,
    wait_until,
)

from gregor.testing import InProcessBroker


@pytest.fixture
def broker() -> Iterator[InProcessBroker]:
    with InProcessBroker() as b:
        yield b


def caught_up(broker: InProcessBroker, topic: str, partitions: int) -> bool:
    ends = end_offsets(broker.bootstrap_servers, topic, partitions)
    table = committed_offsets(broker.data_dir / "logs", topic)
    return all(table.get(p) == end for p, end in ends.items() if end > 0)


def produce(bootstrap: str, topic: str, n: int, partitions: int, tag: str = "") -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(n):
        key = None if i % 7 == 0 else f"k{i}".encode()
        headers = [("h", f"{i}".encode()), ("empty", None)] if i % 3 == 0 else None
        p.produce(topic, f"{tag}v{i}".encode(), key, partition=i % partitions, headers=headers)
    assert p.flush(30) == 0


def test_produced_records_appear_in_the_table_exactly(broker: InProcessBroker) -> None:
    topic = "orders"
    create_table_topic(broker.bootstrap_servers, topic, 3)
    produce(broker.bootstrap_servers, topic, 300, 3)
    wait_until(lambda: caught_up(broker, topic, 3))
    expected = topic_rows(broker.bootstrap_servers, topic, 3)
    assert len(expected) == 300
    assert table_rows(broker.data_dir / "logs", topic) == expected


def test_a_topic_without_a_table_gets_none(broker: InProcessBroker) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic("plain", 1, 1)])["plain"].result(30)
    produce(broker.bootstrap_servers, "plain", 10, 1)
    translators = broker.call(_translators(broker))
    assert translators == []


def _translators(broker: InProcessBroker):  # type: ignore[no-untyped-def]
    async def get() -> list[tuple[str, int]]:
        assert broker.broker is not None and broker.broker.tables is not None
        return sorted(broker.broker.tables.translators)

    return get


def test_aborted_transactions_never_reach_the_table(broker: InProcessBroker) -> None:
    topic = "payments"
    create_table_topic(broker.bootstrap_servers, topic, 2)
    p = Producer(
        {"bootstrap.servers": broker.bootstrap_servers, "transactional.id": str(uuid.uuid4())}
    )
    p.init_transactions(30)
    for txn in range(6):
        p.begin_transaction()
        for i in range(10):
            p.produce(topic, f"t{txn}-{i}".encode(), partition=i % 2)
        if txn % 2:
            assert p.flush(30) == 0  # in the log before the abort (else librdkafka purges them)
            p.abort_transaction(30)
        else:
            p.commit_transaction(30)
    produce(broker.bootstrap_servers, topic, 10, 2, tag="plain-")
    wait_until(lambda: caught_up(broker, topic, 2))
    expected = topic_rows(broker.bootstrap_servers, topic, 2)
    values = sorted(r[3] for r in expected if r[3] is not None)
    assert len(expected) == 40
    assert not [v for v in values if v.startswith((b"t1-", b"t3-", b"t5-"))]
    everything = topic_rows(broker.bootstrap_servers, topic, 2, "read_uncommitted")
    assert len(everything) == 70  # the aborted records are in the log
    assert table_rows(broker.data_dir / "logs", topic) == expected


def test_a_restart_resumes_from_the_table_without_duplicates(broker: InProcessBroker) -> None:
    topic = "events"
    create_table_topic(broker.bootstrap_servers, topic, 2)
    produce(broker.bootstrap_servers, topic, 100, 2, tag="a")
    wait_until(lambda: caught_up(broker, topic, 2))
    first = committed_offsets(broker.data_dir / "logs", topic)
    broker.restart()
    produce(broker.bootstrap_servers, topic, 100, 2, tag="b")
    wait_until(lambda: caught_up(broker, topic, 2))
    expected = topic_rows(broker.bootstrap_servers, topic, 2)
    assert len(expected) == 200
    rows = table_rows(broker.data_dir / "logs", topic)
    assert rows == expected
    assert committed_offsets(broker.data_dir / "logs", topic) == {
        p: first[p] + 50 for p in range(2)
    }


def test_describe_gives_what_pyiceberg_opens_the_table_with(broker: InProcessBroker) -> None:
    import json

    from pyiceberg.catalog import load_catalog

    from gregor.testing.cli import run_command

    topic = "described"
    create_table_topic(broker.bootstrap_servers, topic, 2)
    produce(broker.bootstrap_servers, topic, 40, 2)
    wait_until(lambda: caught_up(broker, topic, 2))
    code, out, err = run_command(
        broker.bootstrap_servers, "tables", "describe", topic, "--output", "json"
    )
    assert code == 0, err
    d = json.loads(out)
    # the two lines a user needs
    table = load_catalog(d["catalog_name"], **d["catalog_properties"]).load_table(tuple(d["table"]))
    assert table.scan().to_arrow().num_rows == 40
    assert d["catalog_type"] == "sql"
    assert d["catalog_uri"] == "sqlite:///" + str(
        broker.data_dir / "logs" / "iceberg" / "catalog.db"
    )
    assert d["table"] == ["gregor", topic]
    assert [
        (r["partition"], r["table_offset"], r["end_offset"], r["lag"]) for r in d["partitions"]
    ] == [
        (0, 20, 20, 0),
        (1, 20, 20, 0),
    ]
    assert d["mode"] == "key_value" and d["target_lag_ms"] == 50
    code, out, err = run_command(broker.bootstrap_servers, "tables", "list", "--output", "json")
    assert code == 0, err
    assert json.loads(out) == [{"topic": topic, "mode": "key_value", "table": ["gregor", topic]}]


def test_table_topic_configs_are_validated_as_kafka_validates_topic_configs(
    broker: InProcessBroker,
) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    cases = {
        "bad-mode": ({"iceberg.mode": "parquet"}, "must be one of"),
        "schema-mode": ({"iceberg.mode": "value_schema_latest"}, "has no schema registry"),
        "bad-lag": ({"iceberg.target.lag.ms": "0"}, "must be at least 1"),
        "nan-lag": ({"iceberg.target.lag.ms": "soon"}, "not a number"),
    }
    futures = admin.create_topics([NewTopic(n, 1, 1, config=c) for n, (c, _) in cases.items()])
    for name, (_, why) in cases.items():
        with pytest.raises(KafkaException) as e:
            futures[name].result(30)
        assert e.value.args[0].code() == KafkaError.INVALID_CONFIG
        assert why in e.value.args[0].str()


def test_turning_the_table_on_later_takes_the_whole_log_and_off_stops_it(
    broker: InProcessBroker,
) -> None:
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

    topic = "later"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    produce(broker.bootstrap_servers, topic, 30, 2)
    assert broker.call(_translators(broker)) == []

    def alter(mode: str) -> None:
        entries = [
            ConfigEntry("iceberg.mode", mode, incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("iceberg.target.lag.ms", "50", incremental_operation=AlterConfigOpType.SET),
        ]
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=entries)
        for f in admin.incremental_alter_configs([resource]).values():
            f.result(30)

    alter("key_value")
    wait_until(lambda: caught_up(broker, topic, 2))
    assert table_rows(broker.data_dir / "logs", topic) == topic_rows(
        broker.bootstrap_servers, topic, 2
    )
    alter("disabled")
    wait_until(lambda: broker.call(_translators(broker)) == [])
