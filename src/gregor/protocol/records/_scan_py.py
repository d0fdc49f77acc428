"""The per-record walk of RecordBatch v2 in pure Python: the readable reference.

``_scan.pyx`` is the compiled twin of this module (same functions, same signatures) and must
agree with it value for value and error for error; ``scan`` picks one of the two. Change the
rules here first, then mirror them there; ``tests/protocol/records/test_records_scan.py``
compares both on arbitrary bytes.

A batch's (decompressed) record data holds ``count`` records, each:

    length varint | attributes int8 | timestamp_delta varint | offset_delta varint |
    key_length varint | key | value_length varint | value | header_count varint |
    (header_key_length varint | header_key | header_value_length varint | header_value)*

All varints are zigzag; a length of -1 means null. The walk checks, in this order per record:
that a record starts before the data ends, the length varint, that the record fits the data and
is at least 6 bytes, the fields (running off the data is "Found invalid record structure"; a
key or value length below -1 is "negative record ... length"), the headers (count within the
record, key and value lengths, UTF-8 keys), that the fields end exactly at the record's end;
after the last record, that nothing is left over. Where Kafka's own record reader
(``DefaultRecord.readFrom`` and ``DefaultRecordBatch``'s iterators) refuses the same fault, the
message is Kafka's, so a producer sees the text a Kafka broker would give it.

:func:`walk` yields one tuple per record; the sinks below turn it into the outputs the code
base needs: :class:`~gregor.protocol.records.batch.Record` lists, the client's consumer
records, Arrow column buffers, nothing (validation) and, the other way round, a record's bytes
for the batch builder; :func:`check_records` is the leader's check of a produced batch
(Kafka's LogValidator): the walk's checks plus what the log judges each batch by;
:func:`schema_ids` and :func:`check_payloads` serve the leader's schema validation, the latter
with :class:`AvroValidator` (in ``_avro_py``), a walk of an Avro payload over a schema given as a program of
nodes (the ``decode`` level).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from gregor.protocol.exceptions import ProtocolError

# the Avro payload walk's reference lives in _avro_py; named here too, so that this module and
# its compiled twin offer the same functions
from gregor.protocol.records._avro_py import AvroValidator as AvroValidator
from gregor.protocol.records.varint import _CACHE, _CACHE_LIMIT, encode_varint, read_uvarint

if TYPE_CHECKING:
    from gregor.protocol.records.columns import ArrowColumns

Buffer = bytes | bytearray | memoryview
Header = tuple[str, bytes | None]
#: (offset_delta, timestamp_delta, key, value, headers or None when the record has none)
RecordFields = tuple[int, int, bytes | None, bytes | None, list[Header] | None]
T = TypeVar("T", bound=tuple[Any, ...])

IMPLEMENTATION = "python"

#: Kafka's texts for a record count that does not match the records (``DefaultRecordBatch``).
PREMATURE_EOF = "Incorrect declared batch size, premature EOF reached"
RECORDS_REMAINING = "Incorrect declared batch size, records still remaining in file"
INVALID_STRUCTURE = "Found invalid record structure"
NO_TIMESTAMP = -1
_INT64 = 1 << 63


def new_buffer(size: int) -> bytearray:
    """A writable buffer of ``size`` bytes for the socket to fill (zeroed here; the compiled
    module leaves it uninitialised, which no reader can tell once the socket filled it)."""
    return bytearray(size)


def walk(data: Buffer, count: int) -> Iterator[RecordFields]:
    """Yield the fields of each of the ``count`` records that must fill ``data`` exactly.

    Every varint is read the same way: the one- and two-byte cases inline (nearly every
    length and delta), anything longer through ``read_uvarint``. Reading past the end of
    ``data`` inside a record raises IndexError, reported once as "Found invalid record
    structure"."""
    if not isinstance(data, bytes):
        data = bytes(data)
    end = len(data)
    pos = 0
    uvarint = read_uvarint
    try:
        for _ in range(count):
            if pos >= end:
                raise ProtocolError(PREMATURE_EOF)
            b = data[pos]
            if b < 0x80:
                n, pos = b, pos + 1
            elif data[pos + 1] < 0x80:
                n, pos = (b & 0x7F) | (data[pos + 1] << 7), pos + 2
            else:
                n, pos = uvarint(data, pos)
            length = (n >> 1) ^ -(n & 1)
            if length > end - pos:
                raise ProtocolError(
                    f"Invalid record size: expected {length} bytes in record payload, but instead "
                    f"the buffer has only {end - pos} remaining bytes."
                )
            if length < 6:
                raise ProtocolError(
                    f"Invalid record size {length}: a record takes at least 6 bytes"
                )
            rec_end = pos + length
            pos += 1  # attributes: no record-level attribute is defined
            b = data[pos]
            if b < 0x80:
                n, pos = b, pos + 1
            elif data[pos + 1] < 0x80:
                n, pos = (b & 0x7F) | (data[pos + 1] << 7), pos + 2
            else:
                n, pos = uvarint(data, pos)
            timestamp_delta = (n >> 1) ^ -(n & 1)
            b = data[pos]
            if b < 0x80:
                n, pos = b, pos + 1
            elif data[pos + 1] < 0x80:
                n, pos = (b & 0x7F) | (data[pos + 1] << 7), pos + 2
            else:
                n, pos = uvarint(data, pos)
            offset_delta = (n >> 1) ^ -(n & 1)
            # key: length (-1 = null), then the bytes
            b = data[pos]
            if b < 0x80:
                n, pos = b, pos + 1
            elif data[pos + 1] < 0x80:
                n, pos = (b & 0x7F) | (data[pos + 1] << 7), pos + 2
            else:
                n, pos = uvarint(data, pos)
            if n & 1:
                if n != 1:
                    raise ProtocolError("negative record key length")
                key = None
            else:
                stop = pos + (n >> 1)
                if stop > end:
                    raise IndexError
                key = data[pos:stop]
                pos = stop
            # value: the same
            b = data[pos]
            if b < 0x80:
                n, pos = b, pos + 1
            elif data[pos + 1] < 0x80:
                n, pos = (b & 0x7F) | (data[pos + 1] << 7), pos + 2
            else:
                n, pos = uvarint(data, pos)
            if n & 1:
                if n != 1:
                    raise ProtocolError("negative record value length")
                value = None
            else:
                stop = pos + (n >> 1)
                if stop > end:
                    raise IndexError
                value = data[pos:stop]
                pos = stop
            if data[pos] == 0:
                headers = None
                pos += 1
            else:
                headers, pos = _headers(data, pos, rec_end)
            if pos != rec_end:
                raise ProtocolError(
                    f"Invalid record size: expected to read {length} bytes in record payload, but "
                    f"instead read {pos - rec_end + length}"
                )
            yield offset_delta, timestamp_delta, key, value, headers
    except IndexError:
        raise ProtocolError(INVALID_STRUCTURE) from None
    if pos != end:
        raise ProtocolError(RECORDS_REMAINING)


