"""DuckDB, polars and pyiceberg read the same topic table (issue 39's readers) and each returns
exactly the topic's committed records, with the same column types: the whole table, the table
as an earlier snapshot held it (time travel), and a filter on the partition column and on the
table's own partitioning (the hour of ``timestamp``). Nothing downloads at run time: DuckDB
reads the Parquet files pyiceberg plans with its own reader (a local warehouse) or the Arrow
data pyiceberg reads (``DataScan.to_duckdb``: an S3 one, which DuckDB would need its httpfs
extension for), never through its iceberg extension; polars plans with pyiceberg
(``scan_iceberg``). Against a local warehouse and an S3 one (moto, ``s3_support``)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from confluent_kafka import Producer
from tables_support import (
    CommittedOffsets,
    Row,
    create_table_topic,
    end_offsets,
    open_table,
    rows_of_arrow,
    topic_rows,
    wait_until,
)

from gregor.testing import InProcessBroker

pytest.importorskip("pyiceberg")
duckdb = pytest.importorskip("duckdb")
pl = pytest.importorskip("polars")

PARTITIONS = 3
TOPIC = "readers"

#: The columns' types as each reader declares them.
DUCKDB_TYPES = [
    ("key", "BLOB"),
    ("value", "BLOB"),
    ("headers", 'STRUCT("key" VARCHAR, "value" BLOB)[]'),
    ("timestamp", "TIMESTAMP WITH TIME ZONE"),
    ("partition", "INTEGER"),
    ("offset", "BIGINT"),
]


def polars_types() -> dict[str, Any]:
    return {
        "key": pl.Binary,
        "value": pl.Binary,
        "headers": pl.List(pl.Struct({"key": pl.String, "value": pl.Binary})),
        "timestamp": pl.Datetime("us", "UTC"),
        "partition": pl.Int32,
        "offset": pl.Int64,
    }


@pytest.fixture(scope="module", params=["local", "s3"])
def broker(request: pytest.FixtureRequest) -> Iterator[tuple[InProcessBroker, dict[str, str]]]:
    if request.param == "local":
        with InProcessBroker() as b:
            yield b, {}
        return
    pytest.importorskip("moto")
    from s3_support import moto_s3

    with moto_s3() as store:
        props = store.broker_props(f"s3://{store.new_bucket()}/tables")
        with InProcessBroker(config=props) as b:
            yield b, props


def produce(bootstrap: str, n: int, tag: str, timestamp_ms: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(n):
        key = None if i % 7 == 0 else f"{tag}k{i}".encode()
        headers = [("h", f"{i}".encode()), ("empty", None)] if i % 3 == 0 else None
        p.produce(
            TOPIC,
            f"{tag}v{i}".encode(),
            key,
            partition=i % PARTITIONS,
            headers=headers,
            timestamp=timestamp_ms + i,
        )
    assert p.flush(30) == 0


def python_types(rows: list[dict[str, Any]]) -> set[tuple[str, str]]:
    """(column, Python type of its non-null values), headers' fields included."""
    out = set()
    for r in rows:
        for name, v in r.items():
            if v is not None:
                out.add((name, type(v).__name__))
            if name == "timestamp" and v is not None:
                out.add(("timestamp.utcoffset", str(v.utcoffset())))
        for h in r["headers"] or ():
            out |= {(f"headers.{k}", type(v).__name__) for k, v in h.items() if v is not None}
    return out


class Readers:
    """The three readers over one table, each giving ``to_pylist``-shaped dicts."""

    def __init__(self, table: Any, props: dict[str, str]) -> None:
        self.table = table
        self.local = not props
        # polars reads the planned files with its own object-store client: told where the
        # store is (its storage options), as a user would tell it.
        self.storage_options = None
        if props:
            self.storage_options = {
                "aws_endpoint_url": props["iceberg.s3.endpoint"],
                "aws_region": props["iceberg.s3.region"],
                "aws_access_key_id": props["iceberg.s3.access-key-id"],
                "aws_secret_access_key": props["iceberg.s3.secret-access-key"],
                "aws_allow_http": "true",
                "aws_virtual_hosted_style_request": "false",
            }

    def pyiceberg(self, snapshot_id: int | None = None, row_filter: str = "") -> list[dict]:
        scan = self.table.scan(snapshot_id=snapshot_id, row_filter=row_filter or "True")
        return scan.to_arrow().to_pylist()

    def duckdb(
        self, snapshot_id: int | None = None, row_filter: str = "", where: str = ""
    ) -> list[dict]:
        """pyiceberg plans (``row_filter`` prunes files), DuckDB reads and selects (``where``)."""
        scan = self.table.scan(snapshot_id=snapshot_id, row_filter=row_filter or "True")
        con = duckdb.connect()
        if self.local:
            tasks = list(scan.plan_files())
            assert all(not t.delete_files for t in tasks)  # plain data files: read them whole
            files = [t.file.file_path.removeprefix("file://") for t in tasks]
            rel = con.read_parquet(files) if files else None
            if rel is None:
                return []
            con.register("t", rel)
        else:
            scan.to_duckdb("t", connection=con)
        query = con.sql(
            'SELECT "key", "value", "headers", "timestamp", "partition", "offset" FROM t'
            + (f" WHERE {where}" if where else "")
        )
        assert list(zip(query.columns, [str(t) for t in query.types], strict=True)) == DUCKDB_TYPES
        return query.to_arrow_table().to_pylist()

    def polars(self, snapshot_id: int | None = None, frame_filter: Any = None) -> list[dict]:
        frame = pl.scan_iceberg(
            self.table, snapshot_id=snapshot_id, storage_options=self.storage_options
        )
        if frame_filter is not None:
            frame = frame.filter(frame_filter)
        df = frame.select("key", "value", "headers", "timestamp", "partition", "offset").collect()
        assert dict(df.schema) == polars_types()
        return df.to_dicts()


