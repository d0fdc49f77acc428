"""``gregor tables``: the topics that are Iceberg tables, and where each table is.

The catalog is the broker's (its ``iceberg.catalog.*``, ``iceberg.warehouse``,
``iceberg.namespace`` and data directory, read with DescribeConfigs); the table's offsets are
those its current snapshot records (``gregor.tables.offsets``), and the lag is each
partition's last stable offset (ListOffsets, read_committed) minus the table's offset.
``describe`` also says whether the table is an upsert table (``upsert``: the topic's
``iceberg.upsert``; ``table_upsert``: the kind the table recorded when it was made).
``describe --output json`` gives what pyiceberg needs to open the table::

    d = json.loads(out)
    table = load_catalog(d["catalog_name"], **d["catalog_properties"]).load_table(tuple(d["table"]))

``snapshots`` lists the table's snapshots with the offsets each covers; ``compact`` runs the
table's compaction now (``gregor.tables.maintenance.compact``), committing to the catalog
beside the broker's translators (the catalog's optimistic commit orders them).

The SQL catalog on SQLite (the default) is a file in the broker's data directory, so the
command must run where that file is.
"""

from __future__ import annotations

import json
from typing import Any

import click

from gregor.cli.clientopts import (
    client_config,
    client_options,
    fail,
    no_such_topic,
    output_option,
    topic_param,
)
from gregor.tables import settings as ts


def _admin(bootstrap_server: str, properties: tuple[str, ...]) -> Any:
    from gregor.client import AdminClient

    return AdminClient(client_config(bootstrap_server, properties))


@click.group()
def tables() -> None:
    """Topics as Iceberg tables (iceberg.mode): list, describe, snapshots, compact."""


def _catalog(admin: Any) -> ts.CatalogSettings:
    from gregor.tables.discovery import cluster_catalog

    try:
        return cluster_catalog(admin)
    except ValueError as e:
        fail(str(e))
        raise


def _topic_configs(admin: Any, names: list[str]) -> dict[str, ts.TopicTableConfig]:
    found = admin.describe_configs([("topic", n) for n in names])
    out = {}
    for (_, name), entries in found.items():
        if isinstance(entries, Exception):
            continue
        out[name] = ts.TopicTableConfig.of(
            {k: e.value for k, e in entries.items() if e.value is not None}
        )
    return out


def _describe(admin: Any, settings: ts.CatalogSettings, topic: str) -> dict[str, Any]:
    from gregor.client.core.metadata import TopicPartition
    from gregor.tables.status import table_status

    described = admin.describe_topics([topic])[topic]
    config = _topic_configs(admin, [topic])[topic]
    partitions = sorted(p.partition for p in described.partitions)
    ends = admin.list_offsets(
        {TopicPartition(topic, p): "latest" for p in partitions}, isolation_level=1
    )
    return table_status(
        settings, topic, config, {p: ends[TopicPartition(topic, p)][0] or 0 for p in partitions}
    )


@tables.command("list")
@client_options
@output_option
def list_tables(bootstrap_server: str, properties: tuple[str, ...], output: str) -> None:
    """The topics whose iceberg.mode is not disabled, with their tables.

    \b
    Examples:
      gregor tables list
      gregor tables list --output json
    """
    with _admin(bootstrap_server, properties) as admin:
        names = sorted(admin.list_topics())
        configs = _topic_configs(admin, names) if names else {}
        settings = _catalog(admin)
    found = [
        {"topic": n, "mode": c.mode, "table": [settings.namespace, n]}
        for n, c in sorted(configs.items())
        if c.enabled
    ]
    if output == "json":
        click.echo(json.dumps(found))
        return
    for t in found:
        click.echo(f"{t['topic']}\t{t['mode']}\t{'.'.join(t['table'])}")


@tables.command()
@client_options
@topic_param()
@output_option
def describe(bootstrap_server: str, properties: tuple[str, ...], topic: str, output: str) -> None:
    """Where a topic's table is (catalog, identifier), its offsets and its lag.

    \b
    Examples:
      gregor tables describe orders
      gregor tables describe orders --output json
    """
    with _admin(bootstrap_server, properties) as admin:
        names = admin.list_topics()
        if topic not in names:
            fail(no_such_topic(topic, names))
        settings = _catalog(admin)
        d = _describe(admin, settings, topic)
    if output == "json":
        click.echo(json.dumps(d, indent=2))
        return
    click.echo(
        f"Topic: {d['topic']}\tMode: {d['mode']}\tTargetLagMs: {d['target_lag_ms']}\t"
        f"Upsert: {str(d['upsert']).lower()}"
    )
    kind = {None: "", True: "\tKind: upsert", False: "\tKind: append"}[d["table_upsert"]]
    click.echo(f"Table: {'.'.join(d['table'])}\tExists: {d['table_exists']}{kind}")
    click.echo(f"Catalog: {d['catalog_type']} {d['catalog_uri']}")
    for r in d["partitions"]:
        click.echo(
            f"\tPartition: {r['partition']}\tTableOffset: {r['table_offset']}\t"
            f"EndOffset: {r['end_offset']}\tLag: {r['lag']}"
        )


