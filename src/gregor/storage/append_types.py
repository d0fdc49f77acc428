"""Values that describe an append: who makes it (:class:`AppendOrigin`, which decides the
checks it gets) and where a producer's batch went (:class:`BatchMetadata`, which the producer
state remembers to answer retries). Kept apart from ``producer_state`` so that the log's
append path (``_append``, ``log_info``) can name them without importing the producer state."""

from __future__ import annotations

from enum import Enum
from typing import NamedTuple


class AppendOrigin(Enum):
    CLIENT = "client"  # a producer: every check applies
    COORDINATOR = "coordinator"  # transaction markers written on WriteTxnMarkers
    REPLICATION = "replication"  # a follower copying the leader, or a replay at load


class BatchMetadata(NamedTuple):
    first_seq: int
    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta
