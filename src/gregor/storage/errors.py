"""Storage exceptions, each a :class:`~gregor.protocol.errors.KafkaError` carrying the Kafka
error code the broker answers with.

Every class derives from :class:`StorageError` *and* from the generated per-code class of the
protocol package (``OffsetOutOfRangeError`` is also a ``gregor.protocol.errors.
OffsetOutOfRangeError``), so ``.code`` (an :class:`~gregor.protocol.errors.ErrorCode`), ``.name``,
``.retriable`` and ``.description`` agree with the protocol's error table, and a handler may catch
either family. ``.error_code`` is an alias of ``.code`` kept while callers move over.

A storage error never carries NONE or a code outside the table: a subclass that names one gets
UNKNOWN_SERVER_ERROR instead (checked when the class is defined).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from gregor.protocol import errors as kafka
from gregor.protocol.errors import ErrorCode


def _answerable(code: int) -> ErrorCode:
    """``code`` as an ErrorCode, or UNKNOWN_SERVER_ERROR for NONE and unknown codes."""
    try:
        known = ErrorCode(code)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return ErrorCode.UNKNOWN_SERVER_ERROR if known is ErrorCode.NONE else known


class StorageError(kafka.KafkaError):
    """Base class: an error the broker answers with ``code`` for the partition concerned."""

    code: ClassVar[ErrorCode] = ErrorCode.UNKNOWN_SERVER_ERROR

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        cls.code = _answerable(cls.code)

    @property
    def error_code(self) -> ErrorCode:
        """Alias of ``code`` (the name storage errors used before they were KafkaErrors)."""
        return self.code


class KafkaStorageError(StorageError, kafka.KafkaStorageError):
    """An I/O failure on a log directory."""

    code = ErrorCode.KAFKA_STORAGE_ERROR


class InvalidConfigError(StorageError, kafka.InvalidConfigError, ValueError):
    code = ErrorCode.INVALID_CONFIG


class OffsetOutOfRangeError(StorageError, kafka.OffsetOutOfRangeError):
    """The offset is outside [log_start_offset, log_end_offset]."""

    code = ErrorCode.OFFSET_OUT_OF_RANGE

    def __init__(
        self, offset: int, log_start_offset: int, log_end_offset: int, what: str = ""
    ) -> None:
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset
        where = f" of {what}" if what else ""
        super().__init__(
            f"offset {offset} is out of range{where}: the log holds "
            f"[{log_start_offset}, {log_end_offset})"
        )


class CorruptRecordError(StorageError, kafka.CorruptMessageError):
    """A batch fails its CRC, its header is malformed, or its payload does not decompress."""

    code = ErrorCode.CORRUPT_MESSAGE


#: (batch_index, message) of one record at fault in a refused batch (KIP-467).
RecordError = tuple[int, str]


class InvalidRecordError(StorageError, kafka.InvalidRecordError):
    """A batch the leader refuses for its records (malformed, a count that does not match
    them, offset deltas out of order, no key on a compacted topic) or its header (inconsistent
    offsets/count, a client writing control batches, a producer id without a sequence).
    ``record_errors`` lists the records at fault when the refusal is theirs (KIP-467)."""

    code = ErrorCode.INVALID_RECORD

    def __init__(
        self, message: str | None = None, record_errors: Sequence[RecordError] = ()
    ) -> None:
        super().__init__(message)
        self.record_errors: list[RecordError] = list(record_errors)


class RecordTooLargeError(StorageError, kafka.MessageTooLargeError):
    """A batch is larger than ``max.message.bytes``, or decompresses past the bound."""

    code = ErrorCode.MESSAGE_TOO_LARGE


class RecordBatchTooLargeError(StorageError, kafka.RecordListTooLargeError):
    """The appended record set is larger than ``segment.bytes``."""

    code = ErrorCode.RECORD_LIST_TOO_LARGE


class InvalidTimestampError(StorageError, kafka.InvalidTimestampError):
    """Records of a CreateTime batch with timestamps outside
    message.timestamp.before/after.max.ms, or a producer's LogAppendTime on a LogAppendTime
    topic; ``record_errors`` lists them (KIP-467)."""

    code = ErrorCode.INVALID_TIMESTAMP

    def __init__(
        self, message: str | None = None, record_errors: Sequence[RecordError] = ()
    ) -> None:
        super().__init__(message)
        self.record_errors: list[RecordError] = list(record_errors)


class OutOfOrderSequenceError(StorageError, kafka.OutOfOrderSequenceNumberError):
    code = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


class DuplicateSequenceError(StorageError, kafka.DuplicateSequenceNumberError):
    """The batch was written before but is older than the five batches whose offsets we keep."""

    code = ErrorCode.DUPLICATE_SEQUENCE_NUMBER


class InvalidProducerEpochError(StorageError, kafka.InvalidProducerEpochError):
    code = ErrorCode.INVALID_PRODUCER_EPOCH


class InvalidTxnStateError(StorageError, kafka.InvalidTxnStateError):
    code = ErrorCode.INVALID_TXN_STATE


class TransactionCoordinatorFencedError(StorageError, kafka.TransactionCoordinatorFencedError):
    code = ErrorCode.TRANSACTION_COORDINATOR_FENCED


class UnknownProducerIdError(StorageError, kafka.UnknownProducerIdError):
    code = ErrorCode.UNKNOWN_PRODUCER_ID


class UnexpectedAppendOffsetError(StorageError, kafka.UnknownServerError):
    """A follower append whose first offset is below the log end offset."""

    code = ErrorCode.UNKNOWN_SERVER_ERROR


class LogClosedError(KafkaStorageError):
    """The log (or its segment) was closed or deleted."""
