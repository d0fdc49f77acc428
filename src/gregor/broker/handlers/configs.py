"""Configs, the describing side: DescribeConfigs, and how each resource's values are resolved
(the altering side, AlterConfigs and IncrementalAlterConfigs, is
:mod:`gregor.broker.handlers.alter_configs`).

Resources are topics (type 2), this broker (4), its loggers (8), client metrics subscriptions
(16, ``client_metrics_configs``) and groups (32). A topic's
configs are its overrides on top of the broker's values and Kafka's defaults, resolved and
described by :mod:`gregor.broker.config.topic_configs`. A broker's values come from its dynamic
override, the cluster-wide dynamic default (broker resource name ""), ``server.properties``
and Kafka's default, in that order (:mod:`gregor.broker.config.dynamic_configs`); DescribeConfigs
reports each key with its source and marks read-only the keys Kafka cannot change
dynamically. Group configs are :mod:`gregor.broker.coordination.group_configs`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from gregor.broker.common.errors import code_of, kafka_error, message_of
from gregor.broker.common.topics import topic_name_error
from gregor.broker.config.broker_config import BrokerConfig
from gregor.broker.config.client_metrics_configs import check_name as check_client_metrics_name
from gregor.broker.config.client_metrics_configs import (
    describe_client_metrics,
)
from gregor.broker.config.config_def import BROKER_KEYS
from gregor.broker.config.dynamic_configs import (
    Layers,
    broker_layers,
    config_type,
    decode_passwords,
    dynamic_mode,
)
from gregor.broker.config.topic_configs import (
    BROKER_SYNONYMS,
    BY_NAME,
    ConfigEntry,
    ConfigResourceType,
    ConfigSource,
    ConfigType,
    describe_topic,
)
from gregor.broker.coordination.group_configs import (
    check_group_name,
    describe_group,
)
from gregor.broker.handlers.authz import (
    CLUSTER_NAME,
    AclOperation,
    ResourceType,
    allowed,
    denied_error,
)
from gregor.broker.handlers.registry import handles
from gregor.broker.state import BrokerState, RequestContext
from gregor.protocol.errors import ErrorCode, KafkaError
from gregor.protocol.messages.describe_configs import (
    DescribeConfigsRequest,
    DescribeConfigsResponse,
)

_BROKER_TYPES = {
    "boolean": ConfigType.BOOLEAN,
    "int": ConfigType.INT,
    "long": ConfigType.LONG,
    "string": ConfigType.STRING,
    "list": ConfigType.LIST,
    "password": ConfigType.PASSWORD,
}

# Python's level names in Kafka's (log4j) vocabulary.
_LEVEL_NAMES = {"WARNING": "WARN", "CRITICAL": "FATAL", "NOTSET": "ALL"}


def format_default(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def check_broker_resource(config: BrokerConfig, name: str) -> bool:
    """True for this broker's id, False for "" (cluster-wide defaults); raises otherwise."""
    if name == "":
        return False
    try:
        node = int(name)
    except ValueError:
        raise kafka_error(
            ErrorCode.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}"
        ) from None
    if node != config.node_id:
        raise kafka_error(
            ErrorCode.INVALID_REQUEST,
            f"Unexpected broker id, expected {config.node_id} or empty string, but received {name}",
        )
    return True


#: The type of each broker key Gregor knows.
_KNOWN_TYPES = {k.name: _BROKER_TYPES.get(k.type, ConfigType.STRING) for k in BROKER_KEYS}


def _type_of(name: str) -> tuple[ConfigType, bool]:
    """A broker config's type and whether it is sensitive: a password, or (as Kafka's
    ``maybeSensitive``) a config whose type is not known."""
    ctype = config_type(name, _KNOWN_TYPES)
    if ctype is None:
        return ConfigType.UNKNOWN, True
    return ctype, ctype is ConfigType.PASSWORD


