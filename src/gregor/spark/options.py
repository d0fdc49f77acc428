"""The data source's options, parsed and checked the way Spark's Kafka source does.

Spark hands a data source its options with lower-cased keys. Everything that starts with
``kafka.`` is a client setting with the prefix removed (``kafka.bootstrap.servers``); the rest
name the subscription (exactly one of ``subscribe``, ``subscribePattern``, ``assign``), where
reading starts and ends (``startingOffsets``, ``endingOffsets``, ``startingTimestamp``,
``startingOffsetsByTimestamp``, and their ending twins), and how a query reads
(``maxOffsetsPerTrigger``, ``minPartitions``, ``maxRecordsPerPartition``, ``failOnDataLoss``,
``includeHeaders``). Offsets use Spark's JSON form: ``{"topic": {"0": 23, "1": -2}}`` where -2
means earliest and -1 latest. A timestamp option takes precedence over the offsets-by-timestamp
option, which takes precedence over the offsets option, as in Spark.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gregor.client import ConfigError, TopicPartition
from gregor.client.config import COMMON, PRODUCER

EARLIEST = -2
LATEST = -1

# Spark refuses these kafka.* settings: the source manages them itself.
_FORBIDDEN = {
    "auto.offset.reset": "use startingOffsets instead",
    "enable.auto.commit": "offsets live in the query's checkpoint",
    "key.deserializer": "keys are always read as bytes",
    "value.deserializer": "values are always read as bytes",
    "key.serializer": "keys are always written as bytes",
    "value.serializer": "values are always written as bytes",
    "interceptor.classes": "interceptors are not supported",
}


class OptionError(ConfigError):
    """An invalid or conflicting data source option."""


@dataclass(frozen=True)
class OffsetSpec:
    """Where to start or end: ``earliest``, ``latest``, per-partition offsets, or timestamps.

    kind is one of "earliest", "latest", "offsets" (``value`` maps TopicPartition -> offset,
    -2/-1 meaning earliest/latest), "timestamp" (``value`` is one timestamp in ms for every
    partition) or "timestamps" (``value`` maps TopicPartition -> timestamp in ms).
    """

    kind: str
    value: Any = None


@dataclass(frozen=True)
class SourceOptions:
    client: dict[str, str]
    subscribe: tuple[str, ...] | None = None
    pattern: str | None = None
    assign: tuple[TopicPartition, ...] | None = None
    starting: OffsetSpec = OffsetSpec("latest")
    ending: OffsetSpec = OffsetSpec("latest")
    by_timestamp_strategy: str = "error"
    max_offsets_per_trigger: int | None = None
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    isolation_level: int = 0
    chunk_records: int = 65536
    timeout: float = 120.0
    extra: dict[str, str] = field(default_factory=dict)

    def matches(self, topic: str) -> bool:
        """Whether a topic belongs to a subscribe / subscribePattern subscription."""
        if self.subscribe is not None:
            return topic in self.subscribe
        if self.pattern is not None:
            return re.fullmatch(self.pattern, topic) is not None
        return self.assign is not None and any(tp.topic == topic for tp in self.assign)


@dataclass(frozen=True)
class SinkOptions:
    client: dict[str, str]
    topic: str | None = None


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items() if v is not None}


def kafka_settings(options: Mapping[str, str], role: str) -> dict[str, str]:
    """The ``kafka.*`` options the client uses for ``role`` ("source" or "producer").

    A source reads with a bare client (connection settings only); a sink adds the producer's.
    Settings with no use here (``kafka.group.id``, consumer tuning of the JVM client) are
    dropped; the ones Spark forbids raise :class:`OptionError`.
    """
    known = {**COMMON, **(PRODUCER if role == "producer" else {})}
    out: dict[str, str] = {}
    for k, v in _lower(options).items():
        if not k.startswith("kafka."):
            continue
        name = k[len("kafka.") :]
        if name in _FORBIDDEN:
            raise OptionError(f"kafka option '{name}' is not supported: {_FORBIDDEN[name]}")
        if name in known and name not in ("group.id", "isolation.level"):
            out[name] = v
    if "bootstrap.servers" not in out:
        raise OptionError("option 'kafka.bootstrap.servers' must be specified")
    return out


def _bool(opts: dict[str, str], key: str, default: bool) -> bool:
    v = opts.get(key)
    if v is None:
        return default
    s = v.strip().lower()
    if s in ("true", "false"):
        return s == "true"
    raise OptionError(f"option '{key}' must be true or false, got {v!r}")


def _positive(opts: dict[str, str], key: str) -> int | None:
    v = opts.get(key)
    if v is None:
        return None
    try:
        n = int(v)
    except ValueError:
        raise OptionError(f"option '{key}' must be a positive integer, got {v!r}") from None
    if n <= 0:
        raise OptionError(f"option '{key}' must be a positive integer, got {v!r}")
    return n


def parse_partition_json(text: str, what: str) -> dict[TopicPartition, int]:
    """``{"topicA": {"0": 23, "1": -1}}`` -> {TopicPartition("topicA", 0): 23, ...}."""
    try:
        obj = json.loads(text)
    except ValueError:
        raise OptionError(f"{what}: expected JSON like {{\"topic\":{{\"0\":23}}}}, got {text!r}") from None
    if not isinstance(obj, dict):
        raise OptionError(f"{what}: expected a JSON object, got {text!r}")
    out: dict[TopicPartition, int] = {}
    for topic, parts in obj.items():
        if not isinstance(parts, dict):
            raise OptionError(f"{what}: partitions of {topic!r} must be a JSON object")
        for p, v in parts.items():
            try:
                out[TopicPartition(topic, int(p))] = int(v)
            except (TypeError, ValueError):
                raise OptionError(f"{what}: bad entry {topic!r} {p!r}: {v!r}") from None
    return out


def offsets_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """The Kafka source's offset form, ``{"topic": {"0": 23}}``, partitions in order."""
    out: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        out.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    return out


