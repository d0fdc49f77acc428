"""The data source's options, parsed and checked the way Spark's Kafka source does.

Spark hands a data source its options with lower-cased keys. Everything that starts with
``kafka.`` is a client setting with the prefix removed (``kafka.bootstrap.servers``); the rest
name the subscription (exactly one of ``subscribe``, ``subscribePattern``, ``assign``), where
reading starts and ends (``startingOffsets``, ``endingOffsets``, ``startingTimestamp``,
``startingOffsetsByTimestamp``, and their ending twins), and how a query reads
(``maxOffsetsPerTrigger``, ``minOffsetsPerTrigger``, ``maxTriggerDelay``, ``minPartitions``,
``maxRecordsPerPartition``, ``failOnDataLoss``, ``includeHeaders``, ``kafkaConsumer.pollTimeoutMs``,
``fetchOffset.numRetries``, ``fetchOffset.retryIntervalMs``). Of the consumer's own settings the
source reads ``kafka.isolation.level`` and ``kafka.check.crcs`` (default true: every batch's CRC
is checked, as Spark's consumer does; false skips it, as librdkafka does by default).

Offsets use Spark's JSON form: ``{"topic": {"0": 23, "1": -2}}`` where -2 means earliest and
-1 latest, and (Spark 4.2's SPARK-58774) a topic may stand for all its partitions with
``"earliest"`` or ``"latest"``: ``{"topicA": "earliest", "topicB": {"0": 23}}``, expanded
against the partitions the query finds when the offsets are resolved. A timestamp option
takes precedence over the offsets-by-timestamp option, which takes precedence over the offsets
option, as in Spark.

No option is ignored silently. Options Spark accepts but that mean nothing here
(``groupIdPrefix``, ``kafka.group.id``, consumer tuning of the JVM client), options Spark
ignores in batch queries (``maxOffsetsPerTrigger``, ``minOffsetsPerTrigger``,
``maxTriggerDelay``) and names no Kafka source knows (a typo) are accepted with a warning,
logged and kept in :attr:`SourceOptions.notes`. Error messages carry Spark's wording, and
Spark's error condition names where it has one (``[UNRESOLVED_START_OFFSET_GREATER_THAN_END_OFFSET]``).

The sink's options are :mod:`gregor.spark.sink_options`, on the helpers here.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gregor.client import ConfigError, TopicPartition
from gregor.client.config import COMMON, PRODUCER

if TYPE_CHECKING:
    from gregor.columns.avro_columns import AvroColumn

EARLIEST = -2
LATEST = -1

log = logging.getLogger("gregor.spark")

# Every option Spark's Kafka source reads (lower-cased), besides kafka.* ones.
SOURCE_KEYS = frozenset(
    {
        "subscribe",
        "subscribepattern",
        "assign",
        "startingoffsets",
        "endingoffsets",
        "startingtimestamp",
        "endingtimestamp",
        "startingoffsetsbytimestamp",
        "endingoffsetsbytimestamp",
        "startingoffsetsbytimestampstrategy",
        "failondataloss",
        "minpartitions",
        "maxrecordsperpartition",
        "maxoffsetspertrigger",
        "minoffsetspertrigger",
        "maxtriggerdelay",
        "kafkaconsumer.polltimeoutms",
        "fetchoffset.numretries",
        "fetchoffset.retryintervalms",
        "groupidprefix",
        "includeheaders",
        "gregor.chunkrecords",
        "gregor.timeoutms",
        # typed key and value columns (gregor.spark.avro_options)
        "valueformat",
        "keyformat",
        "schemaregistry",
        "valuesubject",
        "keysubject",
        "valueschemaversion",
        "keyschemaversion",
        "mode",
    }
)
DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60 * 1000
STRATEGY_KEYS = "subscribe, subscribePattern, assign"

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
    topics: tuple[tuple[str, int], ...] = ()  # "offsets": topic-level -2 / -1, sorted by topic

    def expand(self, tps: Iterable[TopicPartition], name: str) -> dict[TopicPartition, int]:
        """Kind "offsets": the per-partition offsets with every topic-level value expanded to
        the partitions of that topic among ``tps`` (Spark's ``SpecificOffsetRangeLimit.resolve``);
        a topic-level value for a topic with none of ``tps`` is an error."""
        given: dict[TopicPartition, int] = dict(self.value)
        if not self.topics:
            return given
        tps = list(tps)
        level = dict(self.topics)
        expanded = {tp: level[tp.topic] for tp in tps if tp.topic in level}
        unmatched = sorted(set(level) - {tp.topic for tp in expanded})
        if unmatched:
            raise OptionError(
                f"{name} gives topic-level offsets for topics {unmatched} that are not among the topics "
                f"assigned to the query {sorted({tp.topic for tp in tps})}"
            )
        return {**expanded, **given}


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
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = DEFAULT_MAX_TRIGGER_DELAY_MS
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    isolation_level: int = 0
    check_crcs: bool = True
    chunk_records: int = 65536
    timeout: float = 120.0
    fetch_offset_retries: int = 3
    fetch_offset_retry_interval_s: float = 1.0
    extra: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    #: The key and value columns decoded from Avro (``gregor.spark.avro_options``).
    columns: tuple[AvroColumn, ...] = ()

    def matches(self, topic: str) -> bool:
        """Whether a topic belongs to a subscribe / subscribePattern subscription."""
        if self.subscribe is not None:
            return topic in self.subscribe
        if self.pattern is not None:
            return re.fullmatch(self.pattern, topic) is not None
        return self.assign is not None and any(tp.topic == topic for tp in self.assign)


def lower_keys(options: Mapping[str, str]) -> dict[str, str]:
    """The options as a data source sees them in Spark: keys lower-cased, unset values dropped."""
    return {str(k).lower(): str(v) for k, v in options.items() if v is not None}


def kafka_settings(
    options: Mapping[str, str], role: str, notes: list[str] | None = None
) -> dict[str, str]:
    """The ``kafka.*`` options the client uses for ``role`` ("source" or "producer").

    A source reads with a bare client (connection settings only); a sink adds the producer's.
    Settings the client has no use for (``kafka.group.id``, consumer tuning of the JVM
    client) are left out and named in ``notes``; the ones Spark forbids raise
    :class:`OptionError` with Spark's words.
    """
    known = {**COMMON, **(PRODUCER if role == "producer" else {})}
    out: dict[str, str] = {}
    unused: list[str] = []
    for k, v in lower_keys(options).items():
        if not k.startswith("kafka."):
            continue
        name = k[len("kafka.") :]
        if name in _FORBIDDEN:
            raise OptionError(f"Kafka option '{name}' is not supported: {_FORBIDDEN[name]}")
        if name == "group.id":
            if notes is not None:
                notes.append(
                    "option 'kafka.group.id' has no effect: the source reads with no consumer group "
                    "(offsets live in the query's checkpoint)"
                )
        elif name in ("isolation.level", "check.crcs"):
            pass  # the source's own: parse_source reads them
        elif name in known:
            out[name] = v
        else:
            unused.append(name)
    if unused and notes is not None:
        notes.append(
            f"kafka options {sorted(unused)} are not used by Gregor's {role} client and have no effect"
        )
    if "bootstrap.servers" not in out:
        raise OptionError(
            "Option 'kafka.bootstrap.servers' must be specified for configuring Kafka consumer"
            if role == "source"
            else "option 'kafka.bootstrap.servers' must be specified"
        )
    return out


def bool_option(opts: dict[str, str], key: str, default: bool) -> bool:
    """A boolean option (``true`` / ``false``, any case), ``default`` when it is not set."""
    v = opts.get(key)
    if v is None:
        return default
    s = v.strip().lower()
    if s in ("true", "false"):
        return s == "true"
    raise OptionError(f"option '{key}' must be true or false, got {v!r}")


def _positive(opts: dict[str, str], key: str, *, zero: bool = False) -> int | None:
    v = opts.get(key)
    if v is None:
        return None
    try:
        n = int(v.strip())
    except ValueError:
        raise OptionError(f"option '{key}' must be a positive integer, got {v!r}") from None
    if n < 0 or (n == 0 and not zero):
        raise OptionError(f"{key} must be positive, got {v!r}")
    return n


_TIME_UNITS = {
    "us": 0.001,
    "ms": 1,
    "s": 1000,
    "m": 60_000,
    "min": 60_000,
    "h": 3_600_000,
    "d": 86_400_000,
}


def time_ms(text: str, key: str) -> int:
    """Spark's time strings (``5s``, ``15m``, ``100ms``, ``1h``; a bare number is ms) to ms."""
    m = re.fullmatch(r"\s*(-?\d+)\s*([a-z]*)\s*", text.lower())
    if not m or m.group(2) not in ("", *_TIME_UNITS):
        raise OptionError(f"option '{key}' must be a time like 15m, 30s or 500ms, got {text!r}")
    return int(int(m.group(1)) * _TIME_UNITS.get(m.group(2), 1))


def parse_partition_json(text: str, what: str) -> dict[TopicPartition, int]:
    """``{"topicA": {"0": 23, "1": -1}}`` -> {TopicPartition("topicA", 0): 23, ...}."""
    try:
        obj = json.loads(text)
    except ValueError:
        raise OptionError(
            f'{what}: expected JSON like {{"topic":{{"0":23}}}}, got {text!r}'
        ) from None
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


_LEVELS = {"earliest": EARLIEST, "latest": LATEST}


class _Pairs(list[tuple[str, Any]]):
    """A JSON object as its (key, value) pairs, in order, duplicates kept."""


def parse_offsets_json(text: str, what: str) -> OffsetSpec:
    """startingOffsets / endingOffsets JSON: per-partition offsets, and topic-level
    ``"earliest"`` / ``"latest"`` (any case) in place of a topic's partition object."""
    bad = (
        f'{what}: expected JSON like {{"topicA":{{"0":23,"1":-1}},"topicB":"earliest"}} (a topic maps '
        f'to a JSON object of partition offsets, or to "earliest" or "latest"), got {text}'
    )

    try:
        obj = json.loads(text, object_pairs_hook=_Pairs)
    except ValueError:
        raise OptionError(bad) from None
    if not isinstance(obj, _Pairs):
        raise OptionError(bad)
    parts: dict[TopicPartition, int] = {}
    level: dict[str, int] = {}
    for topic, v in obj:
        if isinstance(v, str) and v.strip().lower() in _LEVELS:
            level[topic] = _LEVELS[v.strip().lower()]
        elif isinstance(v, _Pairs):
            for p, off in v:
                if isinstance(off, bool) or not isinstance(off, int):
                    raise OptionError(bad)
                try:
                    parts[TopicPartition(topic, int(p))] = off
                except ValueError:
                    raise OptionError(bad) from None
        else:
            raise OptionError(bad)
    both = sorted(set(level) & {tp.topic for tp in parts})
    if both:
        raise OptionError(
            f"{what}: topics {both} have both a topic-level offset and partition offsets in {text}"
        )
    return OffsetSpec("offsets", parts, tuple(sorted(level.items())))


def offsets_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """The Kafka source's offset form, ``{"topic": {"0": 23}}``, partitions in order."""
    out: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        out.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    return out


def offsets_from_json(obj: Mapping[str, Mapping[str, int]]) -> dict[TopicPartition, int]:
    return {TopicPartition(t, int(p)): int(o) for t, parts in obj.items() for p, o in parts.items()}


def _parse_assign(text: str) -> tuple[TopicPartition, ...]:
    if not text.strip().startswith("{"):
        raise OptionError(
            f"No topicpartitions to assign as specified value for option 'assign' is '{text}'"
        )
    try:
        obj = json.loads(text)
    except ValueError:
        raise OptionError(f'assign: expected JSON like {{"topicA":[0,1]}}, got {text!r}') from None
    if not isinstance(obj, dict) or not all(isinstance(v, list) for v in obj.values()):
        raise OptionError(f'assign: expected JSON like {{"topicA":[0,1]}}, got {text!r}')
    tps = tuple(sorted(TopicPartition(t, int(p)) for t, ps in obj.items() for p in ps))
    if not tps:
        raise OptionError(
            f"No topicpartitions to assign as specified value for option 'assign' is '{text}'"
        )
    return tps


def _offset_spec(opts: dict[str, str], prefix: str, streaming: bool) -> OffsetSpec:
    """startingX / endingX options to one OffsetSpec, with Spark's precedence."""
    ts = opts.get(f"{prefix}timestamp")
    if ts is not None:
        try:
            return OffsetSpec("timestamp", int(ts.strip()))
        except ValueError:
            raise OptionError(
                f"Expected a single long value, got {ts.strip()} (option '{prefix}Timestamp')"
            ) from None
    by_ts = opts.get(f"{prefix}offsetsbytimestamp")
    if by_ts is not None:
        return OffsetSpec("timestamps", parse_partition_json(by_ts, f"{prefix}OffsetsByTimestamp"))
    off = opts.get(f"{prefix}offsets")
    if off is None:
        return OffsetSpec("latest" if prefix == "ending" or streaming else "earliest")
    s = off.strip()
    if s.lower() in ("earliest", "latest"):
        return OffsetSpec(s.lower())
    return parse_offsets_json(s, f"{prefix}Offsets")


def check_offset_limits(starting: OffsetSpec, ending: OffsetSpec) -> None:
    """Spark's checks of a batch query's start and end given as offsets (or as timestamps)
    per partition: the same partitions, and no start after its end, whatever failOnDataLoss."""
    if starting.kind != ending.kind or starting.kind not in ("offsets", "timestamps"):
        return
    start, end = starting.value, ending.value
    if starting.topics or ending.topics:  # the partitions are known once the topics are listed
        start = {tp: v for tp, v in start.items() if tp in end}
        end = {tp: v for tp, v in end.items() if tp in start}
    elif set(start) != set(end):
        raise OptionError(
            "[MISMATCHED_TOPIC_PARTITIONS_BETWEEN_START_OFFSET_AND_END_OFFSET] The specified start "
            "offset and end offset should have the same topic-partitions. Topic-partitions for "
            f"start offset: {_tps(start)}, topic-partitions for end offset: {_tps(end)}."
        )
    for tp in sorted(start):
        s, e = start[tp], end[tp]
        if s > e and s >= 0 and e >= 0:
            what = "offset" if starting.kind == "offsets" else "timestamp"
            cond = "OFFSET" if starting.kind == "offsets" else "TIMESTAMP"
            raise OptionError(
                f"[UNRESOLVED_START_{cond}_GREATER_THAN_END_{cond}] The specified start {what} {s} is "
                f"greater than the end {what} {e} for topic {tp.topic} partition {tp.partition}."
            )


def _tps(offsets: Mapping[TopicPartition, int]) -> str:
    return "{" + ", ".join(f"{tp.topic}-{tp.partition}" for tp in sorted(offsets)) + "}"


def _subscription(
    opts: dict[str, str],
) -> tuple[tuple[str, ...] | None, str | None, tuple[TopicPartition, ...] | None]:
    chosen = [k for k in ("subscribe", "subscribepattern", "assign") if k in opts]
    if not chosen:
        raise OptionError(
            f"One of the following options must be specified for Kafka source: {STRATEGY_KEYS}. "
            "See the docs for more details. (exactly one of them is needed)"
        )
    if len(chosen) > 1:
        raise OptionError(
            f"Only one of the following options can be specified for Kafka source: {STRATEGY_KEYS}. "
            "See the docs for more details. (exactly one of them is needed)"
        )
    value = opts[chosen[0]]
    if chosen[0] == "subscribe":
        topics = tuple(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise OptionError(
                f"No topics to subscribe to as specified value for option 'subscribe' is '{value}'"
            )
        return topics, None, None
    if chosen[0] == "subscribepattern":
        pattern = value.strip()
        if not pattern:
            raise OptionError(
                f"Pattern to subscribe is empty as specified value for option 'subscribePattern' is '{value}'"
            )
        try:
            re.compile(pattern)
        except re.error as e:
            raise OptionError(f"subscribePattern: invalid pattern {pattern!r}: {e}") from None
        return None, pattern, None
    return None, None, _parse_assign(value)


def parse_source(options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    opts = lower_keys(options)
    notes: list[str] = []
    if streaming:
        if "endingoffsets" in opts:
            raise OptionError(
                "Ending offset not valid in streaming queries (option 'endingOffsets')"
            )
        for k in ("endingoffsetsbytimestamp", "endingtimestamp"):
            if k in opts:
                raise OptionError(f"Ending timestamp not valid in streaming queries (option '{k}')")
    subscribe, pattern, assign = _subscription(opts)
    client = kafka_settings(opts, "source", notes)

    starting = _offset_spec(opts, "starting", streaming)
    ending = _offset_spec(opts, "ending", streaming)
    if not streaming:
        if starting.kind == "latest":
            raise OptionError(
                "starting offset can't be latest for batch queries on Kafka (startingOffsets 'latest' is not valid for batch queries)"
            )
        if starting.kind == "offsets":
            for t, v in starting.topics:
                if v == LATEST:
                    raise OptionError(
                        f"startingOffsets for topic {t} can't be latest for batch queries on Kafka"
                    )
            for tp, v in sorted(starting.value.items()):
                if v == LATEST:
                    raise OptionError(
                        f"startingOffsets for {tp.topic}-{tp.partition} can't be latest for batch queries on Kafka (-1)"
                    )
        if ending.kind == "earliest":
            raise OptionError(
                "ending offset can't be earliest for batch queries on Kafka (endingOffsets 'earliest' is not valid for batch queries)"
            )
        if ending.kind == "offsets":
            for t, v in ending.topics:
                if v == EARLIEST:
                    raise OptionError(
                        f"ending offset for topic {t} can't be earliest for batch queries on Kafka"
                    )
            for tp, v in sorted(ending.value.items()):
                if v == EARLIEST:
                    raise OptionError(
                        f"ending offset for {tp.topic}-{tp.partition} can't be earliest for batch queries on Kafka (-2)"
                    )
        check_offset_limits(starting, ending)
        for k, name in (
            ("maxoffsetspertrigger", "maxOffsetsPerTrigger"),
            ("minoffsetspertrigger", "minOffsetsPerTrigger"),
            ("maxtriggerdelay", "maxTriggerDelay"),
        ):
            if k in opts:
                notes.append(f"{name} option ignored in batch queries")

    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise OptionError(
            f"startingOffsetsByTimestampStrategy must be error or latest, got {strategy!r}"
        )

    level = opts.get("kafka.isolation.level", "read_uncommitted").strip().lower()
    if level not in ("read_uncommitted", "read_committed"):
        raise OptionError(
            f"kafka.isolation.level must be read_uncommitted or read_committed, got {level!r}"
        )

    max_per = _positive(opts, "maxoffsetspertrigger")
    min_per = _positive(opts, "minoffsetspertrigger")
    if min_per is not None and max_per is not None and min_per > max_per:
        raise OptionError(
            f"The value of minOffsetPerTrigger({min_per}) is higher than the maxOffsetsPerTrigger({max_per})."
        )
    delay = (
        time_ms(opts["maxtriggerdelay"], "maxTriggerDelay")
        if "maxtriggerdelay" in opts
        else DEFAULT_MAX_TRIGGER_DELAY_MS
    )
    if streaming and "maxtriggerdelay" in opts and min_per is None:
        notes.append("maxTriggerDelay has no effect without minOffsetsPerTrigger")

    chunk = _positive(opts, "gregor.chunkrecords")
    timeout = _positive(opts, "gregor.timeoutms")
    poll = _positive(opts, "kafkaconsumer.polltimeoutms")
    retries = _positive(opts, "fetchoffset.numretries")
    interval = _positive(opts, "fetchoffset.retryintervalms", zero=True)
    if "groupidprefix" in opts:
        notes.append(
            "option 'groupIdPrefix' has no effect: the source reads with no consumer group"
        )
    unknown = sorted(k for k in opts if not k.startswith("kafka.") and k not in SOURCE_KEYS)
    if unknown:
        notes.append(f"options {unknown} are not options of the Kafka source and are ignored")
    for n in notes:
        log.warning("%s", n)
    wait = timeout or poll
    return SourceOptions(
        client=client,
        subscribe=subscribe,
        pattern=pattern,
        assign=assign,
        starting=starting,
        ending=ending,
        by_timestamp_strategy=strategy,
        max_offsets_per_trigger=max_per,
        min_offsets_per_trigger=min_per,
        max_trigger_delay_ms=delay,
        min_partitions=_positive(opts, "minpartitions"),
        max_records_per_partition=_positive(opts, "maxrecordsperpartition"),
        fail_on_data_loss=bool_option(opts, "failondataloss", True),
        include_headers=bool_option(opts, "includeheaders", False),
        isolation_level=1 if level == "read_committed" else 0,
        check_crcs=bool_option(opts, "kafka.check.crcs", True),
        chunk_records=chunk or 65536,
        timeout=(wait / 1000) if wait else 120.0,
        fetch_offset_retries=retries or 3,
        fetch_offset_retry_interval_s=(interval / 1000) if interval is not None else 1.0,
        notes=tuple(notes),
    )


__all__ = [
    "EARLIEST",
    "LATEST",
    "OffsetSpec",
    "OptionError",
    "SourceOptions",
    "check_offset_limits",
    "bool_option",
    "kafka_settings",
    "lower_keys",
    "offsets_from_json",
    "offsets_json",
    "parse_offsets_json",
    "parse_partition_json",
    "parse_source",
    "time_ms",
]
