"""A controller stops when cancelled, even when its wake-up and the cancellation arrive in the
same turn of the event loop. Python 3.11's ``asyncio.wait_for`` returned the finished wait's
result in that case and swallowed the cancellation, so the controller ran on and a broker's
``close()`` waited for it forever (process-cluster teardowns then SIGKILLed the broker after
30 s)."""

from __future__ import annotations

import asyncio

from gregor.broker.controller.controller import Controller
from gregor.cluster.memory_store import MemoryMetadataStore


def test_a_wake_up_and_a_cancellation_at_once_stop_it() -> None:
    async def main() -> None:
        ctl = Controller(1, MemoryMetadataStore(), unclean_leader_election=False)
        ctl.start()
        task = ctl._task
        assert task is not None
        for _ in range(10):  # its first pass, then waiting for the next wake-up
            await asyncio.sleep(0)
        assert not task.done()
        ctl._again.set()
        task.cancel()
        for _ in range(20):  # turns of the loop, not time: a cancelled task ends in a few
            if task.done():
                break
            await asyncio.sleep(0)
        assert task.cancelled()
        await ctl.close()  # returns at once

    asyncio.run(main())
