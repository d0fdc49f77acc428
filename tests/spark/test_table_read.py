"""A topic's Iceberg table read by Spark's own Parquet reader (``gregor.spark.tables``): the
rows equal the topic's committed records exactly; a row filter prunes the planned files and
selects exactly its rows; a snapshot id reads the table as it was; with ``tail=True`` the
records not yet in the table are read from the topic, so the frame is the whole committed
topic. A table on S3 (moto's server) is read by the Python source's tasks with Arrow, its
secret hidden in Spark's plan. polars and pyiceberg read the same table. A real in-process broker translates
(pyiceberg's SQL catalog on SQLite), confluent-kafka produces, the catalog is found by asking
the cluster."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pyarrow.parquet as pq
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from gregor.testing import InProcessBroker

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tables"))
from tables_support import (  # noqa: E402
    CommittedOffsets,
    Row,
    committed_offsets,
    create_table_topic,
    end_offsets,
    open_table,
    topic_rows,
    wait_until,
)

pytest.importorskip("pyiceberg")

from gregor.spark.tables import TableReadError, plan_table, read_table  # noqa: E402

PARTITIONS = 3
HOUR_MS = 3_600_000


@pytest.fixture(scope="module")
def broker() -> Iterator[InProcessBroker]:
    with InProcessBroker() as b:
        yield b


def produce(bootstrap: str, topic: str, n: int, tag: str, timestamps: tuple[int, ...] = ()) -> None:
    """``n`` records round the partitions; with ``timestamps``, record i has the
    ``i % len(timestamps)``-th (else the producer's time)."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(n):
        key = None if i % 7 == 0 else f"{tag}k{i}".encode()
        headers = [("h", f"{i}".encode()), ("empty", None)] if i % 3 == 0 else None
        at = {"timestamp": timestamps[i % len(timestamps)]} if timestamps else {}
        p.produce(
            topic, f"{tag}v{i}".encode(), key, partition=i % PARTITIONS, headers=headers, **at
        )
    assert p.flush(30) == 0


def caught_up(broker: InProcessBroker, topic: str) -> bool:
    ends = end_offsets(broker.bootstrap_servers, topic, PARTITIONS)
    table = committed_offsets(broker.data_dir / "logs", topic)
    return all(table.get(p) == end for p, end in ends.items() if end > 0)


def rows_of(frame: Any) -> list[Row]:
    """The frame's rows in tables_support's shape, sorted by (partition, offset)."""
    from pyspark.sql import functions as F

    out = []
    for r in frame.select(
        "partition", "offset", "key", "value", "headers", F.expr("unix_millis(timestamp)")
    ).collect():
        headers = tuple((h["key"], h["value"]) for h in r["headers"] or ())
        out.append(
            (
                r["partition"],
                r["offset"],
                bytes(r["key"]) if r["key"] is not None else None,
                bytes(r["value"]) if r["value"] is not None else None,
                tuple((k, bytes(v) if v is not None else None) for k, v in headers),
                r[5],
            )
        )
    return sorted(out, key=lambda row: (row[0], row[1]))


def set_mode(broker: InProcessBroker, topic: str, mode: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    entries = [ConfigEntry("iceberg.mode", mode, incremental_operation=AlterConfigOpType.SET)]
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=entries)
    for f in admin.incremental_alter_configs([resource]).values():
        f.result(30)


def test_spark_reads_the_table_as_the_topic_holds_it(spark: Any, broker: InProcessBroker) -> None:
    topic = "table-read"
    bootstrap = broker.bootstrap_servers
    create_table_topic(bootstrap, topic, PARTITIONS)
    now_ms = int(time.time() * 1000)
    earlier_ms = now_ms - 2 * HOUR_MS  # two hours: the table's files of one and of the other
    produce(bootstrap, topic, 300, "a", (earlier_ms, now_ms))
    wait_until(lambda: caught_up(broker, topic))
    first = topic_rows(bootstrap, topic, PARTITIONS)
    assert len(first) == 300
    first_snapshot = open_table(broker.data_dir / "logs", topic).current_snapshot().snapshot_id

    whole = read_table(spark, topic, bootstrap_servers=bootstrap)
    assert whole.columns == ["key", "value", "topic", "partition", "offset", "timestamp", "headers"]
    assert rows_of(whole) == first
    assert {r["topic"] for r in whole.select("topic").distinct().collect()} == {topic}

    # Spark lists the planned files on the driver, whatever its threshold for listing with a job
    # of its own (a stage per read otherwise: 0.6 s at 45 files), and keeps the session's setting.
    threshold = "spark.sql.sources.parallelPartitionDiscovery.threshold"
    assert len(plan_table(topic, bootstrap_servers=bootstrap).files) > 1
    spark.conf.set(threshold, "1")
    spark.sparkContext.setJobGroup("table-listing", "listing")
    try:
        listed = read_table(spark, topic, bootstrap_servers=bootstrap)
        assert spark.sparkContext.statusTracker().getJobIdsForGroup("table-listing") == []
    finally:
        spark.sparkContext.setJobGroup("", "")
        assert spark.conf.get(threshold) == "1"
        spark.conf.unset(threshold)
    assert rows_of(listed) == first

    # A row filter prunes the plan (each commit writes a file per hour of the timestamps) and
    # the frame holds exactly the matching rows.
    cut = datetime.fromtimestamp((earlier_ms + HOUR_MS // 2) / 1000, UTC).isoformat()
    earlier_only = f"timestamp < '{cut}' and partition = 1"
    everything = plan_table(topic, bootstrap_servers=bootstrap)
    pruned = plan_table(topic, bootstrap_servers=bootstrap, row_filter=earlier_only)
    assert 0 < len(pruned.files) < len(everything.files)
    for path in pruned.files:
        stamps = pq.read_table(path.removeprefix("file://"), columns=["timestamp"])
        assert {t.timestamp() * 1000 for t in stamps.column("timestamp").to_pylist()} == {
            earlier_ms
        }
    filtered = read_table(spark, topic, bootstrap_servers=bootstrap, row_filter=earlier_only)
    assert rows_of(filtered) == [r for r in first if r[0] == 1 and r[5] == earlier_ms]
    assert len(rows_of(filtered)) == 50

    # More records: the current snapshot has them, the first snapshot does not.
    produce(bootstrap, topic, 90, "b")
    wait_until(lambda: caught_up(broker, topic))
    second = topic_rows(bootstrap, topic, PARTITIONS)
    assert len(second) == 390
    assert rows_of(read_table(spark, topic, bootstrap_servers=bootstrap)) == second
    then = read_table(spark, topic, bootstrap_servers=bootstrap, snapshot_id=first_snapshot)
    assert rows_of(then) == first
    with pytest.raises(TableReadError, match="no snapshot 12345"):
        plan_table(topic, bootstrap_servers=bootstrap, snapshot_id=12345)

    # The translator stops: what is produced now is only in the topic, and the tail brings it.
    set_mode(broker, topic, "disabled")
    in_table = committed_offsets(broker.data_dir / "logs", topic)
    produce(bootstrap, topic, 60, "c")
    everything_now = topic_rows(bootstrap, topic, PARTITIONS)
    assert len(everything_now) == 450
    assert committed_offsets(broker.data_dir / "logs", topic) == in_table
    table_only = rows_of(read_table(spark, topic, bootstrap_servers=bootstrap))
    assert table_only == [r for r in everything_now if r[1] < in_table[r[0]]]
    with_tail = read_table(spark, topic, bootstrap_servers=bootstrap, tail=True)
    assert rows_of(with_tail) == everything_now
    tail_filtered = read_table(
        spark, topic, bootstrap_servers=bootstrap, tail=True, row_filter="partition = 2"
    )
    assert rows_of(tail_filtered) == [r for r in everything_now if r[0] == 2]

    # Another Iceberg writer's snapshot (an empty append: no offsets map in its summary) is
    # current now: the offsets come from its newest ancestor that has them, so the tail starts
    # where the table ends (not at the earliest offset, which would read every row twice).
    table = open_table(broker.data_dir / "logs", topic)
    table.append(table.schema().as_arrow().empty_table())
    assert plan_table(topic, bootstrap_servers=bootstrap).offsets == in_table
    assert (
        rows_of(read_table(spark, topic, bootstrap_servers=bootstrap, tail=True)) == everything_now
    )


def test_spark_reads_a_table_on_s3(spark: Any) -> None:
    pytest.importorskip("moto")
    from s3_support import moto_s3

    from gregor.tables.settings import catalog_settings

    topic = "table-on-s3"
    with moto_s3() as store:
        props = store.broker_props(f"s3://{store.new_bucket()}/warehouse")
        with InProcessBroker(props) as b:
            bootstrap = b.bootstrap_servers
            create_table_topic(bootstrap, topic, PARTITIONS)
            produce(bootstrap, topic, 120, "s")
            offsets = CommittedOffsets(b.data_dir / "logs", topic, props)
            ends = end_offsets(bootstrap, topic, PARTITIONS)
            wait_until(lambda: all(offsets().get(p) == e for p, e in ends.items() if e > 0))
            expected = topic_rows(bootstrap, topic, PARTITIONS)
            assert len(expected) == 120
            # the catalog's properties with the store's credentials, as a reader holds them
            catalog = catalog_settings(props, str(b.data_dir / "logs")).load_properties()
            assert catalog["s3.secret-access-key"] == store.secret_key
            plan = plan_table(topic, catalog=catalog)
            assert plan.files and all(f.startswith("s3://") for f in plan.files)
            frame = read_table(spark, topic, catalog=catalog)
            assert rows_of(frame) == expected
            # one task per data file; the secret never shows in Spark's plan
            assert frame.rdd.getNumPartitions() == len(plan.files)
            shown = frame._jdf.queryExecution().toString()
            assert store.secret_key not in shown and "gregor_table_files" in shown
            # with the tail: records produced after the translator stopped come from the topic
            set_mode(b, topic, "disabled")
            produce(bootstrap, topic, 30, "t")
            whole = read_table(
                spark, topic, catalog=catalog, bootstrap_servers=bootstrap, tail=True
            )
            assert rows_of(whole) == topic_rows(bootstrap, topic, PARTITIONS)
            assert len(rows_of(whole)) == 150


def test_polars_and_pyiceberg_read_the_same_table(broker: InProcessBroker) -> None:
    import polars as pl

    topic = "table-others"
    bootstrap = broker.bootstrap_servers
    create_table_topic(bootstrap, topic, PARTITIONS)
    produce(bootstrap, topic, 120, "p")
    wait_until(lambda: caught_up(broker, topic))
    table = open_table(broker.data_dir / "logs", topic)
    expected = [(r[0], r[1], r[2], r[3]) for r in topic_rows(bootstrap, topic, PARTITIONS)]
    frame = pl.scan_iceberg(table).select("partition", "offset", "key", "value").collect()
    assert sorted(frame.iter_rows()) == expected
    arrow = table.scan(selected_fields=("partition", "offset", "key", "value")).to_arrow()
    columns = [arrow.column(c).to_pylist() for c in ("partition", "offset", "key", "value")]
    assert sorted(zip(*columns, strict=True)) == expected
