"""The topic config table: validation, resolution through broker synonyms, and agreement with
the log's own config (LogConfig) and the broker's key table."""

from __future__ import annotations

import pytest

from gregor.broker.config.config_def import BROKER_KEYS
from gregor.broker.config.topic_config_validator import validate_overrides, value_error
from gregor.broker.config.topic_configs import (
    BROKER_SYNONYMS,
    BY_NAME,
    TOPIC_CONFIGS,
    ConfigSource,
    broker_default,
    describe_topic,
)
from gregor.broker.handlers.configs import format_default
from gregor.storage.config import LogConfig, from_broker_props
from gregor.storage.errors import InvalidConfigError


@pytest.mark.parametrize(
    "name, value, expected",
    [
        ("retention.ms", "-1", None),
        ("retention.ms", " 86400000 ", None),
        (
            "retention.ms",
            "-2",
            "Invalid value -2 for configuration retention.ms: must be at least -1",
        ),
        (
            "retention.ms",
            "1.5",
            "Invalid value 1.5 for configuration retention.ms: not a number of type LONG",
        ),
        (
            "segment.bytes",
            "2147483648",
            "Invalid value 2147483648 for configuration segment.bytes: out of range for type INT",
        ),
        (
            "segment.bytes",
            "13",
            "Invalid value 13 for configuration segment.bytes: must be at least 14",
        ),
        ("cleanup.policy", "compact,delete", None),
        ("cleanup.policy", "delete, compact", None),
        (
            "cleanup.policy",
            "",
            "Invalid value  for configuration cleanup.policy: must not be empty",
        ),
        (
            "cleanup.policy",
            "compact,archive",
            "Invalid value compact,archive for configuration cleanup.policy: 'archive' is not one of delete, compact",
        ),
        ("unclean.leader.election.enable", "TRUE", None),
        (
            "unclean.leader.election.enable",
            "yes",
            "Invalid value yes for configuration unclean.leader.election.enable: expected true or false",
        ),
        ("min.cleanable.dirty.ratio", "0.01", None),
        (
            "min.cleanable.dirty.ratio",
            "nan",
            "Invalid value nan for configuration min.cleanable.dirty.ratio: not a number",
        ),
        (
            "min.cleanable.dirty.ratio",
            "1.01",
            "Invalid value 1.01 for configuration min.cleanable.dirty.ratio: must be at most 1",
        ),
        ("message.timestamp.type", "LogAppendTime", None),
        (
            "message.timestamp.type",
            "logappendtime",
            "Invalid value logappendtime for configuration message.timestamp.type: must be one of CreateTime, LogAppendTime",
        ),
        ("compression.type", "zstd", None),
        ("compression.gzip.level", "9", None),
        (
            "compression.gzip.level",
            "0",
            "Invalid value 0 for configuration compression.gzip.level: must be -1 or between 1 and 9",
        ),
        ("compression.zstd.level", "-131072", None),
        (
            "min.insync.replicas",
            "0",
            "Invalid value 0 for configuration min.insync.replicas: must be at least 1",
        ),
        ("leader.replication.throttled.replicas", "0:1, 1:1", None),
        ("leader.replication.throttled.replicas", "*", None),
        (
            "leader.replication.throttled.replicas",
            "0-1",
            "Invalid value 0-1 for configuration leader.replication.throttled.replicas: must be '*' or a list of partition:broker pairs",
        ),
        ("remote.storage.enable", "false", None),
        (
            "remote.storage.enable",
            "true",
            "Invalid value true for configuration remote.storage.enable: tiered storage is not supported by this broker",
        ),
        ("retention.hours", "1", "Unknown topic config name: retention.hours"),
        ("retention.ms", None, "Null value not supported for topic config: retention.ms"),
    ],
)
def test_value_error(name: str, value: str | None, expected: str | None) -> None:
    assert value_error(name, value) == expected


def test_validate_overrides_raises_the_first_problem() -> None:
    validate_overrides({"retention.ms": "1000", "cleanup.policy": "compact"})
    with pytest.raises(InvalidConfigError, match="^Unknown topic config name: bogus$"):
        validate_overrides({"retention.ms": "1000", "bogus": "1"})


def test_every_config_the_log_enforces_is_in_the_table() -> None:
    enforced = set(LogConfig().to_props())
    assert enforced <= set(BY_NAME)
    stored_only = {d.name for d in TOPIC_CONFIGS if d.stored_only}
    assert enforced.isdisjoint(stored_only)


def test_table_defaults_are_valid_and_match_the_log() -> None:
    for d in TOPIC_CONFIGS:
        assert value_error(d.name, d.default) is None, d.name
    log_defaults = LogConfig().to_props()
    for name, value in log_defaults.items():
        assert broker_default(BY_NAME[name], {})[0] == value, name


def test_synonym_defaults_match_the_broker_key_table() -> None:
    for key in BROKER_KEYS:
        syn = BROKER_SYNONYMS.get(key.name)
        if syn is not None:
            assert syn.default == format_default(key.default), key.name


@pytest.mark.parametrize(
    "props",
    [
        {},
        {"log.retention.hours": "24", "log.segment.bytes": "1048576"},
        {"log.retention.minutes": "90", "log.retention.hours": "24"},
        {"log.retention.ms": "5000", "log.retention.minutes": "90"},
        {"log.roll.hours": "2", "log.cleanup.policy": "compact", "message.max.bytes": "5000"},
        {"log.roll.ms": "1234", "log.roll.hours": "2"},
        {"log.cleaner.min.cleanable.ratio": "0.25", "log.message.timestamp.type": "LogAppendTime"},
    ],
)
def test_resolved_values_equal_what_the_log_uses(props: dict[str, str]) -> None:
    """What DescribeConfigs reports for a topic without overrides is the config its log runs
    with (LogConfig built from the same server.properties)."""
    log_props = from_broker_props(props).to_props()
    described = {e.name: e.value for e in describe_topic({}, props)}
    for name, value in log_props.items():
        assert described[name] == value, name


def test_retention_synonym_precedence_and_sources() -> None:
    props = {"log.retention.minutes": "90", "log.retention.hours": "24"}
    (entry,) = describe_topic({}, props, ["retention.ms"], include_synonyms=True)
    assert (entry.value, entry.source) == ("5400000", ConfigSource.STATIC_BROKER_CONFIG)
    assert entry.synonyms == [
        ("log.retention.minutes", "90", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", "24", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG),
    ]
    (entry,) = describe_topic({"retention.ms": "1"}, props, ["retention.ms"], include_synonyms=True)
    assert (entry.value, entry.source) == ("1", ConfigSource.TOPIC_CONFIG)
    assert entry.synonyms[0] == ("retention.ms", "1", ConfigSource.TOPIC_CONFIG)
    assert len(entry.synonyms) == 4


def test_describe_filters_and_documents() -> None:
    entries = describe_topic({}, {}, ["segment.ms", "nope"], include_documentation=True)
    assert [(e.name, e.config_type.name, e.synonyms) for e in entries] == [
        ("segment.ms", "LONG", None)
    ]
    assert entries[0].documentation == BY_NAME["segment.ms"].doc
    assert all(e.documentation is None for e in describe_topic({}, {}))
