"""A compacted topic's table as an upsert table (``iceberg.upsert=true``) on a real in-process
broker and pyiceberg's SQL catalog: the table holds exactly what a consumer of the compacted
topic computes, each (partition, key)'s record with the highest offset unless it is a
tombstone, across several commits; aborted transactions never touch it; a restart resumes
without loss or duplicates; the setting is validated through confluent-kafka's AdminClient with
Kafka's INVALID_CONFIG and exact messages."""

from __future__ import annotations

import json
import logging
import random
import signal
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from tables_support import (
    CommittedOffsets,
    Row,
    committed_offsets,
    create_table_topic,
    end_offsets,
    open_table,
    table_rows,
    topic_rows,
    wait_until,
)

from gregor.tables.faults import ENV
from gregor.testing import BrokerProcess, InProcessBroker
from gregor.testing.cli import run_command

UPSERT = {"cleanup.policy": "compact", "iceberg.upsert": "true"}


@pytest.fixture
def broker() -> Iterator[InProcessBroker]:
    with InProcessBroker() as b:
        yield b


def caught_up(broker: InProcessBroker, topic: str, partitions: int) -> bool:
    ends = end_offsets(broker.bootstrap_servers, topic, partitions)
    table = committed_offsets(broker.data_dir / "logs", topic)
    return all(table.get(p) == end for p, end in ends.items() if end > 0)


def latest_per_key(rows: Iterable[Row]) -> list[Row]:
    """What a consumer of the compacted topic keeps: per (partition, key), the record with the
    highest offset, unless it is a tombstone; ordered by (partition, offset)."""
    latest: dict[tuple[int, bytes], Row] = {}
    for row in sorted(rows, key=lambda r: (r[0], r[1])):
        if row[2] is not None:
            latest[(row[0], row[2])] = row
    return sorted((r for r in latest.values() if r[3] is not None), key=lambda r: (r[0], r[1]))


