"""Per-log configuration under Kafka's topic config names.

``LogConfig`` holds Kafka's defaults. ``LogConfig.from_props({...})`` reads Kafka-named
properties (strings or numbers, as a topic config or ``server.properties`` gives them) on top of
a base config, so a topic's overrides layer over the broker's defaults:

    broker_default = LogConfig.from_props({"segment.bytes": "104857600"})
    topic = broker_default.with_overrides({"cleanup.policy": "compact"})

Keys that are topic configs but not the log's business (``min.insync.replicas``,
``compression.type``, ...) are ignored; values that do not parse or are out of range raise
:class:`~gregor.storage.errors.InvalidConfigError` (INVALID_CONFIG).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gregor.storage.errors import InvalidConfigError

LONG_MAX = (1 << 63) - 1
INT_MAX = (1 << 31) - 1

CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = 1024 * 1024 * 1024
    segment_ms: int = 7 * 24 * 3600 * 1000
    segment_index_bytes: int = 10 * 1024 * 1024
    retention_ms: int = 7 * 24 * 3600 * 1000  # -1: keep forever
    retention_bytes: int = -1  # -1: no size limit
    cleanup_policy: tuple[str, ...] = ("delete",)
    max_message_bytes: int = 1024 * 1024 + 12  # Kafka's 1048588
    message_timestamp_type: str = CREATE_TIME
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = 3600 * 1000  # Kafka 4.0's default (KIP-1030)
    index_interval_bytes: int = 4096
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    delete_retention_ms: int = 24 * 3600 * 1000
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    file_delete_delay_ms: int = 60 * 1000

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == LOG_APPEND_TIME

    @classmethod
    def from_props(cls, props: Mapping[str, object], base: LogConfig | None = None) -> LogConfig:
        return (base or cls()).with_overrides(props)

    def with_overrides(self, props: Mapping[str, object]) -> LogConfig:
        changes: dict[str, Any] = {}  # field -> value, typed per field by _PROPS' parsers
        for name, raw in props.items():
            spec = _PROPS.get(name)
            if spec is None:
                continue
            field, parse = spec
            try:
                changes[field] = parse(raw)
            except (TypeError, ValueError) as e:
                raise InvalidConfigError(f"invalid value {raw!r} for {name}: {e}") from None
        cfg = dataclasses.replace(self, **changes) if changes else self
        cfg.validate()
        return cfg

    def to_props(self) -> dict[str, str]:
        out = {}
        for name, (field, _) in _PROPS.items():
            value = getattr(self, field)
            if isinstance(value, tuple):
                out[name] = ",".join(value)
            else:
                out[name] = str(value)
        return out

    def validate(self) -> None:
        def need(cond: bool, what: str) -> None:
            if not cond:
                raise InvalidConfigError(what)

        need(self.segment_bytes >= 14, "segment.bytes must be at least 14")
        need(self.segment_ms >= 1, "segment.ms must be positive")
        need(self.segment_index_bytes >= 12, "segment.index.bytes must be at least 12")
        need(self.retention_ms >= -1, "retention.ms must be -1 or more")
        need(self.index_interval_bytes >= 0, "index.interval.bytes must not be negative")
        need(self.max_message_bytes >= 0, "max.message.bytes must not be negative")
        need(self.flush_messages >= 1, "flush.messages must be positive")
        need(self.flush_ms >= 0, "flush.ms must not be negative")
        need(self.delete_retention_ms >= 0, "delete.retention.ms must not be negative")
        need(0.0 <= self.min_cleanable_dirty_ratio <= 1.0, "min.cleanable.dirty.ratio not in [0,1]")
        need(self.min_compaction_lag_ms >= 0, "min.compaction.lag.ms must not be negative")
        need(self.file_delete_delay_ms >= 0, "file.delete.delay.ms must not be negative")
        need(
            self.message_timestamp_before_max_ms >= 0,
            "message.timestamp.before.max.ms must not be negative",
        )
        need(
            self.message_timestamp_after_max_ms >= 0,
            "message.timestamp.after.max.ms must not be negative",
        )
        need(
            self.message_timestamp_type in (CREATE_TIME, LOG_APPEND_TIME),
            "message.timestamp.type must be CreateTime or LogAppendTime",
        )
        need(
            bool(self.cleanup_policy)
            and all(p in ("delete", "compact") for p in self.cleanup_policy),
            "cleanup.policy must be delete, compact or both",
        )


def _int(raw: object) -> int:
    if isinstance(raw, bool):
        raise ValueError("not an integer")
    if isinstance(raw, int):
        return raw
    return int(str(raw).strip())


def _ratio(raw: object) -> float:
    return float(str(raw).strip())


def _policy(raw: object) -> tuple[str, ...]:
    if isinstance(raw, (list, tuple)):
        parts = [str(p).strip() for p in raw]
    else:
        parts = [p.strip() for p in str(raw).split(",")]
    return tuple(sorted({p for p in parts if p}))


def _timestamp_type(raw: object) -> str:
    return str(raw).strip()


_PROPS: dict[str, tuple[str, Callable[[object], object]]] = {
    "segment.bytes": ("segment_bytes", _int),
    "segment.ms": ("segment_ms", _int),
    "segment.index.bytes": ("segment_index_bytes", _int),
    "retention.ms": ("retention_ms", _int),
    "retention.bytes": ("retention_bytes", _int),
    "cleanup.policy": ("cleanup_policy", _policy),
    "max.message.bytes": ("max_message_bytes", _int),
    "message.timestamp.type": ("message_timestamp_type", _timestamp_type),
    "message.timestamp.before.max.ms": ("message_timestamp_before_max_ms", _int),
    "message.timestamp.after.max.ms": ("message_timestamp_after_max_ms", _int),
    "index.interval.bytes": ("index_interval_bytes", _int),
    "flush.messages": ("flush_messages", _int),
    "flush.ms": ("flush_ms", _int),
    "delete.retention.ms": ("delete_retention_ms", _int),
    "min.cleanable.dirty.ratio": ("min_cleanable_dirty_ratio", _ratio),
    "min.compaction.lag.ms": ("min_compaction_lag_ms", _int),
    "file.delete.delay.ms": ("file_delete_delay_ms", _int),
}

# The broker-level (server.properties) names of the same settings.
BROKER_PROPS: dict[str, str] = {
    "log.segment.bytes": "segment.bytes",
    "log.roll.ms": "segment.ms",
    "log.index.size.max.bytes": "segment.index.bytes",
    "log.retention.ms": "retention.ms",
    "log.retention.bytes": "retention.bytes",
    "log.cleanup.policy": "cleanup.policy",
    "message.max.bytes": "max.message.bytes",
    "log.message.timestamp.type": "message.timestamp.type",
    "log.message.timestamp.before.max.ms": "message.timestamp.before.max.ms",
    "log.message.timestamp.after.max.ms": "message.timestamp.after.max.ms",
    "log.index.interval.bytes": "index.interval.bytes",
    "log.flush.interval.messages": "flush.messages",
    "log.flush.interval.ms": "flush.ms",
    "log.cleaner.delete.retention.ms": "delete.retention.ms",
    "log.cleaner.min.cleanable.ratio": "min.cleanable.dirty.ratio",
    "log.cleaner.min.compaction.lag.ms": "min.compaction.lag.ms",
    "log.segment.delete.delay.ms": "file.delete.delay.ms",
}


def from_broker_props(props: Mapping[str, object]) -> LogConfig:
    """The default LogConfig from ``server.properties`` keys (``log.segment.bytes``, ...).
    ``log.retention.hours``/``minutes`` and ``log.roll.hours`` apply when the ms keys are
    absent, as in Kafka."""
    topic_props: dict[str, object] = {}
    if "log.retention.ms" not in props:
        if "log.retention.minutes" in props:
            topic_props["retention.ms"] = _int(props["log.retention.minutes"]) * 60_000
        elif "log.retention.hours" in props:
            topic_props["retention.ms"] = _int(props["log.retention.hours"]) * 3_600_000
    if "log.roll.ms" not in props and "log.roll.hours" in props:
        topic_props["segment.ms"] = _int(props["log.roll.hours"]) * 3_600_000
    for broker_name, topic_name in BROKER_PROPS.items():
        if broker_name in props:
            topic_props[topic_name] = props[broker_name]
    return LogConfig.from_props(topic_props)
