"""Configs: DescribeConfigs, AlterConfigs and IncrementalAlterConfigs.

Resources are topics (type 2), this broker (4), its loggers (8), client metrics subscriptions
(16, ``client_metrics_configs``) and groups (32). A topic's
configs are its overrides on top of the broker's values and Kafka's defaults, resolved and
described by :mod:`gregor.broker.config.topic_configs`. A broker's values come from its dynamic
override, the cluster-wide dynamic default (broker resource name ""), ``server.properties``
and Kafka's default, in that order (:mod:`gregor.broker.config.dynamic_configs`); DescribeConfigs
reports each key with its source and marks read-only the keys Kafka cannot change
dynamically. Group configs are :mod:`gregor.broker.coordination.group_configs`. Broker and group overrides
are stored in the metadata image as config resources. Loggers cannot be altered.

AlterConfigs replaces a resource's whole override set; IncrementalAlterConfigs edits it key by key
(SET, DELETE, APPEND and SUBTRACT, the last two for list configs only, applied to the
effective value). Both validate the resulting set as a whole before anything changes, so a
resource is either fully updated or not at all; ``validate_only`` stops after validation.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Protocol, TypeVar

from gregor.broker.common.errors import code_of, kafka_error, message_of
from gregor.broker.common.topics import topic_name_error
from gregor.broker.config.broker_config import BROKER_KEYS, BrokerConfig
from gregor.broker.config.client_metrics_configs import check_name as check_client_metrics_name
from gregor.broker.config.client_metrics_configs import (
    describe_client_metrics,
    validate_client_metrics,
)
from gregor.broker.config.dynamic_configs import (
    Layers,
    broker_layers,
    config_type,
    decode_passwords,
    dynamic_mode,
    encode_passwords,
    validate_broker_overrides,
)
from gregor.broker.config.topic_configs import (
    BROKER_SYNONYMS,
    BY_NAME,
    ConfigEntry,
    ConfigResourceType,
    ConfigSource,
    ConfigType,
    describe_topic,
    effective_value,
    split_list,
)
from gregor.broker.coordination.group_configs import (
    check_group_name,
    describe_group,
    validate_group_overrides,
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
from gregor.cluster.image import TopicImage
from gregor.protocol.errors import ErrorCode, KafkaError
from gregor.protocol.messages.alter_configs import AlterConfigsRequest, AlterConfigsResponse
from gregor.protocol.messages.describe_configs import (
    DescribeConfigsRequest,
    DescribeConfigsResponse,
)
from gregor.protocol.messages.incremental_alter_configs import (
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3

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


def _format_default(value: object) -> str | None:
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
            _format_default(key.default),
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


def _clear(broker: BrokerState, props: Mapping[str, str]) -> dict[str, str]:
    """Stored broker overrides with their password configs decoded."""
    config = broker.config
    return decode_passwords(props, config.password_encoder, config.old_password_encoder)


def clear_layers_of(broker: BrokerState) -> Layers:
    """``layers_of`` with the stored passwords in clear (for validating a change)."""
    return [
        (props if source is ConfigSource.STATIC_BROKER_CONFIG else _clear(broker, props), source)
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
            _check_config_access(
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


# --- altering ---


def _not_alterable(broker: BrokerState, rtype: int, name: str) -> KafkaError:
    if rtype == ConfigResourceType.BROKER_LOGGER:
        check_broker_resource(broker.config, name)
        return kafka_error(
            ErrorCode.INVALID_REQUEST, "dynamic broker logger configs are not supported"
        )
    return kafka_error(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {rtype}.")


def _topic_state(broker: BrokerState, name: str) -> TopicImage:
    ts = broker.image.topic(name)
    if ts is None:
        raise kafka_error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist.")
    return ts


class _ConfigKey(Protocol):
    @property
    def name(self) -> str: ...


def _check_unique_keys(configs: Iterable[_ConfigKey]) -> None:
    dup = [n for n, c in Counter(c.name for c in configs).items() if c > 1]
    if dup:
        raise kafka_error(
            ErrorCode.INVALID_REQUEST,
            f"Error due to duplicate config keys: {', '.join(sorted(dup))}",
        )


async def _apply(broker: BrokerState, name: str, new: dict[str, str], validate_only: bool) -> None:
    if validate_only:
        broker.topics.validate_topic_configs(new)
    else:
        await broker.topics.set_topic_configs(name, new)


def _current(broker: BrokerState, rtype: int, name: str) -> dict[str, str]:
    """The override set of a BROKER, GROUP or CLIENT_METRICS resource (after checking its name)."""
    if rtype == ConfigResourceType.BROKER:
        check_broker_resource(broker.config, name)
    elif rtype == ConfigResourceType.GROUP:
        check_group_name(name)
    elif rtype == ConfigResourceType.CLIENT_METRICS:
        check_client_metrics_name(name)
    else:
        raise _not_alterable(broker, rtype, name)
    current = broker.image.config_resource(rtype, name)
    return _clear(broker, current) if rtype == ConfigResourceType.BROKER else dict(current)


async def _apply_resource(
    broker: BrokerState, rtype: int, name: str, new: dict[str, str], validate_only: bool
) -> None:
    """Validate and store a BROKER, GROUP or CLIENT_METRICS resource's new override set (a
    broker's in clear: its password configs are encrypted here, before they are stored)."""
    if rtype == ConfigResourceType.BROKER:
        validate_broker_overrides(name, new, clear_layers_of(broker))
        new = encode_passwords(new, broker.config.password_encoder)
    elif rtype == ConfigResourceType.CLIENT_METRICS:
        validate_client_metrics(new)
    else:
        validate_group_overrides(new, broker.config)
    if not validate_only:
        await broker.topics.set_config_resource(rtype, name, new)


