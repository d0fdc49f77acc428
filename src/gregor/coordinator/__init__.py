"""The coordinators as sans-IO state machines: groups (classic and KIP-848 protocols,
offsets), transactions and share groups' state.

Imports only ``gregor.protocol``. ``common/`` is the seam to the broker's runtime (typed
tokens, one outbox, timers, the append-error mapping); ``group/``, ``txn/`` and ``share/``
hold one coordinator each. The broker runs them on its ``CoordinatorRuntime``, which appends
their writes to the internal topics, delivers their replies and ticks their clocks; tests
drive them directly with a fake clock.
"""

from gregor.coordinator.common.outbox import Output, Reply, Token, Write
from gregor.coordinator.common.partitioning import java_string_hashcode, partition_for
from gregor.coordinator.common.timers import PartitionStatus
from gregor.coordinator.group.config import CoordinatorConfig, TopicsView
from gregor.coordinator.group.coordinator import GroupCoordinator

__all__ = [
    "CoordinatorConfig",
    "GroupCoordinator",
    "Output",
    "PartitionStatus",
    "Reply",
    "Token",
    "TopicsView",
    "Write",
    "java_string_hashcode",
    "partition_for",
]
