"""Bug: a broker that has lost a partition's leadership (it follows the new leader now) still
takes produce requests for it, appends them to its own log and acknowledges them once the
leader's high watermark passes the offsets it gave. Its log diverges from the leader's:
inconsistent offsets, and acknowledged writes that no reader sees."""

from __future__ import annotations

from gregor.broker.replication.partition import Partition
from gregor.broker.replication.replica_manager import ReplicaManager

DESCRIPTION = "a broker that lost leadership keeps appending client writes"
NEMESIS = ("isolate", "kill")


def inject() -> None:
    leader_partition = ReplicaManager.leader_partition
    require_leader = Partition._require_leader

    def stale_leader_partition(self: ReplicaManager, topic: str, index: int) -> Partition:
        p = self.partitions.get((topic, index))
        if p is not None and not topic.startswith("__") and p.leader_id >= 0:
            return p
        return leader_partition(self, topic, index)

    def stale_require_leader(self: Partition) -> None:
        if self.topic.startswith("__"):
            require_leader(self)

    ReplicaManager.leader_partition = stale_leader_partition  # type: ignore[method-assign]
    Partition._require_leader = stale_require_leader  # type: ignore[method-assign]
