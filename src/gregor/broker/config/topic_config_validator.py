"""The one gate for a set of topic config overrides (CreateTopics, AlterConfigs,
IncrementalAlterConfigs), Kafka's validation of topic configs against their definitions
(``topic_configs.TOPIC_CONFIGS``): unknown names, null values, unparsable or out-of-range values
and values outside a config's valid set raise :class:`InvalidConfigError` (INVALID_CONFIG). The
log's own cross-checks (``LogConfig.validate``) run after it (``TopicAdmin.validate_topic_configs``). No state.
"""

from __future__ import annotations

from collections.abc import Mapping

from gregor.broker.config.topic_configs import (
    BY_NAME,
    INT_MAX,
    INT_MIN,
    LONG_MAX,
    LONG_MIN,
    ConfigType,
    TopicConfigDef,
    split_list,
)
from gregor.storage.errors import InvalidConfigError

# --- validation ---


def _check_number(d: TopicConfigDef, text: str) -> str | None:
    if d.type is ConfigType.DOUBLE:
        try:
            value: float = float(text)
        except ValueError:
            return "not a number"
        if value != value:  # NaN
            return "not a number"
    else:
        try:
            value = int(text)
        except ValueError:
            return f"not a number of type {d.type.name}"
        lo, hi = (INT_MIN, INT_MAX) if d.type is ConfigType.INT else (LONG_MIN, LONG_MAX)
        if not lo <= value <= hi:
            return f"out of range for type {d.type.name}"
    if d.minimum is not None and value < d.minimum:
        return f"must be at least {_num(d.minimum)}"
    if d.maximum is not None and value > d.maximum:
        return f"must be at most {_num(d.maximum)}"
    return None


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def value_error(name: str, value: str | None) -> str | None:
    """Why ``name=value`` is not a valid topic config, or None if it is."""
    d = BY_NAME.get(name)
    if d is None:
        return f"Unknown topic config name: {name}"
    if value is None:
        return f"Null value not supported for topic config: {name}"
    text = value.strip()
    why: str | None = None
    if d.type is ConfigType.BOOLEAN:
        if text.lower() not in ("true", "false"):
            why = "expected true or false"
    elif d.type in (ConfigType.INT, ConfigType.LONG, ConfigType.DOUBLE):
        why = _check_number(d, text)
    elif d.type is ConfigType.LIST:
        items = split_list(text)
        if d.choices is not None:
            if not items:
                why = "must not be empty"
            bad = [i for i in items if i not in d.choices]
            if bad:
                why = f"{bad[0]!r} is not one of {', '.join(d.choices)}"
    elif d.choices is not None and text not in d.choices:
        why = f"must be one of {', '.join(d.choices)}"
    if why is None and d.check is not None:
        why = d.check(text)
    if why is not None:
        return f"Invalid value {value} for configuration {name}: {why}"
    return None


def validate_overrides(overrides: Mapping[str, str | None]) -> None:
    """Raise InvalidConfigError for the first unknown name or bad value."""
    for name, value in overrides.items():
        why = value_error(name, value)
        if why is not None:
            raise InvalidConfigError(why)
