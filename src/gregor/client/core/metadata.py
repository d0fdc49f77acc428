"""The client's picture of the cluster: brokers, topics, partitions and their leaders.

Filled from Metadata responses (:meth:`ClusterMetadata.update`) and patched in place by
KIP-951 leader hints (:meth:`ClusterMetadata.update_leader`): a Produce or Fetch response that
says NOT_LEADER_OR_FOLLOWER carries the new leader and its epoch, and the node's endpoint, so
the client redirects without a full refresh. A hint older than the epoch we know is ignored.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

from gregor.protocol.messages import MetadataResponse


class TopicPartition(NamedTuple):
    topic: str
    partition: int


class NodeEndpoint(Protocol):
    """A broker's endpoint as a KIP-951 leader hint carries it (Produce and Fetch responses'
    ``node_endpoints``)."""

    @property
    def node_id(self) -> int: ...
    @property
    def host(self) -> str: ...
    @property
    def port(self) -> int: ...
    @property
    def rack(self) -> str | None: ...


@dataclass
class BrokerMetadata:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass
class PartitionMetadata:
    topic: str
    partition: int
    leader: int
    leader_epoch: int = -1
    replicas: list[int] = field(default_factory=list)
    isr: list[int] = field(default_factory=list)
    offline_replicas: list[int] = field(default_factory=list)
    error_code: int = 0


@dataclass
class TopicMetadata:
    name: str
    topic_id: uuid.UUID
    partitions: dict[int, PartitionMetadata]
    is_internal: bool = False
    error_code: int = 0


class ClusterMetadata:
    def __init__(self) -> None:
        self.brokers: dict[int, BrokerMetadata] = {}
        self.topics: dict[str, TopicMetadata] = {}
        self.topic_names: dict[uuid.UUID, str] = {}
        self.cluster_id: str | None = None
        self.controller_id: int = -1
        self.last_refresh = 0.0
        self.version = 0
        #: The last error each requested topic came back with (removed once it comes back
        #: without one): a caller waiting for a topic stops at one that cannot get better.
        self.topic_errors: dict[str, int] = {}

    def update(self, resp: MetadataResponse, requested: list[str] | None) -> dict[str, int]:
        """Apply a Metadata response; returns {topic: error_code} for topics with errors.

        ``requested`` None means the response lists every topic (topics the cluster no longer
        has are dropped); otherwise only the named topics are replaced.
        """
        self.brokers = {
            b.node_id: BrokerMetadata(b.node_id, b.host, b.port, b.rack) for b in resp.brokers
        }
        self.cluster_id = resp.cluster_id
        self.controller_id = resp.controller_id
        errors: dict[str, int] = {}
        seen: set[str] = set()
        for t in resp.topics:
            name = t.name
            if name is None:
                continue
            seen.add(name)
            if t.error_code:
                errors[name] = t.error_code
                self.topic_errors[name] = t.error_code
                if t.error_code in (3, 17, 29):  # unknown topic, invalid topic, not authorized
                    old = self.topics.pop(name, None)
                    if old is not None:
                        self.topic_names.pop(old.topic_id, None)
                    continue
                if not t.partitions:
                    continue
            parts = {}
            for p in t.partitions:
                parts[p.partition_index] = PartitionMetadata(
                    name,
                    p.partition_index,
                    p.leader_id,
                    p.leader_epoch,
                    list(p.replica_nodes),
                    list(p.isr_nodes),
                    list(p.offline_replicas),
                    p.error_code,
                )
            if not t.error_code:
                self.topic_errors.pop(name, None)
            tm = TopicMetadata(name, t.topic_id, parts, t.is_internal, t.error_code)
            self.topics[name] = tm
            if t.topic_id.int:
                self.topic_names[t.topic_id] = name
        if requested is None:
            for name in list(self.topics):
                if name not in seen:
                    old = self.topics.pop(name)
                    self.topic_names.pop(old.topic_id, None)
        self.last_refresh = time.monotonic()
        self.version += 1
        return errors

    def update_leader(
        self,
        topic: str,
        partition: int,
        leader_id: int,
        leader_epoch: int,
        endpoints: Sequence[NodeEndpoint] = (),
    ) -> bool:
        """Apply a KIP-951 leader hint; True when it moved the leader."""
        for e in endpoints:
            self.brokers[e.node_id] = BrokerMetadata(e.node_id, e.host, e.port, e.rack)
        if leader_id < 0:
            return False
        tm = self.topics.get(topic)
        if tm is None:
            return False
        pm = tm.partitions.get(partition)
        if pm is None or leader_epoch < pm.leader_epoch or leader_id not in self.brokers:
            return False
        changed = pm.leader != leader_id or pm.leader_epoch != leader_epoch
        pm.leader = leader_id
        pm.leader_epoch = leader_epoch
        if changed:
            self.version += 1
        return changed

    def partitions_for(self, topic: str) -> list[int] | None:
        tm = self.topics.get(topic)
        if tm is None:
            return None
        return sorted(tm.partitions)

    def partition(self, tp: TopicPartition) -> PartitionMetadata | None:
        tm = self.topics.get(tp.topic)
        return None if tm is None else tm.partitions.get(tp.partition)

    def leader_for(self, tp: TopicPartition) -> int:
        """The leader's node id, or -1 when unknown or unavailable."""
        pm = self.partition(tp)
        if pm is None or pm.leader < 0 or pm.leader not in self.brokers:
            return -1
        return pm.leader

    def available_partitions(self, topic: str) -> list[int]:
        tm = self.topics.get(topic)
        if tm is None:
            return []
        return sorted(
            p for p, pm in tm.partitions.items() if pm.leader >= 0 and pm.leader in self.brokers
        )

    def topic_id(self, topic: str) -> uuid.UUID | None:
        tm = self.topics.get(topic)
        return None if tm is None else tm.topic_id
