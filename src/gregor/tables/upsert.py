"""A compacted topic's table as an upsert table (``iceberg.upsert=true``): one row per key.

What the table holds. For each partition, at most one row per key: the record with the
highest offset for that key among the partition's committed records below the table's offset
(``gregor.tables.offsets``), unless that record is a tombstone (a null value), which deletes
the key's row. That is what a consumer of the compacted topic reads once the cleaner has
compacted everything, so the row identity is (``partition``, ``key``), as Kafka's compaction is
per partition: the same key in two partitions (a producer with its own partitioner, or a topic
whose partitions were added) is two rows, each its own partition's latest. A record without a
key has no identity to upsert; a compacted topic refuses such records when they are produced
(Kafka's rule, kept by ``gregor.storage.validator``), so they can only be older than the
topic's compaction, and, as Kafka's log cleaner discards them, they are left out.

How a commit applies ``[first, next)`` of one partition (``gregor.tables.catalog``):
:func:`latest_per_key` keeps each key's last record of the range (the rows come in offset
order), then one pyiceberg ``Transaction.overwrite`` deletes the rows of every key the range
touches (:func:`touched_keys_filter`: ``partition = p AND key IN (...)``) and appends the
kept records that are not tombstones, with the snapshot properties carrying the new offsets
on each snapshot it makes. The transaction is committed to the catalog once, on the snapshot
the offsets were read from, exactly as an append is: a crash before leaves the old table and
offsets, after it the new ones, never a part.

Why ``overwrite`` and not pyiceberg's ``upsert``: ``Table.upsert`` (0.12) commits its own
transaction and only updates and inserts: a tombstone would need a second, separate delete
commit, and the offsets would have to ride on one of the two (a crash between them loses or
repeats the range). ``Transaction.overwrite`` with a filter is the library's own
delete-then-append in one transaction, takes snapshot properties, and needs no read of the
old rows to compare. pyiceberg writes deletes copy-on-write (no delete files; merge-on-read
is not written by 0.12): a data file holding a deleted key is rewritten without it, so a commit
reads the data files of its partition whose metrics may match and rewrites those that do. Its
cost grows with the partition's part of the table (its files) more than with the batch, so
bigger batches amortise it; the translator bounds a commit's batch (:data:`MAX_COMMIT_ROWS`)
so the ``IN`` filter stays a size pyiceberg binds and Arrow evaluates quickly. Measured here
(``bench/tables_upsert.py``, one partition of 100k keys with 100 B values, 2 shared cores):
a commit of 10k updates (10% tombstones) takes 0.85 s on a table of one data file and 2.45 s
on one of 20 files (compaction, ``gregor.tables.maintenance``, keeps the count down); 1k
updates 0.37 s; 100k updates 4.2 s.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

#: The table property that records the table's kind when it is made (``"true"``: upsert).
TABLE_PROPERTY = "gregor.upsert"
#: Buffered rows that make an upsert translator's commit due whatever the lag: the keys of one
#: commit are one ``IN`` filter.
MAX_COMMIT_ROWS = 100_000


class TableKindMismatch(RuntimeError):
    """The topic's ``iceberg.upsert`` is not the kind its table was made as."""


def table_is_upsert(properties: dict[str, str]) -> bool:
    """The kind a table's properties record (a table made before the property: append)."""
    return properties.get(TABLE_PROPERTY, "false") == "true"


def latest_per_key(rows: pa.Table) -> tuple[pa.Array, pa.Table]:
    """The distinct keys of ``rows`` (one partition's records in offset order; null keys left
    out) and, of each key's last record, those that are not tombstones."""
    keyed = rows.filter(pc.is_valid(rows.column("key")))
    if keyed.num_rows == 0:
        return pa.array([], pa.binary()), keyed
    last = keyed.group_by("key").aggregate([("offset", "max")])
    keys = last.column("key").combine_chunks()
    latest = keyed.filter(pc.is_in(keyed.column("offset"), value_set=last.column("offset_max")))
    return keys, latest.filter(pc.is_valid(latest.column("value")))


def touched_keys_filter(partition: int, keys: pa.Array) -> Any:
    """``partition = p AND key IN keys``: the rows a commit of these keys replaces."""
    from pyiceberg.expressions import And, EqualTo, In

    # pyiceberg's predicates are pydantic models whose __init__ mypy does not see
    return And(
        EqualTo("partition", partition),  # type: ignore[call-arg,arg-type]
        In("key", set(keys.to_pylist())),  # type: ignore[call-arg,arg-type]
    )
