"""The bulk read path: a partition's offset range as one ``pyarrow.RecordBatch``.

The schema is Spark's Kafka source schema: key binary, value binary, topic string, partition
int32, offset int64, timestamp timestamp[us, UTC] (Spark's TimestampType), timestampType int32,
and headers list<struct<key string, value binary>> when asked for (Spark's includeHeaders).

Theory of operation: no Python object per record. Each v2 batch's record bytes (decompressed
if needed) are appended to one data buffer. A tight loop walks the varint layout of each record
and writes only integers into ``array`` buffers: the record's offset and timestamp, and the
start/end positions of its key and value in the data buffer. Because a record's key precedes
its value and records follow each other, the positions ``[key_start, key_end, value_start,
value_end, key_start', ...]`` never decrease, so they are valid offsets of one Arrow binary
array whose elements alternate key, gap, value, gap. Arrow's ``take`` (in C++) then picks every
fourth element into compact key and value columns; null keys/values get a validity bitmap built
by ``pyarrow.compute`` from a byte-per-record flag buffer. Headers work the same way one level
down. Records outside the asked range (a batch may start before it) are sliced off at the end.
"""

from __future__ import annotations

import asyncio
import time
from array import array
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from gregor.client.core import STALE_METADATA, KafkaClient
from gregor.client.errors import KafkaTimeoutError, error_for_code
from gregor.client.fetcher import _end_offset, aborted_by_markers
from gregor.client.metadata import TopicPartition
from gregor.protocol.exceptions import ProtocolError
from gregor.protocol.messages import FetchRequest
from gregor.protocol.records.batch import batch_payload
from gregor.protocol.records.convert import iter_record_set
from gregor.protocol.records.header import (
    COMPRESSION_MASK,
    CONTROL_MASK,
    HEADER_SIZE,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    crc_ok,
    read_header,
)

HEADER_TYPE = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))


def spark_schema(include_headers: bool = True, timestamp_unit: str = "us") -> pa.Schema:
    fields = [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string(), nullable=False),
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("timestamp", pa.timestamp(timestamp_unit, tz="UTC")),
        pa.field("timestampType", pa.int32()),
    ]
    if include_headers:
        fields.append(pa.field("headers", HEADER_TYPE))
    return pa.schema(fields)


