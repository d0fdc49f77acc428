"""Which ``__consumer_offsets`` partition holds a group: Kafka's rule, bit for bit.

Kafka computes ``Utils.abs(groupId.hashCode) % offsets.topic.num.partitions``, where
``String.hashCode`` runs over UTF-16 code units with 32-bit overflow, and ``Utils.abs`` maps
``Integer.MIN_VALUE`` to 0 (unlike ``Math.abs``). Matching it keeps the layout of a data
directory interchangeable with tools that compute the partition themselves.
"""

from __future__ import annotations

_INT_MIN = -(1 << 31)


def java_string_hashcode(s: str) -> int:
    """Java's ``String.hashCode()``: a signed 32-bit int."""
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def kafka_abs(n: int) -> int:
    """Kafka's ``Utils.abs``: ``abs`` except that ``Integer.MIN_VALUE`` becomes 0."""
    return 0 if n == _INT_MIN else abs(n)


def partition_for(group_id: str, num_partitions: int) -> int:
    """The ``__consumer_offsets`` partition that owns ``group_id``."""
    return kafka_abs(java_string_hashcode(group_id)) % num_partitions
