"""Kafka's topic configs: names, types, defaults, valid values and broker synonyms.

Theory of operation. A topic's effective config is resolved the way Kafka resolves it: the
topic's own override (source TOPIC_CONFIG) wins; otherwise the first of the topic config's
broker synonyms that ``server.properties`` sets (STATIC_BROKER_CONFIG), converted to the topic
config's unit (``log.retention.hours=24`` gives ``retention.ms=86400000``); otherwise the
default of the first synonym that has one, or the topic config's own default (DEFAULT_CONFIG).
Where a broker value is looked up, ``broker_props`` is either ``server.properties`` alone or
the broker's layers (dynamic per-broker, dynamic cluster default, static; see
``gregor.broker.config.dynamic_configs``), each synonym taking its first layer that sets it.

The table lists every common Kafka topic config, including those Gregor only stores and
reports (``compression.type``, ``min.insync.replicas``, ``unclean.leader.election.enable``,
...), so tools that set them keep working. ``topic_config_validator`` checks a set of
overrides against it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from gregor.broker.config import schema_validation as sv
from gregor.broker.config.config_types import ConfigResourceType as ConfigResourceType
from gregor.broker.config.config_types import ConfigSource as ConfigSource
from gregor.broker.config.config_types import ConfigType as ConfigType
from gregor.tables import settings as tables_settings

LONG_MAX = (1 << 63) - 1
LONG_MIN = -(1 << 63)
INT_MAX = (1 << 31) - 1
INT_MIN = -(1 << 31)
HOUR_MS = 3_600_000
MINUTE_MS = 60_000
WEEK_MS = 7 * 24 * HOUR_MS


@dataclass(frozen=True)
class Synonym:
    """A broker (``server.properties``) key that supplies a topic config's default."""

    name: str
    default: str | None  # Kafka's default for the broker key; None when it has none
    scale: int = 1  # multiply the broker value by this to get the topic config's unit


@dataclass(frozen=True)
class TopicConfigDef:
    name: str
    type: ConfigType
    default: str
    doc: str
    synonyms: tuple[Synonym, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] | None = None  # allowed values (each item, for a LIST)
    check: Callable[[str], str | None] | None = None  # extra check: why the value is bad
    stored_only: bool = False  # Gregor keeps and reports it but does not act on it


def _gzip_level(v: str) -> str | None:
    n = int(v)
    return None if n == -1 or 1 <= n <= 9 else "must be -1 or between 1 and 9"


_THROTTLED = re.compile(r"^\s*\d+\s*:\s*\d+\s*$")


def _throttled_replicas(v: str) -> str | None:
    items = [p.strip() for p in v.split(",") if p.strip()]
    if items == ["*"] or all(_THROTTLED.match(p) for p in items):
        return None
    return "must be '*' or a list of partition:broker pairs"


def _remote_storage(v: str) -> str | None:
    return "tiered storage is not supported by this broker" if v.strip().lower() == "true" else None


def _s(name: str, default: object, scale: int = 1) -> Synonym:
    return Synonym(name, None if default is None else str(default), scale)


_T = ConfigType