def offsets_from_json(obj: Mapping[str, Mapping[str, int]]) -> dict[TopicPartition, int]:
    return {TopicPartition(t, int(p)): int(o) for t, parts in obj.items() for p, o in parts.items()}


def _parse_assign(text: str) -> tuple[TopicPartition, ...]:
    try:
        obj = json.loads(text)
    except ValueError:
        raise OptionError(f"assign: expected JSON like {{\"topicA\":[0,1]}}, got {text!r}") from None
    if not isinstance(obj, dict) or not all(isinstance(v, list) for v in obj.values()):
        raise OptionError(f"assign: expected JSON like {{\"topicA\":[0,1]}}, got {text!r}")
    tps = tuple(sorted(TopicPartition(t, int(p)) for t, ps in obj.items() for p in ps))
    if not tps:
        raise OptionError("assign: no topic partitions given")
    return tps


def _offset_spec(opts: dict[str, str], prefix: str, streaming: bool) -> OffsetSpec:
    """startingX / endingX options to one OffsetSpec, with Spark's precedence."""
    ts = opts.get(f"{prefix}timestamp")
    if ts is not None:
        try:
            return OffsetSpec("timestamp", int(ts))
        except ValueError:
            raise OptionError(f"option '{prefix}Timestamp' must be a timestamp in ms, got {ts!r}") from None
    by_ts = opts.get(f"{prefix}offsetsbytimestamp")
    if by_ts is not None:
        return OffsetSpec("timestamps", parse_partition_json(by_ts, f"{prefix}OffsetsByTimestamp"))
    off = opts.get(f"{prefix}offsets")
    if off is None:
        return OffsetSpec("latest" if prefix == "ending" or streaming else "earliest")
    s = off.strip()
    if s.lower() in ("earliest", "latest"):
        return OffsetSpec(s.lower())
    return OffsetSpec("offsets", parse_partition_json(s, f"{prefix}Offsets"))


def parse_source(options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    opts = _lower(options)
    client = kafka_settings(opts, "source")
    chosen = [k for k in ("subscribe", "subscribepattern", "assign") if opts.get(k)]
    if len(chosen) != 1:
        raise OptionError(
            "exactly one of the options 'subscribe', 'subscribePattern' or 'assign' must be "
            f"specified, got {len(chosen)}"
        )
    subscribe = pattern = assign = None
    if chosen[0] == "subscribe":
        subscribe = tuple(t.strip() for t in opts["subscribe"].split(",") if t.strip())
        if not subscribe:
            raise OptionError("subscribe: no topics given")
    elif chosen[0] == "subscribepattern":
        pattern = opts["subscribepattern"].strip()
        try:
            re.compile(pattern)
        except re.error as e:
            raise OptionError(f"subscribePattern: invalid pattern {pattern!r}: {e}") from None
    else:
        assign = _parse_assign(opts["assign"])

    starting = _offset_spec(opts, "starting", streaming)
    ending = _offset_spec(opts, "ending", streaming)
    if streaming:
        for k in ("endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp"):
            if k in opts:
                raise OptionError(f"option '{k}' is not supported by streaming queries")
    else:
        if starting.kind == "latest":
            raise OptionError("startingOffsets 'latest' is not valid for batch queries")
        if starting.kind == "offsets" and any(v == LATEST for v in starting.value.values()):
            raise OptionError("startingOffsets: -1 (latest) is not valid for batch queries")
        if ending.kind == "earliest":
            raise OptionError("endingOffsets 'earliest' is not valid for batch queries")
        if ending.kind == "offsets" and any(v == EARLIEST for v in ending.value.values()):
            raise OptionError("endingOffsets: -2 (earliest) is not valid for batch queries")
        if "maxoffsetspertrigger" in opts:
            raise OptionError("option 'maxOffsetsPerTrigger' is only for streaming queries")

    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise OptionError(f"startingOffsetsByTimestampStrategy must be error or latest, got {strategy!r}")

    level = opts.get("kafka.isolation.level", "read_uncommitted").strip().lower()
    if level not in ("read_uncommitted", "read_committed"):
        raise OptionError(f"kafka.isolation.level must be read_uncommitted or read_committed, got {level!r}")

    chunk = _positive(opts, "gregor.chunkrecords")
    timeout = _positive(opts, "gregor.timeoutms")
    return SourceOptions(
        client=client,
        subscribe=subscribe,
        pattern=pattern,
        assign=assign,
        starting=starting,
        ending=ending,
        by_timestamp_strategy=strategy,
        max_offsets_per_trigger=_positive(opts, "maxoffsetspertrigger"),
        min_partitions=_positive(opts, "minpartitions"),
        max_records_per_partition=_positive(opts, "maxrecordsperpartition"),
        fail_on_data_loss=_bool(opts, "failondataloss", True),
        include_headers=_bool(opts, "includeheaders", False),
        isolation_level=1 if level == "read_committed" else 0,
        chunk_records=chunk or 65536,
        timeout=(timeout / 1000) if timeout else 120.0,
    )


def parse_sink(options: Mapping[str, str]) -> SinkOptions:
    opts = _lower(options)
    client = kafka_settings(opts, "producer")
    topic = opts.get("topic")
    return SinkOptions(client=client, topic=topic.strip() if topic else None)


__all__ = [
    "EARLIEST",
    "LATEST",
    "OffsetSpec",
    "OptionError",
    "SinkOptions",
    "SourceOptions",
    "kafka_settings",
    "offsets_from_json",
    "offsets_json",
    "parse_partition_json",
    "parse_sink",
    "parse_source",
]