def _load_table(bootstrap_server: str, properties: tuple[str, ...], topic: str) -> Any:
    """The topic's pyiceberg table (the command fails when the topic or table is missing)."""
    from pyiceberg.catalog import load_catalog
    from pyiceberg.exceptions import NoSuchTableError

    with _admin(bootstrap_server, properties) as admin:
        names = admin.list_topics()
        if topic not in names:
            fail(no_such_topic(topic, names))
        settings = _catalog(admin)
    catalog = load_catalog(settings.name, **settings.load_properties())
    try:
        return catalog.load_table((settings.namespace, topic))
    except NoSuchTableError:
        fail(f"topic {topic} has no table ({settings.namespace}.{topic} is not in the catalog)")
        raise


def _snapshots(table: Any) -> list[dict[str, Any]]:
    from gregor.tables.offsets import MAINTENANCE, offsets_of_summary

    current = table.current_snapshot()
    out = []
    for s in sorted(table.snapshots(), key=lambda s: (s.timestamp_ms, s.sequence_number or 0)):
        props = s.summary.additional_properties if s.summary is not None else {}
        out.append(
            {
                "id": s.snapshot_id,
                "parent_id": s.parent_snapshot_id,
                "timestamp_ms": s.timestamp_ms,
                "operation": s.summary.operation.value if s.summary is not None else None,
                "maintenance": props.get(MAINTENANCE),
                "offsets": {str(p): o for p, o in offsets_of_summary(props).items()},
                "current": current is not None and s.snapshot_id == current.snapshot_id,
            }
        )
    return out


@tables.command()
@client_options
@topic_param()
@output_option
def snapshots(bootstrap_server: str, properties: tuple[str, ...], topic: str, output: str) -> None:
    """A topic's table snapshots, oldest first: id, time, operation and the offsets it covers.

    \b
    Examples:
      gregor tables snapshots orders
      gregor tables snapshots orders --output json
    """
    found = _snapshots(_load_table(bootstrap_server, properties, topic))
    if output == "json":
        click.echo(json.dumps(found, indent=2))
        return
    from datetime import UTC, datetime

    for s in found:
        when = datetime.fromtimestamp(s["timestamp_ms"] / 1000, UTC).isoformat(
            timespec="milliseconds"
        )
        operation = s["operation"] + (f" ({s['maintenance']})" if s["maintenance"] else "")
        offsets = ",".join(f"{p}:{o}" for p, o in s["offsets"].items())
        current = "\tcurrent" if s["current"] else ""
        click.echo(f"{s['id']}\t{when}\t{operation}\tOffsets: {offsets or '-'}{current}")


@tables.command()
@client_options
@topic_param()
@click.option(
    "--min-input-files",
    type=click.IntRange(min=2),
    default=2,
    show_default=True,
    help="Rewrite an hour partition when it has at least this many small files.",
)
@output_option
def compact(
    bootstrap_server: str,
    properties: tuple[str, ...],
    topic: str,
    min_input_files: int,
    output: str,
) -> None:
    """Compact a topic's table now: each hour partition's small files into one.

    \b
    Examples:
      gregor tables compact orders
      gregor tables compact orders --min-input-files 10 --output json
    """
    from gregor.tables.catalog import TopicTable
    from gregor.tables.maintenance import compact as compact_table

    table = TopicTable(topic, _load_table(bootstrap_server, properties, topic))
    done = compact_table(table, min_input_files)
    if output == "json":
        click.echo(
            json.dumps(
                {
                    "topic": topic,
                    "files_before": done.files_before,
                    "files_after": done.files_after,
                    "groups_rewritten": len(done.rewritten),
                }
            )
        )
        return
    click.echo(f"Topic: {topic}\tFilesBefore: {done.files_before}\tFilesAfter: {done.files_after}")
