"""The source through Spark Connect: a connect server started from the pyspark package's own
script (``sbin/start-connect-server.sh --wait``), a thin client (``spark.remote``) that
registers the data source, reads, writes (with the guide's default save mode) and streams.

No Spark test mirrors this; it shows that the Python data source needs nothing but the
registration call on the client. Needs Spark Connect's client libraries (grpcio, pandas, ...).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("grpc")
pytest.importorskip("pandas")

from spark_helpers import Broker, create_topic, produce, use_jvm_archive  # noqa: E402

from gregor.testing.ports import free_port  # noqa: E402


@pytest.fixture(scope="module")
def connect(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    use_jvm_archive()
    import pyspark

    home = Path(pyspark.__file__).parent
    work = tmp_path_factory.mktemp("connect")
    port = free_port()
    env = dict(
        os.environ,
        SPARK_HOME=str(home),
        SPARK_LOCAL_IP="127.0.0.1",
        PYSPARK_PYTHON=sys.executable,
        SPARK_LOG_DIR=str(work),
        SPARK_PID_DIR=str(work),
    )
    log = open(work / "server.log", "wb")
    server = subprocess.Popen(
        [
            "bash",
            str(home / "sbin" / "start-connect-server.sh"),
            "--wait",
            "--master",
            "local[2]",
            "--conf",
            f"spark.connect.grpc.binding.port={port}",
            "--conf",
            "spark.ui.enabled=false",
            "--conf",
            "spark.sql.shuffle.partitions=2",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
    )
    try:
        while True:  # until the server listens (or dies); pytest-timeout bounds the wait
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if server.poll() is not None:
                    raise RuntimeError((work / "server.log").read_text()[-3000:]) from None
                time.sleep(0.5)
        # The Connect session class directly: another test module of this worker process may
        # hold a classic session, beside which pyspark's generic builder refuses a remote one.
        from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

        from gregor.spark import register

        spark = RemoteSparkSession.builder.remote(f"sc://127.0.0.1:{port}").getOrCreate()
        register(spark)
        yield spark
        spark.stop()
    finally:
        os.killpg(server.pid, 15)
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, 9)
            server.wait()
        log.close()


@pytest.mark.timeout(600)
def test_read_write_and_stream_through_spark_connect(
    connect: Any, gregor: Broker, topic: str, tmp_path: Path
) -> None:
    spark = connect
    create_topic(gregor, topic, 2)
    create_topic(gregor, f"{topic}-out", 1)
    produced = produce(gregor, topic, {0: 3, 1: 2})
    bs = gregor.bootstrap_servers
    df = (
        spark.read.format("gregor")
        .option("kafka.bootstrap.servers", bs)
        .option("subscribe", topic)
        .load()
    )
    assert sorted((r.partition, r.offset, r.value) for r in df.collect()) == sorted(
        (p, i, v) for p, i, _k, v, _ts in produced
    )
    # the guide's write, no save mode: appended
    df.select("value").write.format("gregor").option("kafka.bootstrap.servers", bs).option(
        "topic", f"{topic}-out"
    ).save()
    q = (
        spark.readStream.format("gregor")
        .option("kafka.bootstrap.servers", bs)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("upper(cast(value AS string)) AS value")
        .writeStream.format("gregor")
        .option("kafka.bootstrap.servers", bs)
        .option("topic", f"{topic}-out")
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(300)
    assert q.exception() is None
    out = (
        spark.read.format("gregor")
        .option("kafka.bootstrap.servers", bs)
        .option("subscribe", f"{topic}-out")
        .option("kafka.isolation.level", "read_committed")
        .load()
    )
    values = sorted(v for _p, _i, _k, v, _ts in produced)
    assert sorted(r.value for r in out.collect()) == sorted(values + [v.upper() for v in values])
