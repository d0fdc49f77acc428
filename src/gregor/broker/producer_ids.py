"""Producer id allocation: unique 64-bit ids for idempotent and transactional producers.

Ids come from blocks reserved durably in the metadata store (``PRODUCER_ID_BLOCK_SIZE`` at a
time), so a restart never hands out an id twice; the unused rest of a block is skipped.
"""

from __future__ import annotations

from typing import Any

PRODUCER_ID_BLOCK_SIZE = 1000


class ProducerIdManager:
    def __init__(self, metadata: Any) -> None:
        self.metadata = metadata
        self._next = 0
        self._end = 0

    def generate(self) -> int:
        if self._next >= self._end:
            self._next = self.metadata.allocate_producer_id_block(PRODUCER_ID_BLOCK_SIZE)
            self._end = self._next + PRODUCER_ID_BLOCK_SIZE
        pid = self._next
        self._next += 1
        return pid
