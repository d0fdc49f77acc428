"""Two writers of one table (two brokers' translators of different partitions, or a
translator and ``gregor tables compact``), each with its own connection to pyiceberg's SQL
catalog: when one commits between the other's read of the offsets and its commit, the loser
must start again from the winner's snapshot. pyiceberg 0.12 retries a lost commit by itself,
re-applying the same snapshot on top of the winner's: with the loser's offsets map, which
would undo the winner's offsets (duplicates on the next resume)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from gregor.tables import catalog as tables_catalog
from gregor.tables.catalog import TableCatalog, TopicTable
from gregor.tables.offsets import table_offsets
from gregor.tables.schema import ARROW_SCHEMA
from gregor.tables.settings import catalog_settings


def rows(partition: int, first: int, n: int) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {
                "key": None,
                "value": f"{partition}-{o}".encode(),
                "headers": None,
                "timestamp": 1_795_000_000_000_000,
                "partition": partition,
                "offset": o,
            }
            for o in range(first, first + n)
        ],
        schema=ARROW_SCHEMA,
    )


def writer(data_dir: Path) -> TopicTable:
    """A writer with a catalog connection of its own (as another broker has)."""
    return TableCatalog(catalog_settings({}, str(data_dir))).open_table("orders")


def test_a_commit_that_loses_the_race_keeps_the_winners_offsets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = writer(tmp_path), writer(tmp_path)
    first.commit(0, None, 0, 10, rows(0, 0, 10))
    raced = []

    def the_other_writer_commits_first(point: str) -> None:
        if point == "commit.staged" and not raced:
            raced.append(point)
            first.commit(0, 10, 10, 20, rows(0, 10, 10))

    monkeypatch.setattr(tables_catalog, "crash_point", the_other_writer_commits_first)
    second.commit(1, None, 0, 5, rows(1, 0, 5))
    assert raced

    table = writer(tmp_path).table
    assert table_offsets(table) == {0: 20, 1: 5}
    got = table.scan().to_arrow()
    keys = sorted(zip(got["partition"].to_pylist(), got["offset"].to_pylist(), strict=True))
    assert keys == [(0, o) for o in range(20)] + [(1, o) for o in range(5)]


def test_a_table_made_before_gets_the_property_when_opened(tmp_path: Path) -> None:
    from pyiceberg.catalog import load_catalog

    from gregor.tables.schema import iceberg_schema, partition_spec

    settings = catalog_settings({}, str(tmp_path))
    (tmp_path / "iceberg").mkdir()
    catalog = load_catalog(settings.name, **settings.load_properties())
    catalog.create_namespace(settings.namespace)
    old = catalog.create_table(
        (settings.namespace, "orders"),
        schema=iceberg_schema(),
        partition_spec=partition_spec(),
        properties={"gregor.topic": "orders"},
    )
    assert "commit.retry.num-retries" not in old.properties
    opened = writer(tmp_path)
    assert opened.table.properties["commit.retry.num-retries"] == "0"
    assert old.refresh().properties["commit.retry.num-retries"] == "0"


def test_compaction_reads_about_one_target_file_at_a_time(tmp_path: Path) -> None:
    from gregor.tables.maintenance import compact

    table = writer(tmp_path)
    for i in range(6):
        table.commit(0, None if i == 0 else 10 * i, 10 * i, 10 * i + 10, rows(0, 10 * i, 10))
    sizes = [t.file.file_size_in_bytes for t in table.table.scan().plan_files()]
    assert len(sizes) == 6
    with table.table.transaction() as tx:  # a target of about three of these files
        tx.set_properties({"write.target-file-size-bytes": str(3 * max(sizes))})
    done = compact(table, 2)
    assert done.files_before == 6
    assert [(read, written) for _, read, written in done.rewritten] == [(3, 1), (3, 1)]
    assert done.files_after == 2
    got = table.table.scan().to_arrow()
    assert sorted(zip(got["partition"].to_pylist(), got["offset"].to_pylist(), strict=True)) == [
        (0, o) for o in range(60)
    ]
    assert got.num_rows == 60
    assert table_offsets(table.table) == {0: 60}
