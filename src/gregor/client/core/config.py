"""Client configuration in Kafka's own vocabulary (``bootstrap.servers``, ``linger.ms``, ...).

A :class:`Config` is built from a dict of Kafka keys; underscores are accepted for dots
(``bootstrap_servers``) so Python keyword arguments work too. Unknown keys are an error
(a typo should not silently fall back to a default). Values are converted to the type of the
default: ``"5"`` becomes 5 for ``linger.ms``, ``"true"`` becomes True; None is a value only
for a setting whose default is None (``group.id``, ``transactional.id``, the SASL and TLS
files and secrets).

Reading a setting is typed by its key: ``config["linger.ms"]`` is an ``int``,
``config["group.id"]`` a ``str | None`` (the ``*Key`` literals below; a test checks them
against the defaults).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable, Mapping
from typing import Literal, SupportsInt, overload

from gregor.client.core.errors import ConfigError
from gregor.client.core.security import SECURITY_SETTINGS

#: A setting as a caller gives it: Kafka's string form, or a Python value (a list of servers
#: or of assignors is joined with commas). Whatever object is given is converted to the type of
#: the setting's default, or refused with a ConfigError.
SettingValue = object
#: Settings as a caller gives them, by Kafka name (or with underscores for dots).
Settings = Mapping[str, SettingValue]
#: A setting as a :class:`Config` holds it, converted to the type of its default.
ConfigValue = str | int | bool | None

COMMON: dict[str, ConfigValue] = {
    "bootstrap.servers": "localhost:9092",
    "client.id": "gregor",
    "client.rack": "",
    "request.timeout.ms": 30000,
    "socket.connection.setup.timeout.ms": 10000,
    "retry.backoff.ms": 100,
    "retry.backoff.max.ms": 1000,
    "reconnect.backoff.ms": 50,
    "reconnect.backoff.max.ms": 1000,
    "metadata.max.age.ms": 300000,
    "connections.max.idle.ms": 540000,
    "max.in.flight.requests.per.connection": 5,
    **SECURITY_SETTINGS,
    "default.api.timeout.ms": 60000,
    "allow.auto.create.topics": True,
}

PRODUCER: dict[str, ConfigValue] = {
    "acks": "all",
    "linger.ms": 5,
    "batch.size": 16384,
    "buffer.memory": 33554432,
    "compression.type": "none",
    "compression.level": -1,
    "enable.idempotence": True,
    "transactional.id": None,
    "transaction.timeout.ms": 60000,
    "delivery.timeout.ms": 120000,
    "retries": 2147483647,
    "max.request.size": 1048576,
    "max.block.ms": 60000,
    "partitioner.ignore.keys": False,
    "partitioner.class": "default",
}

CONSUMER: dict[str, ConfigValue] = {
    "group.id": None,
    "group.instance.id": None,
    "group.protocol": "classic",
    "group.remote.assignor": None,
    "partition.assignment.strategy": "range,cooperative-sticky",
    "session.timeout.ms": 45000,
    "heartbeat.interval.ms": 3000,
    "max.poll.interval.ms": 300000,
    "max.poll.records": 500,
    "enable.auto.commit": True,
    "auto.commit.interval.ms": 5000,
    "auto.offset.reset": "latest",
    "fetch.min.bytes": 1,
    "fetch.max.bytes": 52428800,
    "fetch.max.wait.ms": 500,
    "max.partition.fetch.bytes": 1048576,
    "isolation.level": "read_uncommitted",
    "check.crcs": True,
    "exclude.internal.topics": True,
}

ADMIN: dict[str, ConfigValue] = {}

SHARE_CONSUMER: dict[str, ConfigValue] = {
    "group.id": None,
    "share.acknowledgement.mode": "implicit",
    "max.poll.records": 500,
    "fetch.max.bytes": 52428800,
    "fetch.max.wait.ms": 500,
    "max.partition.fetch.bytes": 1048576,
}

ROLES = {
    "producer": PRODUCER,
    "consumer": CONSUMER,
    "admin": ADMIN,
    "share_consumer": SHARE_CONSUMER,
    "client": {},
}


#: Settings whose value is an int.
IntKey = Literal[
    "request.timeout.ms",
    "socket.connection.setup.timeout.ms",
    "retry.backoff.ms",
    "retry.backoff.max.ms",
    "reconnect.backoff.ms",
    "reconnect.backoff.max.ms",
    "metadata.max.age.ms",
    "connections.max.idle.ms",
    "max.in.flight.requests.per.connection",
    "default.api.timeout.ms",
    "linger.ms",
    "batch.size",
    "buffer.memory",
    "compression.level",
    "transaction.timeout.ms",
    "delivery.timeout.ms",
    "retries",
    "max.request.size",
    "max.block.ms",
    "session.timeout.ms",
    "heartbeat.interval.ms",
    "max.poll.interval.ms",
    "max.poll.records",
    "auto.commit.interval.ms",
    "fetch.min.bytes",
    "fetch.max.bytes",
    "fetch.max.wait.ms",
    "max.partition.fetch.bytes",
]
#: Settings whose value is a bool.
BoolKey = Literal[
    "allow.auto.create.topics",
    "sasl.scram.tokenauth",
    "enable.idempotence",
    "partitioner.ignore.keys",
    "enable.auto.commit",
    "check.crcs",
    "exclude.internal.topics",
]
#: Settings whose value is a string.
StrKey = Literal[
    "bootstrap.servers",
    "client.id",
    "client.rack",
    "security.protocol",
    "ssl.endpoint.identification.algorithm",
    "acks",
    "compression.type",
    "partitioner.class",
    "group.protocol",
    "partition.assignment.strategy",
    "auto.offset.reset",
    "isolation.level",
    "share.acknowledgement.mode",
]
#: Settings whose value is a string or None (unset).
OptionalStrKey = Literal[
    "sasl.mechanism",
    "sasl.username",
    "sasl.password",
    "ssl.ca.location",
    "ssl.certificate.location",
    "ssl.key.location",
    "ssl.key.password",
    "transactional.id",
    "group.id",
    "group.instance.id",
    "group.remote.assignor",
]

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


class Config:
    """Kafka client settings for one role (producer, consumer, admin or a bare client)."""

    def __init__(self, role: str, settings: Settings | None = None, **kwargs: SettingValue) -> None:
        defaults = {**COMMON, **ROLES[role]}
        self.role = role
        self._values: dict[str, ConfigValue] = dict(defaults)
        merged = dict(settings or {})
        merged.update(kwargs)
        for key, value in merged.items():
            name = key.replace("_", ".")
            if name not in defaults:
                raise ConfigError(f"unknown {role} configuration {key!r}")
            self._values[name] = _convert(name, value, defaults[name])
        self.explicit = frozenset(k.replace("_", ".") for k in merged)

    @overload
    def __getitem__(self, key: IntKey) -> int: ...
    @overload
    def __getitem__(self, key: BoolKey) -> bool: ...
    @overload
    def __getitem__(self, key: StrKey) -> str: ...
    @overload
    def __getitem__(self, key: OptionalStrKey) -> str | None: ...
    @overload
    def __getitem__(self, key: str) -> ConfigValue: ...
    def __getitem__(self, key: str) -> ConfigValue:
        return self._values[key]

    def get(self, key: str, default: ConfigValue = None) -> ConfigValue:
        return self._values.get(key, default)

    def as_dict(self) -> dict[str, ConfigValue]:
        return dict(self._values)

    @property
    def bootstrap_servers(self) -> list[tuple[str, int]]:
        return parse_servers(self["bootstrap.servers"])

    def __repr__(self) -> str:
        return f"Config({self.role!r}, {self._values!r})"


def _convert(name: str, value: SettingValue, default: ConfigValue) -> ConfigValue:
    if value is None:
        if default is not None:
            raise ConfigError(f"{name} cannot be None (its default is {default!r})")
        return None
    if isinstance(default, bool):
        if isinstance(value, bool):
            return value
        s = str(value).strip().lower()
        if s in _TRUE:
            return True
        if s in _FALSE:
            return False
        raise ConfigError(f"{name} must be true or false, got {value!r}")
    if isinstance(default, int):
        if isinstance(value, (str, bytes, SupportsInt)):
            try:
                return int(value)
            except (ValueError, OverflowError):
                pass
        raise ConfigError(f"{name} must be an integer, got {value!r}")
    if isinstance(value, str):
        return value.strip()
    if name in ("bootstrap.servers", "partition.assignment.strategy") and isinstance(
        value, Iterable
    ):
        items = list(value)
        names = [v for v in items if isinstance(v, str)]
        if len(names) != len(items):
            raise ConfigError(f"{name} must be a string or a list of strings, got {value!r}")
        return ",".join(names)
    return str(value)


def parse_servers(servers: str | list[str]) -> list[tuple[str, int]]:
    """``"host1:9092,host2"`` -> [("host1", 9092), ("host2", 9092)] (IPv6 in brackets)."""
    items = servers.split(",") if isinstance(servers, str) else list(servers)
    out: list[tuple[str, int]] = []
    for item in items:
        item = item.strip()
        if not item:
            continue
        if "://" in item:
            item = item.split("://", 1)[1]
        if item.startswith("["):
            host, _, rest = item[1:].partition("]")
            port = int(rest[1:]) if rest.startswith(":") else 9092
        elif item.count(":") == 1:
            host, p = item.split(":")
            port = int(p)
        else:
            host, port = item, 9092
        out.append((host, port))
    if not out:
        raise ConfigError("bootstrap.servers is empty")
    return out


def default_client_host() -> str:
    try:
        return socket.gethostname()
    except OSError:  # pragma: no cover
        return os.environ.get("HOSTNAME", "localhost")