def produce_versions(bootstrap: str, topic: str, rng: random.Random, tag: str, n: int) -> None:
    """``n`` records over keys k0..k24 (the default partitioner places them), about one in five
    a tombstone, some with headers; and the key ``shared`` in partition 0 or 1 by the round."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(n):
        key = f"k{rng.randrange(25)}".encode()
        value = None if rng.random() < 0.2 else f"{tag}-{i}".encode()
        headers = [("round", tag.encode())] if i % 3 == 0 else None
        p.produce(topic, value, key, headers=headers)
    p.produce(topic, f"shared-{tag}".encode(), b"shared", partition=int(tag[-1]) % 2)
    assert p.flush(30) == 0


def test_the_table_holds_each_keys_latest_record_across_commits(
    broker: InProcessBroker,
) -> None:
    topic = "profiles"
    create_table_topic(broker.bootstrap_servers, topic, 3, lag_ms=20, **UPSERT)
    rng = random.Random(39)
    for rnd in range(4):
        produce_versions(broker.bootstrap_servers, topic, rng, f"r{rnd}", 80)
        wait_until(lambda: caught_up(broker, topic, 3))
        records = topic_rows(broker.bootstrap_servers, topic, 3)
        assert table_rows(broker.data_dir / "logs", topic) == latest_per_key(records)
    assert len(records) == 4 * 81
    rows = table_rows(broker.data_dir / "logs", topic)
    # one row per (partition, key); the same key in two partitions is two rows
    assert len({(r[0], r[2]) for r in rows}) == len(rows) < len(records)
    assert [(r[0], r[3]) for r in rows if r[2] == b"shared"] == [
        (0, b"shared-r2"),
        (1, b"shared-r3"),
    ]
    table = open_table(broker.data_dir / "logs", topic)
    assert table.properties["gregor.upsert"] == "true"
    assert len(table.snapshots()) >= 4  # a commit (or more) per round
    code, out, err = run_command(
        broker.bootstrap_servers, "tables", "describe", topic, "--output", "json"
    )
    assert code == 0, err
    described = json.loads(out)
    assert (described["upsert"], described["table_upsert"]) == (True, True)
    # the topic's tail is not merged into the rows: a Spark read with tail=True is refused
    # (before Spark is asked for anything)
    from gregor.spark.tables import TableReadError, read_table

    with pytest.raises(TableReadError) as e:
        read_table(None, topic, bootstrap_servers=broker.bootstrap_servers, tail=True)
    assert str(e.value) == (
        "the table of profiles is an upsert table (iceberg.upsert): each key's latest record, "
        "which the topic's tail would not be merged into; read it without tail=True"
    )


def test_aborted_transactions_never_touch_the_table(broker: InProcessBroker) -> None:
    topic = "accounts"
    create_table_topic(broker.bootstrap_servers, topic, 2, lag_ms=20, **UPSERT)
    p = Producer(
        {"bootstrap.servers": broker.bootstrap_servers, "transactional.id": str(uuid.uuid4())}
    )
    p.init_transactions(30)
    for txn in range(6):
        p.begin_transaction()
        for i in range(10):
            # key k<i % 5> in partition i % 2; transaction txn's record i == txn is a tombstone
            value = None if i == txn else f"t{txn}-{i}".encode()
            p.produce(topic, value, f"k{i % 5}".encode(), partition=i % 2)
        if txn % 2:
            assert p.flush(30) == 0  # in the log before the abort (else librdkafka purges them)
            p.abort_transaction(30)
        else:
            p.commit_transaction(30)
    wait_until(lambda: caught_up(broker, topic, 2))
    committed = topic_rows(broker.bootstrap_servers, topic, 2)
    assert len(committed) == 30
    assert len(topic_rows(broker.bootstrap_servers, topic, 2, "read_uncommitted")) == 60
    rows = table_rows(broker.data_dir / "logs", topic)
    assert rows == latest_per_key(committed)
    # transaction 4's values, but for its tombstone (k4 in partition 0) and the keys whose
    # last record is transaction 4's: the aborted tombstones (k1, k3, k0) deleted nothing
    assert sorted((r[0], r[2], r[3]) for r in rows) == [
        (0, b"k0", b"t4-0"),
        (0, b"k1", b"t4-6"),
        (0, b"k2", b"t4-2"),
        (0, b"k3", b"t4-8"),
        (1, b"k0", b"t4-5"),
        (1, b"k1", b"t4-1"),
        (1, b"k2", b"t4-7"),
        (1, b"k3", b"t4-3"),
        (1, b"k4", b"t4-9"),
    ]


def test_a_restart_resumes_the_upserts_without_loss_or_duplicates(
    broker: InProcessBroker,
) -> None:
    topic = "inventory"
    create_table_topic(broker.bootstrap_servers, topic, 2, lag_ms=20, **UPSERT)
    rng = random.Random(7)
    produce_versions(broker.bootstrap_servers, topic, rng, "r0", 60)
    wait_until(lambda: caught_up(broker, topic, 2))
    before = committed_offsets(broker.data_dir / "logs", topic)
    broker.restart()
    produce_versions(broker.bootstrap_servers, topic, rng, "r1", 60)
    wait_until(lambda: caught_up(broker, topic, 2))
    records = topic_rows(broker.bootstrap_servers, topic, 2)
    assert len(records) == 122
    assert table_rows(broker.data_dir / "logs", topic) == latest_per_key(records)
    after = committed_offsets(broker.data_dir / "logs", topic)
    assert sum(after.values()) - sum(before.values()) == 61


def _create_error(admin: AdminClient, name: str, configs: dict[str, str]) -> tuple[int, str]:
    future = admin.create_topics([NewTopic(name, 1, 1, config=configs)])[name]
    with pytest.raises(KafkaException) as e:
        future.result(30)
    return e.value.args[0].code(), e.value.args[0].str()


def _alter(admin: AdminClient, topic: str, **ops: str | None) -> None:
    """An IncrementalAlterConfigs of ``topic``: SET each name to its value, DELETE it for None
    (``_`` in a name stands for ``.``)."""
    entries = [
        ConfigEntry(
            name.replace("_", "."),
            value,
            incremental_operation=(
                AlterConfigOpType.DELETE if value is None else AlterConfigOpType.SET
            ),
        )
        for name, value in ops.items()
    ]
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=entries)
    for f in admin.incremental_alter_configs([resource]).values():
        f.result(30)


def _alter_error(admin: AdminClient, topic: str, **ops: str | None) -> tuple[int, str]:
    with pytest.raises(KafkaException) as e:
        _alter(admin, topic, **ops)
    return e.value.args[0].code(), e.value.args[0].str()


def test_the_upsert_setting_is_validated_with_kafkas_invalid_config(
    broker: InProcessBroker,
) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    bad = KafkaError.INVALID_CONFIG
    prefix = "Invalid value true for configuration iceberg.upsert: "
    not_compacted = (
        "only a compacted topic's table can be an upsert table "
        "(the topic's cleanup.policy has no compact)"
    )
    assert _create_error(
        admin, "not-compacted", {"iceberg.mode": "key_value", "iceberg.upsert": "true"}
    ) == (bad, prefix + not_compacted)
    assert _create_error(admin, "no-table", UPSERT) == (
        bad,
        prefix + "an upsert table needs iceberg.mode=key_value (the topic's is disabled; "
        "to turn the table off, delete iceberg.upsert with it)",
    )
    assert _create_error(
        admin, "not-a-bool", {**UPSERT, "iceberg.mode": "key_value", "iceberg.upsert": "yes"}
    ) == (bad, "Invalid value yes for configuration iceberg.upsert: expected true or false")

    # an upsert table's topic stays compacted (compact,delete is compacted too)
    create_table_topic(broker.bootstrap_servers, "upserted", 1, **UPSERT)
    assert _alter_error(admin, "upserted", cleanup_policy="delete") == (
        bad,
        prefix + not_compacted,
    )
    _alter(admin, "upserted", cleanup_policy="compact,delete")
    # turning the table off takes the setting with it; then both may come back together
    assert _alter_error(admin, "upserted", iceberg_mode="disabled") == (
        bad,
        prefix + "an upsert table needs iceberg.mode=key_value (the topic's is disabled; "
        "to turn the table off, delete iceberg.upsert with it)",
    )
    _alter(admin, "upserted", iceberg_mode="disabled", iceberg_upsert=None)
    _alter(admin, "upserted", iceberg_mode="key_value", iceberg_upsert="true")

    # a table's kind does not change while it is on, either way
    create_table_topic(broker.bootstrap_servers, "appended", 1, **{"cleanup.policy": "compact"})
    assert _alter_error(admin, "appended", iceberg_upsert="true") == (
        bad,
        prefix + "it cannot change while the topic has a table (iceberg.mode=key_value): the "
        "table is an append table, fixed when it was made",
    )
    assert _alter_error(admin, "upserted", iceberg_upsert="false") == (
        bad,
        "Invalid value false for configuration iceberg.upsert: it cannot change while the "
        "topic has a table (iceberg.mode=key_value): the table is an upsert table, fixed when "
        "it was made",
    )


def _said(record: logging.LogRecord) -> str:
    """A log record's message, and its exception's (a first failure is logged with it)."""
    error = record.exc_info[1] if record.exc_info else None
    return f"{record.getMessage()} {error}"


def test_a_table_of_the_other_kind_is_never_written(
    broker: InProcessBroker, caplog: pytest.LogCaptureFixture
) -> None:
    """An append table kept while its topic's table was off, turned on again as an upsert
    table: the translator commits nothing and says why."""
    topic = "kept"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    create_table_topic(broker.bootstrap_servers, topic, 1, **{"cleanup.policy": "compact"})
    produce_versions(broker.bootstrap_servers, topic, random.Random(1), "r0", 20)
    wait_until(lambda: caught_up(broker, topic, 1))
    rows = table_rows(broker.data_dir / "logs", topic)
    assert len(rows) == 21  # an append table: every record
    _alter(admin, topic, iceberg_mode="disabled")
    caplog.set_level(logging.WARNING, logger="gregor.tables")
    _alter(admin, topic, iceberg_mode="key_value", iceberg_upsert="true")
    produce_versions(broker.bootstrap_servers, topic, random.Random(2), "r1", 20)
    refused = (
        "the table gregor.kept of topic kept is an append table (table property "
        "gregor.upsert=false), the topic asks for an upsert table (iceberg.upsert=true): "
        "nothing is committed until the table is dropped or iceberg.upsert is put back"
    )
    wait_until(lambda: any(refused in _said(r) for r in caplog.records))
    assert table_rows(broker.data_dir / "logs", topic) == rows
    code, out, err = run_command(broker.bootstrap_servers, "tables", "describe", topic)
    assert code == 0, err
    assert "Upsert: true" in out.splitlines()[0]
    assert out.splitlines()[1].endswith("Kind: append")


def table_offsets_prefix(records: Iterable[Row], offsets: dict[int, int]) -> list[Row]:
    """The records below each partition's table offset."""
    return [r for r in records if r[1] < offsets.get(r[0], 0)]


