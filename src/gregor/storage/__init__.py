"""Gregor's commit log on disk, laid out and recovered as Kafka's.

``LogManager`` owns the log directories and every partition's ``Log``; a ``Log`` is a list of
``LogSegment``s (``.log`` + ``.index`` + ``.timeindex`` + ``.txnindex``) with a leader-epoch
cache and producer state; ``LogCleaner`` compacts. Imports only ``gregor.protocol``.

Modules, lowest first (each imports only modules above it in this list):
  ``clock``, ``files``, ``errors``, ``config``, ``checkpoint``, ``index``, ``transaction_index``,
  ``epoch`` - basics;
  ``file_records`` (batches in a file), ``segment`` (one segment), ``producer_state``;
  ``log_info`` (what a log answers), ``log_segments`` (the sorted segments, reads across them),
  ``validator`` (checking and stamping batches), ``producer_replay``, ``retention``;
  ``loader`` (a directory -> ``LoadedLog``), ``local_log`` (segments, log end offset, recovery
  point, roll, flush), ``log`` (``Log``: offsets, append, read, truncate); ``batch_filter``
  and ``cleaner`` (compaction); ``manager`` (``LogManager``).
"""

from gregor.storage.cleaner import CleanResult, LogCleaner
from gregor.storage.config import LogConfig, from_broker_props
from gregor.storage.epoch import LeaderEpochCache
from gregor.storage.errors import (
    CorruptRecordError,
    DuplicateSequenceError,
    InvalidConfigError,
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTimestampError,
    InvalidTxnStateError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    StorageError,
    TransactionCoordinatorFencedError,
    UnknownProducerIdError,
)
from gregor.storage.file_records import FileRegion
from gregor.storage.log import Log
from gregor.storage.log_info import FetchDataInfo, LogAppendInfo, TimestampAndOffset
from gregor.storage.manager import CheckpointFiles, LogManager, PendingDeletions, delete_files
from gregor.storage.producer_state import AppendOrigin, ProducerStateManager
from gregor.storage.retention import delete_segment_files
from gregor.storage.segment import LogSegment
from gregor.storage.transaction_index import AbortedTxn

__all__ = [
    "AbortedTxn",
    "AppendOrigin",
    "CheckpointFiles",
    "CleanResult",
    "CorruptRecordError",
    "DuplicateSequenceError",
    "FetchDataInfo",
    "FileRegion",
    "InvalidConfigError",
    "InvalidProducerEpochError",
    "InvalidRecordError",
    "InvalidTimestampError",
    "InvalidTxnStateError",
    "KafkaStorageError",
    "LeaderEpochCache",
    "Log",
    "LogAppendInfo",
    "LogCleaner",
    "LogConfig",
    "LogManager",
    "LogSegment",
    "OffsetOutOfRangeError",
    "OutOfOrderSequenceError",
    "PendingDeletions",
    "ProducerStateManager",
    "RecordBatchTooLargeError",
    "RecordTooLargeError",
    "StorageError",
    "TimestampAndOffset",
    "TransactionCoordinatorFencedError",
    "UnknownProducerIdError",
    "delete_files",
    "delete_segment_files",
    "from_broker_props",
]
