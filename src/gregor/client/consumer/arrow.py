"""The bulk read path: a partition's offset range as one ``pyarrow.RecordBatch``.

The schema is Spark's Kafka source schema: key binary, value binary, topic string, partition
int32, offset int64, timestamp timestamp[us, UTC] (Spark's TimestampType), timestampType int32,
and headers list<struct<key string, value binary>> when asked for (Spark's includeHeaders;
null for a record without headers, as Spark's Kafka source returns it).

Theory of operation: no Python object per record. ``gregor.protocol.records.scan`` walks each
fetched record set (decompressing a batch into one buffer, dropping control batches and, for
read_committed, aborted transactions) and its record walk (compiled when built) writes every
record straight into :class:`~gregor.protocol.records.columns.ArrowColumns`: int64 offsets and
timestamps, and for key, value and headers the offsets, bytes and validity of Arrow binary
columns. :meth:`ArrowBatchBuilder.build` wraps those buffers as Arrow arrays without copying;
records outside the asked range (a batch may start before it) are sliced off at the end.
"""

from __future__ import annotations

import asyncio
import time
from array import array
from collections.abc import Awaitable, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from gregor.client.core.client import STALE_METADATA, KafkaClient
from gregor.client.core.conn import BrokerConnection, ConnectionBase
from gregor.client.core.errors import KafkaTimeoutError, error_for_code
from gregor.client.core.metadata import TopicPartition
from gregor.protocol.messages import FetchRequest, FetchResponse
from gregor.protocol.records import scan
from gregor.protocol.records.scan import AbortFilter, Buffer, arrow_columns_from
from gregor.protocol.records.spares import new_arrow_columns

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
    """Accumulates record sets of one partition and builds the Arrow record batch.

    ``build`` hands the buffers to Arrow without copying: it is the builder's last call."""

    def __init__(
        self,
        topic: str,
        partition: int,
        *,
        include_headers: bool = True,
        timestamp_unit: str = "us",
        read_committed: bool = False,
        verify_crc: bool = True,
        aborted_pids: set[int] | None = None,
    ) -> None:
        if timestamp_unit not in ("ms", "us"):
            raise ValueError("timestamp_unit must be ms or us")
        self.topic = topic
        self.partition = partition
        self.include_headers = include_headers
        self.timestamp_unit = timestamp_unit
        self.verify_crc = verify_crc
        self.columns = new_arrow_columns(timestamp_scale=1000 if timestamp_unit == "us" else 1)
        #: read_committed state; its aborted producer ids may go on into the next builder
        self.abort_filter = AbortFilter(aborted_pids) if read_committed else None
        self.next_offset = -1

    def __len__(self) -> int:
        return len(self.columns)

    @property
    def aborted_pids(self) -> set[int] | None:
        return self.abort_filter.aborted_pids if self.abort_filter is not None else None

    def add_record_set(self, buf: Buffer, aborted: Sequence[tuple[int, int]] = ()) -> int:
        """Add every whole batch in a fetched record set; returns the next offset after them.
        ``aborted`` is the response's aborted-transaction list as (producer id, first offset)."""
        if self.abort_filter is not None:
            self.abort_filter.start(buf, aborted)
        nxt = arrow_columns_from(
            buf,
            self.columns,
            include_headers=self.include_headers,
            abort_filter=self.abort_filter,
            verify_crc=self.verify_crc,
        )
        self.next_offset = max(self.next_offset, nxt)
        return self.next_offset

    def build(
        self, start_offset: int | None = None, end_offset: int | None = None
    ) -> pa.RecordBatch:
        c = self.columns
        n = len(c)
        schema = spark_schema(self.include_headers, self.timestamp_unit)
        if n == 0:
            return pa.RecordBatch.from_arrays([pa.nulls(0, f.type) for f in schema], schema=schema)
        keys = _binary(pa.binary(), n, c.key_offsets, c.key_data, c.key_valid, c.key_nulls)
        values = _binary(
            pa.binary(), n, c.value_offsets, c.value_data, c.value_valid, c.value_nulls
        )
        offsets = pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(c.offsets)])
        # the walk wrote the timestamps in this unit (ArrowColumns.timestamp_scale)
        ts = pa.Array.from_buffers(
            pa.timestamp(self.timestamp_unit, tz="UTC"), n, [None, pa.py_buffer(c.timestamps)]
        )
        ts_types = pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(c.timestamp_types)])
        columns = [
            keys,
            values,
            _constant(self.topic, pa.string(), n),
            _constant(self.partition, pa.int32(), n),
            offsets,
            ts,
            ts_types,
        ]
        if self.include_headers:
            columns.append(self._headers_column(n))
        batch = pa.RecordBatch.from_arrays(columns, schema=schema)
        lo = 0
        hi = n
        if start_offset is not None or end_offset is not None:
            # offsets increase: find the slice with binary search over the array buffer
            lo = _bisect(c.offsets, start_offset) if start_offset is not None else 0
            hi = _bisect(c.offsets, end_offset) if end_offset is not None else n
        if lo or hi != n:
            batch = batch.slice(lo, max(hi - lo, 0))
        return batch

    def _headers_column(self, n: int) -> pa.Array:
        c = self.columns
        hn = len(c.hvalue_valid)
        hkeys = _binary(pa.string(), hn, c.hkey_offsets, c.hkey_data, None, 0)
        hvalues = _binary(
            pa.binary(), hn, c.hvalue_offsets, c.hvalue_data, c.hvalue_valid, c.hvalue_nulls
        )
        structs = pa.StructArray.from_arrays([hkeys, hvalues], fields=list(HEADER_TYPE.value_type))
        validity = _validity(c.header_valid, c.header_nulls)
        return pa.Array.from_buffers(
            HEADER_TYPE,
            n,
            [validity, pa.py_buffer(c.header_offsets)],
            null_count=c.header_nulls,
            children=[structs],
        )