class ArrowBatchBuilder:
    """Accumulates v2 record batches of one partition and builds the Arrow record batch."""

    def __init__(
        self,
        topic: str,
        partition: int,
        *,
        include_headers: bool = True,
        timestamp_unit: str = "us",
        read_committed: bool = False,
        verify_crc: bool = True,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.include_headers = include_headers
        self.timestamp_unit = timestamp_unit
        self.read_committed = read_committed
        self.verify_crc = verify_crc
        self.data = bytearray()
        self.bounds = array("i")  # key_start, key_end, value_start, value_end per record
        self.null_keys: list[int] = []  # record indexes with a null key (rare: kept sparse)
        self.null_values: list[int] = []
        self.offsets = array("q")
        self.timestamps = array("q")
        self.ts_types = array("i")
        self.h_sparse: list[tuple[int, int]] = []  # (record index, header count) when > 0
        self.h_bounds = array("i")  # hkey_start, hkey_end, hvalue_start, hvalue_end
        self.h_flags = bytearray()  # 1 when the header value is present
        self.next_offset = -1
        self._aborted_pids: set[int] = set()

    def __len__(self) -> int:
        return len(self.offsets)

    def add_record_set(self, buf: Any, aborted: list[tuple[int, int]] = ()) -> int:  # type: ignore[assignment]
        """Add every whole batch in a fetched record set; returns the next offset after them."""
        mv = memoryview(buf)
        pos = 0
        end = len(mv)
        aborted = sorted(aborted, key=lambda a: a[1])
        marker_aborted = aborted_by_markers(mv) if self.read_committed else set()
        ai = 0
        while pos + 17 <= end:
            size = int.from_bytes(mv[pos + 8 : pos + 12], "big", signed=True)
            entry_end = pos + 12 + size
            if size < 0 or entry_end > end:
                break
            if mv[pos + 16] != 2:
                self._add_legacy(mv[pos:entry_end])
                pos = entry_end
                continue
            h = read_header(mv, pos)
            last = h.base_offset + h.last_offset_delta
            if self.read_committed:
                while ai < len(aborted) and aborted[ai][1] <= last:
                    self._aborted_pids.add(aborted[ai][0])
                    ai += 1
            attrs = h.attributes
            if attrs & CONTROL_MASK:
                self._aborted_pids.discard(h.producer_id)
            elif not (
                self.read_committed
                and attrs & TRANSACTIONAL_MASK
                and (h.producer_id in self._aborted_pids or pos in marker_aborted)
            ):
                if self.verify_crc and not crc_ok(mv, pos, h):
                    raise ProtocolError(f"record batch at offset {h.base_offset} fails its CRC32C check")
                if attrs & COMPRESSION_MASK:
                    payload: Any = batch_payload(mv, pos, h)
                else:
                    payload = mv[pos + HEADER_SIZE : entry_end]
                self._add_records(
                    payload,
                    h.records_count,
                    h.base_offset,
                    h.max_timestamp if attrs & TIMESTAMP_TYPE_MASK else None,
                    h.base_timestamp,
                    1 if attrs & TIMESTAMP_TYPE_MASK else 0,
                )
            self.next_offset = max(self.next_offset, last + 1)
            pos = entry_end
        return self.next_offset

    def _add_legacy(self, entry: Any) -> None:
        for r in iter_record_set(bytes(entry), verify_crc=self.verify_crc):
            base = len(self.data)
            ks = base
            if r.key is not None:
                self.data += r.key
            ke = len(self.data)
            if r.value is not None:
                self.data += r.value
            i = len(self.offsets)
            self.bounds.extend((ks, ke, ke, len(self.data)))
            if r.key is None:
                self.null_keys.append(i)
            if r.value is None:
                self.null_values.append(i)
            self.offsets.append(r.offset)
            self.timestamps.append(r.timestamp)
            self.ts_types.append(0)
            self.next_offset = max(self.next_offset, r.offset + 1)

    def _add_records(
        self, payload: Any, count: int, base_offset: int, log_append_time: int | None, base_ts: int, ts_type: int
    ) -> None:
        data = self.data
        base = len(data)
        data += payload
        end = len(data)
        pos = base
        bounds = self.bounds
        timestamps = self.timestamps
        want_headers = self.include_headers
        first = len(self.offsets)
        self.ts_types.extend(array("i", [ts_type]) * count)
        contiguous = True
        zz = 0  # zigzag of the expected offset delta (0, 1, 2, ... -> 0, 2, 4, ...)
        try:
            for i in range(first, first + count):
                # record length
                b = data[pos]
                if b < 0x80:
                    n = b
                    pos += 1
                else:
                    c = data[pos + 1]
                    if c < 0x80:
                        n = (b & 0x7F) | (c << 7)
                        pos += 2
                    else:
                        n, pos = _uvarint(data, pos)
                rec_end = pos + ((n >> 1) ^ -(n & 1))
                # attributes, then the timestamp delta
                b = data[pos + 1]
                if b < 0x80:
                    n = b
                    pos += 2
                else:
                    c = data[pos + 2]
                    if c < 0x80:
                        n = (b & 0x7F) | (c << 7)
                        pos += 3
                    else:
                        n, pos = _uvarint(data, pos + 1)
                timestamps.append(base_ts + ((n >> 1) ^ -(n & 1)) if log_append_time is None else log_append_time)
                # offset delta: only checked here; offsets are filled per batch below
                b = data[pos]
                if b < 0x80:
                    n = b
                    pos += 1
                else:
                    c = data[pos + 1]
                    if c < 0x80:
                        n = (b & 0x7F) | (c << 7)
                        pos += 2
                    else:
                        n, pos = _uvarint(data, pos)
                if n != zz:
                    contiguous = False
                zz += 2
                # key
                b = data[pos]
                if b < 0x80:
                    n = b
                    pos += 1
                else:
                    c = data[pos + 1]
                    if c < 0x80:
                        n = (b & 0x7F) | (c << 7)
                        pos += 2
                    else:
                        n, pos = _uvarint(data, pos)
                ks = pos
                if n & 1:
                    if n != 1:
                        raise ProtocolError("negative record key length")
                    self.null_keys.append(i)
                else:
                    pos += n >> 1
                ke = pos
                # value
                b = data[pos]
                if b < 0x80:
                    n = b
                    pos += 1
                else:
                    c = data[pos + 1]
                    if c < 0x80:
                        n = (b & 0x7F) | (c << 7)
                        pos += 2
                    else:
                        n, pos = _uvarint(data, pos)
                vs = pos
                if n & 1:
                    if n != 1:
                        raise ProtocolError("negative record value length")
                    self.null_values.append(i)
                else:
                    pos += n >> 1
                bounds.extend((ks, ke, vs, pos))
                if data[pos] != 0 and want_headers:
                    self.h_sparse.append((i, self._add_headers(data, pos, rec_end)))
                if rec_end > end:
                    raise ProtocolError("record runs past its batch")
                pos = rec_end
        except IndexError:
            raise ProtocolError("record data truncated") from None
        if pos != end:
            raise ProtocolError("records do not fill their batch")
        if contiguous:
            self.offsets.extend(array("q", range(base_offset, base_offset + count)))
        else:
            self.offsets.extend(array("q", (base_offset + d for d in _offset_deltas(data, base, count))))

    def _add_headers(self, data: bytearray, pos: int, rec_end: int) -> int:
        n, pos = _uvarint(data, pos)
        count = (n >> 1) ^ -(n & 1)
        if count < 0 or count > rec_end - pos:
            raise ProtocolError("invalid header count")
        hb = self.h_bounds
        for _ in range(count):
            n, pos = _uvarint(data, pos)
            klen = (n >> 1) ^ -(n & 1)
            if klen < 0:
                raise ProtocolError("invalid header key length")
            ks = pos
            pos += klen
            n, pos = _uvarint(data, pos)
            vlen = (n >> 1) ^ -(n & 1)
            if vlen < 0:
                hb.extend((ks, ks + klen, pos, pos))
                self.h_flags.append(0)
            else:
                hb.extend((ks, ks + klen, pos, pos + vlen))
                self.h_flags.append(1)
                pos += vlen
            if pos > rec_end:
                raise ProtocolError("header runs past its record")
        return count

    def _headers_column(self, data_buf: pa.Buffer, n: int) -> pa.Array:
        if self.h_sparse:
            counts = array("i", bytes(4 * n))
            for i, c in self.h_sparse:
                counts[i] = c
            summed = pc.cumulative_sum(pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(counts)]))
            offsets = pa.concat_arrays([pa.array([0], pa.int32()), summed])
        else:
            offsets = pa.Array.from_buffers(pa.int32(), n + 1, [None, pa.py_buffer(bytes(4 * (n + 1)))])
        hn = len(self.h_flags)
        if hn:
            absent = [i for i, f in enumerate(self.h_flags) if not f]
            hkeys, hvalues = _split_pairs(self.h_bounds, data_buf, hn, [], absent, pa.string())
            structs = pa.StructArray.from_arrays([hkeys, hvalues], fields=list(HEADER_TYPE.value_type))
        else:
            structs = pa.array([], type=HEADER_TYPE.value_type)
        return pa.ListArray.from_arrays(offsets, structs).cast(HEADER_TYPE)

    def build(self, start_offset: int | None = None, end_offset: int | None = None) -> pa.RecordBatch:
        n = len(self.offsets)
        schema = spark_schema(self.include_headers, self.timestamp_unit)
        if n == 0:
            return pa.RecordBatch.from_pylist([], schema=schema)
        data_buf = pa.py_buffer(self.data)
        keys, values = _split_pairs(self.bounds, data_buf, n, self.null_keys, self.null_values, pa.binary())
        offsets = pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(self.offsets)])
        ts = pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(self.timestamps)])
        if self.timestamp_unit == "us":
            ts = pc.multiply(ts, 1000)
        elif self.timestamp_unit != "ms":
            raise ValueError("timestamp_unit must be ms or us")
        ts = ts.view(pa.timestamp(self.timestamp_unit, tz="UTC"))
        ts_types = pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(self.ts_types)])
        columns = [
            keys,
            values,
            pa.repeat(pa.scalar(self.topic, pa.string()), n),
            pa.repeat(pa.scalar(self.partition, pa.int32()), n),
            offsets,
            ts,
            ts_types,
        ]
        if self.include_headers:
            columns.append(self._headers_column(data_buf, n))
        batch = pa.RecordBatch.from_arrays(columns, schema=schema)
        lo = 0
        hi = n
        if start_offset is not None or end_offset is not None:
            # offsets increase: find the slice with binary search over the array buffer
            lo = _bisect(self.offsets, start_offset) if start_offset is not None else 0
            hi = _bisect(self.offsets, end_offset) if end_offset is not None else n
        if lo or hi != n:
            batch = batch.slice(lo, max(hi - lo, 0))
        return batch


