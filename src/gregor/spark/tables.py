"""A topic's Iceberg table read by Spark's own Parquet reader (``iceberg.mode``, issue 39).

Theory of operation. pyiceberg plans the scan on the driver: it opens the catalog (the one
the cluster's brokers write to, found with DescribeConfigs when none is given), picks the
snapshot (the current one, ``snapshot_id``, or the last one at or before ``as_of_ms``) and
prunes manifests and data files with ``row_filter`` (by partition, the hour of the record
timestamp, and by each file's column statistics). Spark then reads exactly those files with
its native, vectorized Parquet reader in the JVM, with the table's columns given (no schema
inference, no Python per row). ``row_filter`` only prunes: it is applied again by Spark, so a
file that holds some matching rows gives only those.

A snapshot's summary carries the next offset of every partition it covers
(``gregor.offsets``); with ``tail=True`` the records after those offsets, up to each
partition's last stable offset, are read through the ``gregor`` data source read_committed
(as the translator reads: aborted records and control batches never appear) and unioned, so
the frame is the whole committed topic as of the read, the table's part at Parquet speed.

The result has the data source's columns but ``timestampType`` (the table does not keep it):
``key``, ``value``, ``topic``, ``partition``, ``offset``, ``timestamp``, ``headers``.

A warehouse on S3 (``s3://``, ``s3a://``, ``s3n://``) cannot be opened by Spark's Hadoop
without a JVM package (hadoop-aws): its files are read by Spark tasks of the Python source
``gregor.spark.table_files`` with pyiceberg's FileIO and Arrow, with the table's IO properties
(the credentials from the catalog properties given, else the executors' AWS environment).

Spark lists the paths it is given itself; past ``spark.sql.sources.parallelPartitionDiscovery
.threshold`` paths (32) it lists them with a Spark job of its own, about 0.6 s for a table of 45
files (as translated when each partition committed alone: 10 M records at a 1 s lag) against
0.1 s listed on the driver. A classic session's reader resolves the files when the frame is made, so the
threshold is raised to the plan's file count for that call only (:func:`_listed_on_the_driver`;
a Spark Connect session resolves on the server later, and keeps its own setting).

Limits, refused with a message: other object stores, tables with delete files (``key_value``
tables have none), and ``tail=True`` on an upsert table (``iceberg.upsert``: its rows are each
key's latest record, and the tail's raw records would sit beside them unmerged).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gregor.client import AdminClient

#: The ``key_value`` table's columns as Spark reads them from the data files.
TABLE_COLUMNS = ("key", "value", "headers", "timestamp", "partition", "offset")
#: The frame's columns (the data source's, without ``timestampType``).
COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp", "headers")


#: Spark's own setting: how many paths it lists on the driver before it lists with a job.
LISTING_THRESHOLD = "spark.sql.sources.parallelPartitionDiscovery.threshold"


class TableReadError(ValueError):
    """The table cannot be read natively (see the module's limits)."""


@dataclass(frozen=True)
class TablePlan:
    """What pyiceberg planned: the data files to read, the snapshot, and its offsets."""

    topic: str
    files: tuple[str, ...]
    snapshot_id: int | None
    offsets: Mapping[int, int]  # partition: next offset not in the snapshot
    #: The table's FileIO properties when its files are on S3 (read by ``table_files``).
    io: Mapping[str, str] | None = None
    upsert: bool = False  # an upsert table (gregor.tables.upsert)


def _spark_types() -> Any:
    from pyspark.sql import types as T

    header = T.StructType(
        [T.StructField("key", T.StringType()), T.StructField("value", T.BinaryType())]
    )
    return T.StructType(
        [
            T.StructField("key", T.BinaryType()),
            T.StructField("value", T.BinaryType()),
            T.StructField("headers", T.ArrayType(header)),
            T.StructField("timestamp", T.TimestampType()),
            T.StructField("partition", T.IntegerType(), nullable=False),
            T.StructField("offset", T.LongType(), nullable=False),
        ]
    )


def _catalog_properties(
    catalog: Mapping[str, str] | None, admin: AdminClient | None
) -> tuple[dict[str, str], str]:
    """(load_catalog properties, namespace): given, or asked of the cluster."""
    if catalog is not None:
        props = dict(catalog)
        return props, props.pop("namespace", "gregor")
    if admin is None:
        raise TableReadError("give catalog= (pyiceberg's properties) or bootstrap_servers=")
    from gregor.tables.discovery import cluster_catalog

    settings = cluster_catalog(admin)
    return settings.load_properties(), settings.namespace


def _admin(bootstrap_servers: str | None, kafka: Mapping[str, str] | None) -> AdminClient | None:
    """One admin client for everything a read asks of the cluster, when there is one."""
    if not bootstrap_servers:
        return None
    from gregor.client import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap_servers, **(kafka or {})})


