"""The ``kafka`` short name: what Spark allows, and the Python-side alias."""

from __future__ import annotations

from typing import Any

import pytest
from spark_helpers import Broker, create_topic, produce

from gregor.spark import alias_kafka
from gregor.spark.source import KafkaDataSource


def test_spark_refuses_a_python_source_named_kafka(spark: Any) -> None:
    # Spark 4.3 keeps the name for its JVM connector even when the connector is absent.
    with pytest.raises(Exception, match="DATA_SOURCE_ALREADY_EXISTS"):
        spark.dataSource.register(KafkaDataSource)
    # Through the JVM reader directly (alias_kafka(), another test, patches only Python): the name
    # is Spark's connector's when its jar is on the session's classpath (tests/spark/conftest.py
    # adds it when Maven can fetch it), else nobody's.
    jvm_connector = "spark-sql-kafka-0-10" in spark.sparkContext.getConf().get("spark.jars", "")
    expected = (
        "kafka.bootstrap.servers' must be specified"
        if jvm_connector
        else "Failed to find data source: kafka"
    )
    with pytest.raises(Exception, match=expected):
        spark._jsparkSession.read().format("kafka").option("subscribe", "t").load()


def test_alias_makes_format_kafka_mean_gregor(spark: Any, gregor: Broker, topic: str) -> None:
    create_topic(gregor, topic, 1)
    produce(gregor, topic, {0: 3})
    alias_kafka()
    df = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", gregor.bootstrap_servers)
        .option("subscribe", topic)
        .load()
    )
    assert sorted((r.offset, r.value) for r in df.collect()) == [
        (0, b"v0-0"),
        (1, b"v0-1"),
        (2, b"v0-2"),
    ]
    df.selectExpr("value").write.format("kafka").option(
        "kafka.bootstrap.servers", gregor.bootstrap_servers
    ).option("topic", topic).mode("append").save()
    assert (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", gregor.bootstrap_servers)
        .option("subscribe", topic)
        .load()
        .count()
        == 6
    )
