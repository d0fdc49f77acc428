"""Share groups on one broker (KIP-932): the three parts and the clock that drives them.

``Shares`` holds the share coordinator (``ShareService``: durable state, for the keys whose
``__share_group_state`` partition this broker leads), the share partitions this broker leads
(``SharePartitions``: acquisition, acknowledgements, sessions) and the share groups it
coordinates (``ShareGroups``: membership and assignment). A member that leaves, or whose
session times out, has its records released here at once. A housekeeping task, running while
any share group or share partition exists here, expires sessions and record locks every
``TICK_S``.
"""

from __future__ import annotations

import asyncio
import logging

from gregor.broker.coordination.share_partitions import SharePartitions
from gregor.broker.coordination.share_service import ShareService
from gregor.coordinator.share.group import HeartbeatResult, ShareGroups

log = logging.getLogger("gregor.broker.share")

TICK_S = 0.1


class Shares:
    def __init__(
        self, state: ShareService, partitions: SharePartitions, groups: ShareGroups
    ) -> None:
        self.state = state
        self.partitions = partitions
        self.groups = groups
        self._task: asyncio.Task[None] | None = None

    def _release(self, gone: list[tuple[str, str]]) -> None:
        for group, member in gone:
            self.partitions.release_member(group, member)

    def heartbeat(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        rack_id: str | None,
        subscribed: list[str] | None,
        client_id: str,
        client_host: str,
        version: int,
    ) -> HeartbeatResult:
        result, gone = self.groups.heartbeat(
            group_id, member_id, member_epoch, rack_id, subscribed, client_id, client_host, version
        )
        self._release(gone)
        self._ensure_running()
        return result

    def _ensure_running(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._housekeeping())

    async def _housekeeping(self) -> None:
        while self.groups.groups or self.partitions.entries:
            await asyncio.sleep(TICK_S)
            try:
                self._release(self.groups.expire(self.groups.clock()))
                self.partitions.tick()
            except Exception:  # noqa: BLE001 - the next tick tries again
                log.exception("share group housekeeping failed")

    def touch(self) -> None:
        """A share fetch made state here: keep the clock running."""
        self._ensure_running()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        await self.partitions.stop()
        await self.state.stop()