def plan_table(
    topic: str,
    *,
    catalog: Mapping[str, str] | None = None,
    bootstrap_servers: str | None = None,
    row_filter: str | None = None,
    snapshot_id: int | None = None,
    as_of_ms: int | None = None,
    kafka: Mapping[str, str] | None = None,
) -> TablePlan:
    """Plan a read of ``topic``'s table (see the module); ``catalog`` is what ``gregor tables
    describe TOPIC --output json`` gives as ``catalog_properties`` (plus ``namespace`` when not
    ``gregor``); without it the cluster at ``bootstrap_servers`` is asked."""
    if snapshot_id is not None and as_of_ms is not None:
        raise TableReadError("give snapshot_id or as_of_ms, not both")
    admin = None if catalog is not None else _admin(bootstrap_servers, kafka)
    try:
        return _plan(topic, catalog, admin, row_filter, snapshot_id, as_of_ms)
    finally:
        if admin is not None:
            admin.close()


def _local(path: str) -> bool:
    return path.startswith(("file:", "/"))


def _s3(path: str) -> bool:
    from gregor.tables.settings import S3_SCHEMES

    return path.startswith(S3_SCHEMES)


def _refuse_remote(path: str) -> None:
    raise TableReadError(
        f"{path}: Spark reads local files and S3 here; another store needs its JVM package "
        "(read this table with pyiceberg, DuckDB or polars)"
    )


def _plan(
    topic: str,
    catalog: Mapping[str, str] | None,
    admin: AdminClient | None,
    row_filter: str | None,
    snapshot_id: int | None,
    as_of_ms: int | None,
) -> TablePlan:
    from pyiceberg.catalog import load_catalog
    from pyiceberg.expressions import AlwaysTrue

    from gregor.tables.offsets import offsets_of_summary, offsets_snapshot
    from gregor.tables.upsert import table_is_upsert

    props, namespace = _catalog_properties(catalog, admin)
    table = load_catalog("gregor", **props).load_table((namespace, topic))
    upsert = table_is_upsert(table.properties)
    if not _local(table.location()) and not _s3(table.location()):  # before any planning
        _refuse_remote(table.location())
    if as_of_ms is not None:
        snap = table.snapshot_as_of_timestamp(as_of_ms)
        if snap is None:
            raise TableReadError(f"the table of {topic} has no snapshot at or before {as_of_ms}")
    elif snapshot_id is not None:
        snap = table.snapshot_by_id(snapshot_id)
        if snap is None:
            raise TableReadError(f"the table of {topic} has no snapshot {snapshot_id}")
    else:
        snap = table.current_snapshot()
    if snap is None:
        return TablePlan(topic, (), None, {}, upsert=upsert)
    scan = table.scan(row_filter=row_filter or AlwaysTrue(), snapshot_id=snap.snapshot_id)
    files = []
    for task in scan.plan_files():
        if task.delete_files:
            raise TableReadError(f"the table of {topic} has delete files: read it with pyiceberg")
        files.append(task.file.file_path)
    for path in files:  # a table's files may live outside its location
        if not _local(path) and not _s3(path):
            _refuse_remote(path)
    io = {str(k): str(v) for k, v in table.io.properties.items()}
    # the offsets the planned snapshot covers: its own map, or (a snapshot another Iceberg
    # writer made carries none) that of its newest ancestor with one, as the translator resumes
    carrier = offsets_snapshot(table, snap)
    summary = carrier.summary.additional_properties if carrier and carrier.summary else {}
    remote = any(_s3(path) for path in files)
    return TablePlan(
        topic,
        tuple(files),
        snap.snapshot_id,
        offsets_of_summary(summary),
        io=io if remote else None,
        upsert=upsert,
    )


