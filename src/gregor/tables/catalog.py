"""The catalog side: open the catalog, make a topic's table, commit a partition's rows.

Theory of operation. Everything here blocks (pyiceberg writes Parquet and talks to the
catalog synchronously), so the translators call it in worker threads; nothing here touches
the broker's state. One :class:`TableCatalog` per broker holds the pyiceberg catalog; one
:class:`TopicTable` per topic holds its table and is what the topic's translators commit
through, one at a time (the caller holds the topic's lock).

A commit (:meth:`TopicTable.commit`) is exactly-once by construction:

1. reload the table and read the per-partition offsets of its current snapshot
   (``gregor.tables.offsets``);
2. if this partition's entry is not the offset the translator's rows start at, someone else
   (an earlier leader, another broker) has moved the partition on: the commit is refused
   with :class:`OffsetsMoved` and the translator resumes from the table's offset;
3. otherwise write the rows' data files and manifests in a pyiceberg transaction whose
   snapshot summary carries the new offsets, and commit it. The catalog accepts it only if
   the table's current snapshot is still the one read in step 1 (pyiceberg's
   AssertRefSnapshotId, the SQL catalog's compare-and-set of the metadata location); when it
   is not, the commit starts again at step 1 (the data files written for the lost attempt
   are orphans, never in the table).

A process killed anywhere in this leaves either the old snapshot (and maybe orphan files)
or the new one: never part of a commit. In a typed mode the rows' ``value`` struct may have
fields, or wider types, the table's lacks: the same transaction evolves the table's schema
first (``gregor.tables.typed.evolved``: pyiceberg's ``union_by_name``), so the new columns and
the rows that fill them land in one snapshot; a type the table cannot take raises TypeClash.

Making the table (:meth:`TableCatalog.open_table`) may race too: in a cluster the leaders of
a new topic's partitions make its namespace and table at the same moment. pyiceberg's
``create_*_if_not_exists`` take the catalog's "already exists" answer as success, but not
every catalog gives it to the loser of a race: Iceberg's REST server over its JDBC catalog
answers 500 (a unique key violated). A failed make whose namespace or table exists afterwards
is therefore the winner's, and opened: every maker gets the one table at once. A table that
exists is loaded, never made again: pyiceberg's SQL catalog writes a make's metadata file
before it finds the table there, so each translator's start left one more file behind.

An upsert table (``iceberg.upsert``, ``gregor.tables.upsert``) takes the same steps; its step 3
is one ``overwrite`` (the rows of the keys the range touches deleted, each key's latest record
appended) instead of an append, in the same one transaction. A table records its kind in its
property ``gregor.upsert`` when it is made; a commit of the other kind is refused with
:class:`~gregor.tables.upsert.TableKindMismatch` (a topic whose setting changed while its table
was kept, e.g. turned off and on again), so no table ever mixes the two.

Step 3's retry must start at step 1. pyiceberg (0.12) retries a lost commit by itself,
re-applying the same snapshot, offsets map included, on top of the winner's: that would put
back the loser's view of the other partitions' offsets (the winner's move undone, its records
duplicated on the next resume). Every topic's table therefore carries the Iceberg property
``commit.retry.num-retries=0`` (:data:`TABLE_PROPERTIES`, set when the table is made, and
on a table made before), so a lost commit reaches this module as CommitFailedException.
"""

from __future__ import annotations

import os
import uuid
import warnings
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from gregor.tables.data_files import write_hour
from gregor.tables.faults import crash_point
from gregor.tables.offsets import commit_properties, table_offsets
from gregor.tables.schema import (
    dead_letter_iceberg_schema,
    iceberg_schema,
    partition_spec,
    typed_iceberg_schema,
)
from gregor.tables.settings import (
    DEAD_LETTER_SUFFIX,
    KEY_VALUE,
    TYPED_MODES,
    UPSERT,
    CatalogSettings,
)
from gregor.tables.typed import evolved
from gregor.tables.upsert import (
    TABLE_PROPERTY,
    TableKindMismatch,
    latest_per_key,
    table_is_upsert,
    touched_keys_filter,
)

#: Runs blocking catalog work off the loop, one job at a time (the tables service's executor).
CatalogRunner = Callable[[Callable[[], object]], Awaitable[object]]
#: Attempts of one commit against concurrent writers of other partitions.
COMMIT_ATTEMPTS = 50
#: Iceberg's property: how often a writer re-applies a lost commit on the winner's snapshot.
COMMIT_NUM_RETRIES = "commit.retry.num-retries"
#: The properties every topic's table has (see the module's docstring).
TABLE_PROPERTIES = {COMMIT_NUM_RETRIES: "0"}
#: Iceberg's property: a commit deletes the metadata files older than the newest
#: ``write.metadata.previous-versions-max`` (100); a table gets a metadata file per commit.
METADATA_DELETE_AFTER_COMMIT = "write.metadata.delete-after-commit.enabled"
#: The properties a topic's table is made with, and given when it lacks them (an operator's
#: own value is kept).
TABLE_DEFAULTS = {METADATA_DELETE_AFTER_COMMIT: "true"}


