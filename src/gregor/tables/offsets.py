"""The offsets a table holds, as its snapshots' summary properties say.

Every commit of a translator carries, in its snapshot summary:

* ``gregor.offsets``: JSON ``{"<partition>": <next offset>, ...}``, for every partition the
  table has ever taken: the records of partition p at offsets below the number are in the
  table (or were never in the committed log: control batches, aborted transactions; or, in an
  upsert table, were applied to it: ``gregor.tables.upsert``), and none at or above it. A commit copies its parent's map and moves its own partition's entry, and it
  commits only on top of the snapshot it read the map from (the catalog's optimistic check),
  so the current snapshot's map is the truth for all partitions;
* ``gregor.ranges``: JSON ``{"<partition>": [<first>, <next>], ...}``, what this one commit
  covers: each partition's range ``[first, next)`` (one commit may carry several partitions
  a broker leads: ``gregor.tables.commit_group``);
* ``gregor.partition``, ``gregor.first-offset``, ``gregor.next-offset``: the same range again
  when the commit covers one partition (as every commit did before ``gregor.ranges``).

Table maintenance (``gregor.tables.maintenance``: retention deletes, compaction rewrites)
copies its parent's map unchanged into its own snapshots, so the map stays on the current
snapshot. A snapshot some other writer made (an Iceberg tool appending or deleting) has no
map: the offsets are then those of the newest ancestor of the current snapshot that carries
one (:func:`offsets_snapshot`), which snapshot expiry therefore never removes.

A table that no commit of Gregor's touched has no map: every partition starts from its log
start offset.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

OFFSETS = "gregor.offsets"
PARTITION = "gregor.partition"
FIRST_OFFSET = "gregor.first-offset"
NEXT_OFFSET = "gregor.next-offset"
RANGES = "gregor.ranges"
#: What a maintenance commit did (``retention``, ``compaction``); it covers no new offsets.
MAINTENANCE = "gregor.maintenance"


def offsets_of_summary(properties: Mapping[str, str] | None) -> dict[int, int]:
    """The per-partition next offsets of one snapshot's summary properties."""
    if not properties or OFFSETS not in properties:
        return {}
    raw = json.loads(properties[OFFSETS])
    if not isinstance(raw, dict):
        raise ValueError(f"{OFFSETS} is not a JSON object: {properties[OFFSETS]!r}")
    return {int(p): int(o) for p, o in raw.items()}


def _properties(snapshot: Any) -> Mapping[str, str] | None:
    return None if snapshot.summary is None else snapshot.summary.additional_properties


def offsets_snapshot(table: Any, snapshot: Any = None) -> Any:
    """The newest snapshot in the ancestry of ``snapshot`` (by default the current one; itself
    included) whose summary carries the offsets map, or None (no commit of Gregor's is in the
    table's history)."""
    if snapshot is None:
        snapshot = table.current_snapshot()
    while snapshot is not None:
        properties = _properties(snapshot)
        if properties and OFFSETS in properties:
            return snapshot
        if snapshot.parent_snapshot_id is None:
            return None
        snapshot = table.snapshot_by_id(snapshot.parent_snapshot_id)
    return None


def table_offsets(table: Any) -> dict[int, int]:
    """The per-partition next offsets of a pyiceberg table (its current snapshot's map, or
    that of the newest ancestor carrying one)."""
    snapshot = offsets_snapshot(table)
    if snapshot is None:
        return {}
    return offsets_of_summary(_properties(snapshot))


def carried_properties(parent: Mapping[int, int], operation: str) -> dict[str, str]:
    """The summary properties of a maintenance commit: the parent's offsets, unchanged."""
    return {
        OFFSETS: json.dumps({str(p): o for p, o in sorted(parent.items())}),
        MAINTENANCE: operation,
    }


def commit_properties(
    parent: Mapping[int, int], ranges: Mapping[int, tuple[int, int]]
) -> dict[str, str]:
    """The summary properties of a commit of each ``partition: (first, next_offset)`` of
    ``ranges``."""
    offsets = dict(parent)
    for partition, (_, next_offset) in ranges.items():
        offsets[partition] = next_offset
    props = {
        OFFSETS: json.dumps({str(p): o for p, o in sorted(offsets.items())}),
        RANGES: json.dumps({str(p): [f, n] for p, (f, n) in sorted(ranges.items())}),
    }
    if len(ranges) == 1:
        ((partition, (first, next_offset)),) = ranges.items()
        props.update(
            {PARTITION: str(partition), FIRST_OFFSET: str(first), NEXT_OFFSET: str(next_offset)}
        )
    return props


def ranges_of_summary(properties: Mapping[str, str] | None) -> dict[int, tuple[int, int]]:
    """What one commit covers, ``partition: (first, next)``, from its summary properties
    (empty: a maintenance commit, or a snapshot some other writer made)."""
    if not properties:
        return {}
    if RANGES in properties:
        raw = json.loads(properties[RANGES])
        if not isinstance(raw, dict):
            raise ValueError(f"{RANGES} is not a JSON object: {properties[RANGES]!r}")
        return {int(p): (int(r[0]), int(r[1])) for p, r in raw.items()}
    if PARTITION in properties:
        return {
            int(properties[PARTITION]): (
                int(properties[FIRST_OFFSET]),
                int(properties[NEXT_OFFSET]),
            )
        }
    return {}