def _split_pairs(
    bounds: array, data_buf: pa.Buffer, n: int, key_nulls: list[int], value_nulls: list[int], key_type: pa.DataType
) -> tuple[pa.Array, pa.Array]:
    """Keys and values out of [ks, ke, vs, ve]* bounds over one data buffer."""
    m = len(bounds) - 1
    combined = pa.Array.from_buffers(pa.binary(), m, [None, pa.py_buffer(bounds), data_buf])
    idx_k = _every_fourth(n)
    keys = combined.take(idx_k) if len(key_nulls) < n else pa.nulls(n, pa.binary())
    values = combined.take(pc.add(idx_k, 2)) if len(value_nulls) < n else pa.nulls(n, pa.binary())
    if key_nulls and len(key_nulls) < n:
        keys = _with_validity(keys, _validity(n, key_nulls))
    if value_nulls and len(value_nulls) < n:
        values = _with_validity(values, _validity(n, value_nulls))
    if key_type != pa.binary():
        keys = keys.cast(key_type)
    return keys, values


def _every_fourth(n: int) -> pa.Array:
    """int32 [0, 4, 8, ...] of length n, built in Arrow (no Python int per element)."""
    return pc.subtract(pc.cumulative_sum(pa.repeat(pa.scalar(4, pa.int32()), n)), 4)