@dataclass(frozen=True)
class CommitRange:
    """One partition's rows for a commit: its records in ``[first, next_offset)``, on top of
    a snapshot whose offset for ``partition`` is ``expected``."""

    partition: int
    expected: int | None
    first: int
    next_offset: int
    rows: pa.Table


class OffsetsMoved(Exception):
    """The table's offset of a partition is not where the translator's rows start."""

    def __init__(self, partition: int, expected: int | None, found: int | None) -> None:
        super().__init__(
            f"partition {partition}: the table is at offset {found}, the rows start at {expected}"
        )
        self.found = found


def warehouse_error(settings: CatalogSettings) -> str | None:
    """Why this broker cannot write its warehouse, or None: a probe object is written under it
    and deleted again, with the FileIO (and so the credentials) the tables' commits use. The
    error names the warehouse and the store's answer, never the credentials."""
    from pyiceberg.io import load_file_io

    warehouse = settings.properties["warehouse"].rstrip("/")
    io = load_file_io(dict(settings.properties), warehouse)
    probe = f"{warehouse}/.gregor-probe/{uuid.uuid4().hex}"
    try:
        with io.new_output(probe).create(overwrite=True) as out:
            out.write(b"gregor")
        io.delete(probe)
    except Exception as e:  # noqa: BLE001 - any failure of the store is the answer
        return f"the warehouse {warehouse} cannot be written ({type(e).__name__}: {e})"
    return None


class TableCatalog:
    """The broker's Iceberg catalog (pyiceberg's ``load_catalog`` of the settings)."""

    def __init__(self, settings: CatalogSettings) -> None:
        self.settings = settings
        self._catalog: Any = None

    @property
    def catalog(self) -> Any:
        if self._catalog is None:
            from pyiceberg.catalog import load_catalog

            if self.settings.type == "sql":
                path = self.settings.uri.removeprefix("sqlite:///")
                if path != self.settings.uri:
                    os.makedirs(os.path.dirname(path), exist_ok=True)
            self._catalog = load_catalog(self.settings.name, **self.settings.load_properties())
        return self._catalog

    def identifier(self, topic: str) -> tuple[str, str]:
        return (self.settings.namespace, topic)

    def open_table(self, topic: str, mode: str = KEY_VALUE, upsert: bool = False) -> TopicTable:
        """The topic's table, created (the mode's schema, by hour; an upsert table if
        ``upsert``) if it does not exist."""
        schema = typed_iceberg_schema() if mode in TYPED_MODES else None
        return self._open(topic, topic, schema, upsert)

    def open_dead_letters(self, topic: str) -> TopicTable:
        """The topic's dead-letter table (``<topic>~dlq``), created if it does not exist."""
        return self._open(topic, topic + DEAD_LETTER_SUFFIX, dead_letter_iceberg_schema(), False)

    def _open(self, topic: str, name: str, schema: Any, upsert: bool) -> TopicTable:
        catalog = self.catalog
        namespace, identifier = self.settings.namespace, self.identifier(name)
        try:
            catalog.create_namespace_if_not_exists(namespace)
        except Exception:
            if not catalog.namespace_exists(namespace):  # not a concurrent maker's: the error
                raise
        kind = {TABLE_PROPERTY: "true" if upsert else "false"}
        from pyiceberg.exceptions import NoSuchTableError

        try:  # an existing table is loaded, not made again: a make writes a metadata file
            table = catalog.load_table(identifier)
        except NoSuchTableError:
            table = self._make(catalog, identifier, topic, schema, kind)
        # a table made before kinds were recorded: append, unless nothing was ever committed
        if TABLE_PROPERTY not in table.properties and table.current_snapshot() is not None:
            kind = {TABLE_PROPERTY: "false"}
        return TopicTable(topic, own_table_properties(table, {**TABLE_DEFAULTS, **kind}))

    @staticmethod
    def _make(catalog: Any, identifier: Any, topic: str, schema: Any, kind: dict[str, str]) -> Any:
        try:
            return catalog.create_table_if_not_exists(
                identifier,
                schema=iceberg_schema() if schema is None else schema,
                partition_spec=partition_spec(),
                properties={"gregor.topic": topic, **TABLE_PROPERTIES, **TABLE_DEFAULTS, **kind},
            )
        except Exception:
            if not catalog.table_exists(identifier):
                raise
            return catalog.load_table(identifier)