def _headers(data: bytes, pos: int, rec_end: int) -> tuple[list[Header] | None, int]:
    n, pos = read_uvarint(data, pos)
    count = (n >> 1) ^ -(n & 1)
    if count < 0:
        raise ProtocolError(f"Found invalid number of record headers {count}")
    if count > rec_end - pos:
        raise ProtocolError(
            f"Found invalid number of record headers. {count} is larger than the remaining size "
            "of the buffer"
        )
    headers: list[Header] = []
    for _ in range(count):
        n, pos = read_uvarint(data, pos)
        klen = (n >> 1) ^ -(n & 1)
        if klen < 0:
            raise ProtocolError(f"Invalid negative header key size {klen}")
        if pos + klen > rec_end:
            raise ProtocolError(INVALID_STRUCTURE)
        try:
            hkey = data[pos : pos + klen].decode()
        except UnicodeDecodeError:
            raise ProtocolError("record header key is not UTF-8") from None
        pos += klen
        n, pos = read_uvarint(data, pos)
        vlen = (n >> 1) ^ -(n & 1)
        if vlen == -1:
            headers.append((hkey, None))
        elif vlen < 0 or pos + vlen > rec_end:
            raise ProtocolError("invalid record header value length")
        else:
            headers.append((hkey, data[pos : pos + vlen]))
            pos += vlen
    return (headers or None), pos


# --- sinks ---


def decode_records(
    data: Buffer,
    count: int,
    base_offset: int,
    base_timestamp: int,
    log_append_time: int | None,
    record_type: type[T],
) -> list[T]:
    """``record_type(offset, timestamp, key, value, headers list)`` per record."""
    new = tuple.__new__
    return [
        new(
            record_type,
            (
                base_offset + od,
                base_timestamp + td if log_append_time is None else log_append_time,
                key,
                value,
                headers if headers is not None else [],
            ),
        )
        for od, td, key, value, headers in walk(data, count)
    ]


