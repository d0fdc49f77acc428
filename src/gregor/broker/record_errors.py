"""Per-record produce errors (KIP-467): which records of a refused batch were at fault.

Kafka's log validator checks every record of a batch it has to look into and, when some fail,
refuses the whole batch with INVALID_RECORD, listing each bad record as (``batch_index``, the
record's position in the batch, and a message) in the Produce response's ``record_errors``,
with the partition's ``error_message`` summing them up. A client then fails only the listed
records with the error and the others of the batch with a "different record" error, and may
send those again. The one per-record check Gregor makes is Kafka's key check for compacted
topics: :func:`check_compacted_keys` runs it before the append (the log refuses such a batch
too, but only as a whole).
"""

from __future__ import annotations

from collections.abc import Sequence

from gregor.protocol.errors import InvalidRecordError
from gregor.protocol.records.batch import decode_batch
from gregor.protocol.records.header import LOG_OVERHEAD, read_header

__all__ = ["RecordError", "RecordValidationError", "check_compacted_keys"]

#: (batch_index, message) of one refused record.
RecordError = tuple[int, str]


class RecordValidationError(InvalidRecordError):
    """INVALID_RECORD with the records at fault (Kafka's ``RecordValidationException``)."""

    def __init__(self, record_errors: Sequence[RecordError]) -> None:
        self.record_errors = list(record_errors)
        shown = ", ".join(
            f"RecordError(batchIndex={i}, message='{m}')" for i, m in self.record_errors[:3]
        )
        super().__init__(
            f"One or more records have been rejected due to {len(self.record_errors)} record "
            f"errors in total, and only showing the first three errors at most: [{shown}]"
        )


def check_compacted_keys(records: bytes | bytearray | memoryview, topic: str, index: int) -> None:
    """Raise ``RecordValidationError`` listing every record without a key in the v2 record
    set ``records`` (of a compacted topic); control batches are not checked. A malformed set
    is left to the log's own validation."""
    mv = memoryview(records)
    errors: list[RecordError] = []
    message = f"Compacted topic cannot accept message without key in topic partition {topic}-{index}"
    pos = 0
    while pos + LOG_OVERHEAD <= len(mv):
        h = read_header(mv, pos)
        if not h.is_control:
            batch = decode_batch(mv, pos, verify_crc=False)
            errors.extend((i, message) for i, r in enumerate(batch.records) if r.key is None)
        pos += h.batch_length + LOG_OVERHEAD
    if errors:
        raise RecordValidationError(errors)
