"""The group coordinator: every group API on one state machine.

``GroupCoordinator`` combines the request families (classic protocol, KIP-848 protocol,
offsets, administration) over the shared machinery of ``coordinator.core``: the caller feeds
requests, write completions, loaded batches and clock ticks, and drains writes and replies
with ``take()``. See ``coordinator.core`` for the contract.
"""

from __future__ import annotations

from gregor.coordinator.group.admin_ops import AdminOps
from gregor.coordinator.group.classic import ClassicGroup
from gregor.coordinator.group.classic_ops import ClassicOps
from gregor.coordinator.group.consumer_ops import ConsumerOps
from gregor.coordinator.group.offset_ops import OffsetOps
from gregor.coordinator.group.transaction_offsets import TxnOffsetOps
from gregor.protocol.errors import ErrorCode


class GroupCoordinator(ClassicOps, ConsumerOps, OffsetOps, AdminOps, TxnOffsetOps):
    """A group coordinator for every ``__consumer_offsets`` partition this broker leads."""

    def release_waiting(self) -> None:
        """Answer every held JoinGroup and SyncGroup with NOT_COORDINATOR (the broker is
        going away; members find the coordinator again and rejoin), and append what is
        lingering so its requests are answered before the broker stops."""
        self.flush_lingering()
        for group in self.groups.values():
            if not isinstance(group, ClassicGroup):
                continue
            for m in group.members.values():
                if m.join_token is not None:
                    self.reply(
                        m.join_token,
                        self.join_response(
                            m.join_version, ErrorCode.NOT_COORDINATOR, member_id=m.member_id
                        ),
                    )
                    m.join_token = None
                if m.sync_token is not None:
                    self.reply(m.sync_token, self.sync_response(ErrorCode.NOT_COORDINATOR))
                    m.sync_token = None