def own_table_properties(table: Any, more: dict[str, str] | None = None) -> Any:
    """``table`` with :data:`TABLE_PROPERTIES` set (a table made before they were), and those
    of ``more`` it does not have yet."""
    from pyiceberg.exceptions import CommitFailedException

    for _ in range(COMMIT_ATTEMPTS):
        missing = {k: v for k, v in TABLE_PROPERTIES.items() if table.properties.get(k) != v}
        missing.update({k: v for k, v in (more or {}).items() if k not in table.properties})
        if not missing:
            return table
        try:
            with table.transaction() as tx:
                tx.set_properties(missing)
        except CommitFailedException:
            pass
        table = table.refresh()
    raise RuntimeError(f"{table.name()}: {COMMIT_ATTEMPTS} property updates lost in a row")


#: Microseconds in an hour (the partition spec's transform).
HOUR_US = 3_600_000_000


def append(tx: Any, io: Any, rows: pa.Table, props: dict[str, str]) -> None:
    """``tx.append(rows, snapshot_properties=props)``. Rows of one hour (nearly always: one
    commit covers seconds) skip pyiceberg's split by partition, a group-by of the hour of every
    row and a filtered copy of the whole table (a quarter of a commit's CPU): the one
    partition's key is given directly, and the files are written by
    ``gregor.tables.data_files`` (offsets and timestamps delta-encoded). Anything else (rows of
    several hours, a table whose schema or partition spec an operator changed) takes
    pyiceberg's own path."""
    from pyiceberg.io.pyarrow import pyarrow_to_schema
    from pyiceberg.partitioning import PartitionFieldValue, PartitionKey
    from pyiceberg.table import TableProperties
    from pyiceberg.utils.properties import property_as_bool, property_as_int

    meta = tx.table_metadata
    schema, spec = meta.schema(), meta.spec()
    hour = one_hour(rows)
    task_schema = pyarrow_to_schema(
        rows.schema, name_mapping=schema.name_mapping, format_version=meta.format_version
    )
    # the rows' columns are the table's, field ids included (by the table's name mapping)
    if hour is None or not _by_hour(spec, schema) or task_schema.as_struct() != schema.as_struct():
        tx.append(rows, snapshot_properties=props)
        return
    key = PartitionKey([PartitionFieldValue(spec.fields[0], hour)], spec, schema)
    default_target = TableProperties.WRITE_TARGET_FILE_SIZE_BYTES_DEFAULT
    target = property_as_int(
        meta.properties, TableProperties.WRITE_TARGET_FILE_SIZE_BYTES, default_target
    )
    merge = property_as_bool(
        meta.properties,
        TableProperties.MANIFEST_MERGE_ENABLED,
        TableProperties.MANIFEST_MERGE_ENABLED_DEFAULT,
    )
    update = tx.update_snapshot(snapshot_properties=props)
    with update.merge_append() if merge else update.fast_append() as files:
        for data_file in write_hour(
            io, meta, rows, task_schema, key, files.commit_uuid, target or default_target
        ):
            files.append_data_file(data_file)


def _by_hour(spec: Any, schema: Any) -> bool:
    """The table is partitioned as it was made: by the hour of ``timestamp``, nothing else."""
    from pyiceberg.transforms import HourTransform

    if len(spec.fields) != 1 or not isinstance(spec.fields[0].transform, HourTransform):
        return False
    return bool(schema.find_column_name(spec.fields[0].source_id) == "timestamp")


