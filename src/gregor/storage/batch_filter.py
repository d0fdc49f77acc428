"""What compaction keeps of one batch (the per-batch rules of Kafka's Cleaner).

Theory of operation. The cleaner walks the batches of a group of segments in offset order and
asks :func:`filter_batch` for each: a data record is kept when it is the latest for its key in
the offset map (keyless records go), a tombstone until its delete horizon passes; data of an
aborted transaction is dropped (:class:`CleanedTxnMetadata` tracks which transactions are
aborted, from the aborted-transaction index, and which markers may go once no data of theirs is
left). A batch whose records all survive is copied as it is; otherwise it is rebuilt with the
survivors (:func:`rebuild_batch`: same offsets, producer fields and compression, a delete horizon
stamped when it holds tombstones or a removable marker), or reduced to a bare header
(:func:`empty_batch`) when it is a producer's last, so the producer's sequence state survives.
"""

from __future__ import annotations

import logging
import struct
from collections import deque

from crc32c import crc32c

from gregor.protocol.exceptions import ProtocolError
from gregor.protocol.records.batch import Record, decode_batch
from gregor.protocol.records.compression import compress
from gregor.protocol.records.control import ControlRecordType, parse_control_key
from gregor.protocol.records.header import (
    CONTROL_MASK,
    DELETE_HORIZON_MASK,
    HEADER_SIZE,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    BatchHeader,
)
from gregor.storage.transaction_index import AbortedTxn

logger = logging.getLogger(__name__)


def batch_records(data: memoryview, h: BatchHeader) -> list[Record] | None:
    """The batch's records, or None (logged) when they do not decode."""
    try:
        return decode_batch(data, 0, verify_crc=False).records
    except ProtocolError as e:
        logger.warning("cannot read the records of the batch at offset %d: %s",
                       h.base_offset, e)  # fmt: skip
        return None


def filter_batch(
    h: BatchHeader,
    data: memoryview,
    txn: CleanedTxnMetadata,
    offset_map: dict[bytes, int],
    map_end: int,
    now: int,
    horizon: int,
    last_records: dict[int, tuple[int, int]],
) -> tuple[bytes | None, int]:
    """The batch as it goes into the cleaned segment (None: dropped), and its record
    count. ``offset_map``: key -> latest offset below ``map_end``; ``horizon``: the delete
    horizon this cleaning stamps; ``last_records``: producer id -> (offset of its last data
    batch, epoch), whose last batch survives even when emptied."""
    records = batch_records(data, h) if h.records_count else []
    if records is None:
        return bytes(data), h.records_count  # unreadable: keep it as it is
    has_horizon = bool(h.attributes & DELETE_HORIZON_MASK)
    batch_horizon = h.base_timestamp if has_horizon else None
    if h.is_control:
        control_type = None
        if records:
            try:
                control_type = parse_control_key(records[0].key)[1]
            except ProtocolError:
                control_type = None
        can_discard = txn.on_control_batch_read(h, control_type)
        discard_records = can_discard and batch_horizon is not None and batch_horizon <= now
    else:
        can_discard = txn.on_batch_read(h)
        discard_records = can_discard

    last = last_records.get(h.producer_id) if h.producer_id >= 0 else None
    is_last_of_producer = False
    if last is not None:
        last_data_offset, epoch = last
        if last_data_offset >= 0:
            is_last_of_producer = h.last_offset == last_data_offset
        else:
            is_last_of_producer = h.is_control and h.producer_epoch == epoch

    if discard_records:
        retained: list[Record] = []
    elif h.is_control:
        retained = records
    else:
        retain_deletes = batch_horizon is None or now < batch_horizon
        retained = []
        for r in records:
            if r.offset >= map_end:
                retained.append(r)
            elif r.key is None:
                continue
            elif r.offset >= offset_map.get(r.key, -1) and (r.value is not None or retain_deletes):
                retained.append(r)

    needs_horizon = (
        not has_horizon
        and h.last_offset < map_end
        and (
            (h.is_control and can_discard and bool(retained))
            or any(r.value is None for r in retained if not h.is_control)
        )
    )
    if retained:
        if len(retained) == len(records) and not needs_horizon:
            return bytes(data), len(retained)
        new_horizon = horizon if needs_horizon else batch_horizon
        return rebuild_batch(h, retained, new_horizon), len(retained)
    if h.producer_id >= 0 and is_last_of_producer:
        return empty_batch(h), 0
    return None, 0


class AbortedRanges:
    """Aborted transactions by producer, to test whether a batch belongs to one."""

    def __init__(self, aborted: list[AbortedTxn]) -> None:
        self._by_pid: dict[int, list[tuple[int, int]]] = {}
        for t in aborted:
            self._by_pid.setdefault(t.producer_id, []).append((t.first_offset, t.last_offset))

    def contains(self, producer_id: int, offset: int) -> bool:
        for first, last in self._by_pid.get(producer_id, ()):
            if first <= offset <= last:
                return True
        return False