def consumer_records(
    data: Buffer,
    count: int,
    base_offset: int,
    base_timestamp: int,
    log_append_time: int | None,
    start: int,
    topic: str,
    partition: int,
    leader_epoch: int,
    record_type: type[T],
    out: list[T],
) -> None:
    """Append ``record_type(topic, partition, offset, timestamp, timestamp_type, key, value,
    headers tuple, leader_epoch)`` to ``out`` for each record at or after ``start``."""
    new = tuple.__new__
    ts_type = 0 if log_append_time is None else 1
    append = out.append
    for od, td, key, value, headers in walk(data, count):
        offset = base_offset + od
        if offset >= start:
            ts = base_timestamp + td if log_append_time is None else log_append_time
            hs = tuple(headers) if headers is not None else ()
            append(
                new(
                    record_type,
                    (topic, partition, offset, ts, ts_type, key, value, hs, leader_epoch),
                )
            )


def arrow_records(
    data: Buffer,
    count: int,
    base_offset: int,
    base_timestamp: int,
    log_append_time: int | None,
    columns: ArrowColumns,
    include_headers: bool,
) -> None:
    """Append every record to ``columns`` (see ``columns`` for the layout)."""
    ts_type = 0 if log_append_time is None else 1
    add = columns.add_record
    for od, td, key, value, headers in walk(data, count):
        ts = base_timestamp + td if log_append_time is None else log_append_time
        add(base_offset + od, ts, ts_type, key, value, headers, include_headers)


def reserve_columns(columns: ArrowColumns, records: int, value_bytes: int) -> None:
    """Room for a record set in ``columns`` (its record count and value bytes): a hint that
    lets the compiled walk write in place. ``array`` has no capacity to set from Python, so
    here it only checks its arguments; the columns do not change."""
    if records < 0 or value_bytes < 0:
        raise ValueError("a reservation cannot be negative")


def clear_array(arr: array[int]) -> None:
    """Empty ``arr`` for reuse (a recycled column, see ``spares``). ``array`` cannot keep its
    room from Python, so here it is given back; the compiled walk keeps it."""
    del arr[:]


def validate_records(data: Buffer, count: int) -> None:
    """Check the records as :func:`walk` does, producing nothing."""
    for _ in walk(data, count):
        pass


NULL_SCHEMA_ID = -2
NO_SCHEMA_ID = -1


def schema_ids(data: Buffer, count: int, value: bool) -> list[int]:
    """Per record, the schema id of Confluent's wire format in its value (``value``) or key:
    a magic byte 0 and a 4-byte big-endian id; ``NULL_SCHEMA_ID`` for a null, ``NO_SCHEMA_ID``
    for bytes not framed so. Walked (and refused) as :func:`walk` walks."""
    out = []
    for _, _, key, val, _ in walk(data, count):
        blob = val if value else key
        if blob is None:
            out.append(NULL_SCHEMA_ID)
        elif len(blob) < 5 or blob[0] != 0:
            out.append(NO_SCHEMA_ID)
        else:
            out.append(int.from_bytes(blob[1:5], "big"))
    return out


def check_records(data: Buffer, count: int, base_timestamp: int) -> tuple[int, int, int, int]:
    """A produced batch's records as its leader judges them (Kafka's LogValidator): walked as
    :func:`walk` does (its ProtocolError for a malformed record or a count that does not
    match), and what the log then checks each batch by, as ``(min_timestamp, max_timestamp,
    keyless, bad_delta)``:

    * the smallest and the largest record timestamp (``base_timestamp`` + delta); records
      without one (-1) count for neither; -1 when there is none. A timestamp beyond int64 is a
      ProtocolError;
    * how many records have no key (a compacted topic refuses them);
    * the index of the first record whose offset delta is not its index (0, 1, 2, ...), or
      -1."""
    lo = hi = NO_TIMESTAMP
    keyless = 0
    bad_delta = -1
    i = 0
    for offset_delta, timestamp_delta, key, _value, _headers in walk(data, count):
        if offset_delta != i and bad_delta < 0:
            bad_delta = i
        if key is None:
            keyless += 1
        ts = base_timestamp + timestamp_delta
        if not -_INT64 <= ts < _INT64:
            raise ProtocolError(f"Timestamp of record {i} does not fit 64 bits")
        if ts > hi:
            hi = ts
        if ts != NO_TIMESTAMP and (lo == NO_TIMESTAMP or ts < lo):
            lo = ts
        i += 1
    return lo, hi, keyless, bad_delta


# --- building ---