def one_hour(rows: pa.Table) -> int | None:
    """The hour (since the epoch) of every row's timestamp, if they share one and it is not
    before the epoch; None otherwise (none, several, or a null)."""
    import pyarrow.compute as pc

    stamps = rows.column("timestamp")
    if not len(stamps) or stamps.null_count:
        return None
    bounds = pc.min_max(stamps.cast(pa.int64()))
    low, high = bounds["min"].as_py(), bounds["max"].as_py()
    if low < 0 or low // HOUR_US != high // HOUR_US:
        return None
    return int(low // HOUR_US)


class TopicTable:
    def __init__(self, topic: str, table: Any) -> None:
        self.topic = topic
        self.table = table

    def offsets(self) -> dict[int, int]:
        """The per-partition next offsets of the table's current snapshot, reloaded."""
        self.table = self.table.refresh()
        return table_offsets(self.table)

    def value_type(self) -> pa.DataType | None:
        """The Arrow type of the table's ``value`` column (None: it has none yet)."""
        schema = self.table.schema()
        if "value" not in schema.column_names:
            return None
        field = schema.as_arrow().field("value")
        return field.type

    def offsets_from(self, partition: int, start: int) -> list[int]:
        """The offsets of ``partition``'s rows at or above ``start`` (in the dead-letter table
        after a crash between its commit and the topic table's: a few)."""
        scan = self.table.scan(
            row_filter=f"partition = {int(partition)} AND offset >= {int(start)}",
            selected_fields=("offset",),
        )
        return sorted(int(o) for o in scan.to_arrow().column("offset").to_pylist())

    def commit(
        self,
        partition: int,
        expected: int | None,
        first: int,
        next_offset: int,
        rows: pa.Table,
        upsert: bool = False,
    ) -> int:
        """Append ``rows`` (partition's records in ``[first, next_offset)``), or upsert them by
        key (``upsert``), on top of a snapshot whose offset for ``partition`` is ``expected``;
        returns the new snapshot id. Raises :class:`OffsetsMoved` when the table is elsewhere
        for this partition, :class:`TableKindMismatch` when the table is of the other kind."""
        if upsert:
            return self._upsert(partition, expected, first, next_offset, rows)
        (done,) = self.commit_ranges([CommitRange(partition, expected, first, next_offset, rows)])
        if isinstance(done, OffsetsMoved):
            raise done
        return done

    def commit_ranges(self, ranges: Sequence[CommitRange]) -> list[int | OffsetsMoved]:
        """Append several partitions' ranges in one snapshot (one data file per hour for all
        of them); each range's answer in order: the snapshot id that holds it, or
        :class:`OffsetsMoved` for a range whose partition the table has elsewhere (left out,
        the others committed without it). Raises :class:`TableKindMismatch` for an upsert
        table."""
        from pyiceberg.exceptions import CommitFailedException

        if len({r.partition for r in ranges}) != len(ranges):
            raise ValueError("one commit takes one range per partition")
        answers: dict[int, int | OffsetsMoved] = {}
        for _ in range(COMMIT_ATTEMPTS):
            parent = self.offsets()
            self._check_kind(False)
            going = []
            for i, r in enumerate(ranges):
                if i in answers:
                    continue
                found = parent.get(r.partition)
                if found != r.expected:
                    answers[i] = OffsetsMoved(r.partition, r.expected, found)
                else:
                    going.append(i)
            if not going:
                break
            tx = self.table.transaction()
            props = commit_properties(
                parent,
                {ranges[i].partition: (ranges[i].first, ranges[i].next_offset) for i in going},
            )
            parts = [ranges[i].rows for i in going]
            rows = evolved(tx, parts[0] if len(parts) == 1 else pa.concat_tables(parts))
            append(tx, self.table.io, rows, props)
            crash_point("commit.staged")
            try:
                self.table = tx.commit_transaction()
            except CommitFailedException:
                continue
            snapshot_id = int(self.table.current_snapshot().snapshot_id)
            answers.update((i, snapshot_id) for i in going)
            break
        else:
            raise RuntimeError(
                f"{self.topic}: {COMMIT_ATTEMPTS} commits in a row lost to concurrent writers"
            )
        return [answers[i] for i in range(len(ranges))]

    def _upsert(
        self, partition: int, expected: int | None, first: int, next_offset: int, rows: pa.Table
    ) -> int:
        from pyiceberg.exceptions import CommitFailedException

        keys, latest = latest_per_key(rows)
        for _ in range(COMMIT_ATTEMPTS):
            parent = self.offsets()
            self._check_kind(True)
            found = parent.get(partition)
            if found != expected:
                raise OffsetsMoved(partition, expected, found)
            tx = self.table.transaction()
            props = commit_properties(parent, {partition: (first, next_offset)})
            latest = evolved(tx, latest)
            if len(keys):
                with warnings.catch_warnings():  # no row of the keys in the table yet: fine
                    warnings.filterwarnings("ignore", "Delete operation did not match")
                    tx.overwrite(
                        latest,
                        overwrite_filter=touched_keys_filter(partition, keys),
                        snapshot_properties=props,
                    )
            else:
                tx.append(latest, snapshot_properties=props)
            crash_point("commit.staged")
            try:
                self.table = tx.commit_transaction()
            except CommitFailedException:
                continue
            snapshot = self.table.current_snapshot()
            return int(snapshot.snapshot_id)
        raise RuntimeError(
            f"{self.topic}: {COMMIT_ATTEMPTS} commits in a row lost to concurrent writers"
        )

    @property
    def upsert(self) -> bool:
        """The table is an upsert table (its kind, as recorded when it was made)."""
        return table_is_upsert(self.table.properties)

    def _check_kind(self, upsert: bool) -> None:
        if self.upsert == upsert:
            return
        kind, other = ("an upsert", "an append") if self.upsert else ("an append", "an upsert")
        raise TableKindMismatch(
            f"the table {'.'.join(self.table.name())} of topic {self.topic} is {kind} table "
            f"(table property {TABLE_PROPERTY}={str(self.upsert).lower()}), the topic asks for "
            f"{other} table ({UPSERT}={str(upsert).lower()}): nothing is committed until the "
            f"table is dropped or {UPSERT} is put back"
        )
