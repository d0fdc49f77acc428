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

Save modes. Spark's connector appends whatever the save mode unless it is ``overwrite`` or
``ignore``, so the guide's ``df.write.format("kafka")...save()`` (no mode: ErrorIfExists)
appends. Spark refuses that mode for any Python data source (UNSUPPORTED_DATA_SOURCE_SAVE_MODE)
before the source is asked, so importing this package (and :func:`register`) makes the
DataFrame writers of this Python process (classic and, when installed, Spark Connect) turn an
unset or ``error`` mode into ``append`` for this source, and refuse ``ignore`` with a message saying what to do. Writes
that do not pass through a Python DataFrameWriter (SQL, JVM code) still meet Spark's error;
use ``mode("append")`` there.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from gregor.spark.metrics import offsets_behind_latest
from gregor.spark.options import OptionError
from gregor.spark.session import local_session
from gregor.spark.source import GregorDataSource

__all__ = [
    "GregorDataSource",
    "OptionError",
    "alias_kafka",
    "default_append",
    "local_session",
    "offsets_behind_latest",
    "register",
]


def register(spark: Any, *, kafka_alias: bool = False) -> None:
    """Register the ``gregor`` source on a session (and the writers' save-mode default); with
    ``kafka_alias`` also :func:`alias_kafka`."""
    spark.dataSource.register(GregorDataSource)
    default_append()
    if kafka_alias:
        alias_kafka()


_PATCHED: set[Any] = set()
_APPEND_MODES = (None, "error", "errorifexists", "default")


def _writer_classes() -> list[Any]:
    from pyspark.sql.readwriter import DataFrameWriter

    classes: list[Any] = [DataFrameWriter]
    # A Spark Python worker (the data source's planning processes and tasks) writes no
    # DataFrame unless it runs Spark Connect code, which has imported Connect already: there,
    # importing Connect (pandas, grpc: half a second) for nothing is skipped.
    if (
        "PYTHON_WORKER_FACTORY_SECRET" in os.environ
        and "pyspark.sql.connect.readwriter" not in sys.modules
    ):
        return classes
    try:
        from pyspark.sql.connect.readwriter import DataFrameWriter as ConnectWriter
    except ImportError:  # Spark Connect's client libraries are not installed
        pass
    else:
        classes.append(ConnectWriter)
    return classes


def default_append() -> None:
    """Make an unset (or ``error``) save mode mean append for this source, as Spark's
    connector does; ``ignore`` is refused with advice (idempotent, per writer class)."""
    for cls in _writer_classes():
        if cls in _PATCHED:
            continue
        _PATCHED.add(cls)
        orig_format, orig_mode, orig_save = cls.format, cls.mode, cls.save

        def fmt(self: Any, source: str, _orig: Any = orig_format) -> Any:
            self._gregor_format = str(source).strip().lower()
            return _orig(self, source)

        def mode(self: Any, saveMode: Any, _orig: Any = orig_mode) -> Any:  # noqa: N803
            if saveMode is not None:
                self._gregor_mode = str(saveMode).strip().lower()
            return _orig(self, saveMode)

        def save(
            self: Any,
            path: Any = None,
            format: Any = None,
            mode: Any = None,  # noqa: A002
            partitionBy: Any = None,
            _orig: Any = orig_save,
            **options: Any,
        ) -> Any:  # noqa: N803
            name = (
                str(format).strip().lower()
                if format is not None
                else getattr(self, "_gregor_format", None)
            )
            if name == "gregor" or (name == "kafka" and _ALIASED):
                chosen = (
                    str(mode).strip().lower()
                    if mode is not None
                    else getattr(self, "_gregor_mode", None)
                )
                if chosen in _APPEND_MODES:
                    mode = "append"
                elif chosen == "ignore":
                    raise OptionError(
                        "Save mode Ignore not allowed for Kafka: a topic can only be appended to; "
                        "use mode('append')"
                    )
            return _orig(self, path, format, mode, partitionBy, **options)

        for name, f, orig in (
            ("format", fmt, orig_format),
            ("mode", mode, orig_mode),
            ("save", save, orig_save),
        ):
            f.__doc__ = orig.__doc__
            setattr(cls, name, f)


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


default_append()  # also when the class is registered with spark.dataSource.register directly
