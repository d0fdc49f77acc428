"""Batch and streaming writers: DataFrame rows to topic records, delivery confirmed per task.

The input follows Spark's Kafka sink: a ``value`` column (string or binary, required), and
optional ``key`` (string or binary), ``topic`` (string; the ``topic`` option overrides it),
``partition`` (int; null lets the producer's partitioner choose) and ``headers`` (array of
struct key string, value binary). The columns are checked on the driver when the writer is
made. A task sends every record of its Arrow batches through a producer shared by the tasks
of its Python worker, then flushes and checks every delivery: the task reports success only
when the broker has acknowledged all its records (at-least-once, as Spark's Kafka sink).
Streaming writes are exactly-once by default instead (:mod:`gregor.spark.txsink`); the option
``gregor.exactlyOnce=false`` brings back this at-least-once stream writer.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructType

from gregor.client import Producer
from gregor.spark.options import OptionError
from gregor.spark.sink_options import SinkOptions

_PRODUCERS: dict[tuple[tuple[str, str], ...], Producer] = {}
_LOCK = threading.Lock()


def shared_producer(settings: dict[str, str]) -> Producer:
    key = tuple(sorted(settings.items()))
    with _LOCK:
        p = _PRODUCERS.get(key)
        if p is None:
            p = _PRODUCERS[key] = Producer(settings)
        return p


def check_sink_schema(schema: StructType, options: SinkOptions) -> None:
    """Spark's Kafka sink rules for the input columns, raised as :class:`OptionError`."""
    types = {f.name: f.dataType for f in schema.fields}
    if "value" not in types:
        raise OptionError("required attribute 'value' not found")
    for name in ("key", "value"):
        t = types.get(name)
        if t is not None and not isinstance(t, (StringType, BinaryType)):
            raise OptionError(
                f"{name} attribute type must be a string or binary, got {t.simpleString()}"
            )
    t = types.get("topic")
    if options.topic is None:
        if t is None:
            raise OptionError("topic option required when no 'topic' attribute is present")
    if t is not None and not isinstance(t, StringType):
        raise OptionError(f"topic attribute type must be a string, got {t.simpleString()}")
    t = types.get("partition")
    if t is not None and not isinstance(t, IntegerType):
        raise OptionError(f"partition attribute type must be an int, got {t.simpleString()}")
    t = types.get("headers")
    if t is not None:
        ok = (
            isinstance(t, ArrayType)
            and isinstance(t.elementType, StructType)
            and [f.name for f in t.elementType.fields] == ["key", "value"]
            and isinstance(t.elementType.fields[0].dataType, StringType)
            and isinstance(t.elementType.fields[1].dataType, (BinaryType, StringType))
        )
        if not ok:
            raise OptionError(
                f"headers attribute type must be array<struct<key:string,value:binary>>, got {t.simpleString()}"
            )


NULL_TOPIC = (
    "[KAFKA_NULL_TOPIC_IN_DATA] The Kafka message data sent to the producer contains a null topic. "
    "Use the `topic` option for setting a default topic."
)


@dataclass
class KafkaCommitMessage(WriterCommitMessage):
    records: int


def drop_producer(settings: dict[str, str]) -> None:
    """Forget (and close) a shared producer after an error, so the next task starts afresh."""
    key = tuple(sorted(settings.items()))
    with _LOCK:
        p = _PRODUCERS.pop(key, None)
    if p is not None:
        try:
            p.close(5)
        except Exception:  # it failed already; closing is best effort
            pass


def write_batches(options: SinkOptions, batches: Iterator[Any]) -> KafkaCommitMessage:
    """Send every row, flush, and raise the first delivery error, if any."""
    try:
        return _write(options, batches)
    except Exception:
        drop_producer(options.client)
        raise


def _write(options: SinkOptions, batches: Iterator[Any]) -> KafkaCommitMessage:
    if options.columns:
        from gregor.spark.sink_encode import encode_batches

        batches = encode_batches(batches, options.columns)
    return KafkaCommitMessage(send_batches(shared_producer(options.client), options.topic, batches))


def send_batches(producer: Producer, fixed_topic: str | None, batches: Iterator[Any]) -> int:
    """Send every row of the Arrow batches, flush, raise the first delivery error; the count."""
    send = producer.send
    futures = []
    for batch in batches:
        names = batch.schema.names
        n = batch.num_rows
        values = batch.column(names.index("value")).to_pylist()
        keys = batch.column(names.index("key")).to_pylist() if "key" in names else [None] * n
        if fixed_topic is None:
            topics = batch.column(names.index("topic")).to_pylist()
        parts = batch.column(names.index("partition")).to_pylist() if "partition" in names else None
        hdrs = batch.column(names.index("headers")).to_pylist() if "headers" in names else None
        for i in range(n):
            topic = fixed_topic if fixed_topic is not None else topics[i]
            if topic is None:
                raise OptionError(NULL_TOPIC)
            headers = None
            if hdrs is not None and hdrs[i]:
                headers = [(h["key"], h["value"]) for h in hdrs[i]]
            futures.append(
                send(
                    topic,
                    values[i],
                    keys[i],
                    parts[i] if parts is not None else None,
                    None,
                    headers,
                )
            )
    producer.flush()
    for f in futures:
        err = f.exception()
        if err is not None:
            raise err
    return len(futures)


class KafkaBatchWriter(DataSourceArrowWriter):
    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:  # type: ignore[override]
        return write_batches(self.options, iterator)


class KafkaStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:  # type: ignore[override]
        return write_batches(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        pass

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        pass


__all__ = [
    "KafkaBatchWriter",
    "KafkaCommitMessage",
    "KafkaStreamWriter",
    "check_sink_schema",
    "send_batches",
    "write_batches",
]
