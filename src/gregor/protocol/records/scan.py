"""The one home of record walking: fetched record sets, batch by batch, record by record.

Theory of operation. Two levels:

* The **batch walk** (:func:`iter_fetched_batches`, plain Python: it costs per batch, not per
  record) goes over a fetched record set (v2 batches, legacy v0/v1 entries, maybe a partial
  batch at the end, which ends the walk). For each whole entry it yields a
  :class:`FetchedBatch`: the header, the record bytes (decompressed into one buffer, or a view
  of the input when uncompressed) or the legacy records, and whether the batch is ``skip``ped:
  a control batch, a batch of an aborted transaction under read_committed, or one that ends
  before ``start``. This is the only read_committed abort filter: the Fetch response's aborted
  list (producer id, first offset), advanced as batches pass, plus the ABORT markers found in
  the same data (:func:`aborted_by_markers`; some brokers send no list). The set of aborted
  producer ids lives in an :class:`AbortFilter` that a caller may carry from one response to
  the next.
* The **record walk** over one batch's bytes comes in two implementations with the same
  functions: ``_scan_py`` (pure Python, the reference) and ``_scan`` (Cython, compiled by
  ``pip install``). Its sinks: :func:`decode_records` (``Record`` lists), consumer records
  (:func:`consumer_records_from`), Arrow column buffers (:func:`arrow_columns_from`,
  see ``columns``), validation only (:func:`validate_records`; :func:`check_records` also
  returns what a leader judges a produced batch by), and :func:`encode_record` for the batch
  builder.

The compiled one is used when it imports; ``GREGOR_NO_EXTENSIONS=1`` in the environment forces
the reference, and :func:`set_implementation` switches at run time (the tests run every record
test against both).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, NamedTuple, TypeVar

from gregor.protocol.exceptions import ProtocolError
from gregor.protocol.records import walk
from gregor.protocol.records.batch import decode_batch
from gregor.protocol.records.columns import ArrowColumns
from gregor.protocol.records.compression import DEFAULT_MAX_DECOMPRESSED_SIZE, decompress
from gregor.protocol.records.control import ControlRecordType, parse_control_key
from gregor.protocol.records.convert import iter_record_set
from gregor.protocol.records.header import (
    COMPRESSION_MASK,
    CONTROL_MASK,
    HEADER_SIZE,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    BatchHeader,
    crc_ok,
    iter_batches,
    read_header,
)
from gregor.protocol.records.walk import (  # noqa: F401 - re-exported: the record walk
    available,
    check_records,
    decode_records,
    implementation,
    set_implementation,
    validate_records,
)

Buffer = bytes | bytearray | memoryview
T = TypeVar("T", bound=tuple[Any, ...])

# --- the batch walk ---


class FetchedBatch(NamedTuple):
    """One whole entry of a fetched record set."""

    pos: int
    header: BatchHeader | None  # None for a legacy (v0/v1) entry
    payload: Buffer | None  # the record bytes; None when skipped or legacy
    legacy: list[Any] | None  # Records of a legacy entry (every one, whatever ``start``)
    skip: bool
    next_offset: int  # the offset after this entry


class AbortFilter:
    """read_committed state: the aborted list of a response and the producers now aborting."""

    __slots__ = ("aborted", "index", "aborted_pids", "marker_aborted")

    def __init__(self, aborted_pids: set[int] | None = None) -> None:
        self.aborted: list[tuple[int, int]] = []  # (producer_id, first_offset), sorted
        self.index = 0
        self.aborted_pids: set[int] = aborted_pids if aborted_pids is not None else set()
        self.marker_aborted: set[int] = set()

    def start(self, data: Buffer, aborted: Iterable[tuple[int, int]]) -> None:
        """Begin a response: its aborted list and the positions its ABORT markers close."""
        self.aborted = sorted(aborted, key=lambda a: a[1])
        self.index = 0
        self.marker_aborted = aborted_by_markers(data)

    def skips(self, pos: int, h: BatchHeader) -> bool:
        """Whether the v2 batch at ``pos`` is dropped; call for every batch in order."""
        last = h.base_offset + h.last_offset_delta
        aborted = self.aborted
        i = self.index
        while i < len(aborted) and aborted[i][1] <= last:
            self.aborted_pids.add(aborted[i][0])
            i += 1
        self.index = i
        if h.attributes & CONTROL_MASK:
            self.aborted_pids.discard(h.producer_id)  # the marker ends that transaction
            return True
        return bool(h.attributes & TRANSACTIONAL_MASK) and (
            h.producer_id in self.aborted_pids or pos in self.marker_aborted
        )


def iter_fetched_batches(
    data: Buffer,
    *,
    start: int = 0,
    abort_filter: AbortFilter | None = None,
    verify_crc: bool = True,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> Iterator[FetchedBatch]:
    """Every whole entry of a fetched record set (see the module docstring); ``abort_filter``
    (already started on ``data``) turns on read_committed."""
    mv = memoryview(data)
    pos = 0
    end = len(mv)
    while end - pos >= 17:
        (size,) = _I32.unpack_from(mv, pos + 8)
        entry_end = pos + LOG_OVERHEAD + size
        if size < 0 or entry_end > end:
            return  # a partial entry at the end of a fetch
        if mv[pos + 16] != 2:
            records = list(iter_record_set(mv[pos:entry_end], verify_crc=verify_crc))
            nxt = records[-1].offset + 1 if records else 0
            yield FetchedBatch(pos, None, None, records, False, nxt)
            pos = entry_end
            continue
        h = read_header(mv, pos)
        nxt = h.base_offset + h.last_offset_delta + 1
        if abort_filter is not None:
            skip = abort_filter.skips(pos, h)
        else:
            skip = bool(h.attributes & CONTROL_MASK)
        if skip or nxt <= start:
            yield FetchedBatch(pos, h, None, None, True, nxt)
        else:
            if verify_crc and not crc_ok(mv, pos, h):
                raise ProtocolError(
                    f"record batch at offset {h.base_offset} fails its CRC32C check"
                )
            payload: Buffer = mv[pos + HEADER_SIZE : entry_end]
            if h.attributes & COMPRESSION_MASK:
                payload = decompress(
                    h.attributes & COMPRESSION_MASK, payload, max_size=max_decompressed_size
                )
            yield FetchedBatch(pos, h, payload, None, False, nxt)
        pos = entry_end


def aborted_by_markers(data: Buffer) -> set[int]:
    """Positions of transactional batches that an ABORT marker in the same data closes.

    The Fetch response's aborted-transaction list is how Kafka tells read_committed consumers
    what to drop; some brokers leave it empty. A transactional batch of producer P followed
    (before any other marker of P) by P's ABORT marker is aborted by definition, so this scan
    only ever finds a subset of the truth and is safe to combine with the list.
    """
    out: set[int] = set()
    pending: dict[int, list[int]] = {}
    for pos, h in iter_batches(data, allow_partial_tail=True):
        if not h.attributes & TRANSACTIONAL_MASK:
            continue
        if h.attributes & CONTROL_MASK:
            positions = pending.pop(h.producer_id, [])
            try:
                recs = decode_batch(data, pos).records
                kind = parse_control_key(recs[0].key)[1] if recs else None
            except ProtocolError:
                kind = None
            if kind == ControlRecordType.ABORT:
                out.update(positions)
        else:
            pending.setdefault(h.producer_id, []).append(pos)
    return out


def end_offset(data: Buffer) -> int:
    """The offset after the last whole batch (or legacy message) in a record set; -1 if none."""
    mv = memoryview(data)
    pos = 0
    end = len(mv)
    last = -2
    while pos + 17 <= end:
        base, size = _OFFSET_SIZE.unpack_from(mv, pos)
        if size < 0 or pos + LOG_OVERHEAD + size > end:
            break
        if mv[pos + 16] == 2 and size >= HEADER_SIZE - LOG_OVERHEAD:
            last = base + _I32.unpack_from(mv, pos + 23)[0]
        else:
            last = base  # a legacy wrapper carries the offset of its last inner message
        pos += LOG_OVERHEAD + size
    return last + 1


def _whole_entries(mv: memoryview) -> Iterator[tuple[int, int, int]]:
    """(position, base offset, batch length) of each whole entry of a record set that is at
    least a v2 batch header long, up to the first partial (or too short) one."""
    end = len(mv)
    pos = 0
    while pos + HEADER_SIZE <= end:
        base, size = _OFFSET_SIZE.unpack_from(mv, pos)
        entry_end = pos + LOG_OVERHEAD + size
        if size < HEADER_SIZE - LOG_OVERHEAD or entry_end > end:
            return
        yield pos, base, size
        pos = entry_end


def next_fetch_offset(data: Buffer) -> int | None:
    """The offset after the last whole v2 batch in a record set, from headers alone; None when
    there is no whole batch or a legacy entry (whose next offset needs decoding)."""
    mv = memoryview(data)
    nxt = None
    for pos, base, _ in _whole_entries(mv):
        if mv[pos + 16] != 2:
            return None
        nxt = base + _I32.unpack_from(mv, pos + 23)[0] + 1
    return nxt


def _record_set_room(data: Buffer) -> tuple[int, int]:
    """The records counted by a record set's whole v2 batch headers, and the record bytes of
    its uncompressed ones (an upper bound of their values): what the Arrow sink reserves. A
    hint only, read from headers alone; a legacy entry or a bad header ends the count."""
    mv = memoryview(data)
    records = size = 0
    for pos, _, length in _whole_entries(mv):
        if mv[pos + 16] != 2:
            break
        attributes, count = _ATTRS_COUNT.unpack_from(mv, pos + 21)
        # a count beyond what the bytes can hold (a record takes 7 at least) is not believed
        records += min(max(count, 0), (length + LOG_OVERHEAD - HEADER_SIZE) // 7)
        if not attributes & COMPRESSION_MASK:
            size += length
    return records, size


_I32 = struct.Struct(">i")
_OFFSET_SIZE = struct.Struct(">qi")
_ATTRS_COUNT = struct.Struct(">h34xi")  # attributes at 21, records count at 57


# --- sinks over a whole record set ---


def consumer_records_from(
    data: Buffer,
    *,
    start: int,
    topic: str,
    partition: int,
    record_type: type[T],
    abort_filter: AbortFilter | None = None,
    verify_crc: bool = True,
) -> tuple[list[T], int]:
    """The consumer's records (``record_type`` as in ``consumer_records``) at or after
    ``start``, and the next fetch offset."""
    out: list[T] = []
    append = out.append
    new = tuple.__new__
    next_offset = start
    records_of = walk.current().consumer_records
    for fb in iter_fetched_batches(
        data, start=start, abort_filter=abort_filter, verify_crc=verify_crc
    ):
        h = fb.header
        if h is None:
            for r in fb.legacy or ():
                if r.offset >= start:
                    append(
                        new(
                            record_type,
                            (
                                topic,
                                partition,
                                r.offset,
                                r.timestamp,
                                0,
                                r.key,
                                r.value,
                                tuple(r.headers),
                                -1,
                            ),
                        )
                    )
                    next_offset = r.offset + 1
            continue
        if fb.payload is not None:
            records_of(
                fb.payload,
                h.records_count,
                h.base_offset,
                h.base_timestamp,
                h.max_timestamp if h.attributes & TIMESTAMP_TYPE_MASK else None,
                start,
                topic,
                partition,
                h.partition_leader_epoch,
                record_type,
                out,
            )
        next_offset = max(next_offset, fb.next_offset)
    return out, next_offset


def arrow_columns_from(
    data: Buffer,
    columns: ArrowColumns,
    *,
    include_headers: bool,
    abort_filter: AbortFilter | None = None,
    verify_crc: bool = True,
) -> int:
    """Append every kept record of a record set to ``columns``; return the offset after the
    last whole entry (-1 when there is none)."""
    next_offset = -1
    records, value_bytes = _record_set_room(data)
    if records:
        walk.reserve_columns(columns, records, value_bytes)
    records_of = walk.current().arrow_records
    for fb in iter_fetched_batches(data, abort_filter=abort_filter, verify_crc=verify_crc):
        h = fb.header
        if h is None:
            for r in fb.legacy or ():
                columns.add_record(
                    r.offset, r.timestamp, 0, r.key, r.value, r.headers or None, include_headers
                )
                next_offset = max(next_offset, r.offset + 1)
            continue
        if fb.payload is not None:
            records_of(
                fb.payload,
                h.records_count,
                h.base_offset,
                h.base_timestamp,
                h.max_timestamp if h.attributes & TIMESTAMP_TYPE_MASK else None,
                columns,
                include_headers,
            )
        next_offset = max(next_offset, fb.next_offset)
    return next_offset


def encode_record(
    buf: bytearray,
    offset_delta: int,
    timestamp_delta: int,
    key: Buffer | None,
    value: Buffer | None,
    headers: Sequence[tuple[str | bytes, Buffer | None]],
) -> None:
    walk.current().encode_record(buf, offset_delta, timestamp_delta, key, value, headers)


__all__ = [
    "AbortFilter",
    "ArrowColumns",
    "FetchedBatch",
    "aborted_by_markers",
    "arrow_columns_from",
    "available",
    "check_records",
    "consumer_records_from",
    "decode_records",
    "encode_record",
    "end_offset",
    "implementation",
    "iter_fetched_batches",
    "next_fetch_offset",
    "set_implementation",
    "validate_records",
]
