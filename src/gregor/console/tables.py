"""The Tables pages: every topic written as an Iceberg table (``iceberg.mode``) with its lag,
and one topic's table (catalog, identifier, snapshot, per-partition offsets and lag, and how to
load it with pyiceberg).

The lag is what ``gregor tables describe`` reports (``gregor.tables.status``): per partition,
the last stable offset (read_committed ListOffsets: what a table may hold) minus the table's
next offset for it, in records. The catalog is found the way ``gregor tables`` finds it, from
the first broker's ``iceberg.*`` configs (DescribeConfigs through the visitor's client, so the
cluster's ACLs decide), and asked in a thread (pyiceberg blocks), at most
:data:`CATALOG_CALLS` at once per page. A catalog that cannot be found or opened is a page
saying why, never a traceback.
"""

from __future__ import annotations

import asyncio
import time
from html import escape
from typing import Any
from urllib.parse import quote

from aiohttp import web

from gregor.client import AIOAdminClient, TopicPartition
from gregor.console.html import link, page, table
from gregor.console.pages import respond, session_admin

ACTIVE = "/tables"
CATALOG_CALLS = 4
#: Reads of one table's status before its row shows the catalog's error (SQLite's catalog may
#: answer "database is locked" while a broker commits).
CATALOG_ATTEMPTS = 3


class TablesPage(Exception):
    """A page other than the asked one: ``status``, title and a message."""

    def __init__(self, status: int, title: str, message: str) -> None:
        super().__init__(message)
        self.status, self.title, self.message = status, title, message


def _error_page(e: TablesPage) -> web.Response:
    body = f"<p id='tables-error'>{escape(e.message)}</p>"
    return web.Response(status=e.status, text=page(e.title, body, ACTIVE), content_type="text/html")


async def _catalog(admin: AIOAdminClient) -> Any:
    """The cluster's catalog settings (``gregor.tables.discovery``), or a page saying why not."""
    try:
        from gregor.tables.discovery import broker_catalog
        from gregor.tables.settings import pyiceberg_available
    except ImportError:  # pragma: no cover - gregor.tables imports pyarrow only
        raise TablesPage(503, "Tables unavailable", "gregor.tables cannot be imported") from None
    if not pyiceberg_available():
        raise TablesPage(
            503,
            "Tables unavailable",
            "this console cannot read Iceberg tables: pyiceberg is not installed "
            "(install gregor's 'tables' extra)",
        )
    cluster = await admin.describe_cluster()
    broker_id = str(cluster.brokers[0][0] if cluster.brokers else cluster.controller_id)
    found = await admin.describe_configs([("broker", broker_id)])
    try:
        return broker_catalog(next(iter(found.values())))
    except ValueError as e:
        raise TablesPage(502, "Catalog not found", str(e)) from None


async def _table_configs(admin: AIOAdminClient, names: list[str]) -> dict[str, Any]:
    """The table settings of each of ``names`` whose ``iceberg.mode`` is not disabled."""
    from gregor.tables.settings import TopicTableConfig

    if not names:
        return {}
    found = await admin.describe_configs([("topic", n) for n in names])
    out = {}
    for (_, name), entries in found.items():
        if isinstance(entries, Exception):
            continue
        config = TopicTableConfig.of(
            {k: e.value for k, e in entries.items() if e.value is not None}
        )
        if config.enabled:
            out[name] = config
    return out


async def _statuses(
    admin: AIOAdminClient, settings: Any, configs: dict[str, Any]
) -> dict[str, dict[str, Any] | str]:
    """Each table's status (``gregor.tables.status``), or why the catalog could not say."""
    from gregor.tables.status import table_status

    described = await admin.describe_topics(list(configs))
    partitions = {
        name: sorted(p.partition for p in d.partitions)
        for name, d in described.items()
        if not isinstance(d, Exception)
    }
    tps = [TopicPartition(n, p) for n, ps in partitions.items() for p in ps]
    ends = await admin.list_offsets({tp: "latest" for tp in tps}, isolation_level=1) if tps else {}
    gate = asyncio.Semaphore(CATALOG_CALLS)

    async def one(name: str) -> dict[str, Any] | str:
        at = {p: ends[TopicPartition(name, p)][0] or 0 for p in partitions[name]}
        why = ""
        async with gate:
            for _ in range(CATALOG_ATTEMPTS):  # a catalog busy with a commit answers again
                try:
                    return await asyncio.to_thread(table_status, settings, name, configs[name], at)
                except Exception as e:  # noqa: BLE001 - the catalog's failure is shown, per table
                    why = f"{type(e).__name__}: {e}".splitlines()[0]
        return why

    names = [n for n in configs if n in partitions]
    got = await asyncio.gather(*(one(n) for n in names))
    return dict(zip(names, got, strict=True))


