"""Named deadlines of a coordinator, and the status of its internal topic's partitions.

A coordinator schedules a callback under a key (a member's session, a transaction's timeout);
scheduling the key again replaces it, cancelling drops it. The runtime asks
``next_deadline()`` and calls the coordinator's ``tick()`` when it has passed, which runs
``pop_due`` until nothing is due. Deletion is lazy: a replaced entry stays in the heap until
it reaches the top.

Every coordinator also takes ``session_confirmed()``: False while its broker cannot confirm
its metadata session (``MetadataStore.session_confirmed``: cut off from etcd past its lease's
deadline, or not yet caught up since). Then another broker may lead the internal topic's
partitions already, and the coordinator answers NOT_COORDINATOR for every key (reads
included: its cache may be older than what the new coordinator acknowledged) until the
session is confirmed again.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Hashable
from enum import Enum


def session_always_confirmed() -> bool:
    """The session check of a coordinator whose broker has no metadata session to lose (one
    node, tests): it is always confirmed."""
    return True


class PartitionStatus(Enum):
    """A partition of the internal topic this broker leads: being replayed, or serving."""

    LOADING = "loading"
    ACTIVE = "active"


class Timers:
    """Named deadlines; scheduling a name again replaces it. Lazy deletion in a heap."""

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, Hashable]] = []
        self._live: dict[Hashable, tuple[int, int, Callable[[], None]]] = {}
        self._seq = itertools.count()

    def schedule(self, key: Hashable, deadline: int, fn: Callable[[], None]) -> None:
        seq = next(self._seq)
        self._live[key] = (deadline, seq, fn)
        heapq.heappush(self._heap, (deadline, seq, key))

    def cancel(self, key: Hashable) -> None:
        self._live.pop(key, None)

    def deadline(self, key: Hashable) -> int | None:
        entry = self._live.get(key)
        return None if entry is None else entry[0]

    def _prune(self) -> None:
        heap = self._heap
        while heap:
            _, seq, key = heap[0]
            entry = self._live.get(key)
            if entry is not None and entry[1] == seq:
                return
            heapq.heappop(heap)

    def next_deadline(self) -> int | None:
        self._prune()
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now: int) -> Callable[[], None] | None:
        self._prune()
        if not self._heap or self._heap[0][0] > now:
            return None
        _, _, key = heapq.heappop(self._heap)
        _, _, fn = self._live.pop(key)
        return fn

    def run_due(self, now: Callable[[], int]) -> None:
        """Run every callback whose deadline has passed (``now`` is read before each)."""
        while True:
            fn = self.pop_due(now())
            if fn is None:
                return
            fn()

    def __len__(self) -> int:
        return len(self._live)
