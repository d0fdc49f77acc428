"""Names on disk, as Kafka lays them out.

A partition's directory is ``<topic>-<partition>``; each segment's files are named by the
segment's base offset in 20 digits plus a suffix (``00000000000000001234.log``), and so are the
producer-state snapshots (``<offset>.snapshot``). Suffixes added to a whole file name mark the
crash-safe steps of deletion (``.deleted``) and compaction (``.cleaned``, then ``.swap``).
"""

from __future__ import annotations

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
SNAPSHOT_SUFFIX = ".snapshot"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"

INDEX_SUFFIXES = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)


def file_name(base_offset: int, suffix: str) -> str:
    """``00000000000000001234.log`` and friends: the 20-digit base offset plus a suffix."""
    return f"{base_offset:020d}{suffix}"


def parse_base_offset(name: str) -> int | None:
    """The base offset a segment file name starts with, or None."""
    head = name.split(".", 1)[0]
    if len(head) == 20 and head.isdigit():
        return int(head)
    return None


def parse_topic_partition(dir_name: str) -> tuple[str, int] | None:
    """``orders-3`` -> ("orders", 3); None for names that are not a partition directory."""
    topic, sep, part = dir_name.rpartition("-")
    if not sep or not topic or not part.isdigit() or "." in part:
        return None
    return topic, int(part)
