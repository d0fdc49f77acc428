"""A fetch's parameters and its per-partition results (Kafka's ``FetchParams`` and
``FetchPartitionData``), and what is done to the records read before they are sent: the cut-off
tail of a read left out (``drop_partial_tail``), the down-conversion for old fetch versions in a
worker thread (``convert_all``). ``ReplicaManager.fetch`` fills the ``FetchPartition``\\ s on the
event loop; nothing here holds state between fetches.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

from gregor.broker.common.errors import code_of
from gregor.broker.common.file_send import SendableRegion
from gregor.protocol.errors import (
    ErrorCode,
    KafkaError,
)
from gregor.protocol.exceptions import ProtocolError
from gregor.storage.log import Log
from gregor.storage.transaction_index import AbortedTxn

log = logging.getLogger("gregor.broker.replica_manager")


#: A cut-off read whose first batch is smaller than 1/MANY_BATCHES of it is sent as it is.
MANY_BATCHES = 8


@dataclass(slots=True)
class FetchPartition:
    """One partition of a fetch: what to read, and (after ``fetch``) what was found."""

    topic: str
    index: int
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    #: An error known before reading (an unknown topic id); the result is then that error.
    preset_error: ErrorCode = ErrorCode.NONE
    error: ErrorCode = ErrorCode.NONE
    records: bytes | memoryview | SendableRegion | None = None
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    aborted_transactions: list[AbortedTxn] | None = None
    size: int = 0
    #: KIP-392: the replica the consumer should read this partition from (-1: here).
    preferred_read_replica: int = -1


@dataclass(slots=True)
class FetchParams:
    max_bytes: int
    min_bytes: int
    max_wait_ms: int
    isolation: int
    replica_id: int = -1
    #: Error for a partition this broker does not know.
    unknown_error: ErrorCode = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    #: Applied to each partition's records (down-conversion for old fetch versions), in a
    #: worker thread: (records, fetch offset, byte limit) -> the converted records.
    convert: Callable[[bytes | memoryview, int, int], bytes | memoryview] | None = None
    #: Done when the client hung up: a waiting fetch returns at once.
    hung_up: asyncio.Future[None] | None = None
    #: Records may be handed out as file regions for sendfile (a plain-TCP connection).
    sendfile: bool = False
    #: KIP-392 (Fetch v11+ from a consumer): a follower may serve this fetch, and with a rack
    #: aware replica selector the leader points the consumer to a replica in ``client_rack``.
    follower_read: bool = False
    client_rack: str | None = None

    @property
    def from_follower(self) -> bool:
        return self.replica_id >= 0


async def convert_all(parts: list[FetchPartition], params: FetchParams) -> None:
    """Down-convert each part's records for an old fetch version in a worker thread (a batch
    may inflate to the decompression bound; the event loop goes on serving meanwhile), at most
    the part's byte limit of them from its fetch offset; a batch that cannot be converted
    (zstd, corrupt) answers that partition's error."""
    convert = params.convert
    assert convert is not None
    loop = asyncio.get_running_loop()
    for part in parts:
        records = part.records
        if part.error or records is None or not len(records):
            continue
        assert not isinstance(records, SendableRegion)  # no regions when converting
        limit = max(min(part.max_bytes, params.max_bytes), 1)
        try:
            converted = await loop.run_in_executor(None, convert, records, part.fetch_offset, limit)
        except (KafkaError, ProtocolError) as e:
            part.error, part.records, part.size = code_of(e), b"", 0
            continue
        part.records, part.size = converted, len(converted)


def nothing_to_read(part: FetchPartition, log: Log) -> None:
    """Answer ``part`` with no records and the log's current offsets."""
    part.records, part.size = b"", 0
    part.high_watermark = log.high_watermark
    part.last_stable_offset = log.last_stable_offset
    part.log_start_offset = log.log_start_offset


def _batch_length_at(records: bytes | memoryview | SendableRegion, pos: int) -> int:
    """The batch length field of the batch at ``pos`` (its header's bytes 8..12)."""
    if isinstance(records, SendableRegion):
        field = records.pread(pos + 8, 4)
        return int.from_bytes(field, "big", signed=True) if len(field) == 4 else -1
    return int.from_bytes(records[pos + 8 : pos + 12], "big", signed=True)


def drop_partial_tail(
    records: bytes | memoryview | SendableRegion,
) -> bytes | memoryview | SendableRegion:
    """A read cut off by the byte limit usually ends inside a batch, which the client can only
    discard (Kafka sends it anyway). When the batches are big, leave that tail out: it can be
    nearly as large as the rest. Reads of many small batches are sent as they are (judged by
    the first batch: the tail is then small, and walking the batches would cost more than
    sending it), and so is a read that is all tail, so an old client can still see that a
    batch is larger than its limit."""
    n = len(records)
    if n < 12:
        return records
    first = 12 + _batch_length_at(records, 0)  # base offset, length
    if first * MANY_BATCHES < n:
        return records
    pos = 0
    for _ in range(4 * MANY_BATCHES):
        if pos + 12 > n:
            break
        end = pos + 12 + _batch_length_at(records, pos)
        if end > n or end <= pos:
            break
        pos = end
    else:
        return records
    if not 0 < pos < n:
        return records
    if isinstance(records, SendableRegion):
        head = records.head(pos)
        records.close()
        return head
    return memoryview(records)[:pos]
