"""Storage exceptions, each carrying the Kafka error code the broker answers with
(``error_code``, a :class:`~gregor.protocol.errors.ErrorCode`, which is an int)."""

from __future__ import annotations

from gregor.protocol.errors import ErrorCode


class StorageError(Exception):
    """Base class. ``error_code`` is the Kafka error code for a produce/fetch response."""

    error_code: int = ErrorCode.UNKNOWN_SERVER_ERROR


class KafkaStorageError(StorageError):
    """An I/O failure on a log directory."""

    error_code = ErrorCode.KAFKA_STORAGE_ERROR


class InvalidConfigError(StorageError, ValueError):
    error_code = ErrorCode.INVALID_CONFIG


class OffsetOutOfRangeError(StorageError):
    """The offset is outside [log_start_offset, log_end_offset]."""

    error_code = ErrorCode.OFFSET_OUT_OF_RANGE

    def __init__(self, offset: int, log_start_offset: int, log_end_offset: int, what: str = ""):
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset
        where = f" of {what}" if what else ""
        super().__init__(
            f"offset {offset} is out of range{where}: the log holds "
            f"[{log_start_offset}, {log_end_offset})"
        )


class CorruptRecordError(StorageError):
    """A batch fails its CRC, is malformed, or (compacted topics) has a record without a key."""

    error_code = ErrorCode.CORRUPT_MESSAGE


class InvalidRecordError(StorageError):
    """A well-formed batch the broker refuses (inconsistent offsets/count, a client writing
    control batches, a producer id without a sequence)."""

    error_code = ErrorCode.INVALID_RECORD


class RecordTooLargeError(StorageError):
    """A batch is larger than ``max.message.bytes``."""

    error_code = ErrorCode.MESSAGE_TOO_LARGE


class RecordBatchTooLargeError(StorageError):
    """The appended record set is larger than ``segment.bytes``."""

    error_code = ErrorCode.RECORD_LIST_TOO_LARGE


class InvalidTimestampError(StorageError):
    """A CreateTime batch's timestamp is outside message.timestamp.before/after.max.ms."""

    error_code = ErrorCode.INVALID_TIMESTAMP


class OutOfOrderSequenceError(StorageError):
    error_code = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


class DuplicateSequenceError(StorageError):
    """The batch was written before but is older than the five batches whose offsets we keep."""

    error_code = ErrorCode.DUPLICATE_SEQUENCE_NUMBER


class InvalidProducerEpochError(StorageError):
    error_code = ErrorCode.INVALID_PRODUCER_EPOCH


class InvalidTxnStateError(StorageError):
    error_code = ErrorCode.INVALID_TXN_STATE


class TransactionCoordinatorFencedError(StorageError):
    error_code = ErrorCode.TRANSACTION_COORDINATOR_FENCED


class UnknownProducerIdError(StorageError):
    error_code = ErrorCode.UNKNOWN_PRODUCER_ID


class UnexpectedAppendOffsetError(StorageError):
    """A follower append whose first offset is below the log end offset."""

    error_code = ErrorCode.UNKNOWN_SERVER_ERROR


class LogClosedError(KafkaStorageError):
    """The log (or its segment) was closed or deleted."""