@pytest.mark.slow
@pytest.mark.process  # a real ``gregor serve`` SIGKILLed at a crash point, then restarted
@pytest.mark.timeout(300)
@pytest.mark.parametrize("point", ["commit.staged", "commit.done"])
def test_a_broker_killed_mid_commit_resumes_the_upserts_exactly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, point: str
) -> None:
    """Killed with an upsert commit's files written but the catalog not told, or right after
    the catalog took it: the table it leaves is the latest-per-key of a prefix of each
    partition, and the restarted broker brings it to the latest-per-key of the whole topic."""
    topic, partitions = "killed", 2
    data_dir = tmp_path / "logs"
    broker = BrokerProcess(data_dir=tmp_path)
    offsets = CommittedOffsets(data_dir, topic)
    rng = random.Random(point)
    monkeypatch.setenv(ENV, f"{point}:3")
    try:
        broker.start()
        create_table_topic(broker.bootstrap_servers, topic, partitions, lag_ms=20, **UPSERT)
        assert broker.proc is not None
        for rnd in range(10):  # rounds until the third commit's crash point kills the broker
            try:
                produce_versions(broker.bootstrap_servers, topic, rng, f"r{rnd}", 30)
            except (AssertionError, KafkaException):
                pass  # it died while we produced
            wait_until(lambda: broker.proc.poll() is not None or _caught_up(broker, offsets))
            if broker.proc.poll() is not None:
                break
        assert broker.proc.poll() == -signal.SIGKILL
        broker.kill()
        left = table_rows(data_dir, topic)  # no broker runs
        at_death = dict(offsets())
        monkeypatch.delenv(ENV)
        broker.start()
        records = topic_rows(broker.bootstrap_servers, topic, partitions)
        assert sum(at_death.values()) > 0  # two commits took records before the third died
        assert left == latest_per_key(table_offsets_prefix(records, at_death))
        produce_versions(broker.bootstrap_servers, topic, rng, "r9", 30)
        wait_until(lambda: _caught_up(broker, offsets))
        records = topic_rows(broker.bootstrap_servers, topic, partitions)
        assert table_rows(data_dir, topic) == latest_per_key(records)
    finally:
        broker.stop()


def _caught_up(broker: BrokerProcess, offsets: CommittedOffsets) -> bool:
    try:
        ends = end_offsets(broker.bootstrap_servers, "killed", 2, timeout=3.0)
    except KafkaException:  # it died while we asked, or did not answer in time
        return False
    committed = offsets()
    return all(committed.get(p) == end for p, end in ends.items() if end > 0)
