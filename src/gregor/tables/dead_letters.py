"""One partition's typed translation: the typed rows for the topic's table, the records that do
not convert for its dead-letter table ``<topic>~dlq``, both exactly once.

Theory of operation. A translator in a typed mode (``gregor.tables.typed``) splits each read
into typed rows, which it buffers as before, and dead letters, buffered here. The dead-letter
table carries its own per-partition offsets map in its snapshots (``gregor.tables.offsets``),
and a commit of ``[first, next)`` commits the dead letters first (when there are any: their
table's entry for the partition becomes ``max(next, its entry)``) and the typed rows second.
So the dead-letter table's entry ``d`` is never behind the topic table's ``m``. After a crash
between the two commits ``d > m``: the records of ``[m, d)`` are read again, and the offsets
the dead-letter table holds at or above ``m`` (read from it once, on resume: a few) are
skipped, in both tables, whatever they would convert to now (a schema registered since, the
table's schema evolved since). Every other record of ``[m, ...)`` goes where it converts to.
Each record is then in exactly one of the two tables, once: the topic table's rows and the
dead-letter table's rows together are the partition's committed records.

The ``value`` type of the buffered rows (:attr:`TypedTranslation.value_type`) starts as the
topic table's and widens with each read (``gregor.tables.typed.merge_types``), so one commit's
rows all have one type; the commit evolves the table to it.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from gregor.tables.catalog import CatalogRunner, OffsetsMoved, TopicTable
from gregor.tables.faults import crash_point
from gregor.tables.typed import TypedConverter, conform


class DeadLettersMoved(RuntimeError):
    """The dead-letter table's offset of the partition is not the translator's (another writer
    moved it): the translator resumes from both tables."""


class TypedTranslation:
    def __init__(
        self,
        converter: TypedConverter,
        table: TopicTable,
        dead_letters: TopicTable,
        partition: int,
        run_catalog: CatalogRunner,
    ) -> None:
        self.converter = converter
        self.table = table
        self.dead_letters = dead_letters
        self.partition = partition
        self.run_catalog = run_catalog
        self.committed: int | None = None  # the dead-letter table's entry for the partition
        self.value_type: pa.DataType | None = None
        self._skip = pa.array([], pa.int64())
        self._dead: list[pa.Table] = []

    async def resume(self, committed: int | None) -> None:
        """Start again where the topic table is (``committed``, its entry)."""
        offsets = await self.run_catalog(self.dead_letters.offsets)
        assert isinstance(offsets, dict)
        self.committed = offsets.get(self.partition)
        self._skip = pa.array([], pa.int64())
        if self.committed is not None and (committed is None or self.committed > committed):
            start = 0 if committed is None else committed
            held = await self.run_catalog(
                lambda: self.dead_letters.offsets_from(self.partition, start)
            )
            assert isinstance(held, list)
            self._skip = pa.array(held, pa.int64())
        got = await self.run_catalog(self.table.value_type)
        self.value_type = got if isinstance(got, pa.DataType) else None
        self._dead = []

    def split(self, rows: pa.Table) -> pa.Table:
        """The typed rows of ``rows`` (``key_value``); the dead letters are buffered here. In a
        worker thread."""
        if len(self._skip):
            held = pc.is_in(rows.column("offset"), value_set=self._skip)
            rows = rows.filter(pc.invert(held))
        typed, dead, self.value_type = self.converter.split(rows, self.value_type)
        if dead.num_rows:
            self._dead.append(dead)
        return typed

    def typed_rows(self, pieces: list[pa.Table], empty: pa.Schema) -> pa.Table:
        """The buffered typed rows as one table of :attr:`value_type`."""
        if self.value_type is None:
            return pa.concat_tables(pieces) if pieces else empty.empty_table()
        target = self.value_type
        out = []
        for piece in pieces:
            if "value" in piece.column_names:
                i = piece.schema.get_field_index("value")
                value = conform(piece.column(i).combine_chunks(), target)
                piece = piece.set_column(i, pa.field("value", target), value)
            else:
                piece = piece.append_column(
                    pa.field("value", target), pa.nulls(piece.num_rows, target)
                )
            out.append(piece)
        if not out:
            schema = empty.append(pa.field("value", target))
            return schema.empty_table()
        return pa.concat_tables(out)

    async def commit(self, first: int, next_offset: int) -> None:
        """Commit the buffered dead letters of ``[first, next_offset)`` (before the typed
        rows: see the module's docstring)."""
        if not self._dead:
            return
        rows = pa.concat_tables(self._dead)
        expected = self.committed
        new = max(next_offset, expected or 0)
        try:
            await self.run_catalog(
                lambda: self.dead_letters.commit(self.partition, expected, first, new, rows)
            )
        except OffsetsMoved as e:
            raise DeadLettersMoved(f"the dead-letter table: {e}") from None
        crash_point("dead-letters.done")
        self.committed = new
        self._dead = []

    def forget(self) -> None:
        """Drop the buffered dead letters (the translator starts again)."""
        self._dead = []
