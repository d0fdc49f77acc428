"""Gregor's PySpark data source: read and write Kafka topics from Spark with only ``pip install``.

    from gregor.spark import register
    register(spark)
    df = (spark.read.format("gregor")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "events").load())

The source has the schema and options of Spark's own Kafka connector (see
:mod:`gregor.spark.options`) and works with any Kafka-compatible broker. It is built on the
Python Data Source API (pyspark 4.2+) and the client's Arrow bulk read path.

The name ``kafka``: Spark 4.3 reserves it. ``spark.dataSource.register`` refuses a Python source
called ``kafka`` (DATA_SOURCE_ALREADY_EXISTS), and ``format("kafka")`` fails with Spark's "Failed
to find data source: kafka" error before Python sources are consulted, whenever the JVM
connector is absent. :func:`alias_kafka` is the Python-side answer: it makes
``format("kafka")`` in this Python process mean ``gregor`` (for DataFrame and stream readers
and writers), so an existing PySpark job runs unchanged after one call.
"""

from __future__ import annotations

from typing import Any

from gregor.spark.options import OptionError
from gregor.spark.session import local_session
from gregor.spark.source import GregorDataSource

__all__ = ["GregorDataSource", "OptionError", "alias_kafka", "local_session", "register"]


def register(spark: Any, *, kafka_alias: bool = False) -> None:
    """Register the ``gregor`` source on a session; with ``kafka_alias`` also :func:`alias_kafka`."""
    spark.dataSource.register(GregorDataSource)
    if kafka_alias:
        alias_kafka()


_ALIASED = False


def alias_kafka() -> None:
    """Make ``.format("kafka")`` mean ``.format("gregor")`` in this Python process (idempotent)."""
    global _ALIASED
    if _ALIASED:
        return
    from pyspark.sql.readwriter import DataFrameReader, DataFrameWriter
    from pyspark.sql.streaming.readwriter import DataStreamReader, DataStreamWriter

    for cls in (DataFrameReader, DataFrameWriter, DataStreamReader, DataStreamWriter):
        original = cls.format

        def fmt(self: Any, source: str, _original: Any = original) -> Any:
            if isinstance(source, str) and source.strip().lower() == "kafka":
                source = "gregor"
            return _original(self, source)

        fmt.__doc__ = original.__doc__
        cls.format = fmt  # type: ignore[method-assign]
    _ALIASED = True
