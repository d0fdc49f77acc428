"""The group coordinator: every group API on one state machine.

``GroupCoordinator`` combines the request families (classic protocol, KIP-848 protocol,
offsets, administration) over the shared machinery of ``coordinator.core``: the caller feeds
requests, write completions, loaded batches and clock ticks, and drains writes and replies
with ``take()``. See ``coordinator.core`` for the contract.
"""

from __future__ import annotations

from gregor.coordinator.admin_ops import AdminOps
from gregor.coordinator.classic_ops import ClassicOps
from gregor.coordinator.consumer_ops import ConsumerOps
from gregor.coordinator.offset_ops import OffsetOps
from gregor.coordinator.transaction_offsets import TxnOffsetOps


class GroupCoordinator(ClassicOps, ConsumerOps, OffsetOps, AdminOps, TxnOffsetOps):
    """A group coordinator for every ``__consumer_offsets`` partition this broker leads."""
