"""Dynamic broker configs: which keys may change at run time, at which level, and the layers.

Theory of operation. Kafka lets AlterConfigs / IncrementalAlterConfigs change some broker
configs without a restart, each with a documented "Dynamic Update Mode": *read-only* (only
``server.properties``), *per-broker* (resource name = the node id) or *cluster-wide* (also as
the cluster default, resource name ""). The overrides live in the metadata image as the
config resources ``(BROKER, "<node id>")`` and ``(BROKER, "")`` (so they survive a restart and,
with a shared store, reach every broker). A broker key resolves, first match wins, from:

1. this broker's dynamic override (DYNAMIC_BROKER_CONFIG),
2. the cluster-wide dynamic default (DYNAMIC_DEFAULT_BROKER_CONFIG),
3. ``server.properties`` (STATIC_BROKER_CONFIG),
4. Kafka's default (DEFAULT_CONFIG).

:func:`broker_layers` gives layers 1-3 in that order, for describing broker and topic configs;
:func:`effective_props` merges them for the parts of the broker that apply changes at run time
(the log defaults: ``log.retention.*``, ``log.segment.bytes``, ``message.max.bytes``,
``log.cleanup.policy``, ... and ``min.insync.replicas``; and the connection limits; see
``MetadataPublisher``). Keys Gregor accepts but does not act on (thread counts, SASL
settings) are stored and described.

Listener configs take Kafka's ``listener.name.<l>.`` prefix (``listener.name.<l>.<mechanism>.``
for a mechanism's ``sasl.jaas.config``): the SSL key and trust store settings only that way,
per broker; ``max.connections`` and ``max.connection.creation.rate`` also cluster-wide.

Password configs (Kafka's PASSWORD type: ``sasl.jaas.config``, the ``ssl.*`` passwords, keys and
certificates, with or without a listener prefix) are never described (value null,
``is_sensitive`` true) and are stored encrypted with ``password.encoder.secret``
(``gregor.security.password_encoder``); without that secret they are refused ("Password encoder
secret not configured", as Kafka's brokers refuse them). ``decode_passwords`` gives the stored
values back in clear where the broker needs them (validating a new override set); at start,
``secure_stored_passwords`` stores again, encrypted with the current secret, this broker's
password overrides kept in clear or under ``password.encoder.old.secret``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence

from gregor.broker.common.errors import kafka_error
from gregor.broker.common.events import log_event
from gregor.broker.config.broker_config import BrokerConfig, ConfigError
from gregor.broker.config.topic_configs import ConfigResourceType, ConfigSource, ConfigType
from gregor.cluster.image import MetadataImage
from gregor.cluster.store import MetadataStore
from gregor.protocol.errors import ErrorCode, KafkaError
from gregor.security.password_encoder import PasswordDecodeError, PasswordEncoder, looks_encoded

log = logging.getLogger("gregor.broker")

__all__ = [
    "CLUSTER_WIDE",
    "DYNAMIC_BROKER_CONFIGS",
    "PER_BROKER",
    "Layers",
    "broker_layers",
    "config_type",
    "decode_passwords",
    "effective_props",
    "encode_passwords",
    "is_password_config",
    "secure_stored_passwords",
    "validate_broker_overrides",
]

PER_BROKER = "per-broker"
CLUSTER_WIDE = "cluster-wide"

#: A broker key's value sources, most specific first.
Layers = Sequence[tuple[Mapping[str, str], ConfigSource]]

_LOG_KEYS = (
    "log.segment.bytes",
    "log.roll.ms",
    "log.roll.jitter.ms",
    "log.index.size.max.bytes",
    "log.flush.interval.messages",
    "log.flush.interval.ms",
    "log.retention.bytes",
    "log.retention.ms",
    "message.max.bytes",
    "log.index.interval.bytes",
    "log.cleaner.delete.retention.ms",
    "log.cleaner.min.compaction.lag.ms",
    "log.cleaner.max.compaction.lag.ms",
    "log.segment.delete.delay.ms",
    "log.cleaner.min.cleanable.ratio",
    "log.cleanup.policy",
    "unclean.leader.election.enable",
    "min.insync.replicas",
    "compression.type",
    "compression.gzip.level",
    "compression.lz4.level",
    "compression.zstd.level",
    "log.preallocate",
    "log.message.timestamp.type",
    "log.message.timestamp.before.max.ms",
    "log.message.timestamp.after.max.ms",
    "log.message.timestamp.difference.max.ms",
    "log.local.retention.ms",
    "log.local.retention.bytes",
)
_CLUSTER_WIDE_KEYS = (
    "background.threads",
    "num.io.threads",
    "num.network.threads",
    "num.replica.fetchers",
    "num.recovery.threads.per.data.dir",
    "log.cleaner.threads",
    "log.cleaner.dedupe.buffer.size",
    "log.cleaner.io.buffer.size",
    "log.cleaner.io.buffer.load.factor",
    "log.cleaner.io.max.bytes.per.second",
    "log.cleaner.backoff.ms",
    "max.connections",
    "max.connections.per.ip",
    "max.connections.per.ip.overrides",
    "max.connection.creation.rate",
    "producer.id.expiration.ms",
    "transaction.partition.verification.enable",
    "metric.reporters",
    "leader.replication.throttled.rate",
    "follower.replication.throttled.rate",
    "replica.alter.log.dirs.io.max.bytes.per.second",
)
# Kafka also updates listeners, advertised.listeners and listener.security.protocol.map per
# broker; Gregor cannot rebind a running listener, so those stay read-only here.
_PER_BROKER_KEYS = (
    "sasl.enabled.mechanisms",
    "sasl.jaas.config",
    "sasl.kerberos.service.name",
    "sasl.kerberos.kinit.cmd",
    "sasl.kerberos.ticket.renew.window.factor",
    "sasl.kerberos.ticket.renew.jitter",
    "sasl.kerberos.min.time.before.relogin",
    "sasl.login.refresh.window.factor",
    "sasl.login.refresh.window.jitter",
    "sasl.login.refresh.min.period.seconds",
    "sasl.login.refresh.buffer.seconds",
    "sasl.mechanism.inter.broker.protocol",
)

#: The broker configs Kafka lets change dynamically, with their update mode (Kafka's broker
#: config documentation). Every other key is read-only.
DYNAMIC_BROKER_CONFIGS: dict[str, str] = {
    **{k: CLUSTER_WIDE for k in _LOG_KEYS + _CLUSTER_WIDE_KEYS},
    **{k: PER_BROKER for k in _PER_BROKER_KEYS},
}

#: Kafka's ``SslConfigs.RECONFIGURABLE_CONFIGS``: dynamic only with a listener prefix, per broker.
SSL_LISTENER_CONFIGS = frozenset(
    {
        "ssl.keystore.type",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.key.password",
        "ssl.truststore.type",
        "ssl.truststore.location",
        "ssl.truststore.password",
        "ssl.keystore.certificate.chain",
        "ssl.keystore.key",
        "ssl.truststore.certificates",
    }
)
#: Listener configs that may also be set for all brokers (Kafka's ClusterLevelListenerConfigs).
_CLUSTER_LEVEL_LISTENER_CONFIGS = frozenset({"max.connections", "max.connection.creation.rate"})
#: Per-mechanism listener configs (``listener.name.<l>.<mechanism>.<key>``).
_MECHANISM_CONFIGS = (
    "sasl.jaas.config",
    "sasl.server.callback.handler.class",
    "connections.max.reauth.ms",
    "sasl.login.callback.handler.class",
    "sasl.login.class",
)
#: Kafka's PASSWORD-type broker configs.
PASSWORD_CONFIGS = frozenset(
    {
        "sasl.jaas.config",
        "ssl.keystore.password",
        "ssl.key.password",
        "ssl.truststore.password",
        "ssl.keystore.key",
        "ssl.keystore.certificate.chain",
        "ssl.truststore.certificates",
        "delegation.token.secret.key",
        "delegation.token.master.key",
        "password.encoder.secret",
        "password.encoder.old.secret",
    }
)
#: Kafka's types of the dynamic broker configs Gregor stores without a key of its own.
_DYNAMIC_TYPES: dict[str, ConfigType] = {
    "background.threads": ConfigType.INT,
    "follower.replication.throttled.rate": ConfigType.LONG,
    "leader.replication.throttled.rate": ConfigType.LONG,
    "log.cleaner.dedupe.buffer.size": ConfigType.LONG,
    "log.cleaner.io.buffer.load.factor": ConfigType.DOUBLE,
    "log.cleaner.io.buffer.size": ConfigType.INT,
    "log.cleaner.io.max.bytes.per.second": ConfigType.DOUBLE,
    "log.cleaner.threads": ConfigType.INT,
    "log.message.timestamp.difference.max.ms": ConfigType.LONG,
    "max.connection.creation.rate": ConfigType.INT,
    "metric.reporters": ConfigType.LIST,
    "num.recovery.threads.per.data.dir": ConfigType.INT,
    "num.replica.fetchers": ConfigType.INT,
    "replica.alter.log.dirs.io.max.bytes.per.second": ConfigType.LONG,
    "sasl.enabled.mechanisms": ConfigType.LIST,
    "sasl.kerberos.kinit.cmd": ConfigType.STRING,
    "sasl.kerberos.min.time.before.relogin": ConfigType.LONG,
    "sasl.kerberos.service.name": ConfigType.STRING,
    "sasl.kerberos.ticket.renew.jitter": ConfigType.DOUBLE,
    "sasl.kerberos.ticket.renew.window.factor": ConfigType.DOUBLE,
    "sasl.login.refresh.buffer.seconds": ConfigType.SHORT,
    "sasl.login.refresh.min.period.seconds": ConfigType.SHORT,
    "sasl.login.refresh.window.factor": ConfigType.DOUBLE,
    "sasl.login.refresh.window.jitter": ConfigType.DOUBLE,
    "sasl.mechanism.inter.broker.protocol": ConfigType.STRING,
    "transaction.partition.verification.enable": ConfigType.BOOLEAN,
    "ssl.keystore.type": ConfigType.STRING,
    "ssl.keystore.location": ConfigType.STRING,
    "ssl.truststore.type": ConfigType.STRING,
    "ssl.truststore.location": ConfigType.STRING,
    "sasl.server.callback.handler.class": ConfigType.CLASS,
    "connections.max.reauth.ms": ConfigType.LONG,
    "sasl.login.callback.handler.class": ConfigType.CLASS,
    "sasl.login.class": ConfigType.CLASS,
    "max.connections": ConfigType.INT,
    "sasl.server.max.receive.size": ConfigType.INT,
}

_BROKER = int(ConfigResourceType.BROKER)
_LISTENER_PREFIX = "listener.name."


def listener_base(name: str) -> str | None:
    """The config a ``listener.name.<l>.[<mechanism>.]<key>`` name sets (``<key>``), None for
    a name without the listener prefix."""
    if not name.startswith(_LISTENER_PREFIX):
        return None
    parts = name.split(".", 3)
    if len(parts) < 4 or not parts[2]:
        return ""
    rest = parts[3]
    for key in _MECHANISM_CONFIGS:
        if rest.endswith("." + key) and "." not in rest[: -len(key) - 1]:
            return key
    return rest


def is_password_config(name: str) -> bool:
    """Kafka's ``isPasswordConfig``: a PASSWORD-type config, with or without a listener prefix."""
    base = listener_base(name)
    return (base if base is not None else name) in PASSWORD_CONFIGS


