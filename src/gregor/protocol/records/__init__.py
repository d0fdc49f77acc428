"""Kafka record formats: RecordBatch v2, legacy message sets v0/v1, control records, codecs.

``header`` is the broker's fast path (validate and rewrite batches without decoding records);
``batch`` builds and decodes v2 batches; ``scan`` is the one record walk (fetched record sets
batch by batch, with the read_committed abort filter; records into Records, consumer records,
Arrow column buffers or nothing), compiled (``_scan.pyx``) with ``_scan_py`` as its pure-Python
reference, and ``varint`` its varint helpers; ``control`` handles transaction markers;
``legacy`` builds and reads v0/v1 message sets; ``convert`` moves between the two;
``compression`` holds the codecs. Every reader raises :class:`~gregor.protocol.exceptions.ProtocolError` for
malformed input and nothing else.
"""

from gregor.protocol.exceptions import ProtocolError
from gregor.protocol.records.batch import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    NO_TIMESTAMP,
    Record,
    RecordBatch,
    RecordBatchBuilder,
    build_batch,
    decode_batch,
    decode_batches,
    decode_records,
    iter_records,
)
from gregor.protocol.records.compression import (
    DEFAULT_MAX_DECOMPRESSED_SIZE,
    Compression,
    UnsupportedCompressionError,
    compress,
    decompress,
)
from gregor.protocol.records.control import (
    ControlRecord,
    ControlRecordType,
    build_control_batch,
    parse_control_record,
)
from gregor.protocol.records.convert import downconvert, iter_record_set, upconvert
from gregor.protocol.records.header import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    BatchHeader,
    assign_offsets,
    count_records,
    iter_batches,
    peek_magic,
    read_header,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
    valid_prefix_size,
    validate_batches,
)
from gregor.protocol.records.legacy import (
    LegacyMessage,
    MessageSetBuilder,
    iter_legacy_messages,
)

__all__ = [
    "CREATE_TIME",
    "DEFAULT_MAX_DECOMPRESSED_SIZE",
    "HEADER_SIZE",
    "LOG_APPEND_TIME",
    "LOG_OVERHEAD",
    "NO_PARTITION_LEADER_EPOCH",
    "NO_PRODUCER_ID",
    "NO_SEQUENCE",
    "NO_TIMESTAMP",
    "BatchHeader",
    "Compression",
    "ControlRecord",
    "ControlRecordType",
    "LegacyMessage",
    "MessageSetBuilder",
    "ProtocolError",
    "Record",
    "RecordBatch",
    "RecordBatchBuilder",
    "UnsupportedCompressionError",
    "assign_offsets",
    "build_batch",
    "build_control_batch",
    "compress",
    "count_records",
    "decode_batch",
    "decode_batches",
    "decode_records",
    "decompress",
    "downconvert",
    "iter_batches",
    "iter_legacy_messages",
    "iter_record_set",
    "iter_records",
    "parse_control_record",
    "peek_magic",
    "read_header",
    "set_base_offset",
    "set_log_append_time",
    "set_partition_leader_epoch",
    "upconvert",
    "valid_prefix_size",
    "validate_batches",
]
