"""The group coordinator: every group API on one state machine, composed of managers.

``GroupCoordinator`` owns one ``GroupCore`` (groups, partitions, timers, the outbox) and the
managers that work on it, each for one family of requests, as Kafka's group coordinator shard
composes its metadata and offset managers:

* ``ClassicGroups`` - JoinGroup, SyncGroup, Heartbeat, LeaveGroup (``classic_ops``, over the
  rebalance machinery of ``classic_rebalance``);
* ``ConsumerGroups`` - the KIP-848 ConsumerGroupHeartbeat (``consumer_ops``, with its
  records and target assignment in ``consumer_records``);
* ``Offsets`` - OffsetCommit, OffsetFetch, OffsetDelete, retention (``offset_ops``);
* ``GroupAdmin`` - DescribeGroups, ConsumerGroupDescribe, ListGroups, DeleteGroups
  (``admin_ops``);
* ``TxnOffsets`` - TxnOffsetCommit and the markers that settle it (``transaction_offsets``).

A call that crosses families names the other manager: an offset commit of a classic member
refreshes its session through ``ClassicGroups``, DeleteGroups tombstones the offsets through
``Offsets``; loading a partition (``complete_load``) restarts each manager's timers here. The
request methods are the managers' own, exposed on the coordinator for the runtime; the
caller drains writes and replies with ``take()`` (see ``coordinator.group.core``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Never

from gregor.coordinator.common.outbox import Output
from gregor.coordinator.common.timers import PartitionStatus, session_always_confirmed
from gregor.coordinator.group.admin_ops import GroupAdmin
from gregor.coordinator.group.classic import ClassicGroup
from gregor.coordinator.group.classic_ops import ClassicGroups
from gregor.coordinator.group.config import CoordinatorConfig, TopicsView
from gregor.coordinator.group.consumer_ops import ConsumerGroups
from gregor.coordinator.group.core import Group, GroupCore
from gregor.coordinator.group.offset_ops import Offsets
from gregor.coordinator.group.replay import GroupReplay
from gregor.coordinator.group.transaction_offsets import TxnOffsets


class GroupCoordinator:
    """A group coordinator for every ``__consumer_offsets`` partition this broker leads."""

    def __init__(
        self,
        config: CoordinatorConfig,
        topics: TopicsView,
        clock: Callable[[], int],
        session_confirmed: Callable[[], bool] = session_always_confirmed,
    ) -> None:
        self.core = core = GroupCore(config, topics, clock, session_confirmed)
        self.classic = ClassicGroups(core)
        self.consumer = ConsumerGroups(core)
        self.offsets = Offsets(core, self.classic)
        self.admin = GroupAdmin(core, self.offsets)
        self.txn_offsets = TxnOffsets(core)
        self._replay = GroupReplay(core)
        # The request API, one method per request (each takes a Token typed by its response).
        self.join_group = self.classic.join_group
        self.sync_group = self.classic.sync_group
        self.heartbeat = self.classic.heartbeat
        self.leave_group = self.classic.leave_group
        self.consumer_group_heartbeat = self.consumer.consumer_group_heartbeat
        self.consumer_group_describe = self.admin.consumer_group_describe
        self.offset_commit = self.offsets.offset_commit
        self.offset_fetch = self.offsets.offset_fetch
        self.offset_delete = self.offsets.offset_delete
        self.describe_groups = self.admin.describe_groups
        self.list_groups = self.admin.list_groups
        self.delete_groups = self.admin.delete_groups
        self.txn_offset_commit = self.txn_offsets.txn_offset_commit
        self.complete_txn_offsets = self.txn_offsets.complete_txn_offsets

    # --- state ---

    @property
    def config(self) -> CoordinatorConfig:
        return self.core.config

    @property
    def groups(self) -> dict[str, Group]:
        return self.core.groups

    def partition_for(self, group_id: str) -> int:
        return self.core.partition_for(group_id)

    def partition_error(self, group_id: str) -> int:
        """0 if this coordinator serves ``group_id`` now, else the error to answer."""
        return self.core.partition_error(group_id)

    # --- the runtime's side: outbox and time ---

    @property
    def has_output(self) -> bool:
        return self.core.outbox.has_output

    def take(self) -> Output[Never]:
        return self.core.outbox.take()

    def write_complete(self, write_id: int, error_code: int, base_offset: int = -1) -> None:
        """The caller appended write ``write_id`` (error_code 0) or failed to."""
        self.core.outbox.write_complete(write_id, error_code, base_offset)

    def next_deadline(self) -> int | None:
        return self.core.next_deadline()

    def tick(self) -> None:
        self.core.tick()

    def flush_lingering(self) -> None:
        """Append what is lingering now."""
        self.core.flush_lingering()

    def release_waiting(self) -> None:
        """Answer every held JoinGroup and SyncGroup with NOT_COORDINATOR (the broker is
        going away), and append what is lingering so its requests are answered before the
        broker stops."""
        self.core.flush_lingering()
        self.classic.release_waiting()

    # --- loading ---

    def begin_load(self, partition: int) -> None:
        self.core.partitions[partition] = PartitionStatus.LOADING

    def load_batches(self, partition: int, data: bytes | memoryview) -> None:
        """Replay whole v2 batches read from ``partition`` of ``__consumer_offsets``."""
        self._replay.load_batches(partition, data)

    def complete_load(self, partition: int, leader_epoch: int = -1) -> None:
        """The partition is read to its end: start serving its groups (each manager restarts
        its timers). The leader epoch is not needed here (groups fence by generation)."""
        core = self.core
        core.partitions[partition] = PartitionStatus.ACTIVE
        now = core.clock()
        for gid, group in core.groups.items():
            if core.partition_for(gid) != partition:
                continue
            if isinstance(group, ClassicGroup):
                for m in group.members.values():
                    self.classic.schedule_heartbeat_expiry(group, m, now + m.session_timeout_ms)
            else:
                self.consumer.restore(group)
        self.offsets.ensure_retention_timer()

    def unload(self, partition: int) -> None:
        """Forget a partition's groups (e.g. the offsets topic was deleted)."""
        core = self.core
        core.flush_lingering(partition)
        core.partitions.pop(partition, None)
        for gid in [g for g in core.groups if core.partition_for(g) == partition]:
            core.remove_group(gid)
