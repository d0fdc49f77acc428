"""The leader-epoch cache: which leader epoch began at which offset.

Theory of operation. Each batch a leader appends carries its partition leader epoch. The cache
keeps one (epoch, start_offset) entry per epoch, in increasing order of both, and persists them
to ``leader-epoch-checkpoint`` (Kafka's text format) whenever they change, which is rare (once
per leadership change). A follower asks the leader "where did my epoch end?"
(OffsetForLeaderEpoch) and truncates to the answer; :meth:`end_offset_for` answers exactly as
Kafka does. Truncating the log truncates the cache from the end; raising the log start offset
truncates it from the start.
"""

from __future__ import annotations

import logging
import os
from bisect import bisect_left, bisect_right

from gregor.storage.checkpoint import (
    LEADER_EPOCH_CHECKPOINT,
    CheckpointError,
    read_epochs,
    write_epochs,
)
from gregor.storage.fast_append import LeaderEpochCacheCore

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1

log = logging.getLogger(__name__)


class LeaderEpochCache(LeaderEpochCacheCore):
    def __init__(self, directory: str | None, *, sync: bool = True) -> None:
        """Load ``directory/leader-epoch-checkpoint`` (or start empty). ``directory=None``
        keeps the cache in memory only."""
        self._path = os.path.join(directory, LEADER_EPOCH_CHECKPOINT) if directory else None
        self._sync = sync
        self._epochs: list[int] = []
        self._offsets: list[int] = []
        self.latest = UNDEFINED_EPOCH  # the latest epoch, -1 when empty (a field of the base
        # for the append fast path; kept in step by every change below)
        if self._path:
            try:
                entries = read_epochs(self._path) or []
            except CheckpointError as e:
                log.warning("ignoring unreadable leader epoch checkpoint: %s", e)
                entries = []
            for epoch, offset in entries:
                self._put(epoch, offset)
        self.latest = self._epochs[-1] if self._epochs else UNDEFINED_EPOCH

    # --- queries ---

    @property
    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._epochs, self._offsets, strict=True))

    @property
    def latest_epoch(self) -> int | None:
        return self._epochs[-1] if self._epochs else None

    @property
    def earliest_entry(self) -> tuple[int, int] | None:
        return (self._epochs[0], self._offsets[0]) if self._epochs else None

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch whose range holds ``offset`` (the last entry starting at or before it)."""
        i = bisect_right(self._offsets, offset) - 1
        return self._epochs[i] if i >= 0 else None

    def start_offset_of(self, epoch: int) -> int | None:
        """Where ``epoch`` began, or None if it is not in the cache."""
        i = bisect_left(self._epochs, epoch)
        return self._offsets[i] if i < len(self._epochs) and self._epochs[i] == epoch else None

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end_offset) for OffsetForLeaderEpoch: the largest epoch <= the requested
        one and the start offset of the next epoch (the LEO for the latest epoch);
        (-1, -1) when the requested epoch is undefined or above every known epoch."""
        if requested_epoch == UNDEFINED_EPOCH or not self._epochs:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self._epochs[-1]:
            return requested_epoch, log_end_offset
        higher = bisect_right(self._epochs, requested_epoch)
        if higher == len(self._epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            # Older than anything we know: the data is gone; point at the first epoch's start.
            return requested_epoch, self._offsets[0]
        return self._epochs[higher - 1], self._offsets[higher]

    # --- updates ---

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; entries it contradicts (same or
        later epoch, same or later offset) are dropped, as in Kafka. Returns whether the cache
        changed. Appends only call this with an epoch above the latest."""
        if epoch < 0 or start_offset < 0:
            return False
        if self._epochs and epoch == self._epochs[-1] and start_offset >= self._offsets[-1]:
            return False
        while self._epochs and (self._epochs[-1] >= epoch or self._offsets[-1] >= start_offset):
            self._epochs.pop()
            self._offsets.pop()
        self._put(epoch, start_offset)
        self._flush()
        return True

    def assign_if_newer(self, epoch: int, start_offset: int) -> None:
        """:meth:`assign` an epoch above every known one (as appends and recovery meet them)."""
        if epoch >= 0 and (not self._epochs or epoch > self._epochs[-1]):
            self.assign(epoch, start_offset)

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop entries starting at or after ``end_offset`` (the log was truncated there)."""
        i = bisect_left(self._offsets, end_offset)
        if i < len(self._offsets):
            del self._epochs[i:]
            del self._offsets[i:]
            self._flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """Drop entries wholly below ``start_offset``; the entry covering it now starts there."""
        i = bisect_right(self._offsets, start_offset) - 1
        if i < 0:
            return
        changed = i > 0 or self._offsets[i] != start_offset
        del self._epochs[:i]
        del self._offsets[:i]
        self._offsets[0] = start_offset
        if changed:
            self._flush()

    def clear(self) -> None:
        self._epochs.clear()
        self._offsets.clear()
        self._flush()

    def _put(self, epoch: int, offset: int) -> None:
        self._epochs.append(epoch)
        self._offsets.append(offset)

    def _flush(self) -> None:
        self.latest = self._epochs[-1] if self._epochs else UNDEFINED_EPOCH
        if self._path:
            write_epochs(self._path, self.entries, sync=self._sync)
