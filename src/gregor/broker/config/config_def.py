"""The broker's known configuration keys (Kafka's ``ConfigDef`` for ``KafkaConfig``): each key's
name, type, default and documentation, in Kafka's vocabulary, and the parsers of the types.

A table, no state: ``BrokerConfig`` (``broker_config``) reads ``server.properties`` and the
overrides against it, DescribeConfigs reports its types and defaults, and the dynamic configs
check names and types with it. The defaults are chosen to work on a laptop; where Kafka's own
default would not work on one node (replication factor 3 for internal topics) the single-node
value is the default here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gregor.broker.config.schema_registry_security import (
    CLIENT_SETTINGS as SCHEMA_REGISTRY_CLIENT_SETTINGS,
)


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


#: A key's value: parsed by its type's parser (``TYPES``), or its default.
ConfigValue = bool | int | float | str | list[str] | None

TYPES: dict[str, Callable[[str], ConfigValue]] = {
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
    default: ConfigValue
    doc: str
    minimum: int | None = None


HOUR_MS = 3600 * 1000

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
        "The catalog's URI (a REST catalog's http(s):// URL, or a SQL catalog's database URL).",
    ),
    ConfigKey(
        "iceberg.warehouse",
        "string",
        None,
        "Where tables' files go; default the iceberg/warehouse directory of the data directory "
        "(a REST catalog's warehouse property, given as is; unset, the server's own).",
    ),
    ConfigKey("iceberg.namespace", "string", "gregor", "The namespace of topics' tables."),
    ConfigKey("iceberg.s3.endpoint", "string", None, "An S3-compatible store's URL (s3.endpoint)."),
    ConfigKey("iceberg.s3.region", "string", None, "The S3 region; us-east-1 with an endpoint."),
    ConfigKey("iceberg.s3.path-style-access", "boolean", None, "Buckets in the URL's path."),
    ConfigKey("iceberg.s3.access-key-id", "string", None, "The S3 access key id."),
    ConfigKey("iceberg.s3.secret-access-key", "password", None, "The S3 secret access key."),
    ConfigKey("iceberg.s3.session-token", "password", None, "An S3 session token."),
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
        "Serve a Confluent-compatible schema registry at http://host:port (loopback) or "
        "https://host:port (the broker's PEM ssl.keystore.*) beside the broker (through its "
        "first PLAINTEXT listener, schemas in schema.registry.topic); unset: none. "
        "`gregor schema-registry` serves one for any cluster.",
    ),
    ConfigKey(
        "confluent.schema.registry.url",
        "string",
        None,
        "The schema registry (http(s)://host:port, comma-separated) a topic's schema ID "
        "validation asks (confluent.value.schema.validation); unset: the registry served at "
        "schema.registry.listener, if any.",
    ),
    ConfigKey(
        "schema.registry.topic",
        "string",
        "_schemas",
        "The compacted topic the schema registry beside the broker keeps its schemas in.",
    ),
    ConfigKey(
        "schema.registry.group.id",
        "string",
        "schema-registry",
        "The Kafka group the registries beside a cluster's brokers (and any `gregor "
        "schema-registry` of the cluster) elect their one writer in; the others forward writes.",
    ),
    ConfigKey(
        "schema.registry.leader.eligibility",
        "boolean",
        True,
        "Whether the registry beside this broker may be elected the writer of its topic.",
    ),
    ConfigKey(
        "schema.registry.authentication.method",
        "string",
        "NONE",
        "NONE or BASIC: every request to the registry beside the broker needs HTTP basic auth "
        "with a user of the broker's first SASL_PLAINTEXT listener (PLAIN or SCRAM), checked by "
        "logging in through that listener.",
    ),
    ConfigKey(
        "schema.registry.authorizer",
        "string",
        "none",
        "none or acl: the registry beside the broker enforces the registry ACLs kept in "
        "schema.registry.topic + _acl (gregor acls --subject / --registry); super.users may do "
        "everything. acl needs schema.registry.authentication.method=BASIC.",
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
        7 * 24 * HOUR_MS,
        "Longest a delegation token lives.",
        1,
    ),
    ConfigKey(
        "delegation.token.expiry.time.ms",
        "long",
        24 * HOUR_MS,
        "How long a token lasts per creation or renewal.",
        1,
    ),
    ConfigKey(
        "delegation.token.expiry.check.interval.ms",
        "long",
        HOUR_MS,
        "How often the controller removes expired delegation tokens.",
        1,
    ),
    *(ConfigKey(*setting) for setting in SCHEMA_REGISTRY_CLIENT_SETTINGS),
)
BY_NAME = {k.name: k for k in BROKER_KEYS}
