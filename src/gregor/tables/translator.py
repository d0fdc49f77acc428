"""One partition's translator: the committed log, in order, into the topic's table.

Theory of operation. The leader of a partition whose topic has a table runs one
:class:`PartitionTranslator` (a task on the broker's loop, started and stopped by
``gregor.tables.service``). It keeps three numbers:

* ``committed``: the partition's offset in the table's current snapshot (None: the table has
  no entry for it yet), read from the table when the translator starts;
* ``first``: where the rows buffered now start (``committed``, or the log start offset);
* ``position``: the next offset to read; every record below it and at or above ``first`` is
  either in the buffer or was left out on purpose (a control batch, an aborted transaction).

The loop reads through the same path a read_committed Fetch takes (``PartitionSource``: up to
the last stable offset, with the aborted-transaction list), converts in a worker thread
(``gregor.tables.schema.RowConverter``: control batches and aborted records dropped), and
buffers the rows. A commit is due when the oldest buffered read is ``iceberg.target.lag.ms``
old (records that came while the last commit ran count from that commit's start) or the
buffer holds ``max_buffer_bytes``; it appends ``[first, position)`` on top of a
snapshot whose offset for this partition is ``committed`` (``gregor.tables.catalog``) and
moves ``committed`` and ``first`` to ``position``. A commit that finds the table elsewhere
(another writer moved the partition on) drops the buffer and resumes from the table's offset.
Caught up, the loop waits until the partition's high watermark moves or the commit falls
due; when the partition moved, it lets the appends gather a moment (``GATHER_S``, a tenth of
the lag at most, never past the commit's due time) before reading, so a busy partition is
read in a few large reads rather than one per produce request, and the lag of what it then
reads counts from the move.

An upsert translator (``iceberg.upsert``) does the same with one difference: its commit
replaces the rows of the keys ``[first, position)`` touches with each key's latest record
(``gregor.tables.upsert``), and it is also due when the buffer holds
``upsert.MAX_COMMIT_ROWS`` rows (one commit's keys are one filter).

An append translator (``key_value``) commits through its topic's
:class:`~gregor.tables.commit_group.CommitGroup`: the commits of the topic's partitions this
broker leads that fall due together, and those of the partitions the group calls when one
falls due, become one snapshot with one data file per hour (fewer, larger files).

Nothing is kept across a crash but the table: a new translator resumes at the table's
offset, so the table is always a prefix of the partition's committed records, each once.

In a typed mode (``value_schema_id_prefix``, ``value_schema_latest``) each converted read is
split (``gregor.tables.dead_letters.TypedTranslation``, in the same worker thread) into typed
rows, buffered here, and dead letters, buffered there; a commit writes the dead-letter table
``<topic>~dlq`` first and the topic's table second, and a resume skips the records the
dead-letter table already holds above the topic table's offset (a crash between the two), so
the two tables together hold each committed record exactly once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence

import pyarrow as pa

from gregor.tables.catalog import CatalogRunner, CommitRange, OffsetsMoved, TopicTable
from gregor.tables.commit_group import CommitGroup
from gregor.tables.dead_letters import TypedTranslation
from gregor.tables.failures import RepeatedFailure
from gregor.tables.faults import crash_point
from gregor.tables.schema import ARROW_SCHEMA, TYPED_ARROW_SCHEMA, RowConverter
from gregor.tables.source import CommittedRead, PartitionSource
from gregor.tables.upsert import MAX_COMMIT_ROWS

__all__ = ["CatalogRunner", "CommittedRead", "PartitionSource", "PartitionTranslator"]

log = logging.getLogger("gregor.tables")

#: Bytes asked of one read (the records of whole batches, at least one batch).
READ_BYTES = 4 << 20
#: Buffered Arrow bytes that make a commit due whatever the lag.
MAX_BUFFER_BYTES = 64 << 20
#: How long a moved partition's appends gather before the translator reads them (at most a
#: tenth of its lag, never past its commit's due time).
GATHER_S = 0.1
#: Pause after a failed read or commit before the translator tries again.
RETRY_S = 1.0


class PartitionTranslator:
    def __init__(
        self,
        source: PartitionSource,
        table: TopicTable,
        run_catalog: CatalogRunner,
        *,
        target_lag_ms: int,
        max_buffer_bytes: int = MAX_BUFFER_BYTES,
        upsert: bool = False,
        typed: TypedTranslation | None = None,
        group: CommitGroup | None = None,
    ) -> None:
        if group is not None and (upsert or typed is not None):
            raise ValueError("upsert and typed translators commit alone")
        self.source = source
        self.group = group
        self._wakeup: asyncio.Future[None] | None = None
        self.typed = typed
        self.table = table
        self.run_catalog = run_catalog
        self.target_lag_ms = target_lag_ms
        self.max_buffer_bytes = max_buffer_bytes
        self.upsert = upsert
        self.committed: int | None = None
        self.first = 0
        self.position = 0
        self.commits = 0
        self._rows: list[pa.Table] = []
        self._bytes = 0
        self._count = 0  # buffered rows
        self._oldest: float | None = None  # monotonic time of the oldest buffered read
        self._moved: float | None = None  # when the partition moved past a caught-up position
        self._converter = RowConverter(source.topic, source.index)
        # a failure's traceback once, its repeats in a line now and then (until a commit works)
        self._failures = RepeatedFailure(log, f"translating {source.topic}-{source.index}")

    def __repr__(self) -> str:
        return f"PartitionTranslator({self.source.topic}-{self.source.index}, at {self.position})"

    async def run(self) -> None:
        """Translate until cancelled; failures are logged and retried."""
        if self.group is not None:
            self.group.join(self)
        try:
            while True:
                try:
                    await self._resume()
                    await self._translate()
                except asyncio.CancelledError:
                    raise
                except Exception as e:  # noqa: BLE001 - a failed read or commit: start again from the table
                    self._failures.failed(e)
                    await asyncio.sleep(RETRY_S)
        finally:
            if self.group is not None:
                self.group.leave(self)

    def holds_rows(self) -> bool:
        """Rows are buffered that no commit has taken (the commit group asks)."""
        return self._oldest is not None

    def wake(self) -> None:
        """The commit group calls: stop waiting for records."""
        if self._wakeup is not None and not self._wakeup.done():
            self._wakeup.set_result(None)

    async def _resume(self) -> None:
        offsets = await self.run_catalog(self.table.offsets)
        assert isinstance(offsets, dict)
        self._start_at(offsets.get(self.source.index))
        if self.typed is not None:
            await self.typed.resume(self.committed)

    def _start_at(self, committed: int | None) -> None:
        self.committed = committed
        start = committed if committed is not None else self.source.log_start_offset
        self.first = self.position = start
        self._rows = []
        self._bytes = self._count = 0
        self._oldest = self._moved = None
        self._converter = RowConverter(self.source.topic, self.source.index)

    async def _translate(self) -> None:
        source = self.source
        while True:
            if self.position < source.log_start_offset:
                log.warning(
                    "%s-%d: offsets %d to %d were deleted before they reached the table",
                    source.topic,
                    source.index,
                    self.position,
                    source.log_start_offset,
                )
                self.position = source.log_start_offset
                self._converter = RowConverter(source.topic, source.index)
            read = None
            if self.position < source.last_stable_offset and not self._full():
                read = source.read_committed(self.position, READ_BYTES)
            if read is not None and read.records:
                rows, nxt = await asyncio.to_thread(
                    self._convert, read.records, read.aborted, self.position
                )
                crash_point("read")
                if nxt > self.position:
                    if rows.num_rows:
                        self._rows.append(rows)
                        self._bytes += rows.nbytes
                        self._count += rows.num_rows
                    if self._oldest is None:
                        self._oldest = self._moved or time.monotonic()
                    self.position = nxt
            self._moved = None
            if self._due():
                await self._commit()
                continue
            if read is not None and read.records and self.position < source.last_stable_offset:
                continue  # more to read now
            await self._wait()

    def _convert(
        self, records: bytes | memoryview, aborted: Sequence[tuple[int, int]], start: int
    ) -> tuple[pa.Table, int]:
        rows, nxt = self._converter.rows(records, aborted, start)
        if self.typed is not None:
            rows = self.typed.split(rows)
        return rows, nxt

    def _due(self) -> bool:
        if self._oldest is None:
            return False
        if self._full() or (self.group is not None and self.group.called(self)):
            return True
        return (time.monotonic() - self._oldest) * 1000 >= self.target_lag_ms

    def _full(self) -> bool:
        """The buffer holds what one commit takes at most."""
        return self._bytes >= self.max_buffer_bytes or (
            self.upsert and self._count >= MAX_COMMIT_ROWS
        )

    async def _wait(self) -> None:
        """Until the partition moves past ``position`` or the commit falls due."""
        source = self.source
        if self.position < source.last_stable_offset and not self._full():
            return
        timeout = self._until_due()
        fut = source.wait()
        self._wakeup = asyncio.get_running_loop().create_future()
        try:
            await asyncio.wait(
                (fut, self._wakeup), timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
            moved = fut.done() and not self._wakeup.done()
        finally:
            self._wakeup = None
            source.forget(fut)
        if moved:
            await self._gather()

    async def _gather(self) -> None:
        """The partition moved: let its appends gather a moment before reading them, so a busy
        partition is read in a few large reads, not one per produce request (each read costs
        a conversion's set-up, a thread hand-off and a chunk to concatenate). The records' lag
        counts from now, not from the read; never past the commit's due time."""
        self._moved = time.monotonic()
        pause = min(GATHER_S, self.target_lag_ms / 10_000)
        due = self._until_due()
        if due is not None:
            pause = min(pause, due)
        if pause > 0:
            await asyncio.sleep(pause)

    def _until_due(self) -> float | None:
        """Seconds until the buffered rows' commit falls due by lag (None: nothing buffered)."""
        if self._oldest is None:
            return None
        return max(0.0, self._oldest + self.target_lag_ms / 1000 - time.monotonic())

    async def _commit(self) -> None:
        began = time.monotonic()
        crash_point("commit.begin")
        if self.typed is not None:
            rows = self.typed.typed_rows(self._rows, TYPED_ARROW_SCHEMA)
        else:
            rows = pa.concat_tables(self._rows) if self._rows else ARROW_SCHEMA.empty_table()
        partition, expected, first, nxt = (
            self.source.index,
            self.committed,
            self.first,
            self.position,
        )
        try:
            if self.typed is not None:
                await self.typed.commit(first, nxt)
            if self.group is not None:
                await self.group.commit(self, CommitRange(partition, expected, first, nxt, rows))
            else:
                await self.run_catalog(
                    lambda: self.table.commit(partition, expected, first, nxt, rows, self.upsert)
                )
        except OffsetsMoved as e:
            if self.typed is not None:
                raise  # resume from both tables (the run loop)
            log.warning("%s-%d: %s; resuming from the table", self.source.topic, partition, e)
            self._start_at(e.found)
            return
        crash_point("commit.done")
        self._failures.succeeded()
        self.commits += 1
        self.committed = self.first = nxt
        self._rows = []
        self._bytes = self._count = 0
        # records that came while the commit ran (none read: the loop waited for it) are
        # older than their read will be: their lag counts from the commit's start
        self._oldest = began if self.position < self.source.last_stable_offset else None
