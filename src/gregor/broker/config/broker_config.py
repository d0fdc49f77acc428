"""Broker configuration in Kafka's vocabulary.

A ``server.properties``-style file (``key=value`` lines, ``#`` comments, ``\\`` continuations)
plus command-line overrides, validated against a table of known keys with Kafka's types and
defaults. Unknown keys are kept (Kafka warns and ignores them) so operators' files load as they
are. Values are parsed once at start; ``BrokerConfig`` is immutable after that except for
dynamic topic configs, which live with the topics.

The defaults are chosen to work on a laptop: ``gregor serve`` alone listens on 127.0.0.1:9092
and keeps its data in ``./gregor-data``. Where Kafka's own default would not work on one node
(replication factor 3 for internal topics) the single-node value is the default here.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gregor.broker.config.listener_security import (
    InterBrokerClient,
    ListenerSecurity,
    inter_broker_client,
    is_security_key,
    listener_security,
)
from gregor.broker.config.metrics_web import WebConfig, WebConfigError, load_web_config
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


def _bool(v: str) -> bool:
    s = v.strip().lower()
    if s in ("true", "1", "yes"):
        return True
    if s in ("false", "0", "no"):
        return False
    raise ValueError(f"{v!r} is not a boolean")


def _int(v: str) -> int:
    return int(v.strip())


def _str(v: str) -> str:
    return v.strip()


def _list(v: str) -> list[str]:
    return [p.strip() for p in v.split(",") if p.strip()]


_TYPES: dict[str, Callable[[str], Any]] = {
    "boolean": _bool,
    "int": _int,
    "long": _int,
    "string": _str,
    "list": _list,
    "password": _str,
}


@dataclass(frozen=True)
class ConfigKey:
    name: str
    type: str
    default: Any
    doc: str
    minimum: int | None = None


_HOUR_MS = 3600 * 1000

BROKER_KEYS: tuple[ConfigKey, ...] = (
    ConfigKey("node.id", "int", 1, "This broker's id."),
    ConfigKey("broker.id", "int", None, "Alias of node.id (older name)."),
    ConfigKey("listeners", "list", ["PLAINTEXT://127.0.0.1:9092"], "Addresses to listen on."),
    ConfigKey(
        "advertised.listeners", "list", None, "Addresses given to clients; default listeners."
    ),
    ConfigKey("log.dirs", "list", None, "Data directories; default log.dir."),
    ConfigKey("log.dir", "string", "./gregor-data", "Data directory when log.dirs is unset."),
    ConfigKey("cluster.id", "string", None, "Cluster id; generated and kept in meta.properties."),
    ConfigKey(
        "iceberg.catalog.type",
        "string",
        "sql",
        "The Iceberg catalog of topics' tables: sql (SQLite in the data directory) or rest.",
    ),
    ConfigKey(
        "iceberg.catalog.uri",
        "string",
        None,
        "The catalog's URI (a REST catalog's, or a SQL catalog's database URL).",
    ),
    ConfigKey(
        "iceberg.warehouse",
        "string",
        None,
        "Where tables' files go; default the iceberg/warehouse directory of the data directory.",
    ),
    ConfigKey("iceberg.namespace", "string", "gregor", "The namespace of topics' tables."),
    ConfigKey("broker.rack", "string", None, "Rack of this broker."),
    ConfigKey("num.partitions", "int", 1, "Partitions of an auto-created topic.", 1),
    ConfigKey(
        "default.replication.factor", "int", 1, "Replication factor of auto-created topics.", 1
    ),
    ConfigKey("auto.create.topics.enable", "boolean", True, "Create topics on metadata/produce."),
    ConfigKey("delete.topic.enable", "boolean", True, "Allow DeleteTopics."),
    ConfigKey("message.max.bytes", "int", 1048588, "Largest record batch accepted.", 0),
    ConfigKey("socket.request.max.bytes", "int", 104857600, "Largest request frame.", 1),
    ConfigKey("log.segment.bytes", "int", 1073741824, "Segment size before rolling.", 14),
    ConfigKey("log.roll.ms", "long", None, "Segment age before rolling."),
    ConfigKey("log.roll.hours", "int", 168, "Segment age before rolling, in hours.", 1),
    ConfigKey("log.retention.ms", "long", None, "Retention by time."),
    ConfigKey("log.retention.minutes", "int", None, "Retention by time, minutes."),
    ConfigKey("log.retention.hours", "int", 168, "Retention by time, hours."),
    ConfigKey("log.retention.bytes", "long", -1, "Retention by size per partition."),
    ConfigKey("log.retention.check.interval.ms", "long", 300000, "How often retention runs.", 1),
    ConfigKey("log.cleanup.policy", "list", ["delete"], "delete, compact or both."),
    ConfigKey("log.cleaner.enable", "boolean", True, "Run the log cleaner."),
    ConfigKey("log.cleaner.backoff.ms", "long", 15000, "Cleaner sleep when idle."),
    ConfigKey("log.cleaner.delete.retention.ms", "long", 86400000, "Tombstone retention."),
    ConfigKey("log.cleaner.min.cleanable.ratio", "string", "0.5", "Dirty ratio to clean at."),
    ConfigKey("log.cleaner.min.compaction.lag.ms", "long", 0, "Minimum age before compaction."),
    ConfigKey("log.index.interval.bytes", "int", 4096, "Bytes between index entries.", 0),
    ConfigKey("log.index.size.max.bytes", "int", 10485760, "Max index file size.", 4),
    ConfigKey(
        "log.flush.interval.messages", "long", 9223372036854775807, "fsync every N messages.", 1
    ),
    ConfigKey("log.flush.interval.ms", "long", None, "fsync every N ms."),
    ConfigKey("log.message.timestamp.type", "string", "CreateTime", "CreateTime or LogAppendTime."),
    ConfigKey(
        "log.message.timestamp.before.max.ms", "long", 9223372036854775807, "Oldest allowed."
    ),
    ConfigKey(
        "log.message.timestamp.after.max.ms", "long", 3600000, "Newest allowed ahead of now."
    ),
    ConfigKey("offsets.topic.num.partitions", "int", 50, "Partitions of __consumer_offsets.", 1),
    ConfigKey(
        "offsets.topic.replication.factor", "int", 1, "Replication of __consumer_offsets.", 1
    ),
    ConfigKey("offsets.retention.minutes", "int", 10080, "Committed offset retention.", 1),
    ConfigKey(
        "transaction.state.log.num.partitions", "int", 50, "Partitions of __transaction_state.", 1
    ),
    ConfigKey(
        "transaction.state.log.replication.factor",
        "int",
        1,
        "Replication of __transaction_state.",
        1,
    ),
    ConfigKey("transaction.max.timeout.ms", "int", 900000, "Longest transaction timeout.", 1),
    ConfigKey(
        "transactional.id.expiration.ms", "int", 604800000, "Idle transactional id expiry.", 1
    ),
    ConfigKey("producer.id.expiration.ms", "int", 86400000, "Idle producer id expiry.", 1),
    ConfigKey(
        "telemetry.max.bytes", "int", 1048576, "Largest PushTelemetry metrics payload (KIP-714).", 1
    ),
    ConfigKey(
        "group.initial.rebalance.delay.ms", "int", 3000, "Wait for more members on a new group."
    ),
    ConfigKey(
        "group.coordinator.append.linger.ms",
        "int",
        5,
        "How long group coordinator writes wait to be appended together in one batch.",
        0,
    ),
    ConfigKey("group.min.session.timeout.ms", "int", 6000, "Smallest session timeout."),
    ConfigKey("group.max.session.timeout.ms", "int", 1800000, "Largest session timeout."),
    ConfigKey(
        "group.consumer.heartbeat.interval.ms", "int", 5000, "KIP-848 heartbeat interval.", 1
    ),
    ConfigKey("group.consumer.session.timeout.ms", "int", 45000, "KIP-848 session timeout.", 1),
    ConfigKey(
        "group.consumer.min.session.timeout.ms",
        "int",
        45000,
        "Smallest KIP-848 session timeout.",
        1,
    ),
    ConfigKey(
        "group.consumer.max.session.timeout.ms", "int", 60000, "Largest KIP-848 session timeout.", 1
    ),
    ConfigKey(
        "group.consumer.min.heartbeat.interval.ms",
        "int",
        5000,
        "Smallest KIP-848 heartbeat interval.",
        1,
    ),
    ConfigKey(
        "group.consumer.max.heartbeat.interval.ms",
        "int",
        15000,
        "Largest KIP-848 heartbeat interval.",
        1,
    ),
    ConfigKey("group.share.session.timeout.ms", "int", 45000, "Share group session timeout.", 1),
    ConfigKey(
        "group.share.min.session.timeout.ms",
        "int",
        45000,
        "Smallest share group session timeout.",
        1,
    ),
    ConfigKey(
        "group.share.max.session.timeout.ms",
        "int",
        60000,
        "Largest share group session timeout.",
        1,
    ),
    ConfigKey(
        "group.share.heartbeat.interval.ms", "int", 5000, "Share group heartbeat interval.", 1
    ),
    ConfigKey(
        "group.share.min.heartbeat.interval.ms",
        "int",
        5000,
        "Smallest share group heartbeat interval.",
        1,
    ),
    ConfigKey(
        "group.share.max.heartbeat.interval.ms",
        "int",
        15000,
        "Largest share group heartbeat interval.",
        1,
    ),
    ConfigKey(
        "group.share.record.lock.duration.ms", "int", 30000, "Share group record lock duration."
    ),
    ConfigKey(
        "group.share.min.record.lock.duration.ms",
        "int",
        15000,
        "Smallest share record lock duration.",
    ),
    ConfigKey(
        "group.share.max.record.lock.duration.ms",
        "int",
        60000,
        "Largest share record lock duration.",
    ),
    ConfigKey(
        "group.share.delivery.count.limit",
        "int",
        5,
        "Deliveries of a share record before it is archived.",
        2,
    ),
    ConfigKey(
        "group.share.partition.max.record.locks",
        "int",
        2000,
        "Records a share partition may have acquired.",
        100,
    ),
    ConfigKey("group.share.max.size", "int", 200, "Members a share group may have.", 1),
    ConfigKey(
        "share.coordinator.state.topic.num.partitions",
        "int",
        50,
        "Partitions of __share_group_state.",
        1,
    ),
    ConfigKey(
        "share.coordinator.state.topic.replication.factor",
        "int",
        1,
        "Replication of __share_group_state.",
        1,
    ),
    ConfigKey("fetch.max.bytes", "int", 57671680, "Largest fetch response.", 1024),
    ConfigKey("min.insync.replicas", "int", 1, "Replicas that must ack acks=all.", 1),
    ConfigKey(
        "num.io.threads", "int", 8, "Accepted for compatibility; Gregor uses one event loop."
    ),
    ConfigKey("num.network.threads", "int", 3, "Accepted for compatibility."),
    ConfigKey("max.incremental.fetch.session.cache.slots", "int", 1000, "Fetch sessions kept.", 0),
    ConfigKey(
        "replica.lag.time.max.ms", "long", 30000, "A follower this far behind leaves the ISR.", 1
    ),
    ConfigKey("replica.fetch.wait.max.ms", "int", 500, "Longest wait of a follower's fetch.", 0),
    ConfigKey("replica.fetch.min.bytes", "int", 1, "Bytes a follower's fetch waits for.", 1),
    ConfigKey(
        "replica.fetch.max.bytes", "int", 1048576, "Bytes per partition of a follower's fetch.", 0
    ),
    ConfigKey(
        "replica.fetch.response.max.bytes", "int", 10485760, "Bytes of a follower's fetch.", 0
    ),
    ConfigKey("replica.fetch.backoff.ms", "int", 1000, "Follower's pause after a fetch error.", 0),
    ConfigKey(
        "auto.leader.rebalance.enable",
        "boolean",
        True,
        "Move leadership back to preferred replicas.",
    ),
    ConfigKey(
        "leader.imbalance.check.interval.seconds",
        "long",
        300,
        "How often leadership balance is checked.",
        1,
    ),
    ConfigKey(
        "leader.imbalance.per.broker.percentage", "int", 10, "Imbalance a broker tolerates.", 0
    ),
    ConfigKey(
        "replica.selector.class",
        "string",
        None,
        "KIP-392: RackAwareReplicaSelector lets consumers read from a replica in their rack.",
    ),
    ConfigKey(
        "unclean.leader.election.enable", "boolean", False, "Elect a replica outside the ISR."
    ),
    ConfigKey(
        "controlled.shutdown.enable",
        "boolean",
        True,
        "On SIGTERM, ask the controller to move leadership away first.",
    ),
    ConfigKey(
        "controlled.shutdown.max.retries",
        "int",
        3,
        "Controlled-shutdown requests before giving up.",
        1,
    ),
    ConfigKey(
        "controlled.shutdown.retry.backoff.ms",
        "long",
        5000,
        "Pause between controlled-shutdown requests.",
        0,
    ),
    ConfigKey("connections.max.idle.ms", "long", 600000, "Idle connections are closed after this."),
    ConfigKey(
        "max.connections",
        "int",
        2147483647,
        "Connections the broker takes at a time (all listeners; the inter-broker listener is exempt "
        "when there are others); at the limit a listener stops accepting until one closes. "
        "listener.name.<l>.max.connections limits one listener.",
        0,
    ),
    ConfigKey(
        "max.connections.per.ip",
        "int",
        2147483647,
        "Connections one IP address may have open; one more is closed at once.",
        0,
    ),
    ConfigKey(
        "max.connections.per.ip.overrides",
        "string",
        "",
        "Per-address or host name limits that replace max.connections.per.ip: host:count,ip:count.",
    ),
    ConfigKey(
        "sasl.server.max.receive.size",
        "int",
        524288,
        "Largest request frame a SASL listener reads before the login has succeeded (Kafka's "
        "fix for CVE-2022-34917); a bigger size prefix closes the connection.",
        1,
    ),
    ConfigKey(
        "password.encoder.secret",
        "password",
        None,
        "The secret that encrypts dynamically set password configs at rest; without it they are refused.",
    ),
    ConfigKey(
        "password.encoder.old.secret",
        "password",
        None,
        "The previous password.encoder.secret: stored passwords it decodes are encrypted again with the new one.",
    ),
    ConfigKey(
        "password.encoder.keyfactory.algorithm",
        "string",
        None,
        "Key derivation of the password encoder: PBKDF2WithHmacSHA512 (default), PBKDF2WithHmacSHA256, PBKDF2WithHmacSHA1.",
    ),
    ConfigKey(
        "password.encoder.cipher.algorithm",
        "string",
        "AES/CBC/PKCS5Padding",
        "Cipher of the password encoder: AES/CBC/PKCS5Padding or AES/GCM/NoPadding.",
    ),
    ConfigKey(
        "password.encoder.key.length", "int", 128, "Key length of the password encoder (bits).", 8
    ),
    ConfigKey(
        "password.encoder.iterations",
        "int",
        4096,
        "Key derivation iterations of the password encoder.",
        1024,
    ),
    ConfigKey(
        "metadata.store",
        "string",
        "file",
        "file (single node, default), memory (tests), or etcd://host:port[,host:port...][/prefix] "
        "(a cluster whose metadata lives in etcd under the key prefix, /gregor by default).",
    ),
    ConfigKey(
        "broker.session.timeout.ms",
        "int",
        9000,
        "With metadata.store=etcd://: how long a broker stays registered after its last "
        "keepalive (the TTL of its etcd lease, whole seconds, at least 2).",
        1,
    ),
    ConfigKey(
        "listener.security.protocol.map",
        "list",
        ["PLAINTEXT:PLAINTEXT", "SSL:SSL", "SASL_PLAINTEXT:SASL_PLAINTEXT", "SASL_SSL:SASL_SSL"],
        "Listener name to security protocol.",
    ),
    ConfigKey("inter.broker.listener.name", "string", None, "Listener brokers use between them."),
    ConfigKey(
        "security.inter.broker.protocol", "string", "PLAINTEXT", "Inter-broker security protocol."
    ),
    ConfigKey(
        "authorizer.class.name",
        "string",
        "",
        "The ACL authorizer: empty for none (every request allowed), or one of Kafka's names "
        "(org.apache.kafka.metadata.authorizer.StandardAuthorizer, "
        "kafka.security.authorizer.AclAuthorizer); both mean Gregor's ACL authorizer.",
    ),
    ConfigKey("super.users", "string", "", "Principals allowed everything (User:a;User:b)."),
    ConfigKey(
        "allow.everyone.if.no.acl.found",
        "boolean",
        False,
        "With an authorizer: allow a request on a resource that no ACL names.",
    ),
    ConfigKey(
        "quota.window.num", "int", 11, "Client quotas: how many windows a rate is measured over.", 1
    ),
    ConfigKey("quota.window.size.seconds", "int", 1, "Client quotas: the length of one window.", 1),
    ConfigKey(
        "console.listener",
        "string",
        None,
        "Serve the web console at http://host:port/ beside the broker (through its first PLAINTEXT "
        "listener); unset: none. `gregor console` serves it for any cluster.",
    ),
    ConfigKey(
        "schema.registry.listener",
        "string",
        None,
        "Serve a Confluent-compatible schema registry at http://host:port beside the broker "
        "(through its first PLAINTEXT listener, schemas in schema.registry.topic); unset: none. "
        "`gregor schema-registry` serves one for any cluster.",
    ),
    ConfigKey(
        "schema.registry.topic",
        "string",
        "_schemas",
        "The compacted topic the schema registry beside the broker keeps its schemas in.",
    ),
    ConfigKey(
        "metrics.listener",
        "string",
        None,
        "Serve Prometheus metrics (Kafka's JMX names) at http://host:port/metrics; unset: none.",
    ),
    ConfigKey(
        "metrics.web.config.file",
        "string",
        None,
        "A Prometheus exporter web configuration file (YAML: tls_server_config with cert_file and "
        "key_file, basic_auth_users with bcrypt hashes) for the metrics endpoint; unset: plain HTTP, no login.",
    ),
    ConfigKey(
        "metrics.max.connections",
        "int",
        16,
        "Connections the metrics endpoint serves at a time; more are answered 503 and closed.",
        1,
    ),
    ConfigKey(
        "metrics.cache.ms",
        "int",
        1000,
        "How long a rendered scrape is served again (scrapes meanwhile share one render); 0: each "
        "scrape renders anew (concurrent ones still share).",
        0,
    ),
    ConfigKey(
        "delegation.token.secret.key",
        "password",
        None,
        "The secret that signs delegation tokens (the same on every broker); unset: tokens are disabled.",
    ),
    ConfigKey(
        "delegation.token.master.key",
        "password",
        None,
        "Deprecated name of delegation.token.secret.key.",
    ),
    ConfigKey(
        "delegation.token.max.lifetime.ms",
        "long",
        7 * 24 * _HOUR_MS,
        "Longest a delegation token lives.",
        1,
    ),
    ConfigKey(
        "delegation.token.expiry.time.ms",
        "long",
        24 * _HOUR_MS,
        "How long a token lasts per creation or renewal.",
        1,
    ),
    ConfigKey(
        "delegation.token.expiry.check.interval.ms",
        "long",
        _HOUR_MS,
        "How often the controller removes expired delegation tokens.",
        1,
    ),
)

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

_BY_NAME = {k.name: k for k in BROKER_KEYS}

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
            known = _BY_NAME.get(name)
            if known is None:
                if not is_security_key(name):
                    self.unknown.append(name)
                self.values[name] = text
                continue
            key = known
            try:
                value = _TYPES[key.type](text)
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
        self._check_group_bounds()
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

    def _check_group_bounds(self) -> None:
        """Kafka's start-up checks of the group coordinator's settings (GroupCoordinatorConfig,
        ShareGroupConfig), in its order and words: each default within its bounds, the bounds
        in order, the heartbeat interval below the session timeout."""
        v = self.values

        def require(ok: bool, message: str) -> None:
            if not ok:
                raise ConfigError(message)

        def at_least(a: str, b: str) -> None:
            require(v[a] >= v[b], f"{a} must be greater than or equal to {b}")

        def at_most(a: str, b: str) -> None:
            require(v[a] <= v[b], f"{a} must be less than or equal to {b}")

        for kind in ("consumer", "share"):
            heartbeat, session = (
                f"group.{kind}.heartbeat.interval.ms",
                f"group.{kind}.session.timeout.ms",
            )
            for value, low, high in (
                (
                    heartbeat,
                    f"group.{kind}.min.heartbeat.interval.ms",
                    f"group.{kind}.max.heartbeat.interval.ms",
                ),
                (
                    session,
                    f"group.{kind}.min.session.timeout.ms",
                    f"group.{kind}.max.session.timeout.ms",
                ),
            ):
                at_least(high, low)
                at_least(value, low)
                at_most(value, high)
            require(v[heartbeat] < v[session], f"{heartbeat} must be less than {session}")
        at_least("group.share.record.lock.duration.ms", "group.share.min.record.lock.duration.ms")
        at_least("group.share.max.record.lock.duration.ms", "group.share.record.lock.duration.ms")

    def _check_schema_registry(self) -> None:
        """``schema.registry.listener``: ``http://HOST:PORT`` on loopback (the registry has no
        login yet), reaching the broker through a PLAINTEXT listener, and on a single broker
        (one registry writes a topic's ids; a cluster-wide writer election is not built yet)."""
        value = self.values["schema.registry.listener"]
        if not value:
            return
        text = str(value).strip()
        key = f"schema.registry.listener={value}"
        if text.startswith("https://"):
            raise ConfigError(
                f"{key}: https is not served yet; serve http on loopback, or put "
                "`gregor schema-registry` behind a TLS proxy"
            )
        if not text.startswith("http://"):
            raise ConfigError(f"{key}: use http://host:port (e.g. http://127.0.0.1:8081)")
        try:
            self.schema_registry_address = parse_metrics_listener(text)
        except ConfigError:
            raise ConfigError(f"{key}: use http://host:port (e.g. http://127.0.0.1:8081)") from None
        if not _is_loopback(self.schema_registry_address[0]):
            raise ConfigError(
                f"{key}: the schema registry has no login yet, so it serves on a loopback "
                "address only (127.0.0.1, ::1, localhost)"
            )
        if not any(
            self.security_protocol(listener.name) == "PLAINTEXT" for listener in self.listeners
        ):
            raise ConfigError(
                "schema.registry.listener needs a PLAINTEXT listener to reach the broker through; "
                "with security on, run `gregor schema-registry` with the client's -X login settings"
            )
        if is_etcd_url(str(self.values["metadata.store"])):
            raise ConfigError(
                "schema.registry.listener is for a single broker: in a cluster every broker's "
                "registry would allocate ids, and electing one writer is not built yet; run one "
                "`gregor schema-registry` for the cluster instead"
            )
        topic = str(self.values["schema.registry.topic"] or "")
        if not topic or len(topic) > 249 or not re.fullmatch(r"[A-Za-z0-9._-]+", topic):
            raise ConfigError(
                f"schema.registry.topic={topic!r}: a topic name (1 to 249 of [A-Za-z0-9._-])"
            )

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
        return int(self.values["log.retention.hours"]) * _HOUR_MS

    @property
    def segment_ms(self) -> int:
        if self.values["log.roll.ms"] is not None:
            return int(self.values["log.roll.ms"])
        return int(self.values["log.roll.hours"]) * _HOUR_MS

    def source_of(self, name: str) -> str:
        """Where a value came from: STATIC_BROKER_CONFIG if set in the file/overrides."""
        return "STATIC_BROKER_CONFIG" if name in self.raw else "DEFAULT_CONFIG"