def config_type(name: str, known: Mapping[str, ConfigType]) -> ConfigType | None:
    """The type of a broker config (``known``: the broker's own keys), listener prefix or not;
    None when it is unknown (Kafka then treats it as sensitive)."""
    if is_password_config(name):
        return ConfigType.PASSWORD
    base = listener_base(name)
    key = base if base is not None else name
    found = known.get(key)
    return found if found is not None else _DYNAMIC_TYPES.get(key)


def dynamic_mode(name: str) -> str | None:
    """How ``name`` may change at run time (PER_BROKER, CLUSTER_WIDE), None: read-only."""
    base = listener_base(name)
    if base is None:
        return DYNAMIC_BROKER_CONFIGS.get(name)
    if base in _CLUSTER_LEVEL_LISTENER_CONFIGS:
        return CLUSTER_WIDE
    if (
        base in SSL_LISTENER_CONFIGS
        or base in _MECHANISM_CONFIGS
        or DYNAMIC_BROKER_CONFIGS.get(base) == PER_BROKER
    ):
        return PER_BROKER
    return None


def encode_passwords(props: Mapping[str, str], encoder: PasswordEncoder | None) -> dict[str, str]:
    """``props`` with every password config's clear value encrypted (for storing)."""
    out = dict(props)
    for name, value in props.items():
        if is_password_config(name) and not looks_encoded(value):
            if encoder is None:
                raise ValueError("Password encoder secret not configured")
            out[name] = encoder.encode(value)
    return out