def describe_broker(
    config: BrokerConfig, layers: Layers, include_synonyms: bool, include_documentation: bool
) -> list[ConfigEntry]:
    """Every broker key Gregor knows, the broker-level synonyms of topic configs and any other
    dynamic override, each from its most specific layer; read-only unless Kafka lets it
    change dynamically. Password configs (and configs of unknown type) are described without
    their value, ``is_sensitive`` set."""
    entries: list[ConfigEntry] = []
    known: set[str] = set()

    def add(
        name: str, ctype: ConfigType, default: str | None, doc: str, sensitive: bool = False
    ) -> None:
        known.add(name)
        sensitive = sensitive or ctype is ConfigType.PASSWORD
        found = [(props[name], source) for props, source in layers if name in props]
        value, source = found[0] if found else (default, ConfigSource.DEFAULT_CONFIG)
        synonyms: list[tuple[str, str | None, ConfigSource]] | None = None
        if include_synonyms:
            synonyms = [(name, None if sensitive else v, src) for v, src in found]
            if default is not None:
                synonyms.append((name, None if sensitive else default, ConfigSource.DEFAULT_CONFIG))
        entries.append(
            ConfigEntry(
                name,
                None if sensitive else value,
                source,
                ctype,
                doc if include_documentation else None,
                read_only=dynamic_mode(name) is None,
                is_sensitive=sensitive,
                synonyms=synonyms,
            )
        )

    for key in BROKER_KEYS:
        add(
            key.name,
            _BROKER_TYPES.get(key.type, ConfigType.STRING),
            format_default(key.default),
            key.doc,
        )
    for name, syn in BROKER_SYNONYMS.items():
        if name in known:
            continue
        topic_def = next(d for d in BY_NAME.values() if syn in d.synonyms)
        add(
            name,
            topic_def.type,
            syn.default,
            f"Broker default of the topic config {topic_def.name}.",
        )
    for props, source in layers:
        if source is ConfigSource.STATIC_BROKER_CONFIG:
            continue
        for name in props:
            if name not in known:
                ctype, sensitive = _type_of(name)
                add(
                    name,
                    ctype,
                    None,
                    "A dynamic broker config Gregor stores but does not use.",
                    sensitive,
                )
    entries.sort(key=lambda e: e.name)
    return entries


