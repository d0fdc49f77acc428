"""Spark's own Kafka connector (``spark-sql-kafka-0-10``, the ``kafka`` format: the one Spark users
pick) against a real Gregor broker, unchanged: batch writes and reads, and a streaming query
that reads Gregor and writes Gregor through restarts from its checkpoint. Where both apply,
Gregor's own data source (``gregor``) reads the same rows.

The connector comes from ``scripts/kafka.sh fetch-spark`` (conftest's session carries it).
Maven Central serves no 4.3.0 of it here (the pinned PySpark's release); 4.2.0, the newest it
serves, is what runs."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from spark_helpers import Broker, create_topic, produce


@pytest.fixture(autouse=True)
def _connector(spark: Any) -> None:
    jars = spark.sparkContext.getConf().get("spark.jars", "")
    assert "spark-sql-kafka-0-10" in jars, (
        "no Spark Kafka connector: bash scripts/kafka.sh fetch-spark"
    )


def batch(spark: Any, fmt: str, b: Broker, **opts: str) -> Any:
    r = spark.read.format(fmt).option("kafka.bootstrap.servers", b.bootstrap_servers)
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load()


def rows(df: Any) -> list[tuple]:
    return sorted(
        (
            r.topic,
            r.partition,
            r.offset,
            r.key,
            r.value,
            int(r.timestamp.replace(tzinfo=dt.UTC).timestamp() * 1000),
            r.timestampType,
            [(h.key, h.value) for h in r.headers],
        )
        for r in df.collect()
    )


def test_batch_write_and_read(spark: Any, gregor: Broker, topic: str) -> None:
    create_topic(gregor, topic, 2)
    data = [(f"k{i}", f"v{i}", i % 2, [("h", f"x{i}".encode())]) for i in range(20)]
    df = spark.createDataFrame(
        data,
        "key string, value string, partition int, headers array<struct<key:string,value:binary>>",
    )
    df.write.format("kafka").option("kafka.bootstrap.servers", gregor.bootstrap_servers).option(
        "topic", topic
    ).save()
    got = rows(batch(spark, "kafka", gregor, subscribe=topic, includeHeaders="true"))
    # What was written, each record once, in the partition asked for; offsets 0..9 in each.
    assert sorted((p, k, v, h) for _, p, _, k, v, _, _, h in got) == sorted(
        (i % 2, f"k{i}".encode(), f"v{i}".encode(), [("h", f"x{i}".encode())]) for i in range(20)
    )
    assert sorted((p, o) for _, p, o, *_ in got) == sorted(
        (p, o) for p in range(2) for o in range(10)
    )
    assert {t for *_, t, _ in got} == {0}  # CreateTime
    # Gregor's own data source reads the very same rows.
    assert rows(batch(spark, "gregor", gregor, subscribe=topic, includeHeaders="true")) == got
    # Offset ranges as the connector reads them.
    part = batch(
        spark,
        "kafka",
        gregor,
        assign=f'{{"{topic}": [1]}}',
        startingOffsets=f'{{"{topic}": {{"1": 3}}}}',
        endingOffsets=f'{{"{topic}": {{"1": 6}}}}',
    )
    assert sorted((r.partition, r.offset) for r in part.collect()) == [(1, 3), (1, 4), (1, 5)]


def test_streaming_read_and_write_through_restarts(
    spark: Any, gregor: Broker, topic: str, tmp_path: Path
) -> None:
    sink = f"{topic}-out"
    create_topic(gregor, topic, 3)
    create_topic(gregor, sink, 1)
    checkpoint = tmp_path / "cp"

    def run() -> None:
        q = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", gregor.bootstrap_servers)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "20")
            .load()
            .selectExpr("key", "upper(CAST(value AS STRING)) AS value")
            .writeStream.format("kafka")
            .option("kafka.bootstrap.servers", gregor.bootstrap_servers)
            .option("topic", sink)
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        q.awaitTermination()
        assert q.exception() is None

    first = produce(gregor, topic, {0: 15, 1: 10, 2: 5})
    run()
    second = produce(gregor, topic, {0: 5, 1: 5}, first={0: 15, 1: 10})
    run()  # from the checkpoint: only what came since
    got = sorted((r.key, r.value) for r in batch(spark, "kafka", gregor, subscribe=sink).collect())
    assert got == sorted((k, v.upper()) for _, _, k, v, _ in first + second)
    # The checkpoint's last offsets are the topic's end offsets.
    batches = sorted((checkpoint / "offsets").glob("[0-9]*"), key=lambda p: int(p.name))
    assert len(batches) >= 3  # maxOffsetsPerTrigger=20 over 30, then 10 more
    last = json.loads(batches[-1].read_text().strip().splitlines()[-1])
    assert last == {topic: {"0": 20, "1": 15, "2": 5}}
