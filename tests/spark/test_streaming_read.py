"""Streaming reads: admission control, AvailableNow, checkpoint offsets, restarts, discovery."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

from spark_helpers import Broker, create_topic, produce

from gregor.client import AdminClient, TopicPartition
from gregor.spark import offsets_behind_latest


def stream(spark: Any, b: Broker, **opts: str) -> Any:
    r = spark.readStream.format("gregor")
    for k, v in b.options(**opts).items():
        r = r.option(k, v)
    return r.load()


def checkpoint_offsets(checkpoint: Path) -> list[dict]:
    """The source offsets Spark wrote to the offset log, batch by batch."""
    out = []
    files = sorted((checkpoint / "offsets").glob("[0-9]*"), key=lambda p: int(p.name))
    for f in files:
        lines = f.read_text().splitlines()
        out.append(json.loads(lines[-1]))
    return out


def wait_for(cond: Any, timeout: float = 60.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_available_now_with_max_offsets_per_trigger(
    spark: Any, broker: Broker, topic: str, tmp_path: Path
) -> None:
    create_topic(broker, topic, 2)
    produced = produce(broker, topic, {0: 30, 1: 10})
    name = f"m_{uuid.uuid4().hex[:8]}"
    q = (
        stream(
            spark, broker, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger="15"
        )
        .writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(120)
    assert q.exception() is None
    # backlog 30 + 10, 15 per trigger shared by backlog with Spark's rounding (down, unless a
    # share is below one): 11+3, 10+4, 9+3 (KafkaMicroBatchSourceSuite "maxOffsetsPerTrigger")
    assert checkpoint_offsets(tmp_path / "cp") == [
        {topic: {"0": 11, "1": 3}},
        {topic: {"0": 21, "1": 7}},
        {topic: {"0": 30, "1": 10}},
    ]
    assert [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]] == [14, 14, 12]
    got = sorted((r.partition, r.offset, r.value) for r in spark.table(name).collect())
    assert got == sorted((p, i, v) for p, i, _k, v, _ts in produced)
    # KafkaMicroBatchSourceSuite "test custom metrics - with rate limit": the progress carries
    # the latest offsets the source saw, from which Spark's offsets-behind-latest metrics follow
    behind = [offsets_behind_latest(p["sources"][0]) for p in q.recentProgress if p["numInputRows"]]
    assert behind[0] == {
        "minOffsetsBehindLatest": "7",
        "maxOffsetsBehindLatest": "19",
        "avgOffsetsBehindLatest": "13.0",
    }
    assert behind[-1] == {
        "minOffsetsBehindLatest": "0",
        "maxOffsetsBehindLatest": "0",
        "avgOffsetsBehindLatest": "0.0",
    }


def test_restart_from_checkpoint_reads_only_new_records(
    spark: Any, broker: Broker, topic: str, tmp_path: Path
) -> None:
    create_topic(broker, topic, 2)
    first = produce(broker, topic, {0: 6, 1: 4})
    out, cp = tmp_path / "out", tmp_path / "cp"

    def run() -> None:
        q = (
            stream(spark, broker, subscribe=topic, startingOffsets="earliest")
            .selectExpr("partition", "offset", "value")
            .writeStream.format("parquet")
            .option("path", str(out))
            .option("checkpointLocation", str(cp))
            .trigger(availableNow=True)
            .start()
        )
        q.awaitTermination(120)
        assert q.exception() is None

    run()
    second = produce(broker, topic, {0: 2, 1: 3}, first={0: 6, 1: 4})
    run()
    got = sorted((r.partition, r.offset, r.value) for r in spark.read.parquet(str(out)).collect())
    assert got == sorted((p, i, v) for p, i, _k, v, _ts in first + second)
    assert checkpoint_offsets(cp)[-1] == {topic: {"0": 8, "1": 7}}


def test_starting_latest_skips_existing_records(spark: Any, gregor: Broker, topic: str) -> None:
    create_topic(gregor, topic, 1)
    produce(gregor, topic, {0: 5})
    name = f"m_{uuid.uuid4().hex[:8]}"
    q = (
        stream(spark, gregor, subscribe=topic)
        .writeStream.format("memory")
        .queryName(name)
        .trigger(processingTime="300 milliseconds")
        .start()
    )
    try:
        # either message means a trigger has run, so the starting offsets are fixed
        idle = ("Waiting for data to arrive", "Waiting for next trigger")
        wait_for(lambda: q.status["message"] in idle, what="the first trigger")
        produce(gregor, topic, {0: 3}, first={0: 5})
        wait_for(lambda: spark.table(name).count() == 3, what="3 new records")
        assert sorted((r.offset, r.value) for r in spark.table(name).collect()) == [
            (5, b"v0-5"),
            (6, b"v0-6"),
            (7, b"v0-7"),
        ]
    finally:
        q.stop()


def test_new_partitions_and_topics_are_picked_up(spark: Any, gregor: Broker, topic: str) -> None:
    create_topic(gregor, topic, 1)
    name = f"m_{uuid.uuid4().hex[:8]}"
    q = (
        stream(spark, gregor, subscribePattern=f"{topic}.*", startingOffsets="earliest")
        .writeStream.format("memory")
        .queryName(name)
        .trigger(processingTime="300 milliseconds")
        .start()
    )
    try:
        produce(gregor, topic, {0: 2})
        wait_for(lambda: spark.table(name).count() == 2, what="records of the first partition")
        with AdminClient({"bootstrap.servers": gregor.bootstrap_servers}) as admin:
            admin.create_partitions({topic: 3})
        produce(gregor, topic, {1: 2, 2: 1})
        create_topic(gregor, f"{topic}-more", 1)
        produce(gregor, f"{topic}-more", {0: 1})
        wait_for(
            lambda: spark.table(name).count() == 6, what="records of the new partitions and topic"
        )
        got = sorted((r.topic, r.partition, r.offset) for r in spark.table(name).collect())
        assert got == [
            (topic, 0, 0),
            (topic, 0, 1),
            (topic, 1, 0),
            (topic, 1, 1),
            (topic, 2, 0),
            (f"{topic}-more", 0, 0),
        ]
    finally:
        q.stop()


def test_fail_on_data_loss_in_a_stream(
    spark: Any, gregor: Broker, topic: str, tmp_path: Path
) -> None:
    create_topic(gregor, topic, 1)
    produce(gregor, topic, {0: 5})

    def run(cp: Path, out: Path, fail: str) -> Any:
        q = (
            stream(spark, gregor, subscribe=topic, startingOffsets="earliest", failOnDataLoss=fail)
            .selectExpr("offset", "value")
            .writeStream.format("parquet")
            .option("path", str(out))
            .option("checkpointLocation", str(cp))
            .trigger(availableNow=True)
            .start()
        )
        try:
            q.awaitTermination(120)
        except Exception:  # a failed query raises here; its exception() tells why
            pass
        return q

    for fail in ("true", "false"):
        assert run(tmp_path / f"cp-{fail}", tmp_path / f"out-{fail}", fail).exception() is None
    produce(gregor, topic, {0: 5}, first={0: 5})
    with AdminClient({"bootstrap.servers": gregor.bootstrap_servers}) as admin:
        admin.delete_records({TopicPartition(topic, 0): 8})  # offsets 5, 6, 7 are never read
    q = run(tmp_path / "cp-true", tmp_path / "out-true", "true")
    assert q.exception() is not None and "failOnDataLoss" in str(q.exception())
    assert run(tmp_path / "cp-false", tmp_path / "out-false", "false").exception() is None
    got = sorted(
        (r.offset, r.value) for r in spark.read.parquet(str(tmp_path / "out-false")).collect()
    )
    assert got == [(i, f"v0-{i}".encode()) for i in (0, 1, 2, 3, 4, 8, 9)]


def test_topic_level_starting_offsets_in_a_stream(
    spark: Any, gregor: Broker, topic: str, tmp_path: Path
) -> None:
    # SPARK-58774: {"a": "latest", "b": "earliest"} starts every partition of a at its end and
    # every partition of b at its start, expanded against the partitions the query finds
    a, b = f"{topic}-a", f"{topic}-b"
    create_topic(gregor, a, 2)
    create_topic(gregor, b, 2)
    produce(gregor, a, {0: 3, 1: 2})
    produced_b = produce(gregor, b, {0: 2, 1: 1})
    name = f"m_{uuid.uuid4().hex[:8]}"
    q = (
        stream(
            spark,
            gregor,
            subscribe=f"{a},{b}",
            startingOffsets=f'{{"{a}": "latest", "{b}": "earliest"}}',
        )
        .writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(120)
    assert q.exception() is None
    got = sorted((r.topic, r.partition, r.offset, r.value) for r in spark.table(name).collect())
    assert got == sorted((b, p, i, v) for p, i, _k, v, _ts in produced_b)
    assert checkpoint_offsets(tmp_path / "cp")[-1] == {a: {"0": 3, "1": 2}, b: {"0": 2, "1": 1}}
