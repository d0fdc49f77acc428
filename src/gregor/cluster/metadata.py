"""The cluster's metadata image and its local-file store.

Theory of operation: the image (cluster id, topics with ids, partitions with replicas, leader,
leader_epoch and ISR, topic config overrides) is a small in-memory structure owned by the broker's
event loop. Every change goes through a ``MetadataStore`` method that updates the image and
persists it before returning, so a crash never leaves a topic half-created on disk: the file is
written to a temporary name, fsynced, and renamed over ``cluster-metadata.json`` (rename is
atomic on POSIX). A cluster deployment swaps this store for one backed by etcd with the same
methods.
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

METADATA_FILE = "cluster-metadata.json"


@dataclass
class PartitionState:
    partition: int
    leader: int
    leader_epoch: int = 0
    replicas: list[int] = field(default_factory=list)
    isr: list[int] = field(default_factory=list)
    offline_replicas: list[int] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "partition": self.partition,
            "leader": self.leader,
            "leader_epoch": self.leader_epoch,
            "replicas": self.replicas,
            "isr": self.isr,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> PartitionState:
        return cls(d["partition"], d["leader"], d.get("leader_epoch", 0), list(d["replicas"]), list(d["isr"]))


@dataclass
class TopicState:
    name: str
    topic_id: uuid.UUID
    partitions: list[PartitionState]
    configs: dict[str, str] = field(default_factory=dict)
    internal: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "topic_id": str(self.topic_id),
            "partitions": [p.to_json() for p in self.partitions],
            "configs": self.configs,
            "internal": self.internal,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TopicState:
        return cls(
            d["name"],
            uuid.UUID(d["topic_id"]),
            [PartitionState.from_json(p) for p in d["partitions"]],
            dict(d.get("configs", {})),
            bool(d.get("internal", False)),
        )


class MetadataStore:
    """Single-node metadata kept in a JSON file in the first log dir."""

    def __init__(self, directory: Path, cluster_id: str | None = None) -> None:
        self.path = Path(directory) / METADATA_FILE
        self.topics: dict[str, TopicState] = {}
        self.topics_by_id: dict[uuid.UUID, TopicState] = {}
        self.cluster_id = cluster_id or ""
        # Producer ids are handed out in blocks; the file records the start of the next block,
        # so ids are never reused across restarts (an unused rest of a block is skipped).
        self.next_producer_id_block = 0
        self._load()

    def _load(self) -> None:
        if self.path.exists():
            d = json.loads(self.path.read_text())
            stored = d.get("cluster_id", "")
            if self.cluster_id and stored and stored != self.cluster_id:
                raise ValueError(
                    f"cluster.id {self.cluster_id!r} does not match {stored!r} in {self.path}"
                )
            self.cluster_id = stored or self.cluster_id
            self.next_producer_id_block = int(d.get("next_producer_id_block", 0))
            for t in d.get("topics", []):
                ts = TopicState.from_json(t)
                self.topics[ts.name] = ts
                self.topics_by_id[ts.topic_id] = ts
        if not self.cluster_id:
            # Kafka's cluster ids are 16 random bytes in URL-safe base64 without padding.
            import base64

            self.cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        self._persist()

    def _persist(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = {
            "cluster_id": self.cluster_id,
            "next_producer_id_block": self.next_producer_id_block,
            "topics": [t.to_json() for t in self.topics.values()],
        }
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)

    def create_topic(
        self,
        name: str,
        assignments: list[list[int]],
        configs: dict[str, str] | None = None,
        internal: bool = False,
        topic_id: uuid.UUID | None = None,
    ) -> TopicState:
        ts = TopicState(
            name,
            topic_id or uuid.uuid4(),
            [PartitionState(i, reps[0], 0, list(reps), list(reps)) for i, reps in enumerate(assignments)],
            dict(configs or {}),
            internal,
        )
        self.topics[name] = ts
        self.topics_by_id[ts.topic_id] = ts
        self._persist()
        return ts

    def add_partitions(self, name: str, assignments: list[list[int]]) -> TopicState:
        ts = self.topics[name]
        start = len(ts.partitions)
        for i, reps in enumerate(assignments):
            ts.partitions.append(PartitionState(start + i, reps[0], 0, list(reps), list(reps)))
        self._persist()
        return ts

    def delete_topic(self, name: str) -> TopicState:
        ts = self.topics.pop(name)
        self.topics_by_id.pop(ts.topic_id, None)
        self._persist()
        return ts

    def allocate_producer_id_block(self, size: int) -> int:
        """Reserve ``size`` producer ids durably; returns the first."""
        start = self.next_producer_id_block
        self.next_producer_id_block = start + size
        self._persist()
        return start

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        self.topics[name].configs = dict(configs)
        self._persist()
