"""Retention when the cut falls inside a data file (pyiceberg's SQL catalog, no broker): the
file is rewritten without the rows older than the cut, the rows after it stay exactly, in
offset order, and every snapshot the delete makes carries the table's offsets unchanged."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from gregor.tables.catalog import TableCatalog
from gregor.tables.maintenance import delete_expired_rows
from gregor.tables.offsets import OFFSETS, offsets_of_summary, table_offsets
from gregor.tables.schema import ARROW_SCHEMA
from gregor.tables.settings import catalog_settings

HOUR_MS = 3_600_000
BASE_MS = 1_795_000_000_000 // HOUR_MS * HOUR_MS  # the start of an hour


def rows(partition: int, first: int, n: int) -> pa.Table:
    """Records one minute apart, from the start of the hour."""
    return pa.Table.from_pylist(
        [
            {
                "key": None,
                "value": f"{partition}-{o}".encode(),
                "headers": None,
                "timestamp": (BASE_MS + o * 60_000) * 1000,
                "partition": partition,
                "offset": o,
            }
            for o in range(first, first + n)
        ],
        schema=ARROW_SCHEMA,
    )


def test_a_cut_inside_a_file_rewrites_it_without_the_old_rows(tmp_path: Path) -> None:
    table = TableCatalog(catalog_settings({}, str(tmp_path))).open_table("orders")
    table.commit(0, None, 0, 30, rows(0, 0, 30))
    table.commit(1, None, 0, 30, rows(1, 0, 30))
    before = {s.snapshot_id for s in table.table.snapshots()}
    # now is 10 minutes past the 20th record; keep 10 minutes: offsets 0 to 19 go
    now_ms = BASE_MS + 30 * 60_000
    assert delete_expired_rows(table, 10 * 60_000, now_ms) == 2  # both files held old rows

    got = table.table.scan().to_arrow()
    assert sorted(zip(got["partition"].to_pylist(), got["offset"].to_pylist(), strict=True)) == [
        (p, o) for p in (0, 1) for o in range(20, 30)
    ]
    for p in (0, 1):  # each rewritten file keeps its rows in offset order
        offsets = [
            o
            for q, o in zip(got["partition"].to_pylist(), got["offset"].to_pylist(), strict=True)
            if q == p
        ]
        assert offsets == list(range(20, 30))
    made = [s for s in table.table.snapshots() if s.snapshot_id not in before]
    assert made, "the delete made no snapshot"
    for s in made:
        assert OFFSETS in s.summary.additional_properties
        assert offsets_of_summary(s.summary.additional_properties) == {0: 30, 1: 30}
    assert table_offsets(table.table) == {0: 30, 1: 30}
    # nothing older than the cut is left: a second pass makes no commit
    assert delete_expired_rows(table, 10 * 60_000, now_ms) == 0
    assert len(table.table.snapshots()) == len(before) + len(made)
