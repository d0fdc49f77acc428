"""Topics as tables on an S3-compatible store (moto's server on 127.0.0.1, credentials
checked): a topic's table is written to the bucket and equals the topic record by record; a
restarted broker resumes without loss or duplicate; the secret key is in no log line, no
DescribeConfigs answer and no file the broker wrote; a warehouse the broker cannot write (a
wrong secret, no such bucket) stops its start, and while a broker runs it stops the
translator (the error logged, nothing in the bucket, nothing in the catalog)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource
from s3_support import S3Store, moto_s3
from tables_support import (
    CommittedOffsets,
    create_table_topic,
    end_offsets,
    open_table,
    table_exists,
    table_rows,
    topic_rows,
    wait_until,
)

from gregor.testing import BrokerProcess, InProcessBroker

pytest.importorskip("pyiceberg")
pytest.importorskip("moto")

SECRET = "iceberg.s3.secret-access-key"


@pytest.fixture(scope="module")
def store() -> Iterator[S3Store]:
    with moto_s3() as s:
        yield s


def produce(bootstrap: str, topic: str, n: int, partitions: int, tag: str) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(n):
        key = None if i % 7 == 0 else f"{tag}k{i}".encode()
        headers = [("h", f"{i}".encode()), ("empty", None)] if i % 3 == 0 else None
        p.produce(topic, f"{tag}v{i}".encode(), key, partition=i % partitions, headers=headers)
    assert p.flush(30) == 0


def caught_up(bootstrap: str, offsets: CommittedOffsets, topic: str, partitions: int) -> bool:
    ends = end_offsets(bootstrap, topic, partitions)
    table = offsets()
    return all(table.get(p) == end for p, end in ends.items() if end > 0)


def store_refused(text: str) -> bool:
    """The store's answer to a wrong secret (a HEAD has no body to say more than 403)."""
    return "ACCESS_DENIED" in text or "SIGNATURE_DOES_NOT_MATCH" in text


def files_holding(root: Path, secret: str) -> list[Path]:
    needle = secret.encode()
    return [f for f in root.rglob("*") if f.is_file() and needle in f.read_bytes()]


