"""The default partitioner, compatible with the Java client's.

Keyed records go to ``(murmur2(key) & 0x7fffffff) % partitions`` over all of the topic's
partitions, so a key lands on the same partition whichever Java-compatible client wrote it
(librdkafka calls this ``murmur2_random``). Records without a key stick to one partition until
about ``batch.size`` bytes have gone to it, then move to another available partition chosen at
random (KIP-794's uniform sticky partitioner, without the queue-size weighting).
"""

from __future__ import annotations

import random
import struct

from gregor.client.core.metadata import ClusterMetadata

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK = 0xFFFFFFFF


def murmur2(data: bytes | bytearray | memoryview) -> int:
    """32-bit MurmurHash2 as the Java client computes it, returned as a signed int32."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    n4 = length >> 2
    if n4:
        for k in struct.unpack_from(f"<{n4}I", data):
            k = (k * _M) & _MASK
            k ^= k >> 24
            k = (k * _M) & _MASK
            h = ((h * _M) & _MASK) ^ k
    tail = length & 3
    if tail:
        base = n4 << 2
        if tail == 3:
            h ^= data[base + 2] << 16
        if tail >= 2:
            h ^= data[base + 1] << 8
        h ^= data[base]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: bytes | bytearray | memoryview, num_partitions: int) -> int:
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


class StickyPartitioner:
    """Per-topic sticky choice for records without a key."""

    def __init__(self, batch_size: int) -> None:
        self.batch_size = max(batch_size, 1)
        self._current: dict[str, list[int]] = {}  # topic -> [partition, bytes so far]

    def partition(
        self, topic: str, cluster: ClusterMetadata | list[int], all_partitions: int, size: int
    ) -> int:
        """The sticky partition for a record of ``size`` bytes; ``cluster`` is consulted (for
        partitions with a leader) only when it is time to move, or a list of them is given."""
        cur = self._current.get(topic)
        if cur is None or cur[1] >= self.batch_size:
            available = (
                cluster if isinstance(cluster, list) else cluster.available_partitions(topic)
            )
            choices = [p for p in available if p < all_partitions] or list(range(all_partitions))
            if cur is not None and len(choices) > 1:
                choices = [p for p in choices if p != cur[0]] or choices
            cur = self._current[topic] = [random.choice(choices), 0]
        cur[1] += size
        return cur[0]
