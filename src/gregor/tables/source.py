"""What a table translator reads: a leader's partition (:class:`PartitionSource`).

Kept apart from ``gregor.tables.translator`` (which needs pyarrow and the catalog) so the
broker, which implements the source for every broker whether or not a topic has a table, does
not import pyarrow and pyiceberg at start-up.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class CommittedRead:
    """What a read_committed read of a partition found."""

    records: bytes | memoryview | None
    aborted: Sequence[tuple[int, int]]  # (producer id, first offset) of aborted transactions
    last_stable_offset: int
    log_start_offset: int


class PartitionSource(Protocol):
    """The leader's partition as the translator reads it (the broker implements it)."""

    topic: str
    index: int

    @property
    def last_stable_offset(self) -> int: ...

    @property
    def log_start_offset(self) -> int: ...

    def read_committed(self, offset: int, max_bytes: int) -> CommittedRead: ...

    def wait(self) -> asyncio.Future[None]:
        """A future done when the partition's high watermark (or last stable offset) moves."""
        ...

    def forget(self, fut: asyncio.Future[None]) -> None: ...