@pytest.mark.process  # a real `gregor serve`: its log and command line are part of the check
def test_a_table_on_s3_equals_the_topic_across_a_restart_and_keeps_its_secret(
    store: S3Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bucket = store.new_bucket()
    warehouse = f"s3://{bucket}/tables"
    props = store.broker_props(warehouse)
    topic = "orders-s3"
    with BrokerProcess(config=props, data_dir=tmp_path, log_level="DEBUG") as broker:
        logs = broker.data_dir / "logs"
        offsets = CommittedOffsets(logs, topic, props)
        bootstrap = broker.bootstrap_servers
        create_table_topic(bootstrap, topic, 3)
        produce(bootstrap, topic, 150, 3, "a")
        wait_until(lambda: caught_up(bootstrap, offsets, topic, 3))
        assert table_rows(logs, topic, props) == topic_rows(bootstrap, topic, 3)
        first = offsets()
        assert sum(first.values()) == 150

        broker.restart()
        bootstrap = broker.bootstrap_servers
        produce(bootstrap, topic, 150, 3, "b")
        wait_until(lambda: caught_up(bootstrap, offsets, topic, 3))
        expected = topic_rows(bootstrap, topic, 3)
        assert len(expected) == 300
        assert table_rows(logs, topic, props) == expected  # none lost, none twice
        assert offsets() == {p: first[p] + 50 for p in range(3)}

        # The data files are in the bucket, under the warehouse; none on the broker's disk.
        table = open_table(logs, topic, props)
        data_files = sorted(t.file.file_path for t in table.scan().plan_files())
        in_bucket = store.keys(bucket)
        assert data_files and set(data_files) <= set(in_bucket)
        location = table.location()
        assert location.startswith(f"{warehouse}/") and location.endswith(f"/{topic}")
        assert all(f.startswith(f"{location}/data/") for f in data_files)
        assert table.metadata_location.startswith(f"{location}/metadata/")
        assert table.metadata_location in in_bucket
        assert not list(logs.rglob("*.parquet"))

        # The secret: described as sensitive, without its value, and nowhere else.
        admin = AdminClient({"bootstrap.servers": bootstrap})
        resource = ConfigResource(ConfigResource.Type.BROKER, "1")
        entries = admin.describe_configs([resource])[resource].result(30)
        assert entries[SECRET].is_sensitive and entries[SECRET].value is None
        assert entries["iceberg.s3.endpoint"].value == store.endpoint
        assert not [e.name for e in entries.values() if store.secret_key in (e.value or "")]
        # describe gives no credentials: a reader brings its own (here the AWS environment
        # variables, which pyarrow's S3 client reads; the broker was started without them).
        from gregor.testing.cli import run_command

        monkeypatch.setenv("AWS_ACCESS_KEY_ID", store.access_key)
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", store.secret_key)
        code, out, err = run_command(bootstrap, "tables", "describe", topic, "--output", "json")
        assert code == 0, err
        described = json.loads(out)
        assert described["catalog_properties"]["warehouse"] == warehouse
        assert described["catalog_properties"]["s3.endpoint"] == store.endpoint
        assert store.secret_key not in out and store.access_key not in out
        assert [(p["partition"], p["lag"]) for p in described["partitions"]] == [
            (0, 0),
            (1, 0),
            (2, 0),
        ]
    log_text = broker.read_log(since_start=False)
    assert "translat" in log_text.lower() or "table" in log_text  # the DEBUG log was written
    assert store.secret_key not in log_text
    assert files_holding(broker.data_dir, store.secret_key) == []
    assert not [k for k in in_bucket if store.secret_key in k]


def test_a_warehouse_the_broker_cannot_write_stops_it_and_advances_nothing(
    store: S3Store, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    bucket = store.new_bucket()
    warehouse = f"s3://{bucket}/tables"
    wrong = store.broker_props(warehouse, secret_key="not-the-secret")
    topic = "refused"
    logs = tmp_path / "logs"
    caplog.set_level(logging.INFO, logger="gregor.tables")

    # Running: the table topic is made, its translator cannot write the table and says why.
    with InProcessBroker(config=wrong, data_dir=tmp_path) as broker:
        create_table_topic(broker.bootstrap_servers, topic, 2)
        produce(broker.bootstrap_servers, topic, 20, 2, "r")

        def refused() -> bool:
            return any(
                r.getMessage()
                == f"opening the table of topic {topic} (warehouse {warehouse}) failed; trying again"
                and r.exc_info is not None
                and store_refused(logging.Formatter().formatException(r.exc_info))
                for r in caplog.records
            )

        wait_until(refused)
    assert store.keys(bucket) == []
    assert not table_exists(logs, topic, store.broker_props(warehouse))
    assert "not-the-secret" not in caplog.text

    # At start, with a table topic: the broker does not start, and says why.
    with pytest.raises(Exception) as stopped:
        InProcessBroker(config=wrong, data_dir=tmp_path).start()
    why = str(stopped.value)
    assert f"topic {topic} has iceberg.mode set, but the warehouse {warehouse}" in why, why
    assert "cannot be written" in why and "SIGNATURE_DOES_NOT_MATCH" in why, why
    assert "not-the-secret" not in why
    missing = store.broker_props(f"s3://no-such-bucket-{bucket}/tables")
    with pytest.raises(Exception, match="NO_SUCH_BUCKET"):
        InProcessBroker(config=missing, data_dir=tmp_path).start()
    assert store.keys(bucket) == []

    # The right secret: the table takes the whole topic, each record once.
    props = store.broker_props(warehouse)
    with InProcessBroker(config=props, data_dir=tmp_path) as broker:
        offsets = CommittedOffsets(logs, topic, props)
        wait_until(lambda: caught_up(broker.bootstrap_servers, offsets, topic, 2))
        expected = topic_rows(broker.bootstrap_servers, topic, 2)
        assert len(expected) == 20
        assert table_rows(logs, topic, props) == expected


def test_s3_settings_a_broker_cannot_honour_stop_it_at_start() -> None:
    from gregor.broker.config.broker_config import BrokerConfig, ConfigError
    from gregor.tables.settings import catalog_settings

    s3 = {"iceberg.warehouse": "s3://lake/tables", "iceberg.s3.endpoint": "http://127.0.0.1:1"}
    cases = {
        "not on S3": {"iceberg.s3.endpoint": "http://127.0.0.1:1"},
        "go together": {**s3, "iceberg.s3.access-key-id": "AKIA"},
        "is not an http:// or https:// URL": {**s3, "iceberg.s3.endpoint": "127.0.0.1:1"},
    }
    for why, props in cases.items():
        with pytest.raises(ConfigError, match=why):
            BrokerConfig(props)
    with pytest.raises(ConfigError, match="path-style-access"):
        BrokerConfig({**s3, "iceberg.s3.path-style-access": "maybe"})
    # pyiceberg's FileIO properties: the region defaults with an endpoint; virtual addressing
    # only when path-style access is off.
    props = catalog_settings({**s3, "iceberg.s3.path-style-access": "false"}, "/data").properties
    assert dict(props) == {
        "warehouse": "s3://lake/tables",
        "uri": "sqlite:////data/iceberg/catalog.db",
        "s3.endpoint": "http://127.0.0.1:1",
        "s3.region": "us-east-1",
        "s3.force-virtual-addressing": "true",
    }