class CleanedTxnMetadata:
    """Kafka's CleanedTransactionMetadata: which transactional batches and markers a cleaning
    may drop, walking batches in offset order."""

    def __init__(self, aborted: list[AbortedTxn]) -> None:
        self._pending = deque(aborted)
        # pid -> its aborted transaction the walk is inside
        self._ongoing_aborted: dict[int, AbortedTxn] = {}
        self._aborted_data_seen: set[int] = set()  # pids whose aborted data the walk met
        self._ongoing_committed: set[int] = set()
        self.cleaned_index: list[AbortedTxn] = []

    def _consume_up_to(self, offset: int) -> None:
        while self._pending and self._pending[0].first_offset <= offset:
            t = self._pending.popleft()
            self._ongoing_aborted[t.producer_id] = t
            self._aborted_data_seen.discard(t.producer_id)

    def on_control_batch_read(self, h: BatchHeader, control_type: int | None) -> bool:
        """Whether the marker may be dropped (once its delete horizon passes)."""
        self._consume_up_to(h.last_offset)
        if h.records_count == 0 or control_type is None:
            return True
        pid = h.producer_id
        if control_type == ControlRecordType.ABORT:
            txn = self._ongoing_aborted.pop(pid, None)
            seen = pid in self._aborted_data_seen
            self._aborted_data_seen.discard(pid)
            if txn is not None and seen:
                # Data of this transaction is being removed in this pass: keep the marker
                # (and its index entry) until the next one.
                self.cleaned_index.append(txn)
                return False
            return True
        if control_type == ControlRecordType.COMMIT:
            if pid in self._ongoing_committed:
                self._ongoing_committed.discard(pid)
                return False
            return True
        return False

    def on_batch_read(self, h: BatchHeader) -> bool:
        """Whether the data batch belongs to an aborted transaction (and is dropped)."""
        self._consume_up_to(h.last_offset)
        if not h.is_transactional:
            return False
        if h.producer_id in self._ongoing_aborted:
            self._aborted_data_seen.add(h.producer_id)
            return True
        self._ongoing_committed.add(h.producer_id)
        return False


# --- rebuilding a batch ---


_HEADER = struct.Struct(">qiibIhiqqqhii")


def header_of(batch: bytes) -> BatchHeader:
    return BatchHeader._make(_HEADER.unpack_from(batch, 0))


def _varint(n: int) -> bytes:
    u = (n << 1) ^ (n >> 63)
    out = bytearray()
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def _encode_record(r: Record, base_offset: int, base_timestamp: int) -> bytes:
    parts = [
        b"\x00",
        _varint(r.timestamp - base_timestamp),
        _varint(r.offset - base_offset),
    ]
    for blob in (r.key, r.value):
        if blob is None:
            parts.append(_varint(-1))
        else:
            parts.append(_varint(len(blob)))
            parts.append(bytes(blob))
    parts.append(_varint(len(r.headers)))
    for hkey, hvalue in r.headers:
        kb = hkey.encode()
        parts.append(_varint(len(kb)))
        parts.append(kb)
        if hvalue is None:
            parts.append(_varint(-1))
        else:
            parts.append(_varint(len(hvalue)))
            parts.append(bytes(hvalue))
    body = b"".join(parts)
    return _varint(len(body)) + body


def _assemble(h: BatchHeader, attributes: int, base_ts: int, max_ts: int, count: int,
              payload: bytes) -> bytes:  # fmt: skip
    out = bytearray(HEADER_SIZE)
    out += payload
    _HEADER.pack_into(
        out, 0, h.base_offset, len(out) - LOG_OVERHEAD, h.partition_leader_epoch, 2, 0,
        attributes, h.last_offset_delta, base_ts, max_ts, h.producer_id, h.producer_epoch,
        h.base_sequence, count,
    )  # fmt: skip
    struct.pack_into(">I", out, 17, crc32c(memoryview(out)[21:]))
    return bytes(out)


def rebuild_batch(h: BatchHeader, records: list[Record], delete_horizon: int | None) -> bytes:
    """``h``'s batch with only ``records``: same base and last offset, producer fields,
    compression and flags; with ``delete_horizon`` as base timestamp (and the flag) if set."""
    log_append_time = bool(h.attributes & TIMESTAMP_TYPE_MASK)
    attributes = h.attributes & ~DELETE_HORIZON_MASK
    if delete_horizon is not None:
        attributes |= DELETE_HORIZON_MASK
        base_ts = delete_horizon
    else:
        base_ts = records[0].timestamp
    if log_append_time:
        max_ts = h.max_timestamp
    else:
        max_ts = max(r.timestamp for r in records)
    payload = b"".join(_encode_record(r, h.base_offset, base_ts) for r in records)
    if h.compression:
        payload = compress(h.compression, payload, magic=2)
    return _assemble(h, attributes, base_ts, max_ts, len(records), payload)


def empty_batch(h: BatchHeader) -> bytes:
    """A header-only batch keeping ``h``'s offsets and producer state (Kafka's
    writeEmptyHeader: no compression, no delete horizon, both timestamps the max)."""
    attributes = h.attributes & (TIMESTAMP_TYPE_MASK | TRANSACTIONAL_MASK | CONTROL_MASK)
    return _assemble(h, attributes, h.max_timestamp, h.max_timestamp, 0, b"")
