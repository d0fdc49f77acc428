"""The data files a translator's commit writes (``gregor.tables.data_files``): offsets and
timestamps delta-encoded without a dictionary, every other column as pyiceberg writes it
(dictionary where it pays, field ids, the table's codec), the manifest's statistics those of
the file, and the rows read back exactly (pyiceberg, pyarrow's own Parquet reader)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from gregor.tables.catalog import TableCatalog, TopicTable
from gregor.tables.data_files import _leaf_paths
from gregor.tables.schema import ARROW_SCHEMA
from gregor.tables.settings import catalog_settings

HOUR_US = 3_600_000_000
BASE_US = 491_000 * HOUR_US  # the start of an hour


def rows(partition: int, first: int, n: int) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {
                "key": f"k{o % 5}".encode() if o % 4 else None,
                "value": f"{partition}-{o}".encode(),
                "headers": [{"key": "trace", "value": f"{o}".encode()}] if o % 3 == 0 else None,
                "timestamp": BASE_US + o * 1000,
                "partition": partition,
                "offset": o,
            }
            for o in range(first, first + n)
        ],
        schema=ARROW_SCHEMA,
    )


def open_orders(data_dir: Path) -> TopicTable:
    return TableCatalog(catalog_settings({}, str(data_dir))).open_table("orders")


def local(path: str) -> str:
    return path.removeprefix("file://")


def test_a_commit_writes_offsets_and_timestamps_delta_encoded(tmp_path: Path) -> None:
    table = open_orders(tmp_path)
    # a translator's rows come in a chunk per read: the file's row groups do not follow them
    chunked = pa.concat_tables(rows(0, o, 500) for o in range(100, 5100, 500))
    assert chunked.column("offset").num_chunks == 10
    table.commit(0, None, 100, 5100, chunked)
    table.commit(1, None, 0, 3000, rows(1, 0, 3000))

    schema = table.table.schema()
    field_id = {n: schema.find_field(n).field_id for n in ("offset", "timestamp", "key", "value")}
    files = [task.file for task in table.table.scan().plan_files()]
    assert sorted(f.record_count for f in files) == [3000, 5000]
    for data_file in files:
        parquet = pq.ParquetFile(local(data_file.file_path))
        meta = parquet.metadata
        encodings: dict[str, set[str]] = {}
        dictionary: dict[str, bool] = {}
        for g in range(meta.num_row_groups):
            for c in range(meta.num_columns):
                column = meta.row_group(g).column(c)
                encodings.setdefault(column.path_in_schema, set()).update(column.encodings)
                dictionary[column.path_in_schema] = column.has_dictionary_page
        for ordered in ("offset", "timestamp"):
            assert "DELTA_BINARY_PACKED" in encodings[ordered]
            assert not dictionary[ordered]
        for repeated in ("key", "partition", "headers.list.element.key"):
            assert "RLE_DICTIONARY" in encodings[repeated], repeated
        assert meta.num_row_groups == 1
        assert meta.row_group(0).column(0).compression == "ZSTD"
        # field ids, as Iceberg readers find columns by them
        ids = {
            parquet.schema.column(i).path: parquet.schema_arrow.field(
                parquet.schema.column(i).path.split(".")[0]
            ).metadata[b"PARQUET:field_id"]
            for i in range(meta.num_columns)
        }
        for name in ("offset", "timestamp", "key", "value"):
            assert ids[name] == str(field_id[name]).encode()
        # the manifest's bounds are the file's rows'
        got = parquet.read()
        offsets = got.column("offset").to_pylist()
        assert data_file.record_count == len(offsets)
        lower = int.from_bytes(data_file.lower_bounds[field_id["offset"]], "little", signed=True)
        upper = int.from_bytes(data_file.upper_bounds[field_id["offset"]], "little", signed=True)
        assert (lower, upper) == (min(offsets), max(offsets))
        assert data_file.null_value_counts[field_id["key"]] == sum(1 for o in offsets if o % 4 == 0)

    # read back exactly, by pyarrow's reader and pyiceberg's (a record without headers has
    # an empty list in the files, as pyiceberg writes every file of the table)
    files_read = pa.concat_tables(pq.read_table(local(f.file_path)) for f in files)
    expected = pa.concat_tables([rows(0, 100, 5000), rows(1, 0, 3000)]).to_pylist()
    for row in expected:
        row["headers"] = row["headers"] or []
    order = [("partition", "ascending"), ("offset", "ascending")]
    for back in (files_read, table.table.scan().to_arrow()):
        assert back.sort_by(order).cast(ARROW_SCHEMA).to_pylist() == expected


def test_leaf_paths_are_the_parquet_column_paths(tmp_path: Path) -> None:
    schema = ARROW_SCHEMA.append(
        pa.field(
            "typed",
            pa.struct(
                [
                    pa.field("tags", pa.map_(pa.string(), pa.int32())),
                    pa.field("points", pa.list_(pa.struct([pa.field("x", pa.float64())]))),
                ]
            ),
        )
    )
    pq.write_table(schema.empty_table(), tmp_path / "empty.parquet")
    written = [c.path for c in pq.ParquetFile(tmp_path / "empty.parquet").schema]
    assert _leaf_paths(schema) == written
    assert "typed.points.list.element.x" in written
