"""The sink's options (``df.write.format("gregor")`` and ``writeStream``), parsed and checked
as Spark's Kafka sink does: ``kafka.*`` producer settings, the default ``topic``, and Gregor's
exactly-once stream writer (``gregor.exactlyOnce``, ``gregor.transactionalIdPrefix``,
``gregor.sinkCommitTopic``). The source's options, and the helpers both share, are ``options``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gregor.spark.options import OptionError, bool_option, kafka_settings, lower_keys

if TYPE_CHECKING:
    from gregor.columns.avro_columns import AvroColumn

log = logging.getLogger("gregor.spark")

__all__ = ["SINK_KEYS", "SinkOptions", "parse_sink"]

SINK_KEYS = frozenset(
    {
        "topic",
        "includeheaders",
        "checkpointlocation",
        "path",
        "gregor.exactlyonce",
        "gregor.transactionalidprefix",
        "gregor.sinkcommittopic",
        # typed key and value columns (gregor.spark.avro_options)
        "valueformat",
        "keyformat",
        "schemaregistry",
        "valuesubject",
        "keysubject",
        "valueschemaversion",
        "keyschemaversion",
    }
)


@dataclass(frozen=True)
class SinkOptions:
    """A sink's options. ``exactly_once`` (streaming writes only, ``gregor.exactlyOnce``,
    default true) makes the stream writer transactional: see :mod:`gregor.spark.txsink`."""

    client: dict[str, str]
    topic: str | None = None
    exactly_once: bool = True
    transactional_id_prefix: str = "gregor-spark"
    commit_topic: str = "gregor-spark-sink-commits"
    #: The typed key and value columns to encode (``gregor.spark.avro_options``).
    columns: tuple[AvroColumn, ...] = ()


def parse_sink(options: Mapping[str, str], *, streaming: bool = False) -> SinkOptions:
    opts = lower_keys(options)
    notes: list[str] = []
    client = kafka_settings(opts, "producer", notes)
    topic = opts.get("topic")
    exactly_once = bool_option(opts, "gregor.exactlyonce", True)
    prefix = opts.get("gregor.transactionalidprefix", "gregor-spark").strip()
    commit_topic = opts.get("gregor.sinkcommittopic", "gregor-spark-sink-commits").strip()
    if "transactional.id" in client:
        raise OptionError(
            "Kafka option 'transactional.id' is not supported: the exactly-once stream writer names "
            "its transactions itself (set gregor.transactionalIdPrefix instead)"
        )
    unknown = sorted(k for k in opts if not k.startswith("kafka.") and k not in SINK_KEYS)
    if unknown:
        notes.append(f"options {unknown} are not options of the Kafka sink and are ignored")
    if not streaming and "gregor.exactlyonce" in opts:
        notes.append(
            "gregor.exactlyOnce applies to streaming writes only; batch writes are at-least-once"
        )
    for n in notes:
        log.warning("%s", n)
    return SinkOptions(
        client=client,
        topic=topic.strip() if topic else None,
        exactly_once=exactly_once and streaming,
        transactional_id_prefix=prefix,
        commit_topic=commit_topic,
    )
