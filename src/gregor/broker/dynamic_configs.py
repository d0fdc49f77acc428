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
``log.cleanup.policy``, ... and ``min.insync.replicas``; see ``MetadataPublisher``). Keys
Gregor accepts but does not act on (thread counts, SASL settings) are stored and described.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from gregor.broker.config import BrokerConfig, ConfigError
from gregor.broker.errors import kafka_error
from gregor.broker.topic_configs import ConfigResourceType, ConfigSource
from gregor.cluster.image import MetadataImage
from gregor.protocol.errors import ErrorCode, KafkaError

__all__ = [
    "CLUSTER_WIDE",
    "DYNAMIC_BROKER_CONFIGS",
    "PER_BROKER",
    "Layers",
    "broker_layers",
    "effective_props",
    "validate_broker_overrides",
]

PER_BROKER = "per-broker"
CLUSTER_WIDE = "cluster-wide"

#: A broker key's value sources, most specific first.
Layers = Sequence[tuple[Mapping[str, str], ConfigSource]]

_LOG_KEYS = (
    "log.segment.bytes", "log.roll.ms", "log.roll.jitter.ms", "log.index.size.max.bytes",
    "log.flush.interval.messages", "log.flush.interval.ms", "log.retention.bytes",
    "log.retention.ms", "message.max.bytes", "log.index.interval.bytes",
    "log.cleaner.delete.retention.ms", "log.cleaner.min.compaction.lag.ms",
    "log.cleaner.max.compaction.lag.ms", "log.segment.delete.delay.ms",
    "log.cleaner.min.cleanable.ratio", "log.cleanup.policy", "unclean.leader.election.enable",
    "min.insync.replicas", "compression.type", "compression.gzip.level", "compression.lz4.level",
    "compression.zstd.level", "log.preallocate", "log.message.timestamp.type",
    "log.message.timestamp.before.max.ms", "log.message.timestamp.after.max.ms",
    "log.message.timestamp.difference.max.ms", "log.local.retention.ms", "log.local.retention.bytes",
)
_CLUSTER_WIDE_KEYS = (
    "background.threads", "num.io.threads", "num.network.threads", "num.replica.fetchers",
    "num.recovery.threads.per.data.dir", "log.cleaner.threads", "log.cleaner.dedupe.buffer.size",
    "log.cleaner.io.buffer.size", "log.cleaner.io.buffer.load.factor",
    "log.cleaner.io.max.bytes.per.second", "log.cleaner.backoff.ms", "max.connections",
    "max.connections.per.ip", "max.connections.per.ip.overrides", "max.connection.creation.rate",
    "producer.id.expiration.ms", "transaction.partition.verification.enable", "metric.reporters",
    "leader.replication.throttled.rate", "follower.replication.throttled.rate",
    "replica.alter.log.dirs.io.max.bytes.per.second",
)
# Kafka also updates listeners, advertised.listeners and listener.security.protocol.map per
# broker; Gregor cannot rebind a running listener, so those stay read-only here.
_PER_BROKER_KEYS = (
    "sasl.enabled.mechanisms", "sasl.jaas.config", "sasl.kerberos.service.name",
    "sasl.kerberos.kinit.cmd", "sasl.kerberos.ticket.renew.window.factor",
    "sasl.kerberos.ticket.renew.jitter", "sasl.kerberos.min.time.before.relogin",
    "sasl.login.refresh.window.factor", "sasl.login.refresh.window.jitter",
    "sasl.login.refresh.min.period.seconds", "sasl.login.refresh.buffer.seconds",
    "sasl.mechanism.inter.broker.protocol",
)

#: The broker configs Kafka lets change dynamically, with their update mode (Kafka's broker
#: config documentation). Every other key is read-only.
DYNAMIC_BROKER_CONFIGS: dict[str, str] = {
    **{k: CLUSTER_WIDE for k in _LOG_KEYS + _CLUSTER_WIDE_KEYS},
    **{k: PER_BROKER for k in _PER_BROKER_KEYS},
}

_BROKER = int(ConfigResourceType.BROKER)


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


def validate_broker_overrides(
    name: str, overrides: Mapping[str, str], layers: Layers
) -> None:
    """Refuse a new override set for the broker resource ``name`` ("" = cluster default) as
    Kafka does (INVALID_REQUEST, "Invalid config value for resource ...: ..."): read-only keys,
    per-broker keys at the cluster level, values the broker cannot use. ``layers`` are the
    current ones; the set replaces the layer of ``name``."""
    per_broker = name != ""

    def refuse(why: str) -> KafkaError:
        return kafka_error(
            ErrorCode.INVALID_REQUEST,
            f"Invalid config value for resource ConfigResource(type=BROKER, name='{name}'): {why}",
        )

    read_only = [k for k in overrides if k not in DYNAMIC_BROKER_CONFIGS]
    if read_only:
        raise refuse(f"Cannot update these configs dynamically: {_scala_set(read_only)}")
    if not per_broker:
        only_per_broker = [k for k in overrides if DYNAMIC_BROKER_CONFIGS[k] == PER_BROKER]
        if only_per_broker:
            raise refuse(
                "Cannot update these configs at default cluster level, broker id must be "
                f"specified: {_scala_set(only_per_broker)}"
            )
    replaced = [
        (overrides if source == (
            ConfigSource.DYNAMIC_BROKER_CONFIG if per_broker else ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
        ) else props, source)
        for props, source in layers
    ]
    try:
        BrokerConfig(effective_props(replaced))
    except ConfigError as e:
        raise refuse(str(e)) from None
