"""One broker's commits of a topic's partitions, gathered into one snapshot.

Theory of operation. A partition's translator commits its buffered rows when they are
``iceberg.target.lag.ms`` old or its buffer is full. Committed alone, each partition adds a
data file, a manifest and a snapshot per commit: a topic of P partitions at a 1 s lag makes
P files a second, and a reader pays for each file it opens (Spark: several ms a file, more
than reading a small file's rows). So the translators of a topic's append table on one broker
commit through one :class:`CommitGroup`:

* a translator whose commit is due hands its range (a :class:`CommitRange`) to the group and
  waits for the answer;
* the first range of a gathering *calls* the topic's other translators that hold rows at that
  moment (:meth:`CommitGroup.called`, and ``wake`` ends such a translator's wait for records):
  each hands its rows over after the read it is in, though its own lag is not reached yet,
  so they ride along instead of making a file of their own a moment later. A translator that
  falls due by itself while a gathering waits joins it too;
* once no called translator still holds rows it has not handed over (or ``GATHER_S`` passed:
  one that is slow to, e.g. waiting to retry a failed read), the group commits the ranges in
  one catalog job (:meth:`TopicTable.commit_ranges`: one snapshot, one data file per hour for
  all of them, each range's offsets in its summary) and answers each translator: the snapshot
  id, or :class:`OffsetsMoved` for a range whose partition another writer moved on (the others
  are committed without it).

Gathering weakens no guarantee: a snapshot holds all of its ranges or none, and each range
only on top of the offset its translator started from. One gathering is committed at a time;
ranges handed over meanwhile make the next. A translator cancelled before its range went to
the catalog takes it back (nothing of it is committed; its successor resumes from the table);
once the range is in a catalog job, the job ends as it ends. Upsert and typed translators
commit alone: an upsert commit is one partition's overwrite, a typed commit writes two tables.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from gregor.tables.catalog import CatalogRunner, CommitRange, OffsetsMoved, TopicTable

__all__ = ["GATHER_S", "CommitGroup", "Member"]

#: The longest a gathering waits for a called translator's rows.
GATHER_S = 0.5


class Member(Protocol):
    """A translator, as its topic's group sees it."""

    def holds_rows(self) -> bool:
        """Rows are buffered that no commit has taken yet."""
        ...

    def wake(self) -> None:
        """End a wait for records: the group calls."""
        ...


class CommitGroup:
    def __init__(
        self, table: TopicTable, run_catalog: CatalogRunner, gather_s: float = GATHER_S
    ) -> None:
        self.table = table
        self.run_catalog = run_catalog
        self.gather_s = gather_s
        self._members: set[Member] = set()
        self._handed: dict[Member, tuple[CommitRange, asyncio.Future[int]]] = {}
        self._calling: set[Member] = set()
        self._timer: asyncio.TimerHandle | None = None
        self._flight: asyncio.Task[None] | None = None

    def join(self, member: Member) -> None:
        self._members.add(member)

    def leave(self, member: Member) -> None:
        self._members.discard(member)
        self._calling.discard(member)
        self._check()

    def cancel(self) -> None:
        """Stop a commit in flight from answering (the broker stops; its catalog job ends as
        it ends)."""
        if self._flight is not None:
            self._flight.cancel()
        self._disarm()

    def called(self, member: Member) -> bool:
        """A gathering waits for ``member``'s rows."""
        return member in self._calling

    async def commit(self, member: Member, commit_range: CommitRange) -> int:
        """Commit ``commit_range`` with the others gathered; the snapshot id that holds it.
        Raises :class:`OffsetsMoved` when the table has its partition elsewhere."""
        if member in self._handed:
            raise RuntimeError("a translator hands over one range at a time")
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        first = not self._handed
        self._handed[member] = (commit_range, fut)
        self._calling.discard(member)
        if first:
            self._calling = {m for m in self._members if m is not member and m.holds_rows()}
            for m in self._calling:
                m.wake()
        self._check()
        try:
            return await fut
        except asyncio.CancelledError:
            if self._handed.get(member, (None, None))[1] is fut:  # not in the catalog yet
                del self._handed[member]
                self._check()
            raise

    def _check(self) -> None:
        """Start the gathering's commit if it waits for no one (or arm its timer)."""
        if self._flight is not None:
            return  # the commit in flight checks again when it ends
        if not self._handed:
            self._calling.clear()
            self._disarm()
            return
        if any(m.holds_rows() for m in self._calling):
            if self._timer is None:
                self._timer = asyncio.get_running_loop().call_later(self.gather_s, self._start)
            return
        self._start()

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _start(self) -> None:
        self._timer = None
        if self._flight is not None or not self._handed:
            return
        batch = list(self._handed.values())
        self._handed.clear()
        self._calling.clear()
        self._flight = asyncio.get_running_loop().create_task(self._commit(batch))

    async def _commit(self, batch: list[tuple[CommitRange, asyncio.Future[int]]]) -> None:
        ranges = [r for r, _ in batch]
        try:
            answers = await self.run_catalog(lambda: self.table.commit_ranges(ranges))
            assert isinstance(answers, list)
        except BaseException as e:  # noqa: BLE001 - every waiting translator gets the failure
            for _, fut in batch:
                if not fut.done():
                    fut.set_exception(e if isinstance(e, Exception) else RuntimeError(str(e)))
            if not isinstance(e, Exception):
                raise
        else:
            for (_, fut), answer in zip(batch, answers, strict=True):
                if fut.done():
                    continue
                if isinstance(answer, OffsetsMoved):
                    fut.set_exception(answer)
                else:
                    fut.set_result(answer)
        finally:
            self._flight = None
            self._check()
