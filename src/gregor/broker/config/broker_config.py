"""Broker configuration in Kafka's vocabulary.

A ``server.properties``-style file (``key=value`` lines, ``#`` comments, ``\\`` continuations)
plus command-line overrides, validated against a table of known keys with Kafka's types and
defaults (``config_def``). Unknown keys are kept (Kafka warns and ignores them) so operators'
files load as they are. Values are parsed once at start; ``BrokerConfig`` is immutable after that except for
dynamic topic configs, which live with the topics.

The defaults are chosen to work on a laptop: ``gregor serve`` alone listens on 127.0.0.1:9092
and keeps its data in ``./gregor-data``.
"""

from __future__ import annotations

import functools
import re
import ssl
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from gregor.broker.config.config_def import BROKER_KEYS, BY_NAME, HOUR_MS, TYPES
from gregor.broker.config.group_bounds import check_group_bounds
from gregor.broker.config.listener_security import (
    InterBrokerClient,
    ListenerSecurity,
    inter_broker_client,
    is_security_key,
    listener_security,
)
from gregor.broker.config.metrics_web import WebConfig, WebConfigError, load_web_config
from gregor.broker.config.schema_registry_security import (
    RegistryClient,
    RegistrySecurityError,
    registry_client,
    registry_server_context,
)
from gregor.broker.config.schema_validation import registry_url_error, registry_urls
from gregor.cluster.etcd_url import is_etcd_url, parse_etcd_url
from gregor.security.password_encoder import PasswordEncoder
from gregor.security.tls import TlsConfigError
from gregor.storage.config import from_broker_props
from gregor.storage.errors import InvalidConfigError
from gregor.tables.settings import catalog_settings

#: KIP-392 replica selectors Gregor implements (Kafka's class name).
RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
REPLICA_SELECTORS = frozenset({RACK_AWARE_SELECTOR})


def parse_ip_overrides(text: str) -> dict[str, int]:
    """``max.connections.per.ip.overrides``: ``host:count,ip:count`` (the last ``:`` splits,
    so IPv6 addresses work) -> {host or ip: count}. ValueError names what is wrong."""
    out: dict[str, int] = {}
    for item in (p.strip() for p in text.split(",")):
        if not item:
            continue
        host, sep, count = item.rpartition(":")
        host = host.strip().strip("[]")
        if not sep or not host:
            raise ValueError(f"max.connections.per.ip.overrides entry {item!r} is not host:count")
        try:
            n = int(count.strip())
        except ValueError:
            raise ValueError(
                f"max.connections.per.ip.overrides entry {item!r}: {count.strip()!r} is not a number"
            ) from None
        if n < 0:
            raise ValueError(
                f"max.connections.per.ip.overrides entry {item!r}: the count is negative"
            )
        out[host] = n
    return out


class ConfigError(ValueError):
    """A configuration key or value that cannot be used (INVALID_CONFIG on the wire)."""


def parse_metrics_listener(value: str) -> tuple[str, int]:
    """``http://host:port`` (or ``host:port``, ``/metrics`` allowed) -> (host, port)."""
    text = value.strip()
    if text.startswith("http://"):
        text = text[len("http://") :]
    text = text.rstrip("/")
    if text.endswith("/metrics"):
        text = text[: -len("/metrics")]
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(
            f"metrics.listener={value!r}: use http://host:port (e.g. http://127.0.0.1:9308)"
        )
    return host.strip("[]"), int(port)


def _is_loopback(host: str) -> bool:
    import ipaddress

    if host.lower().rstrip(".") == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


#: The authorizer class names Kafka users configure; each selects Gregor's ACL authorizer.
AUTHORIZER_CLASS_NAMES = frozenset(
    {
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "kafka.security.authorizer.AclAuthorizer",
    }
)

#: Security protocols this broker can serve. Anything else stops it at start (fail closed):
#: a listener that asks for TLS or SASL must never be served as plain text.
SUPPORTED_SECURITY_PROTOCOLS = frozenset({"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"})
KNOWN_SECURITY_PROTOCOLS = frozenset({"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"})
METADATA_STORES = frozenset({"file", "memory"})


