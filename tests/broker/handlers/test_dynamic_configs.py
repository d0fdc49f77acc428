"""Dynamic broker configs and group configs on the wire, and their effect on the logs (issue 12)."""

from __future__ import annotations

import pytest
from handler_wire import Wire

from gregor.broker.config.topic_configs import ConfigSource
from gregor.protocol.errors import ErrorCode
from gregor.protocol.messages.alter_configs import AlterConfigsRequest
from gregor.protocol.messages.create_topics import CreateTopicsRequest
from gregor.protocol.messages.describe_configs import DescribeConfigsRequest
from gregor.protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest

BROKER, GROUP = 4, 32
SET, DELETE = 0, 1
IAC = IncrementalAlterConfigsRequest.Resources


@pytest.fixture
def broker_config() -> dict[str, str]:
    return {"log.retention.hours": "24", "min.insync.replicas": "1"}


def _incremental(
    wire: Wire,
    rtype: int,
    name: str,
    *ops: tuple[str, int, str | None],
    validate_only: bool = False,
) -> tuple[int, str | None]:
    req = IncrementalAlterConfigsRequest(
        resources=[
            IAC(
                resource_type=rtype,
                resource_name=name,
                configs=[IAC.Configs(name=k, config_operation=op, value=v) for k, op, v in ops],
            )
        ],
        validate_only=validate_only,
    )
    r = wire.request(req, 1).responses[0]
    return r.error_code, r.error_message


def _describe(
    wire: Wire, rtype: int, name: str, *keys: str, synonyms: bool = False
) -> dict[str, tuple]:
    req = DescribeConfigsRequest(
        resources=[
            DescribeConfigsRequest.Resources(
                resource_type=rtype, resource_name=name, configuration_keys=list(keys)
            )
        ],
        include_synonyms=synonyms,
    )
    result = wire.request(req, 4).results[0]
    assert result.error_code == 0, result.error_message
    if synonyms:
        return {c.name: [(s.name, s.value, s.source) for s in c.synonyms] for c in result.configs}
    return {c.name: (c.value, c.config_source, c.read_only) for c in result.configs}


