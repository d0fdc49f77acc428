"""A topic's table kept in shape: retention, snapshot expiry, compaction of small files.

Theory of operation. The translators append a few small files per partition every target
lag; left alone, the table grows without bound in rows (the log's retention does not reach
it), in snapshots (one per commit) and in files (small ones, slow to plan and read). One
writer per table maintains it: the broker that leads the topic's partition 0 runs a
:class:`TableMaintenance` beside that partition's translator (``gregor.tables.service``),
which every ``iceberg.maintenance.interval.ms`` runs one pass in the broker's maintenance
thread. Retention and expiry run as jobs of the catalog thread (each is mostly catalog work);
a compaction reads and writes an hour's files, seconds of work for a large table, in the
maintenance thread, and only its swap (:func:`_swap`: reload, build the overwrite, commit) is
a catalog-thread job (``InCatalogThread``), so the translators' commits of every table on the
broker go on meanwhile instead of queueing behind it. The swap is built on the table as it is
when it runs, after any translator commit made while the files were written, and carries the
offsets that table has (never those of the snapshot the compaction read: pyiceberg's ``Table``
is one object the catalog thread updates in place).

1. **retention** (:func:`delete_expired_rows`): with ``iceberg.retention.ms`` >= 0, the rows
   whose record timestamp is older than now minus it are deleted with pyiceberg's delete
   (by hour partition, whole files drop; a file straddling the cut is rewritten without the
   old rows);
2. **snapshot expiry** (:func:`expire_snapshots`): snapshots older than the table's
   ``history.expire.max-snapshot-age-ms`` (Iceberg's property; default 5 days) are removed
   from the metadata, keeping the newest ``history.expire.min-snapshots-to-keep`` (default 1)
   of the current snapshot's ancestry and every snapshot from the current one back to the
   one carrying the offsets (``gregor.tables.offsets.offsets_snapshot``: resume needs it);
   once the catalog has taken the expiry, the files only the expired snapshots reached are
   deleted (:func:`unreachable_files`, as Iceberg's own expiry cleans up: their manifest
   lists, the manifests no kept snapshot lists, and the data files no kept snapshot holds
   live), so retention's deleted rows and compaction's replaced files leave the storage too;
3. **compaction** (:func:`compact`): an hour partition with at least
   ``iceberg.compaction.min.input.files`` data files smaller than the table's
   ``write.target-file-size-bytes`` has them read (pyarrow; at most about one target size
   at a time), sorted by (partition, offset), written as one file and swapped in by one
   ``overwrite`` snapshot that deletes the old files and adds the new one (same rows, each
   once).

Every commit here is optimistic like the translators' (``gregor.tables.catalog``): it is
built on the snapshot it read, carries that snapshot's offsets map unchanged
(``gregor.tables.offsets.carried_properties``: no resume offset moves), and the catalog
refuses it if another writer committed meanwhile, in which case the step starts again from
the new snapshot (a compaction's swap again on the new table, its written files kept while
the files they replace are still live). A translator commit that loses to a maintenance
commit starts again the same way. Each table also has Iceberg's
``write.metadata.delete-after-commit.enabled`` (``gregor.tables.catalog.TABLE_PROPERTIES``): a
commit deletes the metadata files older than the last ``write.metadata.previous-versions-max``
(100). Files no snapshot ever referenced (a
commit's data files written and then lost to another writer, a writer killed mid-commit) are
orphans this does not find: Iceberg removes those with a separate listing of the storage
(``remove_orphan_files``), which this does not do.

A typed mode's dead-letter table ``<topic>~dlq`` gets the same passes from the same broker
(``gregor.tables.service``), with the topic's settings.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from gregor.tables.catalog import TopicTable
from gregor.tables.failures import RepeatedFailure
from gregor.tables.offsets import carried_properties, offsets_snapshot, table_offsets
from gregor.tables.settings import TopicTableConfig
from gregor.tables.translator import CatalogRunner

log = logging.getLogger("gregor.tables")

#: Runs a catalog call (a table's reload, a transaction's commit) in the catalog thread and
#: gives its result; a pass called directly (tests, tools) makes its calls itself.
InCatalogThread = Callable[[Callable[[], Any]], Any]


def _here(call: Callable[[], Any]) -> Any:
    return call()


#: Attempts of one maintenance step against concurrent commits.
ATTEMPTS = 50
MAX_SNAPSHOT_AGE_MS = "history.expire.max-snapshot-age-ms"
MAX_SNAPSHOT_AGE_MS_DEFAULT = 5 * 24 * 3600 * 1000
MIN_SNAPSHOTS_TO_KEEP = "history.expire.min-snapshots-to-keep"
MIN_SNAPSHOTS_TO_KEEP_DEFAULT = 1
TARGET_FILE_SIZE_BYTES = "write.target-file-size-bytes"
TARGET_FILE_SIZE_BYTES_DEFAULT = 512 * 1024 * 1024


def _now_ms() -> int:
    return int(time.time() * 1000)


def _commit_failed() -> type[Exception]:
    from pyiceberg.exceptions import CommitFailedException

    return CommitFailedException


def _int_property(table: Any, name: str, default: int) -> int:
    value = table.metadata.properties.get(name)
    return default if value is None else int(value)


def delete_expired_rows(
    topic_table: TopicTable, retention_ms: int, now_ms: int | None = None
) -> int:
    """Delete the rows whose timestamp is before ``now - retention_ms``; returns the number of
    data files the table had that held such rows (0: nothing to delete, no commit)."""
    if retention_ms < 0:
        return 0
    from pyiceberg.expressions import LessThan

    cutoff_ms = (_now_ms() if now_ms is None else now_ms) - retention_ms
    cutoff = datetime.fromtimestamp(cutoff_ms / 1000, UTC).isoformat()
    # pyiceberg's predicates are pydantic models whose __init__ mypy does not see
    row_filter = LessThan("timestamp", cutoff)  # type: ignore[call-arg,arg-type]
    for _ in range(ATTEMPTS):
        topic_table.offsets()  # reloads the table
        table = topic_table.table
        matching = len(list(table.scan(row_filter=row_filter).plan_files()))
        if not matching:
            return 0
        tx = table.transaction()
        tx.delete(
            row_filter, snapshot_properties=carried_properties(table_offsets(table), "retention")
        )
        try:
            topic_table.table = tx.commit_transaction()
        except _commit_failed():
            continue
        return matching
    raise RuntimeError(f"{topic_table.topic}: retention lost {ATTEMPTS} commits in a row")


def snapshots_to_expire(table: Any, now_ms: int) -> list[int]:
    """The snapshot ids expiry removes now (see the module's docstring)."""
    max_age = _int_property(table, MAX_SNAPSHOT_AGE_MS, MAX_SNAPSHOT_AGE_MS_DEFAULT)
    keep_newest = _int_property(table, MIN_SNAPSHOTS_TO_KEEP, MIN_SNAPSHOTS_TO_KEEP_DEFAULT)
    kept: set[int] = {ref.snapshot_id for ref in table.metadata.refs.values()}
    ancestry = []
    snapshot = table.current_snapshot()
    while snapshot is not None:
        ancestry.append(snapshot)
        parent = snapshot.parent_snapshot_id
        snapshot = None if parent is None else table.snapshot_by_id(parent)
    kept.update(s.snapshot_id for s in ancestry[: max(keep_newest, 1)])
    with_offsets = offsets_snapshot(table)
    if with_offsets is not None:
        for s in ancestry:
            kept.add(s.snapshot_id)
            if s.snapshot_id == with_offsets.snapshot_id:
                break
    oldest_kept = now_ms - max_age
    return sorted(
        s.snapshot_id
        for s in table.snapshots()
        if s.snapshot_id not in kept and s.timestamp_ms < oldest_kept
    )


def _manifests(io: Any, snapshots: Iterable[Any]) -> tuple[set[str], dict[str, Any]]:
    """The manifest lists of ``snapshots`` and their manifests, by path (each read once)."""
    lists: set[str] = set()
    manifests: dict[str, Any] = {}
    for snapshot in snapshots:
        lists.add(snapshot.manifest_list)
        for manifest in snapshot.manifests(io):
            manifests[manifest.manifest_path] = manifest
    return lists, manifests


def _data_files_of(io: Any, manifests: Iterable[Any], live_only: bool) -> set[str]:
    return {
        entry.data_file.file_path
        for manifest in manifests
        for entry in manifest.fetch_manifest_entry(io, discard_deleted=live_only)
    }


def unreachable_files(gone: Iterable[Any], after: Any) -> list[str]:
    """The files the expired snapshots ``gone`` reached that no snapshot of ``after`` (the
    table as the catalog took the expiry) reaches: safe to delete once ``after`` is
    committed. ``gone`` is read before the commit: pyiceberg's commit updates the table
    object in place."""
    io = after.io
    gone_lists, gone_manifests = _manifests(io, gone)
    kept_lists, kept_manifests = _manifests(io, after.snapshots())
    kept_data = _data_files_of(io, kept_manifests.values(), live_only=True)
    # a manifest a kept snapshot lists too: every data file it holds is reached through it
    only_gone = [m for path, m in gone_manifests.items() if path not in kept_manifests]
    gone_data = _data_files_of(io, only_gone, live_only=False)
    return sorted(
        (gone_lists - kept_lists)
        | (set(gone_manifests) - set(kept_manifests))
        | (gone_data - kept_data)
    )


def delete_files(table: Any, paths: Iterable[str]) -> int:
    """Delete ``paths`` with the table's FileIO; returns how many went (one already gone, or
    refused, is left: expiry does not fail for it, and nothing reaches it any more). Only
    files under the table's location: another writer of the catalog may have added files from
    anywhere (pyiceberg's ``add_files``), and expiry must never reach past the table (on a
    local warehouse, into the broker's own log directory)."""
    location = table.location().rstrip("/") + "/"
    deleted = 0
    for path in paths:
        if not path.startswith(location) or "/../" in path:
            log.warning("not deleting %s of an expired snapshot: outside the table", path)
            continue
        try:
            table.io.delete(path)
        except FileNotFoundError:
            continue
        except Exception as e:  # noqa: BLE001 - the storage refusing one file
            log.warning("could not delete %s of an expired snapshot: %s", path, e)
            continue
        deleted += 1
    return deleted


@dataclass
class Expiry:
    """What one snapshot expiry did: the snapshot ids it removed, the files it deleted."""

    snapshots: list[int] = field(default_factory=list)
    files_deleted: int = 0


def expire_snapshots(topic_table: TopicTable, now_ms: int | None = None) -> Expiry:
    """Remove the snapshots :func:`snapshots_to_expire` names, then the files only they
    reached (:func:`unreachable_files`)."""
    from pyiceberg.table import Transaction
    from pyiceberg.table.update.snapshot import ExpireSnapshots

    for _ in range(ATTEMPTS):
        topic_table.offsets()
        table = topic_table.table
        expired = snapshots_to_expire(table, _now_ms() if now_ms is None else now_ms)
        if not expired:
            return Expiry()
        gone = [s for s in (table.snapshot_by_id(i) for i in expired) if s is not None]
        tx = Transaction(table, autocommit=False)
        ExpireSnapshots(tx).by_ids(expired).commit()
        try:
            after = tx.commit_transaction()
        except _commit_failed():
            continue
        topic_table.table = after
        # ``after`` is what the catalog took: a writer committing meanwhile built on the
        # current snapshot, which is kept, so nothing it reaches is among these
        return Expiry(expired, delete_files(after, unreachable_files(gone, after)))
    raise RuntimeError(f"{topic_table.topic}: snapshot expiry lost {ATTEMPTS} commits in a row")


@dataclass
class Compaction:
    """What one compaction did: the table's data files before and after, and for each group
    of small files rewritten, its hour partition (as a string), files read and files written."""

    files_before: int = 0
    files_after: int = 0
    rewritten: list[tuple[str, int, int]] = field(default_factory=list)


def _small_file_groups(table: Any, tasks: Iterable[Any], min_files: int) -> list[list[Any]]:
    """Of ``table``'s planned ``tasks``, the bins of small files to rewrite together."""
    target = _int_property(table, TARGET_FILE_SIZE_BYTES, TARGET_FILE_SIZE_BYTES_DEFAULT)
    groups: dict[tuple[int, str], list[Any]] = {}
    for task in tasks:
        f = task.file
        partition = f.partition
        if task.delete_files or f.file_size_in_bytes >= target:
            continue
        if partition is None or any(v is None for v in partition):
            continue  # rows without a timestamp: left as they are
        groups.setdefault((f.spec_id, repr(partition)), []).append(task)
    out: list[list[Any]] = []
    for tasks in groups.values():  # bins of about one target file each: memory stays bounded
        bin_: list[Any] = []
        size = 0
        for task in [*tasks, None]:
            if task is None or (bin_ and size + task.file.file_size_in_bytes > target):
                if len(bin_) >= min_files:
                    out.append(bin_)
                bin_, size = [], 0
            if task is not None:
                bin_.append(task)
                size += task.file.file_size_in_bytes
    return out


def compact(
    topic_table: TopicTable, min_files: int, catalog: InCatalogThread = _here
) -> Compaction:
    """Rewrite each hour partition with at least ``min_files`` small files into one file.

    The files are read and written here (the maintenance thread); the swap is built and
    committed in the catalog thread on the table as it is then (:func:`_swap`), so the
    translators' commits meanwhile cost nothing: their rows are in other files, and the swap
    carries the offsets the table has when it commits. Only when a file to replace is no longer
    live (another writer compacted or deleted it) are the written files deleted and the step
    planned again."""
    from pyiceberg.expressions import AlwaysTrue
    from pyiceberg.io.pyarrow import ArrowScan, _dataframe_to_data_files

    for _ in range(ATTEMPTS):
        catalog(topic_table.offsets)
        table = topic_table.table
        planned = list(table.scan().plan_files())
        result = Compaction(files_before=len(planned))
        groups = _small_file_groups(table, planned, min_files) if min_files >= 2 else []
        if not groups:
            result.files_after = result.files_before
            return result
        # one name and counter for the step's files: a second group written with a fresh
        # count would overwrite the first group's file
        write_uuid, counter = uuid.uuid4(), itertools.count(0)
        rewrites: list[tuple[list[Any], list[Any]]] = []
        for tasks in groups:
            rows = ArrowScan(
                table_metadata=table.metadata,
                io=table.io,
                projected_schema=table.schema(),
                row_filter=AlwaysTrue(),
            ).to_table(tasks=tasks)
            expected = sum(t.file.record_count for t in tasks)
            if rows.num_rows != expected:  # never swap files for fewer or more rows
                raise RuntimeError(
                    f"{topic_table.topic}: read {rows.num_rows} rows of {expected} to compact"
                )
            rows = rows.sort_by([("partition", "ascending"), ("offset", "ascending")])
            written = _dataframe_to_data_files(
                table_metadata=table.metadata,
                df=rows,
                io=table.io,
                write_uuid=write_uuid,
                counter=counter,
            )
            rewrites.append((tasks, list(written)))
        swapped = catalog(functools.partial(_swap, topic_table, rewrites))
        if swapped is None:  # never committed: the written files are nobody's
            delete_files(table, [f.file_path for _, written in rewrites for f in written])
            continue
        result.files_before = swapped  # the data files of the table the swap was built on
        result.rewritten = [
            (repr(tasks[0].file.partition), len(tasks), len(written)) for tasks, written in rewrites
        ]
        result.files_after = result.files_before + sum(w - r for _, r, w in result.rewritten)
        return result
    raise RuntimeError(f"{topic_table.topic}: compaction lost {ATTEMPTS} commits in a row")


def _swap(topic_table: TopicTable, rewrites: list[tuple[list[Any], list[Any]]]) -> int | None:
    """The catalog thread's half of :func:`compact`: on the table as it is now, one overwrite
    that deletes each group's files and adds the files written from them, carrying the table's
    offsets unchanged; how many data files the table had before it (the commit succeeded on
    that table, so it has those less the deleted plus the written after it), or None when a
    file to delete is no longer live."""
    for _ in range(ATTEMPTS):
        topic_table.offsets()  # reloads the table
        table = topic_table.table
        live = {t.file.file_path for t in table.scan().plan_files()}
        if any(t.file.file_path not in live for tasks, _ in rewrites for t in tasks):
            return None
        tx = table.transaction()
        props = carried_properties(table_offsets(table), "compaction")
        with tx.update_snapshot(snapshot_properties=props).overwrite() as rewrite:
            for tasks, written in rewrites:
                for t in tasks:
                    rewrite.delete_data_file(t.file)
                for f in written:
                    rewrite.append_data_file(f)
        try:
            topic_table.table = tx.commit_transaction()
        except _commit_failed():
            continue  # another writer committed meanwhile: again on the table it made
        return len(live)
    raise RuntimeError(f"{topic_table.topic}: compaction lost {ATTEMPTS} commits in a row")


@dataclass
class Pass:
    """What one maintenance pass did."""

    retention_files: int = 0
    expiry: Expiry = field(default_factory=Expiry)
    compaction: Compaction = field(default_factory=Compaction)

    @property
    def expired(self) -> list[int]:
        return self.expiry.snapshots


def maintain(
    topic_table: TopicTable,
    config: TopicTableConfig,
    now_ms: int | None = None,
    catalog: InCatalogThread = _here,
) -> Pass:
    """One pass: retention, then expiry, then compaction (blocking; the maintenance thread,
    its catalog calls through ``catalog``)."""
    done = Pass()
    done.retention_files = catalog(
        lambda: delete_expired_rows(topic_table, config.retention_ms, now_ms)
    )
    done.expiry = catalog(lambda: expire_snapshots(topic_table, now_ms))
    done.compaction = compact(topic_table, config.compaction_min_input_files, catalog)
    return done


#: Runs a pass (given the catalog thread's runner) in the maintenance thread.
PassRunner = Callable[[Callable[[InCatalogThread], Pass]], Awaitable[Pass]]


class TableMaintenance:
    """The maintenance passes of one topic's table, every ``maintenance_interval_ms``."""

    def __init__(
        self,
        table: TopicTable,
        run_catalog: CatalogRunner,
        config: TopicTableConfig,
        on_pass: Callable[[Pass], None] | None = None,
        name: str | None = None,
        run_pass: PassRunner | None = None,
    ) -> None:
        """``name``: the table's name in the log (the topic's, or ``<topic>~dlq``).
        ``run_pass``: the broker's maintenance thread (None: each pass is one job of the
        catalog thread)."""
        self.table = table
        self.run_pass = run_pass
        self.name = table.topic if name is None else name
        self.run_catalog = run_catalog
        self.config = config
        self.passes = 0
        self._on_pass = on_pass
        self._failures = RepeatedFailure(log, f"maintaining the table {self.name}")

    async def run(self) -> None:
        while True:
            try:
                done = await self._pass()
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - the next pass tries again
                self._failures.failed(e)
            else:
                self._failures.succeeded()
                assert isinstance(done, Pass)
                self.passes += 1
                _log_pass(self.name, done)
                if self._on_pass is not None:
                    self._on_pass(done)
            await asyncio.sleep(self.config.maintenance_interval_ms / 1000)

    async def _pass(self) -> object:
        if self.run_pass is None:
            return await self.run_catalog(lambda: maintain(self.table, self.config))
        return await self.run_pass(lambda catalog: maintain(self.table, self.config, None, catalog))


def _log_pass(name: str, done: Pass) -> None:
    parts: Iterable[str] = (
        f"retention deleted rows of {done.retention_files} files" if done.retention_files else "",
        (
            f"expired {len(done.expired)} snapshots and deleted {done.expiry.files_deleted} "
            "files only they reached"
            if done.expired
            else ""
        ),
        (
            f"compacted {done.compaction.files_before} files into {done.compaction.files_after}"
            if done.compaction.rewritten
            else ""
        ),
    )
    said = "; ".join(p for p in parts if p)
    if said:
        log.info("table %s: %s", name, said)


__all__ = [
    "Compaction",
    "Expiry",
    "InCatalogThread",
    "Pass",
    "PassRunner",
    "TableMaintenance",
    "compact",
    "delete_expired_rows",
    "expire_snapshots",
    "maintain",
    "unreachable_files",
]