def read_table(
    spark: Any,
    topic: str,
    *,
    catalog: Mapping[str, str] | None = None,
    bootstrap_servers: str | None = None,
    row_filter: str | None = None,
    snapshot_id: int | None = None,
    as_of_ms: int | None = None,
    tail: bool = False,
    kafka: Mapping[str, str] | None = None,
) -> Any:
    """``topic``'s table as a DataFrame (see the module); ``tail=True`` unions the records not
    yet in the snapshot (needs ``bootstrap_servers``); ``kafka`` holds client settings (Kafka
    names) for the cluster, e.g. SASL."""
    from pyspark.sql import functions as F

    if snapshot_id is not None and as_of_ms is not None:
        raise TableReadError("give snapshot_id or as_of_ms, not both")
    if tail and not bootstrap_servers:
        raise TableReadError("tail=True reads the topic: give bootstrap_servers=")
    admin = _admin(bootstrap_servers, kafka) if tail or catalog is None else None
    try:
        plan = _plan(topic, catalog, admin, row_filter, snapshot_id, as_of_ms)
        partitions = (
            sorted(p.partition for p in admin.describe_topics([topic])[topic].partitions)
            if tail and admin is not None
            else []
        )
    finally:
        if admin is not None:
            admin.close()
    if tail and plan.upsert:
        raise TableReadError(
            f"the table of {topic} is an upsert table (iceberg.upsert): each key's latest "
            "record, which the topic's tail would not be merged into; read it without tail=True"
        )
    schema = _spark_types()
    if plan.files and plan.io is not None:
        from gregor.spark.table_files import read_files

        files = read_files(spark, schema, list(plan.files), dict(plan.io))
    elif plan.files:
        with _listed_on_the_driver(spark, len(plan.files)):
            files = spark.read.schema(schema).parquet(*plan.files)
    else:
        files = spark.createDataFrame([], schema)
    frame = files.select(
        "key",
        "value",
        F.lit(topic).alias("topic"),
        "partition",
        "offset",
        "timestamp",
        "headers",
    )
    if not tail or bootstrap_servers is None:
        # pyiceberg's filter text is also a Spark SQL condition (comparisons, and/or/not, in,
        # is null): the files are pruned by the plan, the rows by Spark
        return frame.where(F.expr(row_filter)) if row_filter else frame
    tail_rows = _tail(spark, topic, plan, partitions, bootstrap_servers, dict(kafka or {}))
    return (
        frame.unionByName(tail_rows).where(F.expr(row_filter))
        if row_filter
        else frame.unionByName(tail_rows)
    )


@contextmanager
def _listed_on_the_driver(spark: Any, paths: int) -> Iterator[None]:
    """Spark lists ``paths`` files on the driver while the frame is made (see the module): the
    planned files are files, not directories to walk, so a listing job only costs a stage."""
    if type(spark).__module__.startswith("pyspark.sql.connect"):
        yield
        return
    before = spark.conf.get(LISTING_THRESHOLD)
    if before is not None and paths <= int(before):
        yield
        return
    spark.conf.set(LISTING_THRESHOLD, str(paths))
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(LISTING_THRESHOLD)
        else:
            spark.conf.set(LISTING_THRESHOLD, before)


def _tail(
    spark: Any,
    topic: str,
    plan: TablePlan,
    partitions: list[int],
    bootstrap_servers: str,
    kafka: dict[str, str],
) -> Any:
    import json

    starting = {str(p): plan.offsets.get(p, -2) for p in partitions}  # -2: earliest
    reader = (
        spark.read.format("gregor")
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("assign", json.dumps({topic: partitions}))
        .option("startingOffsets", json.dumps({topic: starting}))
        .option("endingOffsets", "latest")
        .option("includeHeaders", "true")
        .option("kafka.isolation.level", "read_committed")
    )
    for k, v in kafka.items():
        reader = reader.option(f"kafka.{k}", v)
    return reader.load().select(*COLUMNS)


__all__ = [
    "COLUMNS",
    "TablePlan",
    "TableReadError",
    "plan_table",
    "read_table",
]