def _when(ms: int | None) -> str:
    if ms is None:
        return "no commit yet"
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ms / 1000))
    return f"{stamp} UTC ({max(time.time() - ms / 1000, 0):.0f} s ago)"


async def tables(request: web.Request) -> web.Response:
    admin = session_admin(request)
    try:
        configs = await _table_configs(admin, sorted(await admin.list_topics()))
        if not configs:
            body = (
                "<p id='no-tables'>No topic is written as a table. Set the topic config "
                "<code>iceberg.mode=key_value</code> on a topic to have one.</p>"
            )
            return respond(request, "Tables", body, ACTIVE)
        settings = await _catalog(admin)
        statuses = await _statuses(admin, settings, configs)
    except TablesPage as e:
        return _error_page(e)
    rows = []
    for name, status in sorted(statuses.items()):
        if isinstance(status, str):
            rows.append(
                (
                    link(f"/tables/{quote(name, safe='')}", name),
                    configs[name].mode,
                    "-",
                    status,
                    "-",
                )
            )
            continue
        snapshot = status["snapshot"]
        rows.append(
            (
                link(f"/tables/{quote(name, safe='')}", name),
                status["mode"],
                ".".join(status["table"]) if status["table_exists"] else "(not created yet)",
                _when(snapshot["timestamp_ms"] if snapshot else None),
                f"{status['lag']:,}",
            )
        )
    body = (
        f"<p>Catalog: {escape(settings.type)} <code>{escape(str(settings.uri))}</code></p>"
        + table(["Topic", "Mode", "Table", "Last commit", "Lag (records)"], rows, "tables")
    )
    return respond(request, "Tables", body, ACTIVE)


async def topic_table(request: web.Request) -> web.Response:
    admin = session_admin(request)
    name = request.match_info["topic"]
    try:
        if name not in await admin.list_topics(internal=True):
            raise TablesPage(404, "No such topic", f"topic {name} does not exist")
        configs = await _table_configs(admin, [name])
        if name not in configs:
            raise TablesPage(
                404,
                "No table",
                f"topic {name} is not written as a table (iceberg.mode is disabled)",
            )
        settings = await _catalog(admin)
        status = (await _statuses(admin, settings, configs))[name]
        if isinstance(status, str):
            raise TablesPage(502, "Catalog unavailable", f"the catalog could not say: {status}")
    except TablesPage as e:
        return _error_page(e)
    snapshot = status["snapshot"]
    identifier = ".".join(status["table"])
    topic_href = "/topics/" + quote(name, safe="")
    rows = [
        (
            r["partition"],
            "-" if r["table_offset"] is None else r["table_offset"],
            r["end_offset"],
            f"{r['lag']:,}",
        )
        for r in status["partitions"]
    ]
    props = ", ".join(f"{k!r}: {v!r}" for k, v in sorted(status["catalog_properties"].items()))
    load = (
        "from pyiceberg.catalog import load_catalog\n"
        f"catalog = load_catalog({status['catalog_name']!r}, **{{{props}}})\n"
        f"table = catalog.load_table({tuple(status['table'])!r})"
    )
    body = (
        f"<p>Mode {escape(status['mode'])} · target lag {status['target_lag_ms']:,} ms · "
        f"table <code id='identifier'>{escape(identifier)}</code>"
        f"{'' if status['table_exists'] else ' (not created yet)'}</p>"
        f"<p>Catalog: {escape(status['catalog_type'])} "
        f"<code>{escape(str(status['catalog_uri']))}</code></p>"
        f"<p id='snapshot'>Current snapshot: "
        + (
            f"{snapshot['id']}, committed {escape(_when(snapshot['timestamp_ms']))}"
            if snapshot
            else "none yet"
        )
        + f"</p><p id='lag'>Lag: {status['lag']:,} records</p>"
        + table(["Partition", "Table offset", "Last stable offset", "Lag"], rows, "partitions")
        + "<h2>Load it</h2><pre id='load'>"
        + escape(load)
        + "</pre>"
        + f"<p>{link(topic_href, 'The topic')}</p>"
    )
    return respond(request, f"Table of {name}", body, ACTIVE)


__all__ = ["tables", "topic_table"]