TOPIC_CONFIGS: tuple[TopicConfigDef, ...] = (
    TopicConfigDef(
        "cleanup.policy",
        _T.LIST,
        "delete",
        "How old log segments are discarded: 'delete' by age or size, 'compact' to keep the "
        "latest record per key, or both.",
        (_s("log.cleanup.policy", "delete"),),
        choices=("delete", "compact"),
    ),
    TopicConfigDef(
        "compression.type",
        _T.STRING,
        "producer",
        "The compression codec of the topic's batches; 'producer' keeps what the producer sent.",
        (_s("compression.type", "producer"),),
        choices=("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
        stored_only=True,
    ),
    TopicConfigDef(
        "compression.gzip.level",
        _T.INT,
        "-1",
        "Compression level when compression.type is gzip.",
        (_s("compression.gzip.level", -1),),
        check=_gzip_level,
        stored_only=True,
    ),
    TopicConfigDef(
        "compression.lz4.level",
        _T.INT,
        "9",
        "Compression level when compression.type is lz4.",
        (_s("compression.lz4.level", 9),),
        minimum=1,
        maximum=17,
        stored_only=True,
    ),
    TopicConfigDef(
        "compression.zstd.level",
        _T.INT,
        "3",
        "Compression level when compression.type is zstd.",
        (_s("compression.zstd.level", 3),),
        minimum=-131072,
        maximum=22,
        stored_only=True,
    ),
    TopicConfigDef(
        sv.KEY_VALIDATION,
        _T.BOOLEAN,
        "false",
        "Confluent Server's schema ID validation of keys: each non-null key must carry a schema "
        "id registered under the subject its strategy names (needs a schema registry).",
    ),
    TopicConfigDef(
        sv.KEY_STRATEGY,
        _T.STRING,
        sv.TOPIC_NAME,
        "How a key's subject is named: TopicNameStrategy, RecordNameStrategy or "
        "TopicRecordNameStrategy.",
        check=sv.strategy_error,
    ),
    TopicConfigDef(
        sv.VALUE_VALIDATION,
        _T.BOOLEAN,
        "false",
        "Confluent Server's schema ID validation of values: each non-null value must carry a "
        "schema id registered under the subject its strategy names (needs a schema registry).",
    ),
    TopicConfigDef(
        sv.VALUE_STRATEGY,
        _T.STRING,
        sv.TOPIC_NAME,
        "How a value's subject is named: TopicNameStrategy, RecordNameStrategy or "
        "TopicRecordNameStrategy.",
        check=sv.strategy_error,
    ),
    TopicConfigDef(
        sv.KEY_LEVEL,
        _T.STRING,
        sv.ID_LEVEL,
        "How deep confluent.key.schema.validation checks a key: 'id' (its schema id, as "
        "Confluent Server does) or 'decode' (it must also decode with that id's schema).",
        choices=sv.LEVELS,
    ),
    TopicConfigDef(
        sv.VALUE_LEVEL,
        _T.STRING,
        sv.ID_LEVEL,
        "How deep confluent.value.schema.validation checks a value: 'id' (its schema id, as "
        "Confluent Server does) or 'decode' (it must also decode with that id's schema).",
        choices=sv.LEVELS,
    ),
    TopicConfigDef(
        "delete.retention.ms",
        _T.LONG,
        "86400000",
        "How long tombstones are kept on a compacted topic after the cleaner reaches them.",
        (_s("log.cleaner.delete.retention.ms", 86400000),),
        minimum=0,
    ),
    TopicConfigDef(
        "file.delete.delay.ms",
        _T.LONG,
        "60000",
        "How long a deleted segment's files stay on disk before they are removed.",
        (_s("log.segment.delete.delay.ms", 60000),),
        minimum=0,
    ),
    TopicConfigDef(
        "flush.messages",
        _T.LONG,
        str(LONG_MAX),
        "Force an fsync of the log after this many messages.",
        (_s("log.flush.interval.messages", LONG_MAX),),
        minimum=1,
    ),
    TopicConfigDef(
        "flush.ms",
        _T.LONG,
        str(LONG_MAX),
        "Force an fsync of the log when this much time has passed since the last one.",
        (_s("log.flush.interval.ms", None),),
        minimum=0,
    ),
    TopicConfigDef(
        "follower.replication.throttled.replicas",
        _T.LIST,
        "",
        "Replicas whose follower fetches are throttled: '*' or partition:broker pairs.",
        check=_throttled_replicas,
        stored_only=True,
    ),
    TopicConfigDef(
        tables_settings.MODE,
        _T.STRING,
        tables_settings.DISABLED,
        "Whether the topic is also an Iceberg table: 'disabled', 'key_value', "
        "'value_schema_id_prefix' or 'value_schema_latest' (typed, with <topic>~dlq).",
        choices=tables_settings.MODES,
        check=tables_settings.mode_error,
    ),
    TopicConfigDef(
        tables_settings.UPSERT,
        _T.BOOLEAN,
        "false",
        "Whether a compacted topic's Iceberg table is an upsert table: one row per (partition, "
        "key), the key's latest record; a tombstone deletes the row. Needs cleanup.policy with "
        "compact and iceberg.mode=key_value.",
    ),
    TopicConfigDef(
        tables_settings.TARGET_LAG_MS,
        _T.LONG,
        str(tables_settings.DEFAULT_TARGET_LAG_MS),
        "How long a committed record may wait before the topic's Iceberg table shows it.",
        minimum=1,
    ),
    TopicConfigDef(
        tables_settings.RETENTION_MS,
        _T.LONG,
        str(tables_settings.DEFAULT_RETENTION_MS),
        "Rows of the topic's Iceberg table older than this (record timestamp) are deleted; "
        "-1 keeps everything.",
        minimum=-1,
    ),
    TopicConfigDef(
        tables_settings.COMPACTION_MIN_INPUT_FILES,
        _T.INT,
        str(tables_settings.DEFAULT_COMPACTION_MIN_INPUT_FILES),
        "An hour partition of the topic's Iceberg table with this many small files is "
        "rewritten into one; 0: never automatically.",
        check=tables_settings.compaction_min_input_files_error,
    ),
    TopicConfigDef(
        tables_settings.MAINTENANCE_INTERVAL_MS,
        _T.LONG,
        str(tables_settings.DEFAULT_MAINTENANCE_INTERVAL_MS),
        "How often the topic's Iceberg table is maintained (retention, snapshot expiry, "
        "compaction).",
        minimum=1,
    ),
    TopicConfigDef(
        "index.interval.bytes",
        _T.INT,
        "4096",
        "Bytes of log between two entries of the offset index.",
        (_s("log.index.interval.bytes", 4096),),
        minimum=0,
    ),
    TopicConfigDef(
        "leader.replication.throttled.replicas",
        _T.LIST,
        "",
        "Replicas whose leader-side replication is throttled: '*' or partition:broker pairs.",
        check=_throttled_replicas,
        stored_only=True,
    ),
    TopicConfigDef(
        "local.retention.bytes",
        _T.LONG,
        "-2",
        "Tiered storage: bytes kept locally (-2: the value of retention.bytes).",
        (_s("log.local.retention.bytes", -2),),
        minimum=-2,
        stored_only=True,
    ),
    TopicConfigDef(
        "local.retention.ms",
        _T.LONG,
        "-2",
        "Tiered storage: time kept locally (-2: the value of retention.ms).",
        (_s("log.local.retention.ms", -2),),
        minimum=-2,
        stored_only=True,
    ),
    TopicConfigDef(
        "max.compaction.lag.ms",
        _T.LONG,
        str(LONG_MAX),
        "The longest a record may stay uncompacted on a compacted topic.",
        (_s("log.cleaner.max.compaction.lag.ms", LONG_MAX),),
        minimum=1,
        stored_only=True,
    ),
    TopicConfigDef(
        "max.message.bytes",
        _T.INT,
        "1048588",
        "The largest record batch the topic accepts, in bytes.",
        (_s("message.max.bytes", 1048588),),
        minimum=0,
    ),
    TopicConfigDef(
        "message.downconversion.enable",
        _T.BOOLEAN,
        "true",
        "Whether fetches by old consumers may down-convert batches to their message format.",
        (_s("log.message.downconversion.enable", "true"),),
        stored_only=True,
    ),
    TopicConfigDef(
        "message.timestamp.after.max.ms",
        _T.LONG,
        "3600000",
        "How far a CreateTime timestamp may lie ahead of the broker's clock.",
        (_s("log.message.timestamp.after.max.ms", 3600000),),
        minimum=0,
    ),
    TopicConfigDef(
        "message.timestamp.before.max.ms",
        _T.LONG,
        str(LONG_MAX),
        "How far a CreateTime timestamp may lie behind the broker's clock.",
        (_s("log.message.timestamp.before.max.ms", LONG_MAX),),
        minimum=0,
    ),
    TopicConfigDef(
        "message.timestamp.type",
        _T.STRING,
        "CreateTime",
        "CreateTime keeps the producer's timestamps; LogAppendTime stamps the broker's time.",
        (_s("log.message.timestamp.type", "CreateTime"),),
        choices=("CreateTime", "LogAppendTime"),
    ),
    TopicConfigDef(
        "min.cleanable.dirty.ratio",
        _T.DOUBLE,
        "0.5",
        "The share of uncompacted log above which the cleaner compacts a partition.",
        (_s("log.cleaner.min.cleanable.ratio", "0.5"),),
        minimum=0,
        maximum=1,
    ),
    TopicConfigDef(
        "min.compaction.lag.ms",
        _T.LONG,
        "0",
        "The least time a record stays uncompacted.",
        (_s("log.cleaner.min.compaction.lag.ms", 0),),
        minimum=0,
    ),
    TopicConfigDef(
        "min.insync.replicas",
        _T.INT,
        "1",
        "In-sync replicas needed for an acks=all produce to succeed.",
        (_s("min.insync.replicas", 1),),
        minimum=1,
        stored_only=True,
    ),
    TopicConfigDef(
        "preallocate",
        _T.BOOLEAN,
        "false",
        "Whether new segment files are preallocated.",
        (_s("log.preallocate", "false"),),
        stored_only=True,
    ),
    TopicConfigDef(
        "remote.storage.enable",
        _T.BOOLEAN,
        "false",
        "Tiered storage for the topic; this broker has none, so only false is accepted.",
        check=_remote_storage,
        stored_only=True,
    ),
    TopicConfigDef(
        "retention.bytes",
        _T.LONG,
        "-1",
        "The most bytes a partition keeps before old segments are deleted (-1: no limit).",
        (_s("log.retention.bytes", -1),),
    ),
    TopicConfigDef(
        "retention.ms",
        _T.LONG,
        str(WEEK_MS),
        "How long a record is kept before its segment may be deleted (-1: forever).",
        (
            _s("log.retention.ms", None),
            _s("log.retention.minutes", None, MINUTE_MS),
            _s("log.retention.hours", 168, HOUR_MS),
        ),
        minimum=-1,
    ),
    TopicConfigDef(
        "segment.bytes",
        _T.INT,
        "1073741824",
        "The size at which a segment file is rolled.",
        (_s("log.segment.bytes", 1073741824),),
        minimum=14,
    ),
    TopicConfigDef(
        "segment.index.bytes",
        _T.INT,
        "10485760",
        "The largest size of a segment's index files.",
        (_s("log.index.size.max.bytes", 10485760),),
        minimum=4,
    ),
    TopicConfigDef(
        "segment.jitter.ms",
        _T.LONG,
        "0",
        "A random delay subtracted from segment.ms per segment.",
        (_s("log.roll.jitter.ms", None), _s("log.roll.jitter.hours", 0, HOUR_MS)),
        minimum=0,
        stored_only=True,
    ),
    TopicConfigDef(
        "segment.ms",
        _T.LONG,
        str(WEEK_MS),
        "The age at which a segment is rolled even if it is not full.",
        (_s("log.roll.ms", None), _s("log.roll.hours", 168, HOUR_MS)),
        minimum=1,
    ),
    TopicConfigDef(
        "unclean.leader.election.enable",
        _T.BOOLEAN,
        "false",
        "Whether a replica outside the ISR may become leader (risking data loss).",
        (_s("unclean.leader.election.enable", "false"),),
        stored_only=True,
    ),
)

BY_NAME: dict[str, TopicConfigDef] = {d.name: d for d in TOPIC_CONFIGS}
_SORTED = sorted(TOPIC_CONFIGS, key=lambda d: d.name)

# Broker keys that are synonyms of a topic config, with Kafka's default for each.
BROKER_SYNONYMS: dict[str, Synonym] = {s.name: s for d in TOPIC_CONFIGS for s in d.synonyms}


def split_list(text: str) -> list[str]:
    return [p.strip() for p in text.split(",") if p.strip()]


# --- resolution and description ---


@dataclass
class ConfigEntry:
    """One described config: what DescribeConfigs and CreateTopics v5+ report."""

    name: str
    value: str | None
    source: ConfigSource
    config_type: ConfigType
    documentation: str | None
    read_only: bool = False
    is_sensitive: bool = False
    synonyms: list[tuple[str, str | None, ConfigSource]] | None = None


def _scaled(value: str, scale: int) -> str | None:
    if scale == 1:
        return value.strip()
    try:
        return str(int(value.strip()) * scale)
    except ValueError:
        return None


#: Broker values: ``server.properties`` alone, or (props, source) layers, most specific first.
BrokerProps = Mapping[str, str] | Sequence[tuple[Mapping[str, str], ConfigSource]]


def broker_layers_of(broker_props: BrokerProps) -> Sequence[tuple[Mapping[str, str], ConfigSource]]:
    if isinstance(broker_props, Mapping):
        return ((broker_props, ConfigSource.STATIC_BROKER_CONFIG),)
    return broker_props


def broker_synonyms(
    d: TopicConfigDef, broker_props: BrokerProps
) -> list[tuple[str, str | None, ConfigSource, int]]:
    """The broker-level entries behind a topic config, in precedence order: per synonym, its
    value in each layer that sets it (dynamic, then static) and then its default (if any)."""
    out: list[tuple[str, str | None, ConfigSource, int]] = []
    layers = broker_layers_of(broker_props)
    for syn in d.synonyms:
        for props, source in layers:
            if syn.name in props:
                out.append((syn.name, props[syn.name], source, syn.scale))
        if syn.default is not None:
            out.append((syn.name, syn.default, ConfigSource.DEFAULT_CONFIG, syn.scale))
    return out


def broker_default(d: TopicConfigDef, broker_props: BrokerProps) -> tuple[str, ConfigSource]:
    """The value a topic without an override gets, and where it comes from."""
    for _name, value, source, scale in broker_synonyms(d, broker_props):
        if value is None:
            continue
        converted = _scaled(value, scale)
        if converted is not None:
            return converted, source
    return d.default, ConfigSource.DEFAULT_CONFIG


def effective_value(name: str, overrides: Mapping[str, str], broker_props: BrokerProps) -> str:
    if name in overrides:
        return overrides[name]
    return broker_default(BY_NAME[name], broker_props)[0]


def describe_topic(
    overrides: Mapping[str, str],
    broker_props: BrokerProps,
    names: Iterable[str] | None = None,
    *,
    include_synonyms: bool = False,
    include_documentation: bool = False,
) -> list[ConfigEntry]:
    """Every topic config (or those in ``names`` that exist) with value, source and, when
    asked, synonyms and documentation. Sorted by name."""
    wanted = None if names is None else set(names)
    out = []
    for d in _SORTED:
        if wanted is not None and d.name not in wanted:
            continue
        if d.name in overrides:
            value: str | None = overrides[d.name]
            source = ConfigSource.TOPIC_CONFIG
        else:
            value, source = broker_default(d, broker_props)
        synonyms: list[tuple[str, str | None, ConfigSource]] | None = None
        if include_synonyms:
            synonyms = []
            if d.name in overrides:
                synonyms.append((d.name, overrides[d.name], ConfigSource.TOPIC_CONFIG))
            synonyms.extend((n, v, s) for n, v, s, _ in broker_synonyms(d, broker_props))
        out.append(
            ConfigEntry(
                d.name,
                value,
                source,
                d.type,
                d.doc if include_documentation else None,
                synonyms=synonyms,
            )
        )
    return out
