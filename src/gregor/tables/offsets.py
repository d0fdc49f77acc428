"""The offsets a table holds, as its snapshots' summary properties say.

Every commit of a translator carries, in its snapshot summary:

* ``gregor.offsets``: JSON ``{"<partition>": <next offset>, ...}``, for every partition the
  table has ever taken: the records of partition p at offsets below the number are in the
  table (or were never in the committed log: control batches, aborted transactions), and none
  at or above it. A commit copies its parent's map and moves its own partition's entry, and it
  commits only on top of the snapshot it read the map from (the catalog's optimistic check),
  so the current snapshot's map is the truth for all partitions;
* ``gregor.partition``, ``gregor.first-offset``, ``gregor.next-offset``: what this one
  commit covers (one partition's range ``[first, next)``).

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


def offsets_of_summary(properties: Mapping[str, str] | None) -> dict[int, int]:
    """The per-partition next offsets of one snapshot's summary properties."""
    if not properties or OFFSETS not in properties:
        return {}
    raw = json.loads(properties[OFFSETS])
    if not isinstance(raw, dict):
        raise ValueError(f"{OFFSETS} is not a JSON object: {properties[OFFSETS]!r}")
    return {int(p): int(o) for p, o in raw.items()}


def table_offsets(table: Any) -> dict[int, int]:
    """The per-partition next offsets of a pyiceberg table's current snapshot."""
    snapshot = table.current_snapshot()
    if snapshot is None or snapshot.summary is None:
        return {}
    return offsets_of_summary(snapshot.summary.additional_properties)


def commit_properties(
    parent: Mapping[int, int], partition: int, first: int, next_offset: int
) -> dict[str, str]:
    """The summary properties of a commit of ``[first, next_offset)`` of ``partition``."""
    offsets = dict(parent)
    offsets[partition] = next_offset
    return {
        OFFSETS: json.dumps({str(p): o for p, o in sorted(offsets.items())}),
        PARTITION: str(partition),
        FIRST_OFFSET: str(first),
        NEXT_OFFSET: str(next_offset),
    }