def caught_up(bootstrap: str, offsets: CommittedOffsets) -> bool:
    ends = end_offsets(bootstrap, TOPIC, PARTITIONS)
    table = offsets()
    return all(table.get(p) == end for p, end in ends.items() if end > 0)


def check(rows: list[dict], expected: list[Row], types: set[tuple[str, str]]) -> None:
    assert rows_of_arrow(rows) == expected
    assert python_types(rows) == types


def test_duckdb_polars_and_pyiceberg_read_exactly_the_topic(
    broker: tuple[InProcessBroker, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("POLARS_ICEBERG_PLANNER", "pyiceberg")  # what it does without the plugin
    b, props = broker
    bootstrap = b.bootstrap_servers
    logs = b.data_dir / "logs"
    offsets = CommittedOffsets(logs, TOPIC, props)
    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=2)
    first_hour_ms = int(hour.timestamp() * 1000) + 60_000
    second_hour = hour + timedelta(hours=1)
    create_table_topic(bootstrap, TOPIC, PARTITIONS)
    produce(bootstrap, 60, "a", first_hour_ms)
    wait_until(lambda: caught_up(bootstrap, offsets))
    first = topic_rows(bootstrap, TOPIC, PARTITIONS)
    assert len(first) == 60
    first_snapshot = open_table(logs, TOPIC, props).current_snapshot().snapshot_id

    produce(bootstrap, 60, "b", int(second_hour.timestamp() * 1000) + 60_000)
    wait_until(lambda: caught_up(bootstrap, offsets))
    everything = topic_rows(bootstrap, TOPIC, PARTITIONS)
    assert len(everything) == 120
    table = open_table(logs, TOPIC, props)
    readers = Readers(table, props)

    types = {
        ("key", "bytes"),
        ("value", "bytes"),
        ("headers", "list"),
        ("headers.key", "str"),
        ("headers.value", "bytes"),
        ("timestamp", "datetime"),
        ("timestamp.utcoffset", "0:00:00"),
        ("partition", "int"),
        ("offset", "int"),
    }
    for read in (readers.pyiceberg, readers.duckdb, readers.polars):
        check(read(), everything, types)

    # Time travel: the table as the first snapshot held it.
    check(readers.pyiceberg(snapshot_id=first_snapshot), first, types)
    check(readers.duckdb(snapshot_id=first_snapshot), first, types)
    check(readers.polars(snapshot_id=first_snapshot), first, types)

    # A filter on the partition column: exactly that partition's records (partition 1's have
    # no headers: every third record has them, and those all go to partition 0).
    one = [r for r in everything if r[0] == 1]
    assert one and not [r for r in one if r[4]]
    bare = types - {("headers.key", "str"), ("headers.value", "bytes")}
    check(readers.pyiceberg(row_filter="partition = 1"), one, bare)
    check(readers.duckdb(row_filter="partition = 1", where='"partition" = 1'), one, bare)
    check(readers.polars(frame_filter=pl.col("partition") == 1), one, bare)

    # A filter on the table's partitioning (hour of timestamp): pyiceberg plans only the
    # second hour's files, and every reader returns exactly the second hour's records.
    later = [r for r in everything if r[5] >= second_hour.timestamp() * 1000]
    assert len(later) == 60
    since = f"timestamp >= '{second_hour.isoformat()}'"
    planned = {t.file.file_path for t in table.scan(row_filter=since).plan_files()}
    assert planned and planned < {t.file.file_path for t in table.scan().plan_files()}
    check(readers.pyiceberg(row_filter=since), later, types)
    at = f"\"timestamp\" >= '{second_hour.isoformat()}'"
    check(readers.duckdb(row_filter=since, where=at), later, types)
    check(readers.polars(frame_filter=pl.col("timestamp") >= second_hour), later, types)