_LISTENER = re.compile(
    r"^(?:(?P<name>[A-Za-z_][A-Za-z0-9_]*)://)?(?P<host>\[[^\]]*\]|[^:]*):(?P<port>\d+)$"
)


@dataclass(frozen=True)
class Listener:
    name: str
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.name}://{self.host}:{self.port}"


def parse_listener(text: str) -> Listener:
    m = _LISTENER.match(text.strip())
    if not m:
        raise ConfigError(f"listener {text!r} is not NAME://host:port")
    host = m.group("host").strip("[]")
    port = int(m.group("port"))
    if not 0 <= port <= 65535:
        raise ConfigError(f"listener {text!r} has an invalid port")
    return Listener(m.group("name") or "PLAINTEXT", host, port)


def read_properties(text: str) -> dict[str, str]:
    """Parse Java-properties text: ``key=value`` or ``key: value``, comments, continuations."""
    out: dict[str, str] = {}
    pending = ""
    for raw in text.splitlines():
        line = raw.strip() if not pending else raw.lstrip()
        if not pending and (not line or line[0] in "#!"):
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending += line[:-1]
            continue
        line = pending + line
        pending = ""
        m = re.match(r"^([^=:\s]+)\s*[=:\s]\s*(.*)$", line)
        if not m:
            out[line] = ""
            continue
        out[m.group(1)] = m.group(2).strip()
    if pending:
        raise ConfigError("properties file ends inside a line continuation")
    return out


