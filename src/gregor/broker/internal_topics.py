"""What the coordinators' asyncio shells share about their internal topics.

Both ``__consumer_offsets`` (groups) and ``__transaction_state`` (transactions) are compacted
logs that a coordinator state machine replays at start: every batch of every partition is fed
to the coordinator, then the partition is marked loaded. Loading yields to the event loop after
each partition so a broker with many partitions keeps serving while it loads.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

log = logging.getLogger("gregor.broker")


async def replay_partitions(
    broker: Any,
    topic: str,
    partitions: list[int],
    load_batches: Callable[[int, bytes], Any],
    complete_load: Callable[[int], Any],
) -> int:
    """Feed every batch of ``topic``'s ``partitions`` to ``load_batches``; returns the count."""
    batches = 0
    for p in partitions:
        plog = broker.get_log(topic, p)
        if plog is not None:
            for _, data in plog.iter_batches():
                try:
                    load_batches(p, data)
                except Exception:  # noqa: BLE001 - one bad batch must not stop the load
                    log.exception("could not replay a batch of %s-%d", topic, p)
                batches += 1
        complete_load(p)
        await asyncio.sleep(0)
    return batches


async def cancel_task(task: asyncio.Task[Any] | None) -> None:
    """Cancel ``task`` if it is still running and wait for it to finish."""
    if task is not None and not task.done():
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
