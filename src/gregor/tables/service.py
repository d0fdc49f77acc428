"""The broker's table translation: one translator per led partition of a topic with a table.

Theory of operation. The broker tells :meth:`TableTranslation.reconcile` after every metadata
change which partitions should be translated here (those it leads whose topic's
``iceberg.mode`` is not ``disabled``), each with its leader epoch and the topic's settings. The
service starts a :class:`~gregor.tables.translator.PartitionTranslator` task for each new one,
cancels those no longer wanted, and restarts one whose leader epoch or settings changed (a new
translator resumes from the table, so a restart is always safe). All catalog work (opening
tables, commits) runs in one worker thread, one job at a time: commits of one topic's
partitions never race inside a broker, and pyiceberg's SQL catalog on SQLite sees one writer
per process. Writers in other processes (another broker, after a leader change) are fenced
by the catalog's optimistic commit (``gregor.tables.catalog``). The tables' maintenance passes
run in a second thread, one pass at a time: a compaction reads and writes an hour's files
there and sends only its swap to the catalog thread, so it never holds up the translators'
commits (``gregor.tables.maintenance``). The append translators of a topic commit through one
``CommitGroup``
(``gregor.tables.commit_group``): the partitions' commits that fall due together become one
snapshot. The translator of a topic's
partition 0 runs the table's maintenance beside it (retention, snapshot expiry, compaction;
``gregor.tables.maintenance``).

The catalog and the translators (pyarrow, pyiceberg) are imported when a broker first builds
the service (a catalog is configured), not when the broker imports this module.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gregor.client.schema_registry import RegistryClient
from gregor.tables.failures import RepeatedFailure
from gregor.tables.settings import (
    DEAD_LETTER_SUFFIX,
    MODE,
    TYPED_MODES,
    CatalogSettings,
    TablesUnavailableError,
    TopicTableConfig,
    is_object_store,
)
from gregor.tables.source import PartitionSource

if TYPE_CHECKING:
    from gregor.tables.catalog import TableCatalog, TopicTable
    from gregor.tables.commit_group import CommitGroup
    from gregor.tables.dead_letters import TypedTranslation
    from gregor.tables.maintenance import InCatalogThread, Pass, TableMaintenance
    from gregor.tables.translator import PartitionTranslator

log = logging.getLogger("gregor.tables")

#: The partition whose leader maintains the topic's table (``gregor.tables.maintenance``): one
#: maintainer per table, moving with that partition's leadership.
MAINTAINER_PARTITION = 0


@dataclass(frozen=True)
class Wanted:
    """A partition this broker should translate."""

    source: PartitionSource
    config: TopicTableConfig
    leader_epoch: int


@dataclass
class _Running:
    wanted: Wanted
    translator: PartitionTranslator | None = None
    maintenance: TableMaintenance | None = None
    #: A typed mode's dead-letter table's maintenance (same broker, same settings).
    dead_letter_maintenance: TableMaintenance | None = None
    task: asyncio.Task[None] | None = None


class TableTranslation:
    def __init__(
        self,
        settings: CatalogSettings,
        registry: Callable[[], RegistryClient | None] = lambda: None,
    ) -> None:
        """``registry``: the broker's schema registry (its login and TLS), which the typed
        modes ask for the values' schemas (None: none, or not listening yet)."""
        self.settings = settings
        self.registry = registry
        self._catalog: TableCatalog | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gregor-tables")
        self._maintenance = ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="gregor-tables-maintenance"
        )
        self._tables: dict[str, TopicTable] = {}
        self._groups: dict[str, CommitGroup] = {}
        self._running: dict[tuple[str, int], _Running] = {}
        self._warehouse_checked = False

    def require_writable_warehouse(self, topic: str) -> None:
        """Fail closed at start: a topic with a table, and an object-store warehouse this
        broker cannot write (no such bucket, credentials refused), stops the broker with the
        store's answer (``gregor.tables.catalog.warehouse_error``; probed once). A warehouse
        that fails later stops the translators instead: each logs the error and tries again,
        and nothing is committed meanwhile."""
        warehouse = self.settings.properties.get("warehouse", "")  # a REST catalog may have none
        if self._warehouse_checked or not is_object_store(warehouse):
            return
        from gregor.tables.catalog import warehouse_error

        why = warehouse_error(self.settings)
        if why is not None:
            raise TablesUnavailableError(f"topic {topic} has {MODE} set, but {why}")
        self._warehouse_checked = True

    @property
    def catalog(self) -> TableCatalog:
        """The catalog, made on first use (a broker with no table never imports pyarrow)."""
        if self._catalog is None:
            from gregor.tables.catalog import TableCatalog

            self._catalog = TableCatalog(self.settings)
        return self._catalog

    @property
    def maintainers(self) -> dict[str, TableMaintenance]:
        """The tables maintained here, by topic (``<topic>~dlq`` for a dead-letter table)."""
        out: dict[str, TableMaintenance] = {}
        for (topic, _), r in self._running.items():
            if r.maintenance is not None:
                out[topic] = r.maintenance
            if r.dead_letter_maintenance is not None:
                out[topic + DEAD_LETTER_SUFFIX] = r.dead_letter_maintenance
        return out

    @property
    def translators(self) -> dict[tuple[str, int], PartitionTranslator]:
        return {k: r.translator for k, r in self._running.items() if r.translator is not None}

    async def run_catalog(self, job: Callable[[], object]) -> object:
        return await asyncio.get_running_loop().run_in_executor(self._executor, job)

    async def run_pass(self, job: Callable[[InCatalogThread], Pass]) -> Pass:
        """A maintenance pass in the maintenance thread, its catalog calls in the catalog
        thread."""
        return await asyncio.get_running_loop().run_in_executor(
            self._maintenance, job, self._in_catalog_thread
        )

    def _in_catalog_thread(self, call: Callable[[], object]) -> object:
        return self._executor.submit(call).result()

    def reconcile(self, wanted: Mapping[tuple[str, int], Wanted]) -> None:
        """Start, stop and restart translators so that exactly ``wanted`` run (on the loop)."""
        for key in list(self._running):
            running = self._running[key]
            now = wanted.get(key)
            if (
                now is None
                or running.task is None
                or running.task.done()
                or now.leader_epoch != running.wanted.leader_epoch
                or now.config != running.wanted.config
                or now.source != running.wanted.source
            ):
                if running.task is not None:
                    running.task.cancel()
                del self._running[key]
        for key, w in wanted.items():
            if key not in self._running:
                running = _Running(w)
                running.task = asyncio.get_running_loop().create_task(
                    self._translate(running), name=f"table-{key[0]}-{key[1]}"
                )
                self._running[key] = running
        dropped = {
            t
            for t in self._tables
            if not any(t in (k[0], k[0] + DEAD_LETTER_SUFFIX) for k in self._running)
        }
        for topic in dropped:
            del self._tables[topic]
        for topic in [t for t in self._groups if t not in self._tables]:
            self._groups.pop(topic).cancel()

    async def _translate(self, running: _Running) -> None:
        from gregor.tables.catalog import TopicTable
        from gregor.tables.translator import PartitionTranslator

        w = running.wanted
        topic = w.source.topic
        warehouse = self.settings.properties.get("warehouse")
        where = f"warehouse {warehouse}" if warehouse else f"catalog {self.settings.uri}"
        failures = RepeatedFailure(log, f"opening the table of topic {topic} ({where})")
        while True:
            try:
                table = self._tables.get(topic)
                if table is None:
                    opened = await self.run_catalog(
                        lambda: self.catalog.open_table(topic, w.config.mode, w.config.upsert)
                    )
                    assert isinstance(opened, TopicTable)
                    table = self._tables.setdefault(topic, opened)
                typed = await self._typed(w, table)
                break
            except Exception as e:  # noqa: BLE001 - the catalog may come back; say why meanwhile
                failures.failed(e)
                await asyncio.sleep(1.0)
        failures.succeeded()
        group = None
        if typed is None and not w.config.upsert:
            from gregor.tables.commit_group import CommitGroup

            group = self._groups.get(topic)
            if group is None or group.table is not table:
                group = self._groups[topic] = CommitGroup(table, self.run_catalog)
        running.translator = PartitionTranslator(
            w.source,
            table,
            self.run_catalog,
            target_lag_ms=w.config.target_lag_ms,
            upsert=w.config.upsert,
            typed=typed,
            group=group,
        )
        if w.source.index != MAINTAINER_PARTITION:
            await running.translator.run()
            return
        from gregor.tables.maintenance import TableMaintenance

        running.maintenance = TableMaintenance(
            table, self.run_catalog, w.config, run_pass=self.run_pass
        )
        jobs = [running.translator.run(), running.maintenance.run()]
        if typed is not None:
            running.dead_letter_maintenance = TableMaintenance(
                typed.dead_letters,
                self.run_catalog,
                w.config,
                name=topic + DEAD_LETTER_SUFFIX,
                run_pass=self.run_pass,
            )
            jobs.append(running.dead_letter_maintenance.run())
        await asyncio.gather(*jobs)

    async def _typed(self, w: Wanted, table: TopicTable) -> TypedTranslation | None:
        """A typed mode's side of the partition's translator (its dead-letter table opened),
        or None for ``key_value``."""
        if w.config.mode not in TYPED_MODES:
            return None
        registry = self.registry()
        if registry is None:  # the translator's opening tries again
            raise TablesUnavailableError(
                f"topic {w.source.topic} has {MODE}={w.config.mode}, but the broker's schema "
                "registry is not set, or the one beside the broker does not listen yet"
            )
        from gregor.columns.framing import use_client
        from gregor.tables.catalog import TopicTable
        from gregor.tables.dead_letters import TypedTranslation
        from gregor.tables.typed import TypedConverter

        use_client(registry)
        topic = w.source.topic
        key = topic + DEAD_LETTER_SUFFIX
        dead = self._tables.get(key)
        if dead is None:
            opened = await self.run_catalog(lambda: self.catalog.open_dead_letters(topic))
            assert isinstance(opened, TopicTable)
            dead = self._tables.setdefault(key, opened)
        converter = TypedConverter(topic, w.config.mode, registry)
        return TypedTranslation(converter, table, dead, w.source.index, self.run_catalog)

    async def stop(self) -> None:
        """Cancel every translator and wait for the catalog thread's last job."""
        tasks = [r.task for r in self._running.values() if r.task is not None]
        self._running.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for group in self._groups.values():
            group.cancel()
        self._groups.clear()
        # a pass still running makes its last catalog calls before the catalog thread stops
        await asyncio.get_running_loop().run_in_executor(None, self._maintenance.shutdown)
        await asyncio.get_running_loop().run_in_executor(None, self._executor.shutdown)
