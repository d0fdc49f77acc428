"""Kafka's checks of a Produce request's records before the log's own
(``ProduceRequest.validateRecords``, the base offset, the codecs), the up-conversion of a legacy
message set, and the walk of a compressed record set off the event loop when it inflates.

``ReplicaManager.append_records`` calls them in this order: ``upconvert_legacy`` (message
format v0/v1), else ``check_batches`` (RecordBatch v2), then ``scan_compressed`` for compressed
batches. The record-level checks, offsets and leader epoch are the log's and the partition's
business. No state.
"""

from __future__ import annotations

import asyncio

from gregor.protocol.errors import (
    CorruptMessageError,
    InvalidRecordError,
    UnsupportedCompressionTypeError,
)
from gregor.protocol.records.convert import upconvert
from gregor.protocol.records.header import iter_batches
from gregor.storage.errors import RecordTooLargeError
from gregor.storage.validator import MAX_DECOMPRESSED_SIZE, ScannedBatch, scan_batches

ZSTD = 4
MAX_CODEC = ZSTD  # none, gzip, snappy, lz4, zstd
#: A produced compressed batch is decompressed and walked on the event loop up to this many
#: bytes of records (about a millisecond); a larger one again in a worker thread.
INLINE_DECOMPRESSED_BYTES = 1 << 20


def upconvert_legacy(
    records: bytes | bytearray | memoryview, version: int, max_decompressed_size: int
) -> bytes | bytearray | memoryview:
    """A legacy message set (magic 0 or 1) as RecordBatch v2; refused from Produce v3 on."""
    if version >= 3:
        raise InvalidRecordError(
            f"Produce requests with version {version} are only allowed to contain record "
            "batches with magic version 2"
        )
    return upconvert(records, max_decompressed_size=max_decompressed_size)


def check_batches(
    topic: str, index: int, records: bytes | bytearray | memoryview, version: int
) -> bool:
    """The request's v2 batches as Kafka checks them (exactly one from Produce v3 on, base
    offset 0, a known codec, zstd from v7 on, KIP-110); True when any is compressed."""
    compressed = False
    batches = 0
    for _, header in iter_batches(records):
        batches += 1
        if version >= 3 and batches > 1:
            raise InvalidRecordError(
                f"Produce requests with version {version} are only allowed to contain exactly "
                "one record batch"
            )
        if header.base_offset != 0:
            raise InvalidRecordError(
                f"The baseOffset of the record batch in the append to {topic}-"
                f"{index} should be 0, but it is {header.base_offset}"
            )
        codec = header.compression
        if codec > MAX_CODEC:
            raise CorruptMessageError(f"unknown compression codec {codec}")
        if codec == ZSTD and version < 7:
            raise UnsupportedCompressionTypeError("zstd needs Produce v7 or later")
        compressed = compressed or codec != 0
    return compressed


async def scan_compressed(records: bytes | bytearray | memoryview) -> list[ScannedBatch] | None:
    """``validator.scan_batches`` of a compressed record set: on the event loop while its
    batches decompress to at most ``INLINE_DECOMPRESSED_BYTES``, else all over again in a worker
    thread (the codecs release the GIL), up to the log's bound."""
    scanned = scan_batches(records, INLINE_DECOMPRESSED_BYTES)
    if scanned is not None and any(isinstance(b.error, RecordTooLargeError) for b in scanned):
        loop = asyncio.get_running_loop()
        scanned = await loop.run_in_executor(None, scan_batches, records, MAX_DECOMPRESSED_SIZE)
    return scanned