def _validity(n: int, nulls: list[int]) -> pa.BooleanArray:
    flags = bytearray(b"\x01") * n
    for i in nulls:
        flags[i] = 0
    return pc.not_equal(pa.Array.from_buffers(pa.uint8(), n, [None, pa.py_buffer(flags)]), 0)


def _with_validity(arr: pa.Array, valid: pa.BooleanArray) -> pa.Array:
    bufs = arr.buffers()
    return pa.Array.from_buffers(arr.type, len(arr), [valid.buffers()[1], bufs[1], bufs[2]], offset=arr.offset)


def _offset_deltas(data: Any, pos: int, count: int) -> list[int]:
    """Offset deltas of a batch's records (the slow path, for batches with gaps)."""
    out = []
    for _ in range(count):
        n, pos = _uvarint(data, pos)
        rec_end = pos + ((n >> 1) ^ -(n & 1))
        _, p = _uvarint(data, pos + 1)  # timestamp delta
        n, _ = _uvarint(data, p)
        out.append((n >> 1) ^ -(n & 1))
        pos = rec_end
    return out


def _bisect(offsets: array, target: int) -> int:
    lo, hi = 0, len(offsets)
    while lo < hi:
        mid = (lo + hi) // 2
        if offsets[mid] < target:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _uvarint(data: Any, pos: int) -> tuple[int, int]:
    u = 0
    shift = 0
    while True:
        b = data[pos]
        pos += 1
        u |= (b & 0x7F) << shift
        if b < 0x80:
            return u, pos
        shift += 7
        if shift >= 70:
            raise ProtocolError("varint longer than 10 bytes")


