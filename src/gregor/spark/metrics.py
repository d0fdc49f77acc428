"""Offsets behind latest, as Spark's Kafka source reports them in stream progress.

Spark's connector puts ``minOffsetsBehindLatest``, ``maxOffsetsBehindLatest`` and
``avgOffsetsBehindLatest`` into each progress' ``sources[i].metrics``. A Python data source
cannot: PySpark 4.3's stream reader has no ``metrics`` hook (the JVM wrapper does not
implement ``ReportsSourceMetrics``). What it can do is report the latest offsets it saw
(``reportLatestOffset``), and Spark puts those beside the batch's end offset in the same
progress entry. :func:`offsets_behind_latest` computes Spark's three figures from that entry,
with Spark's formula and formatting (latest minus consumed per partition; min and max as
integers, the average as a double).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from gregor.spark.options import offsets_from_json
from gregor.spark.planning import offsets_behind_latest as _behind


def _offsets(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, str):
        value = json.loads(value)
    return offsets_from_json(value) if isinstance(value, Mapping) else None


def offsets_behind_latest(source: Any) -> dict[str, str]:
    """Spark's offsets-behind-latest metrics for one source entry of a streaming query's
    progress (a dict from ``query.recentProgress[i]["sources"][j]`` or a ``SourceProgress``);
    empty when the entry has no latest or end offset."""
    if not isinstance(source, Mapping):
        source = {
            "endOffset": getattr(source, "endOffset", None),
            "latestOffset": getattr(source, "latestOffset", None),
        }
    consumed = _offsets(source.get("endOffset"))
    latest = _offsets(source.get("latestOffset"))
    if not consumed or not latest:
        return {}
    return _behind(consumed, latest)


__all__ = ["offsets_behind_latest"]
