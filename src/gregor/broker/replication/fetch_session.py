"""Fetch sessions (KIP-227): full and incremental fetches.

Theory of operation. A client opens a session with a full fetch (session_id 0, epoch 0); the
broker answers with a new session id and remembers the partitions and their fetch parameters.
Later fetches carry (session_id, epoch) and list only partitions whose parameters changed, plus
forgotten ones; the broker merges them into the session and answers only partitions with news
(records, an error, or a moved high watermark / last stable offset / log start offset). The
epoch must match what the broker expects and then advances by one (wrapping after 2^31-1 to 1).
Epoch -1 (FINAL_EPOCH) closes a session and makes the fetch sessionless. Sessions are kept in a
bounded cache (``max.incremental.fetch.session.cache.slots``); the least recently used one goes
first when it is full.
"""

from __future__ import annotations

import itertools
import random
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field

INITIAL_EPOCH = 0
FINAL_EPOCH = -1


@dataclass
class CachedPartition:
    topic: str
    partition: int
    topic_id: uuid.UUID
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1
    log_start_offset: int = -1
    # What the client was last told; an incremental response includes the partition again
    # only when one of these changes or there are records or an error.
    high_watermark: int = -1
    last_stable_offset: int = -1
    sent_log_start_offset: int = -1


@dataclass
class FetchSession:
    session_id: int
    epoch: int
    partitions: OrderedDict[tuple[str, int], CachedPartition] = field(default_factory=OrderedDict)

    def next_epoch(self) -> None:
        self.epoch = 1 if self.epoch >= 2**31 - 1 else self.epoch + 1


class FetchSessionCache:
    def __init__(self, max_slots: int) -> None:
        self.max_slots = max_slots
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()
        self._ids = itertools.count(random.randint(1, 1 << 20))

    def get(self, session_id: int) -> FetchSession | None:
        s = self._sessions.get(session_id)
        if s is not None:
            self._sessions.move_to_end(session_id)
        return s

    def create(self) -> FetchSession | None:
        if self.max_slots <= 0:
            return None
        while len(self._sessions) >= self.max_slots:
            self._sessions.popitem(last=False)
        sid = next(self._ids) & 0x7FFFFFFF or next(self._ids)
        s = FetchSession(sid, 1)
        self._sessions[sid] = s
        return s

    def remove(self, session_id: int) -> None:
        self._sessions.pop(session_id, None)

    def __len__(self) -> int:
        return len(self._sessions)