async def fetch_arrow(
    client: KafkaClient,
    topic: str,
    partition: int,
    start_offset: int,
    end_offset: int | None = None,
    *,
    include_headers: bool = True,
    timestamp_unit: str = "us",
    isolation_level: int = 0,
    max_bytes: int = 4 * 1024 * 1024,
    timeout: float = 60.0,
    verify_crc: bool = True,
) -> pa.RecordBatch:
    """Read offsets ``[start_offset, end_offset)`` of one partition as a Spark-schema batch.

    ``end_offset`` None means up to the high watermark (last stable offset for
    read_committed) at the time of the first fetch.
    """
    tp = TopicPartition(topic, partition)
    builder = ArrowBatchBuilder(
        topic, partition, include_headers=include_headers, timestamp_unit=timestamp_unit,
        read_committed=isolation_level == 1, verify_crc=verify_crc,
    )
    position = start_offset
    deadline = time.monotonic() + timeout
    await client.wait_for_metadata(topic, timeout)
    pending: tuple[int, Any] | None = None  # a fetch sent ahead while the last is decoded

    def send(conn: Any, offset: int) -> Any:
        req = FetchRequest(
            replica_id=-1,
            max_wait_ms=100,  # Tansu answers max_wait_ms=0 with no partitions at all
            min_bytes=1,
            max_bytes=max_bytes,
            isolation_level=isolation_level,
            session_id=0,
            session_epoch=-1,
            topics=[
                FetchRequest.Topics(
                    topic=topic,
                    partitions=[
                        FetchRequest.Topics.Partitions(
                            partition=partition, fetch_offset=offset, partition_max_bytes=max_bytes
                        )
                    ],
                )
            ],
        )
        return conn.send(req, min(conn.version(FetchRequest.API_KEY, min_version=4), 12))

    while end_offset is None or position < end_offset:
        if time.monotonic() > deadline:
            raise KafkaTimeoutError(f"{tp}: bulk read did not finish in {timeout}s")
        if pending is None or pending[0] != position:
            node = client.cluster.leader_for(tp)
            if node < 0:
                await client.refresh_metadata()
                await asyncio.sleep(client.retry_backoff)
                continue
            conn = await client.connection(node)
            pending = (position, send(conn, position))
        resp = await pending[1]
        pending = None
        if resp.error_code:
            raise error_for_code(resp.error_code)(str(tp))
        if not resp.responses or not resp.responses[0].partitions:
            await asyncio.sleep(client.retry_backoff)
            continue
        p = resp.responses[0].partitions[0]
        if p.error_code:
            if p.error_code in STALE_METADATA:
                client.request_update()
                await client.refresh_metadata()
                continue
            raise error_for_code(p.error_code)(f"{tp} at offset {position}")
        limit = p.last_stable_offset if isolation_level == 1 and p.last_stable_offset >= 0 else p.high_watermark
        if end_offset is None:
            end_offset = limit
        if position >= min(end_offset, limit):
            break
        records = p.records
        if not records:
            if limit <= position:
                break
            max_bytes *= 2  # a batch bigger than max_bytes: ask for more
            continue
        ahead = _end_offset(records)
        if position < ahead < min(end_offset, limit):
            pending = (ahead, send(conn, ahead))  # overlap the next fetch with this decode
        aborted = [(a.producer_id, a.first_offset) for a in p.aborted_transactions or ()]
        nxt = builder.add_record_set(records, aborted)
        if nxt <= position:
            max_bytes *= 2
            continue
        position = nxt
    return builder.build(start_offset, end_offset)


__all__ = ["ArrowBatchBuilder", "fetch_arrow", "spark_schema", "HEADER_TYPE"]
