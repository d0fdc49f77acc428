"""A class-data-sharing archive for the Spark JVMs a test run starts.

Theory of operation. A Spark JVM spends most of its first seconds loading and verifying the
classes of Spark's jars: on the 2-core test machine a bare local session took 10.5 s to start
and 5 s more for its first job. JDK 17 can write the classes one run loaded into an archive at
exit (``-XX:ArchiveClassesAtExit``) that later JVMs on the same class path map instead of
loading (``-XX:SharedArchiveFile``): with it the same session took 6 s and its first job 2.5 s.
A test run starts a few dozen Spark JVMs (sessions, jobs run as their own processes, a standalone
cluster, a Connect server), so the suite builds an archive once, in the background, and the
Spark tests use it.

- :func:`start_build` (pytest's controller process, at configure) starts ``python -m
  gregor.testing.jvm_archive DIR``. That process runs a small Spark job of the kinds the tests
  run (Parquet, a Python UDF, a Python data source, a stream), stops the JVM and waits for it to
  write the archive, then writes ``DIR/done`` with the archive's name, or an empty ``done`` when
  anything failed.
- :func:`java_options` (the Spark tests, before each test and each session) returns the options
  to put in ``JDK_JAVA_OPTIONS``, which every ``java`` started below reads: the archive once
  ``done`` names it. Nothing waits for it: until then (and if the build failed) the options
  leave it out and JVMs load their classes as they always did. A JVM given a missing archive would also drop the JDK's own.
  A JVM whose class path differs from the archive's (an executor, a standalone master) ignores
  the archive with a warning; the options send JVM warnings to stderr, so none lands in a job's
  stdout. ``-XX:TieredStopAtLevel=1`` (the quick compiler only) is there too: the tests' JVMs
  are short-lived and their data small.

Only the test suite uses this; a user's Spark is started as Spark starts it.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

ARCHIVE = "spark.jsa"
OPTIONS = "-XX:TieredStopAtLevel=1 -Xlog:disable -Xlog:all=warning:stderr"


def start_build(directory: Path) -> subprocess.Popen[bytes] | None:
    """Start building the archive in ``directory``; None when there is no java or pyspark."""
    if shutil.which("java") is None:
        return None
    if importlib.util.find_spec("pyspark") is None:
        return None
    directory.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "JDK_JAVA_OPTIONS"}
    with open(directory / "build.log", "wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "gregor.testing.jvm_archive", str(directory)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def java_options(directory: Path) -> str:
    """The JVM options that use the archive built in ``directory``; while it is being built or
    when its build failed, the same options without it (:data:`OPTIONS`): nothing waits for the
    archive, and a JVM started before it is there still runs with the quick compiler only (the
    Spark groups of the whole run start at once, their sessions before the archive is there)."""
    try:
        name = (directory / "done").read_text().strip()
    except OSError:
        return OPTIONS
    if not name or not (directory / name).is_file():
        return OPTIONS
    return f"-XX:SharedArchiveFile={directory / name} {OPTIONS}"


def stop_build(builder: subprocess.Popen[bytes], directory: Path) -> None:
    """Stop the build if it still runs (its JVM too) and remove ``directory``."""
    if builder.poll() is None:
        try:
            os.killpg(builder.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    builder.wait()
    shutil.rmtree(directory, ignore_errors=True)


def build(directory: Path) -> bool:
    """Run the job with the archive written at the JVM's exit; True when the archive is there."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    part = directory / (ARCHIVE + ".part")
    from pyspark import SparkContext

    from gregor.spark import local_session

    spark = local_session(
        "gregor-jvm-archive",
        master="local[2]",
        config={
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.driver.extraJavaOptions": f"-XX:ArchiveClassesAtExit={part}",
        },
    )
    spark.sparkContext.setLogLevel("ERROR")
    gateway = SparkContext._gateway
    try:
        _exercise(spark, directory / "work")
    finally:
        spark.stop()
        proc = getattr(gateway, "proc", None)
        if gateway is not None:
            gateway.shutdown()
        if proc is not None:  # the JVM exits when its stdin closes, writing the archive first
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait(300)
        shutil.rmtree(directory / "work", ignore_errors=True)
    if not part.is_file() or part.stat().st_size == 0:
        return False
    part.rename(directory / ARCHIVE)
    return True


def _exercise(spark: Any, work: Path) -> None:
    from pyspark.sql.functions import col, udf
    from pyspark.sql.types import StringType

    df = spark.range(2000).selectExpr(
        "id", "cast(id AS string) AS s", "cast(cast(id AS string) AS binary) AS b"
    )
    df.write.mode("overwrite").parquet(str(work / "in"))
    back = spark.read.parquet(str(work / "in"))
    back.groupBy((col("id") % 7).alias("k")).count().collect()
    upper = udf(lambda s: s.upper(), StringType())
    back.select(upper(col("s"))).collect()
    spark.dataSource.register(_rows_source())
    spark.read.format("gregor_jvm_archive_rows").load().collect()
    q = (
        spark.readStream.schema(back.schema)
        .parquet(str(work / "in"))
        .writeStream.format("parquet")
        .option("path", str(work / "out"))
        .option("checkpointLocation", str(work / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination()


def _rows_source() -> Any:
    from pyspark.sql.datasource import DataSource, DataSourceReader

    class Reader(DataSourceReader):
        def read(self, partition: Any) -> Any:
            import pyarrow as pa

            yield pa.RecordBatch.from_arrays([pa.nulls(3, pa.binary())], names=["value"])

    class Rows(DataSource):
        @classmethod
        def name(cls) -> str:
            return "gregor_jvm_archive_rows"

        def schema(self) -> str:
            return "value binary"

        def reader(self, schema: Any) -> Any:
            return Reader()

    return Rows


def main(argv: list[str]) -> int:
    directory = Path(argv[0])
    directory.mkdir(parents=True, exist_ok=True)
    ok = False
    try:
        ok = build(directory)
    finally:
        tmp = directory / "done.part"
        tmp.write_text(ARCHIVE if ok else "")
        tmp.rename(directory / "done")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