def decode_passwords(
    props: Mapping[str, str],
    encoder: PasswordEncoder | None,
    old_encoder: PasswordEncoder | None = None,
) -> dict[str, str]:
    """``props`` with every stored password config decoded (with ``password.encoder.secret``,
    else ``password.encoder.old.secret``); one neither decodes is left out and logged, as
    Kafka ignores it ("could not be decoded, ignoring")."""
    out = dict(props)
    for name, value in props.items():
        if not (is_password_config(name) and looks_encoded(value)):
            continue
        for candidate in (encoder, old_encoder):
            if candidate is None:
                continue
            try:
                out[name] = candidate.decode(value)
                break
            except PasswordDecodeError:
                continue
        else:
            del out[name]
            log_event(
                log,
                "config.password_undecodable",
                logging.ERROR,
                config=name,
                reason="Dynamic password config could not be decoded with password.encoder.secret "
                "(or password.encoder.old.secret), ignoring",
            )
    return out


def broker_layers(image: MetadataImage, node_id: int, static: Mapping[str, str]) -> Layers:
    """The value sources of this broker's keys, most specific first."""
    return (
        (image.config_resource(_BROKER, str(node_id)), ConfigSource.DYNAMIC_BROKER_CONFIG),
        (image.config_resource(_BROKER, ""), ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        (static, ConfigSource.STATIC_BROKER_CONFIG),
    )


def effective_props(layers: Layers) -> dict[str, str]:
    """One ``server.properties``-like map: each key from its most specific layer."""
    out: dict[str, str] = {}
    for props, _ in reversed(layers):
        out.update(props)
    return out


def _scala_set(names: Iterable[str]) -> str:
    return "Set(" + ", ".join(sorted(names)) + ")"


def validate_broker_overrides(name: str, overrides: Mapping[str, str], layers: Layers) -> None:
    """Refuse a new override set for the broker resource ``name`` ("" = cluster default) as
    Kafka 4 does (INVALID_REQUEST with the reason alone: ZooKeeper-era Kafka put "Invalid
    config value for resource ..." before it, Kafka's KRaft brokers do not): read-only keys,
    SSL store settings without a listener prefix, per-broker keys at the cluster level,
    password configs without ``password.encoder.secret``, values the broker cannot use.
    ``layers`` are the current ones, passwords in clear (``decode_passwords``); the set (in
    clear too) replaces the layer of ``name``. (Kafka's ZooKeeper-mode brokers answered the
    missing secret with INVALID_CONFIG and checked it only when storing; it is checked with
    everything else here, so ``validate_only`` predicts the outcome.)"""
    per_broker = name != ""

    def refuse(why: str) -> KafkaError:
        return kafka_error(ErrorCode.INVALID_REQUEST, why)

    read_only = [k for k in overrides if dynamic_mode(k) is None and k not in SSL_LISTENER_CONFIGS]
    if read_only:
        raise refuse(f"Cannot update these configs dynamically: {_scala_set(read_only)}")
    unprefixed = [k for k in overrides if k in SSL_LISTENER_CONFIGS]
    if unprefixed:
        raise refuse(
            "These security configs can be dynamically updated only per-listener using the listener "
            f"prefix: {_scala_set(unprefixed)}"
        )
    if not per_broker:
        only_per_broker = [k for k in overrides if dynamic_mode(k) == PER_BROKER]
        if only_per_broker:
            raise refuse(
                "Cannot update these configs at default cluster level, broker id must be "
                f"specified: {_scala_set(only_per_broker)}"
            )
        if any(is_password_config(k) for k in overrides):
            raise refuse("Password config can be defined only at broker level")
    replaced = [
        (
            overrides
            if source
            == (
                ConfigSource.DYNAMIC_BROKER_CONFIG
                if per_broker
                else ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
            )
            else props,
            source,
        )
        for props, source in layers
    ]
    try:
        config = BrokerConfig(effective_props(replaced))
    except ConfigError as e:
        raise refuse(str(e)) from None
    if config.password_encoder is None and any(is_password_config(k) for k in overrides):
        raise refuse("Password encoder secret not configured")


def reencode_passwords(
    stored: Mapping[str, str], encoder: PasswordEncoder | None, old_encoder: PasswordEncoder | None
) -> dict[str, str] | None:
    """What a broker override set should be stored as at start, None when it is fine: with
    ``password.encoder.secret``, password configs kept in clear (by an older Gregor) or
    encoded with ``password.encoder.old.secret`` are encrypted with the current secret (as
    Kafka's brokers re-encode at start); values no secret decodes are left for
    ``decode_passwords`` to report. Without a secret nothing changes (see the warning the
    broker logs)."""
    if encoder is None:
        return None
    new = dict(stored)
    for name, value in stored.items():
        if not is_password_config(name):
            continue
        if not looks_encoded(value):
            new[name] = encoder.encode(value)
            continue
        try:
            encoder.decode(value)
            continue
        except PasswordDecodeError:
            pass
        if old_encoder is not None:
            try:
                new[name] = encoder.encode(old_encoder.decode(value))
            except PasswordDecodeError:
                pass
    return new if new != dict(stored) else None


async def secure_stored_passwords(store: MetadataStore, node_id: int, config: BrokerConfig) -> None:
    """Dynamic password configs of this broker (and the cluster default) kept in clear or
    with ``password.encoder.old.secret`` are stored again, encrypted with
    ``password.encoder.secret``; without a secret, configs kept in clear are reported."""
    broker = int(ConfigResourceType.BROKER)
    for name in (str(node_id), ""):
        stored = store.image.config_resource(broker, name)
        new = reencode_passwords(stored, config.password_encoder, config.old_password_encoder)
        if new is not None:
            await store.alter_config_resource(broker, name, new)
            log_event(log, "config.passwords_encrypted", resource=f"BROKER:{name}")
        elif config.password_encoder is None:
            clear = sorted(
                k for k, v in stored.items() if is_password_config(k) and not looks_encoded(v)
            )
            if clear:
                log_event(
                    log,
                    "config.passwords_in_clear",
                    logging.WARNING,
                    resource=f"BROKER:{name}",
                    configs=",".join(clear),
                    reason="set password.encoder.secret to keep dynamic password configs encrypted",
                )