_CONSTANTS: dict[tuple[pa.DataType, str | int], pa.Array] = {}
_CONSTANTS_KEPT = 64


def _constant(value: str | int, type_: pa.DataType, n: int) -> pa.Array:
    """``n`` times ``value``: a slice of an array kept per (type, value), so a batch's topic and
    partition columns are not built anew for every batch. Arrays are immutable, so batches may
    share them; a few dozen are kept (a task reads one partition), any more start afresh."""
    key = (type_, value)
    kept = _CONSTANTS.get(key)
    if kept is None or len(kept) < n:
        if len(_CONSTANTS) >= _CONSTANTS_KEPT:
            _CONSTANTS.clear()
        kept = pa.repeat(_scalar(value, type_), max(n, 2 * len(kept) if kept is not None else n))
        _CONSTANTS[key] = kept
    return kept.slice(0, n)


def _scalar(value: str | int, type_: pa.DataType) -> pa.Scalar:
    """An Arrow scalar of a string or an int32 made from its buffers. ``pa.scalar`` (like
    ``pa.array`` of Python objects) first imports pandas to check whether the value is a pandas
    object: about half a second in every fresh Python process, which Spark starts for each kind
    of data source call. The read path makes no Arrow value from Python objects, so a Spark
    worker reading topics never imports pandas."""
    if isinstance(value, str) and type_ == pa.string():
        data = value.encode()
        return pa.Array.from_buffers(
            type_, 1, [None, pa.py_buffer(array("i", [0, len(data)])), pa.py_buffer(data)]
        )[0]
    if isinstance(value, int) and type_ == pa.int32():
        return pa.Array.from_buffers(type_, 1, [None, pa.py_buffer(array("i", [value]))])[0]
    return pa.scalar(value, type_)


def _validity(flags: array[int] | None, nulls: int) -> pa.Buffer | None:
    """Arrow's validity bitmap from one byte per entry (0 = null) with ``nulls`` zeros among
    them (the walk counted them): none when nothing is null, all zero bits when everything is,
    else packed by Arrow (not by a Python loop over the flags)."""
    if flags is None or not nulls:
        return None
    n = len(flags)
    if nulls == n:
        return pa.py_buffer(bytes((n + 7) // 8))
    as_bool = pc.cast(
        pa.Array.from_buffers(pa.uint8(), n, [None, pa.py_buffer(flags)]), pa.bool_()
    )  # 0: False
    return as_bool.buffers()[1]


def _binary(
    type_: pa.DataType,
    n: int,
    offsets: array[int],
    data: array[int],
    valid: array[int] | None,
    nulls: int,
) -> pa.Array:
    return pa.Array.from_buffers(
        type_,
        n,
        [_validity(valid, nulls), pa.py_buffer(offsets), pa.py_buffer(data)],
        null_count=nulls,
    )


def _bisect(offsets: array[int], target: int) -> int:
    lo, hi = 0, len(offsets)
    while lo < hi:
        mid = (lo + hi) // 2
        if offsets[mid] < target:
            lo = mid + 1
        else:
            hi = mid
    return lo


def fetch_request(
    tp: TopicPartition, offset: int, max_bytes: int, isolation_level: int, min_bytes: int = 1
) -> FetchRequest:
    """A sessionless Fetch of one partition from ``offset``, as a consumer asks (replica -1)."""
    return FetchRequest(
        replica_id=-1,
        max_wait_ms=100,  # Tansu answers max_wait_ms=0 with no partitions at all
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=isolation_level,
        session_id=0,
        session_epoch=-1,
        topics=[
            FetchRequest.Topics(
                topic=tp.topic,
                partitions=[
                    FetchRequest.Topics.Partitions(
                        partition=tp.partition, fetch_offset=offset, partition_max_bytes=max_bytes
                    )
                ],
            )
        ],
    )


def fetch_version(conn: ConnectionBase) -> int:
    """The Fetch version the bulk readers use: 4 (read_committed, aborted transactions) to 12
    (the last before topic IDs replace names)."""
    return min(conn.version(FetchRequest.API_KEY, min_version=4), 12)


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
        topic,
        partition,
        include_headers=include_headers,
        timestamp_unit=timestamp_unit,
        read_committed=isolation_level == 1,
        verify_crc=verify_crc,
    )
    position = start_offset
    deadline = time.monotonic() + timeout
    await client.wait_for_metadata(topic, timeout)
    pending: tuple[int, Awaitable[FetchResponse]] | None = (
        None  # a fetch sent ahead while the last is decoded
    )

    def send(conn: BrokerConnection, offset: int) -> Awaitable[FetchResponse]:
        req = fetch_request(tp, offset, max_bytes, isolation_level)
        response: Awaitable[FetchResponse] = conn.send(req, fetch_version(conn))
        return response

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
        limit = (
            p.last_stable_offset
            if isolation_level == 1 and p.last_stable_offset >= 0
            else p.high_watermark
        )
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
        ahead = scan.end_offset(records)
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
