"""Bug: acks=all is acknowledged as soon as the leader has appended, before the ISR has the
write (the produce path's wait for the high watermark returns at once). A leader that then
dies or is cut off takes acknowledged writes with it: lost writes."""

from __future__ import annotations

import asyncio

from gregor.broker.replication.partition import Partition

DESCRIPTION = "acks=all acknowledged before the ISR has the write"
NEMESIS = ("isolate",)


def inject() -> None:
    original = Partition.wait_for_high_watermark

    def wait_for_high_watermark(
        self: Partition, offset: int, min_isr: bool = False
    ) -> asyncio.Future[None]:
        if self.topic.startswith("__"):
            return original(self, offset, min_isr)
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        fut.set_result(None)
        return fut

    Partition.wait_for_high_watermark = wait_for_high_watermark  # type: ignore[method-assign]
