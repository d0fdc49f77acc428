"""Group coordination as a sans-IO state machine (classic and KIP-848 protocols, offsets).

Imports only ``gregor.protocol``. The broker wraps :class:`GroupCoordinator` in an asyncio
shell that appends its writes to ``__consumer_offsets``, delivers its replies and ticks its
clock; tests drive it directly with a fake clock.
"""

from gregor.coordinator.common.partitioning import java_string_hashcode, partition_for
from gregor.coordinator.group.coordinator import GroupCoordinator
from gregor.coordinator.group.core import (
    CoordinatorConfig,
    PartitionStatus,
    Reply,
    TopicsView,
    Write,
)

__all__ = [
    "CoordinatorConfig",
    "GroupCoordinator",
    "PartitionStatus",
    "Reply",
    "TopicsView",
    "Write",
    "java_string_hashcode",
    "partition_for",
]
