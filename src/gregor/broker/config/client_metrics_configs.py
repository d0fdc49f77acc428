"""Client metrics subscriptions (KIP-714): the config resource CLIENT_METRICS (type 16).

A subscription is a named config resource with three configs, Kafka's: ``metrics`` (metric
name prefixes, ``*`` for all; empty: none), ``interval.ms`` (the push interval, 100 to
3600000, default 300000) and ``match`` (``selector=regex`` pairs that must all match a client;
empty: every client). The selectors are the client's instance id, client id, software name and
version, and source address and port. Subscriptions live in the metadata image as config
resources, like group configs; describing a subscription lists its three configs (source
CLIENT_METRICS_CONFIG when set, DEFAULT_CONFIG otherwise).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from gregor.broker.common.errors import kafka_error
from gregor.broker.config.topic_configs import ConfigEntry, ConfigSource, ConfigType
from gregor.protocol.errors import ErrorCode

__all__ = [
    "DEFAULT_INTERVAL_MS",
    "SELECTORS",
    "Subscription",
    "check_name",
    "describe_client_metrics",
    "parse_subscription",
    "validate_client_metrics",
]

METRICS, INTERVAL_MS, MATCH = "metrics", "interval.ms", "match"
DEFAULT_INTERVAL_MS = 300_000
MIN_INTERVAL_MS, MAX_INTERVAL_MS = 100, 3_600_000
ALL_METRICS = "*"
SELECTORS = (
    "client_instance_id",
    "client_id",
    "client_software_name",
    "client_software_version",
    "client_source_address",
    "client_source_port",
)
_DOCS = {
    METRICS: "Telemetry metric name prefixes, or * for all metrics.",
    INTERVAL_MS: "Client telemetry push interval in milliseconds.",
    MATCH: "Client matching patterns: selector=regex pairs, all of which a client must match.",
}
_TYPES = {METRICS: ConfigType.LIST, INTERVAL_MS: ConfigType.INT, MATCH: ConfigType.LIST}
_DEFAULTS = {METRICS: "", INTERVAL_MS: str(DEFAULT_INTERVAL_MS), MATCH: ""}


@dataclass(frozen=True, slots=True)
class Subscription:
    name: str
    metrics: tuple[str, ...]
    interval_ms: int
    match: tuple[tuple[str, re.Pattern[str]], ...]

    def matches(self, client: Mapping[str, str]) -> bool:
        return all(pattern.fullmatch(client.get(selector, "")) for selector, pattern in self.match)


def check_name(name: str) -> None:
    if not name:
        raise kafka_error(
            ErrorCode.INVALID_REQUEST, "Client metrics resource name must not be empty"
        )


def _items(text: str) -> list[str]:
    return [i.strip() for i in text.split(",") if i.strip()]


def _bad(message: str) -> Exception:
    return kafka_error(ErrorCode.INVALID_CONFIG, message)


def _match(items: Iterable[str]) -> tuple[tuple[str, re.Pattern[str]], ...]:
    out = []
    for item in items:
        selector, sep, regex = item.partition("=")
        if not sep or selector.strip() not in SELECTORS:
            raise _bad(f"Illegal client matching pattern: {item}")
        try:
            out.append((selector.strip(), re.compile(regex.strip())))
        except re.error as e:
            raise _bad(f"Illegal regex in client matching pattern {item}: {e}") from None
    return tuple(out)


def validate_client_metrics(configs: Mapping[str, str]) -> None:
    """INVALID_CONFIG for a config set Kafka refuses (unknown name, interval out of range, a
    match entry that is not ``selector=regex``)."""
    for name in configs:
        if name not in _DEFAULTS:
            raise _bad(f"Unknown client metrics configuration: {name}")
    if INTERVAL_MS in configs:
        text = configs[INTERVAL_MS]
        try:
            interval = int(text.strip())
        except ValueError:
            raise _bad(
                f"Invalid value {text} for configuration {INTERVAL_MS}: Not a number of type INT"
            ) from None
        if not MIN_INTERVAL_MS <= interval <= MAX_INTERVAL_MS:
            raise _bad(
                f"Invalid value {interval} for {INTERVAL_MS}, interval must be between "
                f"{MIN_INTERVAL_MS} and {MAX_INTERVAL_MS}"
            )
    _match(_items(configs.get(MATCH, "")))


def parse_subscription(name: str, configs: Mapping[str, str]) -> Subscription:
    """A stored (so already validated) config set as a subscription."""
    return Subscription(
        name,
        tuple(_items(configs.get(METRICS, ""))),
        int(configs.get(INTERVAL_MS, DEFAULT_INTERVAL_MS)),
        _match(_items(configs.get(MATCH, ""))),
    )


def describe_client_metrics(
    configs: Mapping[str, str],
    names: Iterable[str] | None,
    include_synonyms: bool,
    include_documentation: bool,
) -> list[ConfigEntry]:
    wanted = None if names is None else set(names)
    out = []
    for name, default in _DEFAULTS.items():
        if wanted is not None and name not in wanted:
            continue
        value, source = (
            (configs[name], ConfigSource.CLIENT_METRICS_CONFIG)
            if name in configs
            else (default, ConfigSource.DEFAULT_CONFIG)
        )
        out.append(
            ConfigEntry(
                name,
                value,
                source,
                _TYPES[name],
                _DOCS[name] if include_documentation else None,
                synonyms=[(name, value, source)] if include_synonyms else None,
            )
        )
    return out