def test_synonyms_list_every_layer_most_specific_first(wire: Wire) -> None:
    assert _incremental(wire, BROKER, "", ("log.retention.ms", SET, "7200000")) == (0, None)
    assert _incremental(wire, BROKER, "1", ("log.retention.ms", SET, "3600000")) == (0, None)
    assert _describe(wire, BROKER, "1", "log.retention.ms", synonyms=True) == {
        "log.retention.ms": [
            ("log.retention.ms", "3600000", ConfigSource.DYNAMIC_BROKER_CONFIG),
            ("log.retention.ms", "7200000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ]
    }
    create = CreateTopicsRequest(
        topics=[
            CreateTopicsRequest.Topics(
                name="t", num_partitions=1, replication_factor=1, assignments=[], configs=[]
            )
        ],
        timeout_ms=5000,
        validate_only=False,
    )
    assert wire.request(create, 5).topics[0].error_code == 0
    # A topic's retention.ms: the dynamic values, then server.properties' hours, then the default.
    assert _describe(wire, 2, "t", "retention.ms", synonyms=True) == {
        "retention.ms": [
            ("log.retention.ms", "3600000", ConfigSource.DYNAMIC_BROKER_CONFIG),
            ("log.retention.ms", "7200000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
            ("log.retention.hours", "24", ConfigSource.STATIC_BROKER_CONFIG),
            ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG),
        ]
    }
    # The log took the per-broker value; removing it falls back to the cluster default.
    logs = wire.broker.broker.logs  # type: ignore[union-attr]
    assert logs.logs[("t", 0)].config.retention_ms == 3_600_000
    assert _incremental(wire, BROKER, "1", ("log.retention.ms", DELETE, None)) == (0, None)
    assert logs.logs[("t", 0)].config.retention_ms == 7_200_000
    assert logs.default_config.retention_ms == 7_200_000


def test_validate_only_and_legacy_alter_configs(wire: Wire) -> None:
    assert _incremental(
        wire, BROKER, "1", ("message.max.bytes", SET, "5000"), validate_only=True
    ) == (0, None)
    assert _describe(wire, BROKER, "1", "message.max.bytes") == {
        "message.max.bytes": ("1048588", ConfigSource.DEFAULT_CONFIG, False)
    }
    assert _incremental(
        wire, BROKER, "1", ("message.max.bytes", SET, "5000"), ("log.retention.ms", SET, "1000")
    ) == (0, None)
    # AlterConfigs replaces the whole set: log.retention.ms goes.
    legacy = AlterConfigsRequest(
        resources=[
            AlterConfigsRequest.Resources(
                resource_type=BROKER,
                resource_name="1",
                configs=[
                    AlterConfigsRequest.Resources.Configs(name="message.max.bytes", value="6000")
                ],
            )
        ],
        validate_only=False,
    )
    assert wire.request(legacy, 1).responses[0].error_code == 0
    assert _describe(wire, BROKER, "1", "message.max.bytes", "log.retention.ms") == {
        "message.max.bytes": ("6000", ConfigSource.DYNAMIC_BROKER_CONFIG, False),
        "log.retention.ms": (None, ConfigSource.DEFAULT_CONFIG, False),
    }
    assert dict(wire.broker.broker.image.config_resource(BROKER, "1")) == {
        "message.max.bytes": "6000"
    }  # type: ignore[union-attr]


def test_refusals(wire: Wire) -> None:
    code, message = _incremental(wire, BROKER, "2", ("message.max.bytes", SET, "5000"))
    assert code == ErrorCode.INVALID_REQUEST and "expected 1 or empty string" in str(message)
    code, message = _incremental(wire, BROKER, "1", ("log.segment.bytes", SET, "3"))
    assert code == ErrorCode.INVALID_REQUEST
    assert message == "log.segment.bytes=3 is below the minimum 14"
    assert _incremental(wire, BROKER, "1", ("background.threads", 2, "x")) == (
        ErrorCode.INVALID_CONFIG,
        "Config value append is not allowed for config key: background.threads",
    )
    assert _incremental(wire, GROUP, "", ("consumer.session.timeout.ms", SET, "50000")) == (
        ErrorCode.INVALID_REQUEST,
        "Group name must not be empty",
    )
    assert _incremental(wire, GROUP, "g", ("consumer.heartbeat.interval.ms", SET, "4000")) == (
        ErrorCode.INVALID_CONFIG,
        "consumer.heartbeat.interval.ms must be greater than or equal to group.consumer.min.heartbeat.interval.ms",
    )
    assert (
        _incremental(wire, GROUP, "g", ("share.auto.offset.reset", SET, "middle"))[0]
        == ErrorCode.INVALID_CONFIG
    )
    assert wire.broker.broker.image.config_resources == {}  # type: ignore[union-attr]


@pytest.mark.parametrize("broker_config", [{"group.consumer.session.timeout.ms": "50000"}])
def test_group_defaults_come_from_the_broker(wire: Wire) -> None:
    assert _describe(
        wire, GROUP, "any", "consumer.session.timeout.ms", "share.auto.offset.reset"
    ) == {
        "consumer.session.timeout.ms": ("50000", ConfigSource.DEFAULT_CONFIG, False),
        "share.auto.offset.reset": ("latest", ConfigSource.DEFAULT_CONFIG, False),
    }
    assert _incremental(wire, GROUP, "any", ("consumer.heartbeat.interval.ms", SET, "15000")) == (
        0,
        None,
    )
    assert _describe(wire, GROUP, "any", "consumer.heartbeat.interval.ms") == {
        "consumer.heartbeat.interval.ms": ("15000", ConfigSource.GROUP_CONFIG, False),
    }
