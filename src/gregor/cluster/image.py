"""The cluster metadata image: an immutable snapshot that handlers read, replaced whole on change.

Theory of operation: a ``MetadataImage`` holds everything a broker needs to know about the
cluster (cluster id, controller, registered brokers with their listener endpoints, topics by
name and by id, each partition's leader, leader_epoch, partition_epoch, replicas and ISR, and
the next free producer id, the users' salted SCRAM credentials, and the config overrides of
resources other than topics: dynamic broker configs by node id or "" for the cluster-wide
default, group configs by group id; the ACL bindings, each once, in creation order; the delegation
tokens by id, without their HMACs; the finalized feature levels). Every class here is a frozen, slotted dataclass whose containers
are tuples or read-only mappings, so any task may keep a reference to an image (or to a topic
or partition in it) without locks: nothing in it ever changes. A store publishes a change by
building a new image with ``version`` one higher and swapping its reference.

``MetadataDelta(previous, image)`` says what changed between two images. It is computed by
comparing them (never recorded by the store), so every store, and a watcher that skipped
versions, derives the same answer: topics are matched by ``topic_id`` (a topic deleted and
created again under the same name is one deletion plus one creation), partitions by index.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import TypeVar

from gregor.security.acls import AclBinding
from gregor.security.delegation_tokens import DelegationToken
from gregor.security.quotas import QuotaEntity
from gregor.security.scram import ScramCredential

__all__ = [
    "EMPTY",
    "AclBinding",
    "ConfigResourceKey",
    "DelegationToken",
    "BrokerEndpoint",
    "BrokerRegistration",
    "MetadataDelta",
    "MetadataImage",
    "PartitionImage",
    "QuotaEntity",
    "ScramCredential",
    "TopicImage",
]


#: (resource type, name) of a config resource that is not a topic: Kafka's ConfigResource
#: type codes, BROKER (4) with a node id or "" (cluster-wide default), GROUP (32) with a group id.
ConfigResourceKey = tuple[int, str]

K = TypeVar("K")
V = TypeVar("V")


def _frozen_map(items: Mapping[K, V]) -> Mapping[K, V]:
    """A read-only copy: later changes to ``items`` do not show through."""
    return MappingProxyType(dict(items))


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    """Where one listener of a broker is reached, as advertised to clients."""

    listener: str
    host: str
    port: int
    security_protocol: str


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """A live broker: its id, one endpoint per listener, rack, whether it is fenced, and its
    broker epoch: the image version of the change that registered it (Kafka's broker epoch,
    as the ZooKeeper-era controller took it from the registration's creation), so a broker
    that registers again (a restart, an expired session) has a higher one, and a request
    carrying an older epoch is fenced (STALE_BROKER_EPOCH). -1 until registered."""

    node_id: int
    endpoints: tuple[BrokerEndpoint, ...]
    rack: str | None
    fenced: bool = False
    epoch: int = -1

    def __post_init__(self) -> None:
        object.__setattr__(self, "endpoints", tuple(self.endpoints))

    def endpoint(self, listener: str) -> BrokerEndpoint | None:
        for ep in self.endpoints:
            if ep.listener == listener:
                return ep
        return None


@dataclass(frozen=True, slots=True)
class PartitionImage:
    """One partition's replication state.

    ``leader`` is -1 when the partition has no leader. ``leader_epoch`` goes up on every leader
    change; ``partition_epoch`` goes up on every change to this partition's state (the
    compare-and-set token of ``MetadataStore.alter_partition``).

    During a reassignment (KIP-455) ``replicas`` is the target set followed by the original
    replicas not in it; ``adding_replicas`` are the target's replicas that were not replicas
    before, ``removing_replicas`` the original ones not in the target. Both are empty when no
    reassignment is in progress.
    """

    partition: int
    leader: int
    leader_epoch: int
    partition_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "replicas", tuple(self.replicas))
        object.__setattr__(self, "isr", tuple(self.isr))
        object.__setattr__(self, "offline_replicas", tuple(self.offline_replicas))
        object.__setattr__(self, "adding_replicas", tuple(self.adding_replicas))
        object.__setattr__(self, "removing_replicas", tuple(self.removing_replicas))

    @property
    def reassigning(self) -> bool:
        return bool(self.adding_replicas or self.removing_replicas)

    @property
    def target_replicas(self) -> tuple[int, ...]:
        """The replicas once the reassignment completes (``replicas`` when there is none)."""
        return tuple(r for r in self.replicas if r not in self.removing_replicas)

    @property
    def original_replicas(self) -> tuple[int, ...]:
        """The replicas before the reassignment (``replicas`` when there is none)."""
        return tuple(r for r in self.replicas if r not in self.adding_replicas)


@dataclass(frozen=True, slots=True)
class TopicImage:
    """A topic: its id, partitions (``partitions[i].partition == i``) and config overrides."""

    name: str
    topic_id: uuid.UUID
    partitions: tuple[PartitionImage, ...]
    configs: Mapping[str, str]
    internal: bool

    def __post_init__(self) -> None:
        partitions = tuple(self.partitions)
        for i, p in enumerate(partitions):
            if p.partition != i:
                raise ValueError(f"topic {self.name!r}: partition at position {i} is {p.partition}")
        object.__setattr__(self, "partitions", partitions)
        object.__setattr__(self, "configs", _frozen_map(self.configs))

    def partition(self, index: int) -> PartitionImage | None:
        if 0 <= index < len(self.partitions):
            return self.partitions[index]
        return None


@dataclass(frozen=True, slots=True)
class MetadataImage:
    """The whole cluster metadata at one ``version``. Build a changed copy, never mutate."""

    version: int
    cluster_id: str
    controller_id: int
    topics: Mapping[str, TopicImage]
    topics_by_id: Mapping[uuid.UUID, TopicImage]
    brokers: Mapping[int, BrokerRegistration]
    next_producer_id: int
    #: SCRAM credentials: user name -> mechanism name -> salted credential (never a password).
    scram_credentials: Mapping[str, Mapping[str, ScramCredential]] = field(default_factory=dict)
    #: Config overrides of non-topic resources; a resource without overrides has no entry.
    config_resources: Mapping[ConfigResourceKey, Mapping[str, str]] = field(default_factory=dict)
    #: ACL bindings, each once, in the order they were created.
    acls: tuple[AclBinding, ...] = ()
    #: Client quotas: entity ((type, name or None for the default), ... sorted by type) -> key
    #: -> value (``security.quotas``); an entity without quotas has no entry.
    client_quotas: Mapping[QuotaEntity, Mapping[str, float]] = field(default_factory=dict)
    #: Delegation tokens by token id (their HMACs are derived from the secret, never stored).
    delegation_tokens: Mapping[str, DelegationToken] = field(default_factory=dict)
    #: Finalized feature levels set by UpdateFeatures (``metadata.version``, ``group.version``,
    #: ...); a feature without an entry is at the broker's default level (``broker.features``).
    features: Mapping[str, int] = field(default_factory=dict)
    #: Goes up with every controller election (etcd: the revision that created the controller
    #: key; the local stores, which have no election, keep 0): Kafka's controller epoch, which
    #: fences requests from a deposed controller (STALE_CONTROLLER_EPOCH).
    controller_epoch: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "acls", tuple(dict.fromkeys(self.acls)))
        object.__setattr__(
            self,
            "config_resources",
            _frozen_map({k: _frozen_map(v) for k, v in self.config_resources.items() if v}),
        )
        object.__setattr__(
            self,
            "client_quotas",
            _frozen_map({k: _frozen_map(v) for k, v in self.client_quotas.items() if v}),
        )
        object.__setattr__(self, "delegation_tokens", _frozen_map(self.delegation_tokens))
        object.__setattr__(self, "features", _frozen_map(self.features))
        object.__setattr__(self, "topics", _frozen_map(self.topics))
        object.__setattr__(self, "topics_by_id", _frozen_map(self.topics_by_id))
        object.__setattr__(self, "brokers", _frozen_map(self.brokers))
        object.__setattr__(
            self,
            "scram_credentials",
            _frozen_map({u: _frozen_map(c) for u, c in self.scram_credentials.items()}),
        )
        if len(self.topics) != len(self.topics_by_id) or any(
            self.topics_by_id.get(t.topic_id) is not t for t in self.topics.values()
        ):
            raise ValueError("topics and topics_by_id do not hold the same topics")

    def topic(self, name: str) -> TopicImage | None:
        return self.topics.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicImage | None:
        return self.topics_by_id.get(topic_id)

    def partition(self, topic: str, index: int) -> PartitionImage | None:
        t = self.topics.get(topic)
        return None if t is None else t.partition(index)

    def scram_credential(self, user: str, mechanism: str) -> ScramCredential | None:
        return self.scram_credentials.get(user, {}).get(mechanism)

    def config_resource(self, resource_type: int, name: str) -> Mapping[str, str]:
        """The overrides of a non-topic config resource (empty when it has none)."""
        return self.config_resources.get((resource_type, name), _NO_CONFIGS)

    def live_broker_ids(self) -> list[int]:
        """Registered, unfenced brokers, lowest id first."""
        return sorted(b.node_id for b in self.brokers.values() if not b.fenced)


_NO_CONFIGS: Mapping[str, str] = _frozen_map({})

EMPTY = MetadataImage(
    version=0,
    cluster_id="",
    controller_id=-1,
    topics={},
    topics_by_id={},
    brokers={},
    next_producer_id=0,
)


@dataclass(frozen=True)
class MetadataDelta:
    """What changed from ``previous`` to ``image``; each property is computed once, on first use.

    - ``created_topics`` / ``deleted_topics``: topics whose id is only in the new / old image.
    - ``changed_partitions``: topic name -> {index: new PartitionImage} for every partition that
      is new (a created topic's, or one added by CreatePartitions) or differs from before.
    - ``changed_configs``: names of topics that exist in both images with different overrides
      (a created topic's overrides come with it in ``created_topics``).
    - ``changed_brokers``: node id -> new registration, or None when it was unregistered.
    - ``changed_config_resources``: (resource type, name) of every non-topic config resource
      whose overrides differ (an emptied set is a change too).
    """

    previous: MetadataImage
    image: MetadataImage

    @cached_property
    def created_topics(self) -> tuple[TopicImage, ...]:
        old = self.previous.topics_by_id
        return tuple(t for t in self.image.topics.values() if t.topic_id not in old)

    @cached_property
    def deleted_topics(self) -> tuple[TopicImage, ...]:
        new = self.image.topics_by_id
        return tuple(t for t in self.previous.topics.values() if t.topic_id not in new)

    @cached_property
    def changed_partitions(self) -> Mapping[str, Mapping[int, PartitionImage]]:
        out: dict[str, Mapping[int, PartitionImage]] = {}
        for topic in self.image.topics.values():
            before = self.previous.topics_by_id.get(topic.topic_id)
            if before is topic:
                continue
            changed = {
                p.partition: p
                for p in topic.partitions
                if before is None or before.partition(p.partition) != p
            }
            if changed:
                out[topic.name] = MappingProxyType(changed)
        return MappingProxyType(out)

    @cached_property
    def changed_configs(self) -> frozenset[str]:
        out = set()
        for topic in self.image.topics.values():
            before = self.previous.topics_by_id.get(topic.topic_id)
            if before is not None and before is not topic and before.configs != topic.configs:
                out.add(topic.name)
        return frozenset(out)

    @cached_property
    def changed_brokers(self) -> Mapping[int, BrokerRegistration | None]:
        old, new = self.previous.brokers, self.image.brokers
        out: dict[int, BrokerRegistration | None] = {
            node_id: reg for node_id, reg in new.items() if old.get(node_id) != reg
        }
        out.update({node_id: None for node_id in old if node_id not in new})
        return MappingProxyType(out)

    @cached_property
    def changed_config_resources(self) -> frozenset[ConfigResourceKey]:
        old, new = self.previous.config_resources, self.image.config_resources
        return frozenset(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))

    @property
    def is_empty(self) -> bool:
        """True when no topic, partition, config or broker changed (e.g. a producer-id block)."""
        return not (
            self.changed_config_resources
            or self.created_topics
            or self.deleted_topics
            or self.changed_partitions
            or self.changed_configs
            or self.changed_brokers
        )
