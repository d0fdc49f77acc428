"""What a log answers: an append's offsets, a fetch's file region, a timestamp lookup."""

from __future__ import annotations

from typing import NamedTuple

from gregor.storage.append_types import BatchMetadata
from gregor.storage.file_records import FileRegion
from gregor.storage.index import NO_TIMESTAMP
from gregor.storage.transaction_index import AbortedTxn


class LogAppendInfo(NamedTuple):
    first_offset: int
    last_offset: int
    log_append_time: int  # -1 for CreateTime
    log_start_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    records_count: int
    valid_bytes: int
    duplicate: bool = False  # a retried batch answered with its original offsets

    @classmethod
    def of_duplicate(
        cls, dup: BatchMetadata, log_start_offset: int, log_append_time: bool
    ) -> LogAppendInfo:
        """The answer to a retried batch: the offsets (and time) it was written with."""
        return cls(
            dup.first_offset,
            dup.last_offset,
            dup.timestamp if log_append_time else NO_TIMESTAMP,
            log_start_offset,
            dup.timestamp,
            dup.last_offset,
            dup.offset_delta + 1,
            0,
            duplicate=True,
        )


class FetchDataInfo(NamedTuple):
    fetch_offset: int
    region: FileRegion | None  # None: nothing to return
    first_batch_offset: int  # base offset of the first batch in the region (-1 if none)
    aborted_transactions: list[AbortedTxn] | None = None

    @property
    def size(self) -> int:
        return self.region.length if self.region else 0

    def read_bytes(self) -> bytes:
        return self.region.read() if self.region else b""


class TimestampAndOffset(NamedTuple):
    timestamp: int
    offset: int
    leader_epoch: int | None