def describe_cluster_defaults(layers: Layers, include_documentation: bool) -> list[ConfigEntry]:
    """The cluster-wide dynamic defaults (resource BROKER ""), as Kafka lists them."""
    defaults = next(p for p, s in layers if s is ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    entries = []
    for name, value in sorted(defaults.items()):
        ctype, sensitive = _type_of(name)
        entries.append(
            ConfigEntry(
                name,
                None if sensitive else value,
                ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
                ctype,
                "A cluster-wide dynamic broker config." if include_documentation else None,
                read_only=dynamic_mode(name) is None,
                is_sensitive=sensitive,
            )
        )
    return entries


def layers_of(broker: BrokerState) -> Layers:
    return broker_layers(broker.image, broker.config.node_id, broker.config.raw)


def clear_overrides(broker: BrokerState, props: Mapping[str, str]) -> dict[str, str]:
    """Stored broker overrides with their password configs decoded."""
    config = broker.config
    return decode_passwords(props, config.password_encoder, config.old_password_encoder)


def clear_layers_of(broker: BrokerState) -> Layers:
    """``layers_of`` with the stored passwords in clear (for validating a change)."""
    return [
        (
            props
            if source is ConfigSource.STATIC_BROKER_CONFIG
            else clear_overrides(broker, props),
            source,
        )
        for props, source in layers_of(broker)
    ]


def describe_loggers(include_documentation: bool) -> list[ConfigEntry]:
    manager = logging.Logger.manager
    names = sorted(
        n
        for n, lg in manager.loggerDict.items()
        if n.startswith("gregor") and isinstance(lg, logging.Logger)
    )
    out = []
    for name in ["root", *names]:
        logger = logging.getLogger() if name == "root" else logging.getLogger(name)
        level = logging.getLevelName(logger.getEffectiveLevel())
        out.append(
            ConfigEntry(
                name,
                _LEVEL_NAMES.get(level, level),
                ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG,
                ConfigType.STRING,
                "The effective log level of this logger." if include_documentation else None,
                read_only=True,
            )
        )
    return out


DCResult = DescribeConfigsResponse.Results
DCConfig = DescribeConfigsResponse.Results.Configs
DCSynonym = DescribeConfigsResponse.Results.Configs.Synonyms


def _describe_resource(
    broker: BrokerState,
    res: DescribeConfigsRequest.Resources,
    include_synonyms: bool,
    include_documentation: bool,
) -> list[ConfigEntry]:
    keys: Iterable[str] | None = res.configuration_keys or None
    rtype = res.resource_type
    if rtype == ConfigResourceType.TOPIC:
        name = res.resource_name
        why = topic_name_error(name)
        if why is not None:
            raise kafka_error(
                ErrorCode.INVALID_TOPIC_EXCEPTION, f"Invalid topic name '{name}': {why}"
            )
        ts = broker.image.topic(name)
        if ts is None:
            raise kafka_error(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist."
            )
        return describe_topic(
            dict(ts.configs),
            layers_of(broker),
            keys,
            include_synonyms=include_synonyms,
            include_documentation=include_documentation,
        )
    if rtype == ConfigResourceType.GROUP:
        check_group_name(res.resource_name)
        overrides = broker.image.config_resource(ConfigResourceType.GROUP, res.resource_name)
        return describe_group(
            overrides, broker.config, keys, include_synonyms, include_documentation
        )
    if rtype == ConfigResourceType.CLIENT_METRICS:
        check_client_metrics_name(res.resource_name)
        configs = broker.image.config_resource(ConfigResourceType.CLIENT_METRICS, res.resource_name)
        return describe_client_metrics(configs, keys, include_synonyms, include_documentation)
    if rtype == ConfigResourceType.BROKER:
        if not check_broker_resource(broker.config, res.resource_name):
            entries = describe_cluster_defaults(layers_of(broker), include_documentation)
        else:
            entries = describe_broker(
                broker.config, layers_of(broker), include_synonyms, include_documentation
            )
    elif rtype == ConfigResourceType.BROKER_LOGGER:
        if not check_broker_resource(broker.config, res.resource_name):
            raise kafka_error(
                ErrorCode.INVALID_REQUEST, "A broker logger resource needs a broker id."
            )
        entries = describe_loggers(include_documentation)
    else:
        raise kafka_error(
            ErrorCode.INVALID_REQUEST, f"Unsupported resource type {rtype} for DescribeConfigs."
        )
    if keys is not None:
        wanted = set(keys)
        entries = [e for e in entries if e.name in wanted]
    return entries


def _to_wire(e: ConfigEntry) -> DCConfig:
    return DCConfig(
        name=e.name,
        value=e.value,
        read_only=e.read_only,
        config_source=int(e.source),
        is_default=e.source == ConfigSource.DEFAULT_CONFIG,
        is_sensitive=e.is_sensitive,
        synonyms=[DCSynonym(name=n, value=v, source=int(s)) for n, v, s in (e.synonyms or [])],
        config_type=int(e.config_type),
        documentation=e.documentation,
    )


@handles(DescribeConfigsRequest)
async def handle_describe_configs(
    ctx: RequestContext, req: DescribeConfigsRequest
) -> DescribeConfigsResponse:
    version = ctx.version
    include_synonyms = bool(req.include_synonyms) if version >= 1 else False
    include_documentation = bool(req.include_documentation) if version >= 3 else False
    results = []
    for res in req.resources:
        try:
            check_config_access(
                ctx, res.resource_type, res.resource_name, AclOperation.DESCRIBE_CONFIGS
            )
            entries = _describe_resource(ctx.broker, res, include_synonyms, include_documentation)
        except KafkaError as e:
            results.append(
                DCResult(
                    error_code=code_of(e),
                    error_message=message_of(e),
                    resource_type=res.resource_type,
                    resource_name=res.resource_name,
                    configs=[],
                )
            )
            continue
        results.append(
            DCResult(
                error_code=0,
                error_message=None,
                resource_type=res.resource_type,
                resource_name=res.resource_name,
                configs=[_to_wire(e) for e in entries],
            )
        )
    return DescribeConfigsResponse(throttle_time_ms=0, results=results)


def check_config_access(
    ctx: RequestContext, resource_type: int, name: str, operation: AclOperation
) -> None:
    """Kafka's checks: DESCRIBE_CONFIGS / ALTER_CONFIGS on the topic, the group, or (for broker
    and logger resources) the cluster; refused with that resource type's error."""
    if resource_type == ConfigResourceType.TOPIC:
        target, target_name = ResourceType.TOPIC, name
    elif resource_type == ConfigResourceType.GROUP:
        target, target_name = ResourceType.GROUP, name
    else:
        target, target_name = ResourceType.CLUSTER, CLUSTER_NAME
    if not allowed(ctx, operation, target, target_name):
        raise kafka_error(
            denied_error(target),
            f"Not authorized: {operation.name} on {target.name} {target_name}.",
        )