class BrokerConfig:
    """Typed, validated broker configuration. Access by Kafka key: ``cfg["log.dirs"]``."""

    def __init__(self, props: Mapping[str, str] | None = None) -> None:
        self.raw: dict[str, str] = dict(props or {})
        self.values: dict[str, Any] = {}
        self.unknown: list[str] = []
        for key in BROKER_KEYS:
            self.values[key.name] = key.default
        for name, text in self.raw.items():
            known = BY_NAME.get(name)
            if known is None:
                if not is_security_key(name):
                    self.unknown.append(name)
                self.values[name] = text
                continue
            key = known
            try:
                value = TYPES[key.type](text)
            except ValueError as e:
                raise ConfigError(f"{name}={text!r}: {e}") from None
            if key.minimum is not None and isinstance(value, int) and value < key.minimum:
                raise ConfigError(f"{name}={value} is below the minimum {key.minimum}")
            self.values[name] = value
        if self.raw.get("broker.id") and "node.id" not in self.raw:
            self.values["node.id"] = self.values["broker.id"]
        if self.values["log.message.timestamp.type"] not in ("CreateTime", "LogAppendTime"):
            raise ConfigError("log.message.timestamp.type must be CreateTime or LogAppendTime")
        self.listeners = [parse_listener(x) for x in self.values["listeners"]]
        if not self.listeners:
            raise ConfigError("listeners is empty")
        adv = self.values["advertised.listeners"]
        self.advertised_listeners = (
            [parse_listener(x) for x in adv] if adv else list(self.listeners)
        )
        for i, a in enumerate(self.advertised_listeners):
            if a.host in ("", "0.0.0.0", "::"):
                # A wildcard bind is not an address a client can use; advertise loopback.
                self.advertised_listeners[i] = Listener(a.name, "127.0.0.1", a.port)
        self._check_can_honour()

    # --- fail closed ---

    def _check_can_honour(self) -> None:
        """Refuse, at start, any setting this broker cannot honour, rather than run a
        silently weaker broker (a TLS or SASL listener served as plain text, ACLs that
        are not enforced, a metadata store it does not have)."""
        self.security_protocol_map: dict[str, str] = {}
        for entry in self.values["listener.security.protocol.map"]:
            name, sep, protocol = entry.partition(":")
            protocol = protocol.strip().upper()
            if not sep or not name.strip() or protocol not in KNOWN_SECURITY_PROTOCOLS:
                raise ConfigError(
                    f"listener.security.protocol.map entry {entry!r} is not NAME:PROTOCOL with a "
                    f"protocol of {', '.join(sorted(KNOWN_SECURITY_PROTOCOLS))}"
                )
            self.security_protocol_map[name.strip().upper()] = protocol
        names = [listener.name for listener in self.listeners]
        if len(set(names)) != len(names):
            raise ConfigError(f"listeners has a listener name more than once: {','.join(names)}")
        for a in self.advertised_listeners:
            if a.name not in names:
                raise ConfigError(f"advertised listener {a} names no listener in listeners")
        self.listener_security: dict[str, ListenerSecurity] = {}
        #: (host, port) of the Prometheus endpoint (``metrics.listener``), None without one.
        self.metrics_address: tuple[str, int] | None = None
        #: (host, port) of the schema registry served beside the broker
        #: (``schema.registry.listener``).
        self.schema_registry_address: tuple[str, int] | None = None
        #: its TLS context when https (the broker's own PEM certificate), else None.
        self.schema_registry_tls: ssl.SSLContext | None = None
        #: (host, port) of the web console served beside the broker (``console.listener``).
        self.console_address: tuple[str, int] | None = None
        for listener in self.listeners:
            protocol = self.security_protocol(listener.name)
            try:
                self.listener_security[listener.name] = listener_security(
                    listener.name,
                    protocol,
                    functools.partial(self.listener_value, listener.name),
                    functools.partial(self._listener_only, listener.name),
                )
            except (TlsConfigError, ValueError) as e:
                raise ConfigError(
                    f"listener {listener.name} ({protocol}) cannot be served (and is never served "
                    f"as plain text): {e}"
                ) from None
        inter = self.values["inter.broker.listener.name"]
        if inter is not None and inter not in names:
            raise ConfigError(f"inter.broker.listener.name={inter} names no listener in listeners")
        protocol = str(self.values["security.inter.broker.protocol"]).upper()
        if inter is None and "security.inter.broker.protocol" in self.raw and protocol not in names:
            # Kafka takes the listener named after the protocol for inter-broker traffic.
            raise ConfigError(
                f"security.inter.broker.protocol={protocol} names no listener in listeners "
                "(or set inter.broker.listener.name)"
            )
        inter_name = self.inter_broker_listener
        try:
            self.inter_broker_client = inter_broker_client(
                inter_name,
                self.security_protocol(inter_name),
                functools.partial(self.listener_value, inter_name),
                functools.partial(self._listener_only, inter_name),
            )
        except (TlsConfigError, ValueError) as e:
            if is_etcd_url(str(self.values["metadata.store"])):
                raise ConfigError(
                    f"the inter-broker listener {inter_name} cannot be reached by the other brokers: {e}"
                ) from None
            self.inter_broker_client = InterBrokerClient("PLAINTEXT")  # one node: nobody to reach
        if protocol not in SUPPORTED_SECURITY_PROTOCOLS:
            raise ConfigError(
                f"security.inter.broker.protocol={protocol} is not one of "
                f"{', '.join(sorted(SUPPORTED_SECURITY_PROTOCOLS))}"
            )
        selector = str(self.values["replica.selector.class"] or "").strip()
        if selector and selector not in REPLICA_SELECTORS:
            raise ConfigError(
                f"replica.selector.class={selector} is not a selector Gregor provides "
                f"(use {', '.join(sorted(REPLICA_SELECTORS))}, or leave it empty: consumers read from leaders)"
            )
        #: The metrics endpoint's TLS and basic auth (``metrics.web.config.file``), if any.
        self.metrics_web_config: WebConfig | None = None
        if self.values["metrics.listener"]:
            self.metrics_address = parse_metrics_listener(str(self.values["metrics.listener"]))
            web = self.values["metrics.web.config.file"]
            if web:
                try:
                    self.metrics_web_config = load_web_config(str(web))
                except WebConfigError as e:
                    raise ConfigError(f"metrics.web.config.file: {e}") from None
        elif self.values["metrics.web.config.file"]:
            raise ConfigError("metrics.web.config.file is set but metrics.listener is not")
        if self.values["console.listener"]:
            try:
                self.console_address = parse_metrics_listener(str(self.values["console.listener"]))
            except ConfigError as e:
                raise ConfigError(str(e).replace("metrics.listener", "console.listener")) from None
            if not _is_loopback(self.console_address[0]):
                raise ConfigError(
                    f"console.listener={self.values['console.listener']}: the console beside the broker has "
                    "no login, so it serves on a loopback address only (127.0.0.1, ::1, localhost); run "
                    "`gregor console` (logins, TLS) to serve it beyond"
                )
            if not any(
                self.security_protocol(listener.name) == "PLAINTEXT" for listener in self.listeners
            ):
                raise ConfigError(
                    "console.listener needs a PLAINTEXT listener to reach the broker through; with "
                    "security on, run `gregor console` with the client's -X login settings instead"
                )
        self._check_schema_registry()
        self._check_connection_limits()
        try:
            check_group_bounds(self.values)
        except ValueError as e:
            raise ConfigError(str(e)) from None
        self.password_encoder = self._encoder("password.encoder.secret")
        #: Decodes what an earlier password.encoder.secret encoded (re-encoded at start).
        self.old_password_encoder = self._encoder("password.encoder.old.secret")
        authorizer = str(self.values["authorizer.class.name"] or "").strip()
        if authorizer and authorizer not in AUTHORIZER_CLASS_NAMES:
            raise ConfigError(
                f"authorizer.class.name={authorizer} is not an authorizer Gregor provides "
                f"(use one of: {', '.join(sorted(AUTHORIZER_CLASS_NAMES))}, or leave it empty)"
            )
        try:
            from_broker_props(dict(self.raw)).validate()
        except (InvalidConfigError, ValueError) as e:
            raise ConfigError(f"invalid log setting: {e}") from None
        try:
            catalog_settings(self.raw, str(self.log_dirs[0]))
        except ValueError as e:
            raise ConfigError(f"topics as tables: {e}") from None
        store = str(self.values["metadata.store"])
        if is_etcd_url(store):
            try:
                parse_etcd_url(store)
            except ValueError as e:
                raise ConfigError(f"metadata.store: {e}") from None
        elif store not in METADATA_STORES:
            raise ConfigError(
                f"metadata.store={store} is not available in this version of Gregor "
                f"(use one of: {', '.join(sorted(METADATA_STORES))}, etcd://host:port[/prefix])"
            )

    @property
    def schema_registry_urls(self) -> tuple[str, ...]:
        """The registry a topic's schema ID validation asks (``confluent.schema.registry.url``,
        else the one served at ``schema.registry.listener``); empty: none."""
        return registry_urls(
            self.values["confluent.schema.registry.url"],
            self.schema_registry_address,
            self.schema_registry_tls is not None,
        )

    def _check_schema_registry(self) -> None:
        """``schema.registry.listener``: http on loopback or https (with a login), reaching
        the broker through a PLAINTEXT listener (in a cluster the brokers' registries elect
        one writer in schema.registry.group.id); its login and ACLs."""
        why = registry_url_error(self.values["confluent.schema.registry.url"])
        if why is not None:
            raise ConfigError(why)
        if self.values["confluent.schema.registry.url"] and find_spec("aiohttp") is None:
            raise ConfigError(
                "confluent.schema.registry.url is set but the broker asks the registry with "
                "aiohttp, the schema-registry extra: pip install 'gregor[schema-registry]'"
            )
        try:  # how schema ID validation logs in to and trusts the registry it asks
            self.schema_registry_client: RegistryClient = registry_client(
                lambda k: str(self.values[k]) if k in self.raw else None
            )
        except RegistrySecurityError as e:
            raise ConfigError(str(e)) from None
        value = self.values["schema.registry.listener"]
        if not value:
            return
        text = str(value).strip()
        key = f"schema.registry.listener={value}"
        usage = f"{key}: use http://host:port or https://host:port (e.g. http://127.0.0.1:8081)"
        https = text.startswith("https://")
        if not https and not text.startswith("http://"):
            raise ConfigError(usage)
        try:
            self.schema_registry_address = parse_metrics_listener(text[8:] if https else text)
        except ConfigError:
            raise ConfigError(usage) from None
        beyond = not _is_loopback(self.schema_registry_address[0])
        if https:
            tls: list[Callable[[str], str | None]] = [self.raw.get]
            tls += [
                functools.partial(self.listener_value, x.name)
                for x in self.listeners
                if self.security_protocol(x.name) in ("SSL", "SASL_SSL")
            ]
            basic = str(self.values["schema.registry.authentication.method"]).upper() == "BASIC"
            try:
                self.schema_registry_tls = registry_server_context(str(value), tls, beyond, basic)
            except RegistrySecurityError as e:
                raise ConfigError(str(e)) from None
        elif beyond:
            raise ConfigError(
                f"{key}: plain http is served on a loopback address only (127.0.0.1, ::1, "
                "localhost); serve https:// with the broker's PEM certificate (ssl.keystore.*)"
            )
        if not any(
            self.security_protocol(listener.name) == "PLAINTEXT" for listener in self.listeners
        ):
            raise ConfigError(
                "schema.registry.listener needs a PLAINTEXT listener to reach the broker through; "
                "with security on, run `gregor schema-registry` with the client's -X login settings"
            )
        if not str(self.values["schema.registry.group.id"] or "").strip():
            raise ConfigError("schema.registry.group.id: a group id (not empty)")
        topic = str(self.values["schema.registry.topic"] or "")
        if not topic or len(topic) > 249 or not re.fullmatch(r"[A-Za-z0-9._-]+", topic):
            raise ConfigError(
                f"schema.registry.topic={topic!r}: a topic name (1 to 249 of [A-Za-z0-9._-])"
            )
        method = str(self.values["schema.registry.authentication.method"] or "NONE").upper()
        authorizer = str(self.values["schema.registry.authorizer"] or "none").lower()
        if method not in ("NONE", "BASIC") or authorizer not in ("none", "acl"):
            raise ConfigError(
                f"schema.registry.authentication.method={method} / schema.registry.authorizer="
                f"{authorizer}: use NONE or BASIC / none or acl"
            )
        if authorizer == "acl" and method != "BASIC":
            raise ConfigError(
                "schema.registry.authorizer=acl needs to know who is asking: set "
                "schema.registry.authentication.method=BASIC"
            )
        if method == "BASIC" and self.schema_registry_login() is None:
            raise ConfigError(
                "schema.registry.authentication.method=BASIC checks logins through a "
                "SASL_PLAINTEXT listener with PLAIN or SCRAM enabled; this broker has none"
            )

    def schema_registry_login(self) -> tuple[str, str] | None:
        """(listener, mechanism) through which the registry beside the broker checks logins."""
        for listener in self.listeners:
            sec = self.listener_security.get(listener.name)
            if sec is None or self.security_protocol(listener.name) != "SASL_PLAINTEXT":
                continue
            for mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
                if mechanism in sec.mechanisms:
                    return listener.name, mechanism
        return None

    def _check_connection_limits(self) -> None:
        try:
            overrides = parse_ip_overrides(
                str(self.values["max.connections.per.ip.overrides"] or "")
            )
        except ValueError as e:
            raise ConfigError(str(e)) from None
        if self.values["max.connections.per.ip"] == 0 and not overrides:
            raise ConfigError(
                "max.connections.per.ip can be set to zero only if max.connections.per.ip.overrides property is set."
            )
        for listener in self.listeners:
            key = f"listener.name.{listener.name.lower()}.max.connections"
            text = self.raw.get(key)
            if text is None:
                continue
            try:
                value = int(text.strip())
            except ValueError:
                raise ConfigError(f"{key}={text!r} is not a number") from None
            if value <= 0:
                raise ConfigError(f"Invalid max.connections {value} ({key})")

    def _encoder(self, secret_key: str) -> PasswordEncoder | None:
        """The password encoder of ``secret_key``'s secret, None when it is unset."""
        secret = self.values[secret_key]
        if not secret:
            return None
        try:
            return PasswordEncoder(
                str(secret),
                self.values["password.encoder.keyfactory.algorithm"],
                str(self.values["password.encoder.cipher.algorithm"]),
                int(self.values["password.encoder.key.length"]),
                int(self.values["password.encoder.iterations"]),
            )
        except ValueError as e:
            raise ConfigError(str(e)) from None

    def security_protocol(self, listener_name: str) -> str:
        """The security protocol of a listener; ConfigError if it is unmapped or one this
        broker cannot serve."""
        protocol = self.security_protocol_map.get(listener_name.upper())
        if protocol is None:
            raise ConfigError(
                f"listener {listener_name} has no entry in listener.security.protocol.map"
            )
        if protocol not in SUPPORTED_SECURITY_PROTOCOLS:
            raise ConfigError(
                f"listener {listener_name} uses security protocol {protocol}, which this version "
                "of Gregor cannot serve; it would not be served as plain text"
            )
        return protocol

    @property
    def inter_broker_listener(self) -> str:
        """The listener followers fetch over: ``inter.broker.listener.name``, else the one
        named after ``security.inter.broker.protocol`` (Kafka's rule), else the first."""
        inter = self.values["inter.broker.listener.name"]
        if inter:
            return str(inter)
        names = [listener.name for listener in self.listeners]
        protocol = str(self.values["security.inter.broker.protocol"]).upper()
        return protocol if protocol in names else names[0]

    def _listener_only(self, listener_name: str, key: str) -> str | None:
        return self.raw.get(f"listener.name.{listener_name.lower()}.{key}")

    def listener_value(self, listener_name: str, key: str) -> str | None:
        """A setting as one listener sees it: ``listener.name.<lower-case name>.<key>`` if
        set, else ``<key>`` (Kafka's per-listener overrides)."""
        value = self.raw.get(f"listener.name.{listener_name.lower()}.{key}")
        return value if value is not None else self.raw.get(key)

    @classmethod
    def load(cls, path: str | Path | None = None, overrides: Iterable[str] = ()) -> BrokerConfig:
        """Read ``path`` (if given) and apply ``key=value`` overrides on top."""
        props: dict[str, str] = {}
        if path is not None:
            props.update(read_properties(Path(path).read_text()))
        for item in overrides:
            if "=" not in item:
                raise ConfigError(f"override {item!r} is not key=value")
            k, v = item.split("=", 1)
            props[k.strip()] = v.strip()
        return cls(props)

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    def get(self, name: str, default: Any = None) -> Any:
        v = self.values.get(name)
        return default if v is None else v

    @property
    def node_id(self) -> int:
        return int(self.values["node.id"])

    @property
    def log_dirs(self) -> list[Path]:
        dirs = self.values["log.dirs"] or [self.values["log.dir"]]
        return [Path(d) for d in dirs]

    @property
    def retention_ms(self) -> int:
        if self.values["log.retention.ms"] is not None:
            return int(self.values["log.retention.ms"])
        if self.values["log.retention.minutes"] is not None:
            return int(self.values["log.retention.minutes"]) * 60000
        return int(self.values["log.retention.hours"]) * HOUR_MS

    @property
    def segment_ms(self) -> int:
        if self.values["log.roll.ms"] is not None:
            return int(self.values["log.roll.ms"])
        return int(self.values["log.roll.hours"]) * HOUR_MS

    def source_of(self, name: str) -> str:
        """Where a value came from: STATIC_BROKER_CONFIG if set in the file/overrides."""
        return "STATIC_BROKER_CONFIG" if name in self.raw else "DEFAULT_CONFIG"
