"""A topic's table as a reader sees it: where it is (catalog and identifier), the offsets its
current snapshot covers, and how far each partition's committed log is ahead of it (the lag,
in records: the partition's last stable offset minus the table's next offset for it). What
``gregor tables describe`` prints and the console's Tables pages show; the caller asks the
cluster for the topic's configs and end offsets, this module asks the catalog (blocking:
pyiceberg). No state.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gregor.tables import settings as ts
from gregor.tables.offsets import table_offsets
from gregor.tables.upsert import table_is_upsert


def table_status(
    settings: ts.CatalogSettings,
    topic: str,
    config: ts.TopicTableConfig,
    ends: Mapping[int, int],
) -> dict[str, Any]:
    """``topic``'s table: identifier, catalog, current snapshot (id and time), and per
    partition of ``ends`` (partition -> last stable offset) the table's offset and the lag."""
    from pyiceberg.catalog import load_catalog
    from pyiceberg.exceptions import NoSuchTableError

    identifier = [settings.namespace, topic]
    catalog = load_catalog(settings.name, **settings.load_properties())
    offsets: dict[int, int] = {}
    snapshot: dict[str, Any] | None = None
    table_upsert: bool | None = None  # the kind the table was made as (None: no table yet)
    try:
        table = catalog.load_table(tuple(identifier))
    except NoSuchTableError:
        table = None
    if table is not None:
        offsets = table_offsets(table)
        table_upsert = table_is_upsert(table.properties)
        current = table.current_snapshot()
        if current is not None:
            snapshot = {"id": current.snapshot_id, "timestamp_ms": current.timestamp_ms}
    rows = []
    for p, end in sorted(ends.items()):
        at = offsets.get(p)
        rows.append({"partition": p, "table_offset": at, "end_offset": end, "lag": end - (at or 0)})
    return {
        "topic": topic,
        "mode": config.mode,
        "target_lag_ms": config.target_lag_ms,
        "upsert": config.upsert,
        "table": identifier,
        "table_exists": table is not None,
        "table_upsert": table_upsert,
        "catalog_name": settings.name,
        "catalog_type": settings.type,
        "catalog_uri": settings.uri,
        "catalog_properties": settings.load_properties(),
        "snapshot": snapshot,
        "partitions": rows,
        "lag": sum(r["lag"] for r in rows),
    }


__all__ = ["table_status"]
