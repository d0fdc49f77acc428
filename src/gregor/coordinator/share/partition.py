"""One share partition's in-flight records (KIP-932), as its partition leader tracks them.

Theory of operation. The share-partition start offset (SPSO, ``start_offset``) is the lowest
offset not yet done; the end offset (SPEO, ``end_offset``) is one past the highest offset
ever handed out. Every offset in [SPSO, SPEO) has an entry: its state, its delivery count,
and while ACQUIRED the member holding it and the lock's deadline. Offsets from SPEO on are
"available, never delivered" without an entry.

* ``acquire`` hands a member AVAILABLE offsets among the data-record ranges the leader read
  from the log, oldest first, up to ``max_records`` and the partition's lock limit: each
  becomes ACQUIRED with its delivery count one higher and a lock until now + lock duration.
  Offsets the log read passes that hold no data record (control batches, compacted gaps)
  are ARCHIVED on the way, so they never hold SPSO back.
* ``acknowledge`` applies a member's ACCEPT (ACKNOWLEDGED), RELEASE (AVAILABLE again),
  REJECT and GAP (ARCHIVED) to offsets it holds: a batch that names any offset it does not
  hold changes nothing and answers INVALID_RECORD_STATE.
* A lock that expires (``expire``), a released record, or the records of a member that left
  (``release_member``) become AVAILABLE again, unless their delivery count has reached
  ``delivery_limit``: then they are ARCHIVED and never delivered again.
* After each change SPSO moves past the finished (ACKNOWLEDGED or ARCHIVED) offsets at its
  front and their entries are dropped.

``state_batches`` is what the share coordinator persists (ACQUIRED written as AVAILABLE with
its count: a lock does not survive its leader), and ``load`` rebuilds from it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from gregor.coordinator.share.state import ACKNOWLEDGED, ACQUIRED, ARCHIVED, AVAILABLE, StateBatch
from gregor.protocol.errors import ErrorCode

#: ShareFetch / ShareAcknowledge acknowledge types.
GAP, ACCEPT, RELEASE, REJECT = 0, 1, 2, 3
_ACK_STATE = {GAP: ARCHIVED, ACCEPT: ACKNOWLEDGED, REJECT: ARCHIVED}


@dataclass(slots=True)
class InFlight:
    state: int
    delivery_count: int
    member: str | None = None
    lock_deadline: int = 0


class SharePartition:
    def __init__(self, start_offset: int, delivery_limit: int, max_locks: int) -> None:
        self.start_offset = start_offset
        self.end_offset = start_offset
        self.delivery_limit = delivery_limit
        self.max_locks = max_locks
        self.records: dict[int, InFlight] = {}

    # --- persistence ---

    def load(self, start_offset: int, batches: Iterable[StateBatch]) -> None:
        self.start_offset = self.end_offset = start_offset
        self.records = {}
        for b in sorted(batches, key=lambda b: b.first_offset):
            state = AVAILABLE if b.delivery_state == ACQUIRED else b.delivery_state
            for off in range(max(b.first_offset, start_offset), b.last_offset + 1):
                self.records[off] = InFlight(state, b.delivery_count)
            self.end_offset = max(self.end_offset, b.last_offset + 1)
        for off in range(self.start_offset, self.end_offset):
            self.records.setdefault(off, InFlight(AVAILABLE, 0))
        self._advance()

    def state_batches(self) -> list[StateBatch]:
        out: list[StateBatch] = []
        for off in range(self.start_offset, self.end_offset):
            r = self.records[off]
            state = AVAILABLE if r.state == ACQUIRED else r.state
            if state == AVAILABLE and r.delivery_count == 0:
                continue
            if (
                out
                and out[-1].last_offset == off - 1
                and (out[-1].delivery_state, out[-1].delivery_count) == (state, r.delivery_count)
            ):
                out[-1] = StateBatch(out[-1].first_offset, off, state, r.delivery_count)
            else:
                out.append(StateBatch(off, off, state, r.delivery_count))
        return out

    # --- queries ---

    @property
    def acquired_count(self) -> int:
        return sum(1 for r in self.records.values() if r.state == ACQUIRED)

    def first_available(self) -> int:
        """Where a log read for new acquisitions starts: the oldest AVAILABLE offset, else SPEO."""
        for off in range(self.start_offset, self.end_offset):
            if self.records[off].state == AVAILABLE:
                return off
        return self.end_offset

    def next_deadline(self) -> int | None:
        deadlines = [r.lock_deadline for r in self.records.values() if r.state == ACQUIRED]
        return min(deadlines) if deadlines else None

    # --- changes ---

    def move_start(self, log_start_offset: int) -> None:
        """Records below the log start are gone (retention, DeleteRecords): skip them."""
        if log_start_offset > self.start_offset:
            for off in range(self.start_offset, min(log_start_offset, self.end_offset)):
                self.records.pop(off, None)
            self.start_offset = log_start_offset
            self.end_offset = max(self.end_offset, log_start_offset)

    def acquire(
        self,
        member: str,
        data_ranges: Sequence[tuple[int, int]],
        upper: int,
        max_records: int,
        now: int,
        lock_ms: int,
    ) -> list[tuple[int, int, int]]:
        """Acquire for ``member`` AVAILABLE offsets inside ``data_ranges`` (inclusive ranges
        of data records read from the log, ascending, below ``upper``); the acquired
        (first, last, delivery count) runs."""
        budget = min(max_records, self.max_locks - self.acquired_count)
        got: list[int] = []
        data = sorted(data_ranges)
        i = 0
        off = self.first_available()
        limit = min(upper, data[-1][1] + 1) if data else off
        while off < limit and len(got) < budget:
            while i < len(data) and data[i][1] < off:
                i += 1
            is_data = i < len(data) and data[i][0] <= off <= data[i][1]
            r = self.records.get(off)
            if r is None:  # at or past SPEO: first sight of this offset
                r = self.records[off] = InFlight(AVAILABLE if is_data else ARCHIVED, 0)
                self.end_offset = off + 1
            if is_data and r.state == AVAILABLE:
                r.state, r.member, r.lock_deadline = ACQUIRED, member, now + lock_ms
                r.delivery_count += 1
                got.append(off)
            off += 1
        self._advance()
        runs: list[tuple[int, int, int]] = []
        for off in got:
            count = self.records[off].delivery_count
            if runs and runs[-1][1] == off - 1 and runs[-1][2] == count:
                runs[-1] = (runs[-1][0], off, count)
            else:
                runs.append((off, off, count))
        return runs

    def acknowledge(self, member: str, first: int, last: int, types: Sequence[int]) -> int:
        """Apply one acknowledgement batch; 0 or the error (nothing changes on an error)."""
        if last < first or not types or (len(types) != 1 and len(types) != last - first + 1):
            return ErrorCode.INVALID_REQUEST
        if any(t not in (GAP, ACCEPT, RELEASE, REJECT) for t in types):
            return ErrorCode.INVALID_REQUEST
        for off in range(first, last + 1):
            r = self.records.get(off)
            if r is None or r.state != ACQUIRED or r.member != member:
                return ErrorCode.INVALID_RECORD_STATE
        for i, off in enumerate(range(first, last + 1)):
            kind = types[0] if len(types) == 1 else types[i]
            r = self.records[off]
            if kind == RELEASE:
                self._make_available(r)
            else:
                r.state, r.member = _ACK_STATE[kind], None
        self._advance()
        return 0

    def release_member(self, member: str) -> int:
        """Every record ``member`` holds goes back (a member that left or closed its session)."""
        released = 0
        for r in self.records.values():
            if r.state == ACQUIRED and r.member == member:
                self._make_available(r)
                released += 1
        self._advance()
        return released

    def expire(self, now: int) -> int:
        """Locks past their deadline are released; how many."""
        expired = 0
        for r in self.records.values():
            if r.state == ACQUIRED and r.lock_deadline <= now:
                self._make_available(r)
                expired += 1
        if expired:
            self._advance()
        return expired

    def _make_available(self, r: InFlight) -> None:
        r.member, r.lock_deadline = None, 0
        r.state = ARCHIVED if r.delivery_count >= self.delivery_limit else AVAILABLE

    def _advance(self) -> None:
        while self.start_offset < self.end_offset and self.records[self.start_offset].state in (
            ACKNOWLEDGED,
            ARCHIVED,
        ):
            del self.records[self.start_offset]
            self.start_offset += 1