async def _alter(
    broker: BrokerState, res: AlterConfigsRequest.Resources, validate_only: bool
) -> None:
    if res.resource_type != ConfigResourceType.TOPIC:
        _current(broker, res.resource_type, res.resource_name)
        _check_unique_keys(res.configs)
        if any(c.value is None for c in res.configs):
            raise kafka_error(ErrorCode.INVALID_REQUEST, "Null value not supported")
        overrides = {c.name: c.value for c in res.configs if c.value is not None}
        await _apply_resource(
            broker, res.resource_type, res.resource_name, overrides, validate_only
        )
        return
    _topic_state(broker, res.resource_name)
    _check_unique_keys(res.configs)
    new: dict[str, str] = {}
    for c in res.configs:
        if c.value is None:
            raise kafka_error(
                ErrorCode.INVALID_CONFIG, f"Null value not supported for topic config: {c.name}"
            )
        new[c.name] = c.value
    await _apply(broker, res.resource_name, new, validate_only)


async def _incremental_alter(
    broker: BrokerState, res: IncrementalAlterConfigsRequest.Resources, validate_only: bool
) -> None:
    if res.resource_type != ConfigResourceType.TOPIC:
        await _incremental_alter_resource(broker, res, validate_only)
        return
    ts = _topic_state(broker, res.resource_name)
    _check_unique_keys(res.configs)
    raw = layers_of(broker)
    new = dict(ts.configs)
    for c in res.configs:
        op, key, value = c.config_operation, c.name, c.value
        definition = BY_NAME.get(key)
        if definition is None:
            raise kafka_error(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {key}")
        if op not in (SET, DELETE, APPEND, SUBTRACT):
            raise kafka_error(ErrorCode.INVALID_REQUEST, f"Unknown config operation {op} for {key}")
        if op != DELETE and value is None:
            raise kafka_error(ErrorCode.INVALID_REQUEST, f"Null value not supported for: {key}")
        if op == DELETE:
            new.pop(key, None)
            continue
        assert value is not None  # checked above for every operation but DELETE
        if op == SET:
            new[key] = value
        else:
            if definition.type is not ConfigType.LIST:
                verb = "append" if op == APPEND else "subtract"
                raise kafka_error(
                    ErrorCode.INVALID_CONFIG,
                    f"Config value {verb} is not allowed for config key: {key}",
                )
            current = split_list(effective_value(key, new, raw))
            items = split_list(value)
            if op == APPEND:
                result = current + [i for i in items if i not in current]
            else:
                result = [i for i in current if i not in items]
            new[key] = ",".join(result)
    await _apply(broker, res.resource_name, new, validate_only)


async def _incremental_alter_resource(
    broker: BrokerState, res: IncrementalAlterConfigsRequest.Resources, validate_only: bool
) -> None:
    """IncrementalAlterConfigs for BROKER and GROUP: APPEND/SUBTRACT start from the
    resource's own override, else the config's default (as Kafka does)."""
    rtype, name = res.resource_type, res.resource_name
    new = _current(broker, rtype, name)
    _check_unique_keys(res.configs)
    for c in res.configs:
        op, key, value = c.config_operation, c.name, c.value
        if op not in (SET, DELETE, APPEND, SUBTRACT):
            raise kafka_error(ErrorCode.INVALID_REQUEST, f"Unknown config operation {op} for {key}")
        if op == DELETE:
            new.pop(key, None)
            continue
        if value is None:
            raise kafka_error(ErrorCode.INVALID_REQUEST, f"Null value not supported for: {key}")
        if op == SET:
            new[key] = value
            continue
        default = _list_default(rtype, key)
        if default is None:
            verb = "append" if op == APPEND else "subtract"
            raise kafka_error(
                ErrorCode.INVALID_CONFIG,
                f"Config value {verb} is not allowed for config key: {key}",
            )
        current = split_list(new.get(key, default))
        items = split_list(value)
        if op == APPEND:
            result = current + [i for i in items if i not in current]
        else:
            result = [i for i in current if i not in items]
        new[key] = ",".join(result)
    await _apply_resource(broker, rtype, name, new, validate_only)


def _list_default(rtype: int, key: str) -> str | None:
    """The default of a broker or client-metrics LIST config as text, None when ``key`` is not
    a list."""
    if rtype == ConfigResourceType.CLIENT_METRICS:
        return "" if key in ("metrics", "match") else None
    if rtype != ConfigResourceType.BROKER:
        return None
    for k in BROKER_KEYS:
        if k.name == key:
            return _format_default(k.default) or "" if k.type == "list" else None
    syn = BROKER_SYNONYMS.get(key)
    if syn is not None:
        topic_def = next(d for d in BY_NAME.values() if syn in d.synonyms)
        if topic_def.type is ConfigType.LIST:
            return syn.default or ""
    return None


Res = TypeVar("Res", AlterConfigsRequest.Resources, IncrementalAlterConfigsRequest.Resources)
Out = TypeVar("Out", AlterConfigsResponse.Responses, IncrementalAlterConfigsResponse.Responses)


def _check_config_access(
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


async def _alter_all(
    ctx: RequestContext,
    resources: list[Res],
    validate_only: bool,
    one: Callable[[BrokerState, Res, bool], Awaitable[None]],
    result_cls: type[Out],
) -> list[Out]:
    broker = ctx.broker
    counts = Counter((r.resource_type, r.resource_name) for r in resources)
    out = []
    for res in resources:
        try:
            _check_config_access(
                ctx, res.resource_type, res.resource_name, AclOperation.ALTER_CONFIGS
            )
            if counts[(res.resource_type, res.resource_name)] > 1:
                raise kafka_error(
                    ErrorCode.INVALID_REQUEST, "The resource appears more than once in the request."
                )
            await one(broker, res, validate_only)
        except KafkaError as e:
            out.append(
                result_cls(
                    error_code=code_of(e),
                    error_message=message_of(e),
                    resource_type=res.resource_type,
                    resource_name=res.resource_name,
                )
            )
            continue
        out.append(
            result_cls(
                error_code=0,
                error_message=None,
                resource_type=res.resource_type,
                resource_name=res.resource_name,
            )
        )
    return out


@handles(AlterConfigsRequest)
async def handle_alter_configs(
    ctx: RequestContext, req: AlterConfigsRequest
) -> AlterConfigsResponse:
    responses = await _alter_all(
        ctx, req.resources, req.validate_only, _alter, AlterConfigsResponse.Responses
    )
    return AlterConfigsResponse(throttle_time_ms=0, responses=responses)


@handles(IncrementalAlterConfigsRequest)
async def handle_incremental_alter_configs(
    ctx: RequestContext, req: IncrementalAlterConfigsRequest
) -> IncrementalAlterConfigsResponse:
    responses = await _alter_all(
        ctx,
        req.resources,
        req.validate_only,
        _incremental_alter,
        IncrementalAlterConfigsResponse.Responses,
    )
    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=responses)
