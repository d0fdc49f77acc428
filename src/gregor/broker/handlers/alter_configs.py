"""Configs, the altering side: AlterConfigs and IncrementalAlterConfigs (Kafka's
``ConfigAdminManager``); DescribeConfigs and the resolution of each resource's values are
:mod:`gregor.broker.handlers.configs`.

AlterConfigs replaces a resource's whole override set; IncrementalAlterConfigs edits it key by key
(SET, DELETE, APPEND and SUBTRACT, the last two for list configs only, applied to the
effective value). Both validate the resulting set as a whole before anything changes, so a
resource is either fully updated or not at all; ``validate_only`` stops after validation.
Broker and group overrides are stored in the metadata image as config resources; topic
overrides go through ``TopicAdmin``. Loggers cannot be altered.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from typing import Protocol, TypeVar

from gregor.broker.common.errors import code_of, kafka_error, message_of
from gregor.broker.config.client_metrics_configs import check_name as check_client_metrics_name
from gregor.broker.config.client_metrics_configs import (
    validate_client_metrics,
)
from gregor.broker.config.config_def import BROKER_KEYS
from gregor.broker.config.dynamic_configs import (
    encode_passwords,
    validate_broker_overrides,
)
from gregor.broker.config.topic_configs import (
    BROKER_SYNONYMS,
    BY_NAME,
    ConfigResourceType,
    ConfigType,
    effective_value,
    split_list,
)
from gregor.broker.coordination.group_configs import (
    check_group_name,
    validate_group_overrides,
)
from gregor.broker.handlers.authz import (
    AclOperation,
)
from gregor.broker.handlers.configs import (
    check_broker_resource,
    check_config_access,
    clear_layers_of,
    clear_overrides,
    format_default,
    layers_of,
)
from gregor.broker.handlers.registry import handles
from gregor.broker.state import BrokerState, RequestContext
from gregor.cluster.image import TopicImage
from gregor.protocol.errors import ErrorCode, KafkaError
from gregor.protocol.messages.alter_configs import AlterConfigsRequest, AlterConfigsResponse
from gregor.protocol.messages.incremental_alter_configs import (
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
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
        broker.topics.validate_topic_configs(new, name)
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
    return clear_overrides(broker, current) if rtype == ConfigResourceType.BROKER else dict(current)


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
            return format_default(k.default) or "" if k.type == "list" else None
    syn = BROKER_SYNONYMS.get(key)
    if syn is not None:
        topic_def = next(d for d in BY_NAME.values() if syn in d.synonyms)
        if topic_def.type is ConfigType.LIST:
            return syn.default or ""
    return None


Res = TypeVar("Res", AlterConfigsRequest.Resources, IncrementalAlterConfigsRequest.Resources)
Out = TypeVar("Out", AlterConfigsResponse.Responses, IncrementalAlterConfigsResponse.Responses)


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
            check_config_access(
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
