"""Bug: read_committed fetches are served as read_uncommitted: up to the high watermark, past
the last stable offset, with no aborted-transaction list. Consumers see open transactions'
writes (precommitted reads) and aborted ones (aborted reads)."""

from __future__ import annotations

from typing import Any

from gregor.broker.replication.partition import Partition, PartitionRead

DESCRIPTION = "read_committed served past the LSO"
NEMESIS = ()
READ_UNCOMMITTED = 0


def inject() -> None:
    read = Partition.read

    def read_past_lso(
        self: Partition, fetch_offset: int, max_bytes: int, **kw: Any
    ) -> PartitionRead:
        if not self.topic.startswith("__"):
            kw["isolation"] = READ_UNCOMMITTED
        return read(self, fetch_offset, max_bytes, **kw)

    Partition.read = read_past_lso  # type: ignore[method-assign]
