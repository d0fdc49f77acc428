"""Batch and streaming writes, read back with a real Kafka client (confluent-kafka)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    StringType,
    StructField,
    StructType,
)
from spark_helpers import Broker, create_topic, produce

HEADERS = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)


def consume_all(b: Broker, topic: str, expected: int, partitions: int = 1) -> list[tuple]:
    """(partition, key, value, headers) of ``expected`` records, read by librdkafka."""
    import confluent_kafka

    c = confluent_kafka.Consumer(
        {
            "bootstrap.servers": b.bootstrap_servers,
            "group.id": f"g-{topic}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    c.assign(
        [
            confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
            for p in range(partitions)
        ]
    )
    out = []
    try:
        for _ in range(300):
            for m in c.consume(100, 0.2):
                if m.error():
                    continue
                out.append((m.partition(), m.key(), m.value(), m.headers() or []))
            if len(out) >= expected:
                break
    finally:
        c.close()
    return sorted(out, key=lambda r: (r[0], r[2]))


def test_batch_write_every_column(spark: Any, broker: Broker, topic: str) -> None:
    create_topic(broker, topic, 3)
    schema = StructType(
        [
            StructField("topic", StringType()),
            StructField("key", StringType()),
            StructField("value", BinaryType()),
            StructField("partition", IntegerType()),
            StructField("headers", HEADERS),
        ]
    )
    data = [
        (topic, "a", b"v0", 0, [("h", b"1")]),
        (topic, None, b"v1", 2, []),
        (topic, "c", b"v2", 2, [("h", None), ("i", b"")]),
        (topic, "d", b"v3", 1, None),
    ]
    spark.createDataFrame(data, schema).write.format("gregor").option(
        "kafka.bootstrap.servers", broker.bootstrap_servers
    ).mode("append").save()
    assert consume_all(broker, topic, 4, 3) == [
        (0, b"a", b"v0", [("h", b"1")]),
        (1, b"d", b"v3", []),
        (2, None, b"v1", []),
        (2, b"c", b"v2", [("h", None), ("i", b"")]),
    ]


def test_topic_option_overrides_column_and_round_trip(
    spark: Any, broker: Broker, topic: str
) -> None:
    create_topic(broker, topic, 1)
    create_topic(broker, f"{topic}-copy", 1)
    produced = produce(broker, topic, {0: 20})
    src = (
        spark.read.format("gregor")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("subscribe", topic)
        .load()
    )
    # the source's own columns (topic = the source topic) go straight back to a sink
    src.select("topic", "key", "value").write.format("gregor").option(
        "kafka.bootstrap.servers", broker.bootstrap_servers
    ).option("topic", f"{topic}-copy").mode("append").save()
    got = consume_all(broker, f"{topic}-copy", 20)
    assert sorted((k, v) for _p, k, v, _h in got) == sorted(
        (k, v) for _p, _i, k, v, _ts in produced
    )


@pytest.mark.parametrize(
    "ddl,message",
    [
        ("key string", "required attribute 'value' not found"),
        ("value int", "value attribute type must be a string or binary"),
        ("value string, partition string", "partition attribute type must be an int"),
        ("value string, headers string", "headers attribute type"),
    ],
)
def test_bad_columns_are_refused(spark: Any, gregor: Broker, ddl: str, message: str) -> None:
    df = spark.createDataFrame([], ddl)
    w = (
        df.write.format("gregor")
        .option("kafka.bootstrap.servers", gregor.bootstrap_servers)
        .option("topic", "x")
    )
    with pytest.raises(Exception, match=message):
        w.mode("append").save()


def test_missing_topic_is_refused(spark: Any, gregor: Broker) -> None:
    df = spark.createDataFrame([("v",)], "value string")
    with pytest.raises(Exception, match="topic option required"):
        df.write.format("gregor").option("kafka.bootstrap.servers", gregor.bootstrap_servers).mode(
            "append"
        ).save()


def test_a_failed_delivery_fails_the_job(spark: Any, gregor: Broker, topic: str) -> None:
    create_topic(gregor, topic, 1)
    df = spark.createDataFrame([("v", 5)], "value string, partition int")
    with pytest.raises(Exception, match="partition 5 out of range"):
        df.write.format("gregor").option(
            "kafka.bootstrap.servers", gregor.bootstrap_servers
        ).option("topic", topic).mode("append").save()


def test_streaming_write(spark: Any, broker: Broker, topic: str, tmp_path: Path) -> None:
    create_topic(broker, topic, 2)
    create_topic(broker, f"{topic}-up", 2)
    produced = produce(broker, topic, {0: 7, 1: 5})
    q = (
        spark.readStream.format("gregor")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "5")
        .load()
        .selectExpr("key", "upper(cast(value AS string)) AS value", "partition")
        .writeStream.format("gregor")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("topic", f"{topic}-up")
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(120)
    assert q.exception() is None
    got = consume_all(broker, f"{topic}-up", 12, 2)
    assert got == sorted(
        ((p, k, v.upper(), []) for p, _i, k, v, _ts in produced), key=lambda r: (r[0], r[2])
    )


def test_save_mode_defaults_to_append(spark: Any, gregor: Broker, topic: str) -> None:
    # The guide's write example has no mode (ErrorIfExists), which Spark's connector appends;
    # KafkaSinkBatchSuiteV2 "batch - unsupported save modes": Ignore and Overwrite are refused
    create_topic(gregor, topic, 1)
    df = spark.createDataFrame([("a",), ("b",)], "value string")
    df.write.format("gregor").option("kafka.bootstrap.servers", gregor.bootstrap_servers).option(
        "topic", topic
    ).save()
    df.write.format("gregor").option("kafka.bootstrap.servers", gregor.bootstrap_servers).option(
        "topic", topic
    ).mode("error").save()
    assert sorted(v for _p, _k, v, _h in consume_all(gregor, topic, 4)) == [b"a", b"a", b"b", b"b"]
    w = (
        df.write.format("gregor")
        .option("kafka.bootstrap.servers", gregor.bootstrap_servers)
        .option("topic", topic)
    )
    with pytest.raises(Exception, match="Save mode Ignore not allowed for Kafka"):
        w.mode("ignore").save()
    with pytest.raises(Exception, match='cannot be written in the "Overwrite" mode'):
        w.mode("overwrite").save()


def test_null_topic_is_refused(spark: Any, gregor: Broker) -> None:
    # KafkaSinkBatchSuite "batch - null topic field value, and no topic option"
    df = spark.createDataFrame([(None, "1")], "topic string, value string")
    with pytest.raises(Exception, match="KAFKA_NULL_TOPIC_IN_DATA"):
        df.write.format("gregor").option("kafka.bootstrap.servers", gregor.bootstrap_servers).mode(
            "append"
        ).save()


def test_streaming_write_is_exactly_once_and_at_least_once_on_request(
    spark: Any, gregor: Broker, topic: str, tmp_path: Path
) -> None:
    # the streaming sink writes inside transactions: read_committed readers see each record
    # once; gregor.exactlyOnce=false is Spark's at-least-once sink (KafkaSinkSuite
    # "streaming - write w/o topic field, with topic option")
    create_topic(gregor, topic, 2)
    produced = produce(gregor, topic, {0: 4, 1: 3})
    for eos in ("true", "false"):
        out = f"{topic}-{eos}"
        create_topic(gregor, out, 1)
        q = (
            spark.readStream.format("gregor")
            .option("kafka.bootstrap.servers", gregor.bootstrap_servers)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .load()
            .selectExpr("value")
            .writeStream.format("gregor")
            .option("kafka.bootstrap.servers", gregor.bootstrap_servers)
            .option("topic", out)
            .option("gregor.exactlyOnce", eos)
            .option("checkpointLocation", str(tmp_path / eos))
            .trigger(availableNow=True)
            .start()
        )
        q.awaitTermination(120)
        assert q.exception() is None
        committed = (
            spark.read.format("gregor")
            .option("kafka.bootstrap.servers", gregor.bootstrap_servers)
            .option("subscribe", out)
            .option("kafka.isolation.level", "read_committed")
            .load()
        )
        assert sorted(r.value for r in committed.collect()) == sorted(
            v for _p, _i, _k, v, _ts in produced
        )
        assert q.recentProgress[-1]["sink"]["numOutputRows"] in (7, -1)
