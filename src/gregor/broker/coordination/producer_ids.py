"""Producer id allocation: unique 64-bit ids for idempotent and transactional producers.

Theory of operation. Ids come from blocks reserved durably in the metadata store
(``PRODUCER_ID_BLOCK_SIZE`` at a time, ``allocate_producer_ids``), so a restart never hands
out an id twice; the unused rest of a block is skipped. Reserving a block awaits the store,
but the transaction coordinator asks for ids synchronously, so callers ``reserve`` first
(``next_id`` does both) and ``generate`` then never waits. Concurrent reservations share one
store call.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

PRODUCER_ID_BLOCK_SIZE = 1000


class ProducerIdStore(Protocol):
    async def allocate_producer_ids(self, count: int) -> int: ...


class ProducerIdsExhaustedError(RuntimeError):
    """``generate`` was called with no reserved id left (a caller skipped ``reserve``)."""


class ProducerIdManager:
    def __init__(self, store: ProducerIdStore, block_size: int = PRODUCER_ID_BLOCK_SIZE) -> None:
        self.store = store
        self.block_size = block_size
        self._next = 0
        self._end = 0
        self._reserving: asyncio.Future[None] | None = None

    @property
    def available(self) -> int:
        return self._end - self._next

    async def reserve(self, count: int = 1) -> None:
        """Make sure at least ``count`` ids can be generated without waiting."""
        while self.available < count:
            if self._reserving is not None:
                await asyncio.shield(self._reserving)
                continue
            self._reserving = asyncio.get_running_loop().create_future()
            try:
                start = await self.store.allocate_producer_ids(self.block_size)
                self._next, self._end = start, start + self.block_size
            finally:
                done, self._reserving = self._reserving, None
                done.set_result(None)

    def generate(self) -> int:
        if self._next >= self._end:
            raise ProducerIdsExhaustedError("no producer id reserved")
        pid = self._next
        self._next += 1
        return pid

    async def next_id(self) -> int:
        await self.reserve(1)
        return self.generate()