_NULL = _CACHE[1]  # varint -1: the length of a null key, value or header value
_NO_HEADERS = _CACHE[0]  # varint 0: the header count of a record without headers


def encode_record(
    buf: bytearray,
    offset_delta: int,
    timestamp_delta: int,
    key: Buffer | None,
    value: Buffer | None,
    headers: Sequence[tuple[str | bytes, Buffer | None]],
) -> None:
    """Append one record's bytes (length prefix included) to ``buf``.

    Raises ValueError when a delta does not fit a varlong."""
    cache = _CACHE
    limit = _CACHE_LIMIT
    u = (timestamp_delta << 1) ^ (timestamp_delta >> 63)
    ts_enc = cache[u] if 0 <= u < limit else encode_varint(timestamp_delta)
    u = (offset_delta << 1) ^ (offset_delta >> 63)
    od_enc = cache[u] if 0 <= u < limit else encode_varint(offset_delta)
    if key is None:
        key_len = _NULL
        key = b""
    else:
        u = len(key) << 1
        key_len = cache[u] if u < limit else encode_varint(len(key))
    if value is None:
        value_len = _NULL
        value = b""
    else:
        u = len(value) << 1
        value_len = cache[u] if u < limit else encode_varint(len(value))
    hdrs = _encode_headers(headers) if headers else _NO_HEADERS
    body = b"".join((b"\x00", ts_enc, od_enc, key_len, key, value_len, value, hdrs))
    u = len(body) << 1
    buf += cache[u] if u < limit else encode_varint(len(body))
    buf += body


def _encode_headers(headers: Sequence[tuple[str | bytes, Buffer | None]]) -> bytes:
    parts = [encode_varint(len(headers))]
    for hkey, hvalue in headers:
        kb = hkey.encode() if isinstance(hkey, str) else bytes(hkey)
        parts.append(encode_varint(len(kb)))
        parts.append(kb)
        if hvalue is None:
            parts.append(_NULL)
        else:
            parts.append(encode_varint(len(hvalue)))
            parts.append(bytes(hvalue))
    return b"".join(parts)


class RecordAppender:
    """The records of one batch being built: encoded bytes and the counters the header needs.

    ``append`` encodes a record (``encode_record``) with its offset delta (the next one unless
    given; deltas must increase) and its timestamp delta from the first record's timestamp,
    and returns the offset delta. ``RecordBatchBuilder`` and the producer's accumulator append
    through it; the compiled twin keeps the counters as C fields."""

    __slots__ = ("buf", "count", "base_timestamp", "max_timestamp", "next_delta")

    def __init__(self) -> None:
        self.buf = bytearray()
        self.count = 0
        self.base_timestamp: int | None = None
        self.max_timestamp = -1
        self.next_delta = 0

    def append(
        self,
        timestamp: int,
        key: Buffer | None,
        value: Buffer | None,
        headers: Sequence[tuple[str | bytes, Buffer | None]] = (),
        offset_delta: int | None = None,
    ) -> int:
        if offset_delta is None:
            offset_delta = self.next_delta
        elif offset_delta < self.next_delta:
            raise ValueError(f"offset delta {offset_delta} does not increase")
        if offset_delta > 0x7FFFFFFF:
            raise ValueError("offset delta does not fit int32")
        base_ts = self.base_timestamp
        if base_ts is None:
            self.base_timestamp = base_ts = self.max_timestamp = timestamp
        elif timestamp > self.max_timestamp:
            self.max_timestamp = timestamp
        encode_record(self.buf, offset_delta, timestamp - base_ts, key, value, headers)
        self.count += 1
        self.next_delta = offset_delta + 1
        return offset_delta


def check_payloads(
    data: Buffer,
    count: int,
    value: bool,
    ids: list[int],
    checks: dict[int, Callable[[bytes], str | None]],
) -> list[tuple[int, int, str]]:
    """Each record's value (``value``) or key checked by ``checks[ids[i]]`` (an
    ``AvroValidator`` or any callable answering None or why not); nulls are not checked. The
    records whose check answered, as ``(index, schema id, why)``. Walked (and refused) as
    :func:`walk` walks; the compiled twin checks Avro in place, without a bytes object."""
    if len(ids) != count:
        raise ValueError("one schema id per record")
    out = []
    for i, (_, _, key, val, _) in enumerate(walk(data, count)):
        blob = val if value else key
        if blob is None:
            continue
        why = checks[ids[i]](blob)
        if why is not None:
            out.append((i, ids[i], why))
    return out
