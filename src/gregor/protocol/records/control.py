"""Control records: the transaction markers a partition leader writes on EndTxn.

A control batch has the transactional and control attribute bits set and carries one record:
key = version int16 (0) + type int16 (0 abort, 1 commit; KRaft uses further types), value for
abort/commit = the end transaction marker, version int16 (0) + coordinator_epoch int32. Readers
accept later versions and ignore bytes they do not know, as Kafka does.
"""

from __future__ import annotations

import struct
from enum import IntEnum
from typing import NamedTuple

from gregor.protocol.exceptions import ProtocolError
from gregor.protocol.records.batch import NO_TIMESTAMP, Record, RecordBatchBuilder
from gregor.protocol.records.header import NO_PARTITION_LEADER_EPOCH

_KEY = struct.Struct(">hh")
_END_TXN = struct.Struct(">hi")
CONTROL_KEY_VERSION = 0
END_TXN_MARKER_VERSION = 0


class ControlRecordType(IntEnum):
    ABORT = 0
    COMMIT = 1


class ControlRecord(NamedTuple):
    version: int
    type: int
    coordinator_epoch: int | None  # only for ABORT / COMMIT

    @property
    def is_commit(self) -> bool:
        return self.type == ControlRecordType.COMMIT

    @property
    def is_abort(self) -> bool:
        return self.type == ControlRecordType.ABORT


def encode_control_key(record_type: int, version: int = CONTROL_KEY_VERSION) -> bytes:
    return _KEY.pack(version, record_type)


def encode_end_txn_marker(coordinator_epoch: int, version: int = END_TXN_MARKER_VERSION) -> bytes:
    return _END_TXN.pack(version, coordinator_epoch)


def parse_control_key(key: bytes | None) -> tuple[int, int]:
    """(version, type) of a control record key."""
    if key is None or len(key) < 4:
        raise ProtocolError("control record key is shorter than 4 bytes")
    version, record_type = _KEY.unpack_from(key)
    if version < 0:
        raise ProtocolError(f"invalid control record key version {version}")
    return version, record_type


def parse_end_txn_marker(value: bytes | None) -> tuple[int, int]:
    """(version, coordinator_epoch) of an end transaction marker value."""
    if value is None or len(value) < 6:
        raise ProtocolError("end transaction marker is shorter than 6 bytes")
    version, coordinator_epoch = _END_TXN.unpack_from(value)
    if version < 0:
        raise ProtocolError(f"invalid end transaction marker version {version}")
    return version, coordinator_epoch


def parse_control_record(record: Record) -> ControlRecord:
    version, record_type = parse_control_key(record.key)
    epoch = None
    if record_type in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        _, epoch = parse_end_txn_marker(record.value)
    return ControlRecord(version, record_type, epoch)


def build_control_batch(
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    coordinator_epoch: int,
    base_offset: int = 0,
    timestamp: int = NO_TIMESTAMP,
    *,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """A transactional control batch holding one COMMIT or ABORT marker."""
    b = RecordBatchBuilder(
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=True,
        is_control=True,
        partition_leader_epoch=partition_leader_epoch,
    )
    b.append(
        timestamp,
        encode_control_key(ControlRecordType.COMMIT if commit else ControlRecordType.ABORT),
        encode_end_txn_marker(coordinator_epoch),
    )
    return b.build()
