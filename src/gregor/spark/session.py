"""A SparkSession for Gregor jobs: local by default, the data source registered.

PySpark starts its Python workers with ``PYSPARK_PYTHON`` (default: ``python3`` on the PATH),
which may not be the interpreter that has Gregor installed; this helper points it at the
current interpreter unless it is already set. ``SPARK_LOCAL_IP`` defaults to 127.0.0.1 so a
local session never depends on the machine's network names. A local session's Python workers
start from :mod:`gregor.spark_daemon`, which has them import the installed pyspark (with its
compiled bytecode) rather than Spark's zip of the same sources.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

from gregor.spark_daemon import MODULE as SPARK_DAEMON


def local_session(
    app_name: str = "gregor",
    master: str | None = None,
    config: Mapping[str, str] | None = None,
    *,
    kafka_alias: bool = False,
) -> Any:
    """Get or create a SparkSession (``local[*]`` unless ``master`` says otherwise)."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from gregor.spark import register

    builder = SparkSession.builder.appName(app_name).master(master or "local[*]")
    defaults = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "4",
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.host": os.environ["SPARK_LOCAL_IP"] if not master else "",
        # A Python worker must connect back and authenticate within this (15 s by default);
        # on a machine whose cores are busy, starting one (pyspark, pyarrow, gregor) can take
        # longer, and the task then fails with "Python worker failed to connect back".
        "spark.python.authenticate.socketTimeout": "120s",
    }
    defaults.update(worker_daemon(master, config or {}))
    for k, v in {**defaults, **dict(config or {})}.items():
        if v != "":
            builder = builder.config(k, v)
    spark = builder.getOrCreate()
    register(spark, kafka_alias=kafka_alias)
    return spark


def worker_daemon(master: str | None, config: Mapping[str, str]) -> dict[str, str]:
    """``spark.python.daemon.module`` for a session whose Python workers run this interpreter on
    this machine: :mod:`gregor.spark_daemon` (the installed pyspark, not Spark's zip of its
    sources). On a cluster, or with another interpreter (which may not have Gregor), Spark's
    own daemon."""
    python = config.get("spark.pyspark.python") or os.environ.get("PYSPARK_PYTHON")
    local = master is None or master.startswith("local")
    if local and python and os.path.abspath(python) == os.path.abspath(sys.executable):
        return {"spark.python.daemon.module": SPARK_DAEMON}
    return {}


__all__ = ["local_session", "worker_daemon"]
