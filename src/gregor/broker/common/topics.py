"""Topic names and partition assignment rules, as Kafka defines them."""

from __future__ import annotations

import re
from collections.abc import Mapping

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")
OFFSETS_TOPIC = "__consumer_offsets"
TXN_TOPIC = "__transaction_state"
SHARE_STATE_TOPIC = "__share_group_state"
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TXN_TOPIC, SHARE_STATE_TOPIC})


def topic_name_error(name: str | None) -> str | None:
    """Why ``name`` is not a legal topic name, or None if it is."""
    if not name:
        return "topic name is empty"
    if name in (".", ".."):
        return "topic name cannot be '.' or '..'"
    if len(name) > MAX_NAME_LENGTH:
        return f"topic name is longer than {MAX_NAME_LENGTH} characters"
    if not _LEGAL.match(name):
        return "topic name may contain only ASCII letters, digits, '.', '_' and '-'"
    return None


def rack_alternated(brokers: list[int], racks: Mapping[int, str | None]) -> list[int]:
    """Brokers ordered so that neighbours sit in different racks where possible: one broker
    of each rack in turn (racks by name, brokers by id), Kafka's rack-alternated list."""
    by_rack: dict[str, list[int]] = {}
    for b in sorted(brokers):
        by_rack.setdefault(racks.get(b) or "", []).append(b)
    queues = [by_rack[r] for r in sorted(by_rack)]
    out: list[int] = []
    for i in range(max((len(q) for q in queues), default=0)):
        out.extend(q[i] for q in queues if i < len(q))
    return out


def assign_replicas(
    num_partitions: int,
    replication_factor: int,
    brokers: list[int],
    start: int = 0,
    racks: Mapping[int, str | None] | None = None,
) -> list[list[int]]:
    """Round-robin replica placement: partition p's leader is the (start+p)-th broker and its
    followers the next ones. With ``racks`` (every broker has one, as Kafka requires for
    rack-aware placement) the brokers are taken in rack-alternated order, so the replicas of a
    partition land on as many racks as there are."""
    if racks is not None and brokers and all(racks.get(b) for b in brokers):
        brokers = rack_alternated(brokers, racks)
    n = len(brokers)
    out = []
    for p in range(num_partitions):
        first = (start + p) % n
        out.append([brokers[(first + r) % n] for r in range(replication_factor)])
    return out
