"""Topic names and partition assignment rules, as Kafka defines them."""

from __future__ import annotations

import re

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")
OFFSETS_TOPIC = "__consumer_offsets"
TXN_TOPIC = "__transaction_state"
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TXN_TOPIC})


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


def assign_replicas(num_partitions: int, replication_factor: int, brokers: list[int], start: int = 0) -> list[list[int]]:
    """Round-robin replica placement: partition p's leader is brokers[(start+p) % n]."""
    n = len(brokers)
    out = []
    for p in range(num_partitions):
        first = (start + p) % n
        out.append([brokers[(first + r) % n] for r in range(replication_factor)])
    return out
