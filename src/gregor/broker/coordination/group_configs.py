"""Group configs (config resource GROUP, type 32): Kafka 4.0's per-group overrides.

Theory of operation. A group's configs override, for that group only, the broker's
``group.consumer.*`` / ``group.share.*`` settings. The overrides live in the metadata image as
the config resource ``(GROUP, group id)``; a group need not exist to have them (Kafka keeps
them apart from the group). DescribeConfigs lists every group config: the override (source
GROUP_CONFIG) or the broker's value (DEFAULT_CONFIG), as Kafka does. A new override set is
validated as Kafka's ``GroupConfig.validate`` does, against the broker's min/max settings
(INVALID_CONFIG with Kafka's messages).

The share partitions read ``share.record.lock.duration.ms``, ``share.isolation.level`` and
``share.auto.offset.reset`` of their group; the other overrides are stored and described.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from gregor.broker.common.errors import kafka_error
from gregor.broker.config.broker_config import BrokerConfig
from gregor.broker.config.topic_configs import ConfigEntry, ConfigSource, ConfigType
from gregor.protocol.errors import ErrorCode

__all__ = ["GROUP_CONFIGS", "check_group_name", "describe_group", "validate_group_overrides"]


@dataclass(frozen=True)
class GroupConfigDef:
    name: str
    type: ConfigType
    broker_key: str | None  # the broker setting that gives the default
    default: str  # when there is no broker key
    doc: str
    min_key: str | None = None
    max_key: str | None = None
    choices: tuple[str, ...] | None = None


GROUP_CONFIGS: tuple[GroupConfigDef, ...] = (
    GroupConfigDef(
        "consumer.heartbeat.interval.ms",
        ConfigType.INT,
        "group.consumer.heartbeat.interval.ms",
        "5000",
        "The heartbeat interval given to the members of a consumer group.",
        "group.consumer.min.heartbeat.interval.ms",
        "group.consumer.max.heartbeat.interval.ms",
    ),
    GroupConfigDef(
        "consumer.session.timeout.ms",
        ConfigType.INT,
        "group.consumer.session.timeout.ms",
        "45000",
        "The timeout to detect client failures when using the consumer group protocol.",
        "group.consumer.min.session.timeout.ms",
        "group.consumer.max.session.timeout.ms",
    ),
    GroupConfigDef(
        "share.auto.offset.reset",
        ConfigType.STRING,
        None,
        "latest",
        "The strategy to initialize the share-partition start offset.",
        choices=("earliest", "latest"),
    ),
    GroupConfigDef(
        "share.isolation.level",
        ConfigType.STRING,
        None,
        "read_uncommitted",
        "Whether a share group reads transactional records only once committed.",
        choices=("read_committed", "read_uncommitted"),
    ),
    GroupConfigDef(
        "share.heartbeat.interval.ms",
        ConfigType.INT,
        "group.share.heartbeat.interval.ms",
        "5000",
        "The heartbeat interval given to the members of a share group.",
        "group.share.min.heartbeat.interval.ms",
        "group.share.max.heartbeat.interval.ms",
    ),
    GroupConfigDef(
        "share.record.lock.duration.ms",
        ConfigType.INT,
        "group.share.record.lock.duration.ms",
        "30000",
        "The record acquisition lock duration in milliseconds for share groups.",
        "group.share.min.record.lock.duration.ms",
        "group.share.max.record.lock.duration.ms",
    ),
    GroupConfigDef(
        "share.session.timeout.ms",
        ConfigType.INT,
        "group.share.session.timeout.ms",
        "45000",
        "The timeout to detect client failures when using the share group protocol.",
        "group.share.min.session.timeout.ms",
        "group.share.max.session.timeout.ms",
    ),
)
_BY_NAME = {d.name: d for d in GROUP_CONFIGS}


def check_group_name(name: str) -> None:
    if not name:
        raise kafka_error(ErrorCode.INVALID_REQUEST, "Group name must not be empty")


def _broker_value(config: BrokerConfig, key: str | None, default: str) -> str:
    if key is None:
        return default
    value = config.get(key)
    return default if value is None else str(value)


def describe_group(
    overrides: Mapping[str, str],
    config: BrokerConfig,
    names: Iterable[str] | None,
    include_synonyms: bool,
    include_documentation: bool,
) -> list[ConfigEntry]:
    wanted = None if names is None else set(names)
    out = []
    for d in GROUP_CONFIGS:
        if wanted is not None and d.name not in wanted:
            continue
        default = _broker_value(config, d.broker_key, d.default)
        if d.name in overrides:
            value, source = overrides[d.name], ConfigSource.GROUP_CONFIG
        else:
            value, source = default, ConfigSource.DEFAULT_CONFIG
        synonyms: list[tuple[str, str | None, ConfigSource]] | None = None
        if include_synonyms:
            synonyms = [(d.name, value, source)]
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


def validate_group_overrides(overrides: Mapping[str, str], config: BrokerConfig) -> None:
    """INVALID_CONFIG, with Kafka's messages, for a set of group overrides Kafka refuses."""

    def bad(message: str) -> Exception:
        return kafka_error(ErrorCode.INVALID_CONFIG, message)

    values: dict[str, int] = {}
    for name, text in overrides.items():
        d = _BY_NAME.get(name)
        if d is None:
            raise bad(f"Unknown group config name: {name}")
        if d.choices is not None:
            if text not in d.choices:
                raise bad(
                    f"Invalid value {text} for configuration {name}: String must be one of: "
                    + ", ".join(d.choices)
                )
            continue
        try:
            values[name] = int(text.strip())
        except ValueError:
            raise bad(
                f"Invalid value {text} for configuration {name}: Not a number of type INT"
            ) from None
        if d.min_key is not None and values[name] < int(config.get(d.min_key)):
            raise bad(f"{name} must be greater than or equal to {d.min_key}")
        if d.max_key is not None and values[name] > int(config.get(d.max_key)):
            raise bad(f"{name} must be less than or equal to {d.max_key}")

    def effective(name: str) -> int:
        if name in values:
            return values[name]
        d = _BY_NAME[name]
        return int(_broker_value(config, d.broker_key, d.default))

    for kind in ("consumer", "share"):
        heartbeat, session = f"{kind}.heartbeat.interval.ms", f"{kind}.session.timeout.ms"
        if (heartbeat in values or session in values) and effective(heartbeat) >= effective(
            session
        ):
            raise bad(f"{heartbeat} must be less than {session}")
