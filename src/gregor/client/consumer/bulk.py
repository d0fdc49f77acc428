"""Chunked bulk reads: a partition's offset range as a stream of ``pyarrow.RecordBatch``.

:func:`gregor.client.consumer.arrow.fetch_arrow` returns a whole range as one batch. A data-source task
reading millions of records wants bounded memory and no idle network, so :class:`RangeReader`
reads ``[start_offset, end_offset)`` in chunks of about ``chunk_records`` records, with one
Fetch always in flight.

Theory of operation. The reader fetches from the partition's leader on a blocking connection
(:class:`~gregor.client.core.blocking.BlockingConnection`, held by :class:`_LeaderLink`) in the
caller's thread, and decodes into Arrow (:class:`~gregor.client.consumer.arrow.ArrowBatchBuilder`) in
the same thread; metadata, offsets and the client's other requests stay on the synchronous
facade's loop thread. The next fetch offset is known from the batch headers of a response
alone (base offset plus last offset delta of the last whole v2 batch), so the reader sends the
next Fetch *before* decoding the current response, and the broker's answer travels into the
socket's receive buffer while this thread works. A broken connection, a timeout or stale
metadata (the leader moved) drops the connection, refreshes the metadata and asks the new
leader again, until ``timeout``. A response whose
only batch is larger than the byte limit comes back partial: the limit doubles and the fetch
is repeated. An out-of-range fetch offset (retention deleted records, or the log was
truncated) is data loss: it raises :class:`DataLossError` unless ``fail_on_data_loss`` is
false, in which case the reader skips to the log start offset and reports the skipped count in
``lost``.

:func:`shared_client` keeps one started :class:`KafkaClient` per configuration per process,
so the many short tasks of a long-lived worker process reuse their connections; a reader that
finishes with nothing outstanding leaves its blocking connection for the next one.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator

import pyarrow as pa

from gregor.client.consumer.arrow import ArrowBatchBuilder, fetch_request, fetch_version
from gregor.client.consumer.consumer import list_offsets
from gregor.client.core.blocking import BlockingConnection
from gregor.client.core.client import STALE_METADATA, KafkaClient
from gregor.client.core.config import COMMON, Config, Settings
from gregor.client.core.conn import expect
from gregor.client.core.errors import KafkaError, KafkaTimeoutError, error_for_code
from gregor.client.core.loop import LoopThread
from gregor.client.core.metadata import TopicPartition
from gregor.protocol.errors import ErrorCode, LeaderNotAvailableError
from gregor.protocol.messages import FetchResponse
from gregor.protocol.records.scan import Buffer, next_fetch_offset

EARLIEST = -2
LATEST = -1


class DataLossError(KafkaError):
    """Records that a read was asked for no longer exist (deleted, truncated or never written)."""


_CLIENTS: dict[tuple[tuple[str, str], ...], KafkaClient] = {}
_CLIENTS_LOCK = threading.Lock()


def client_config(settings: Settings) -> Config:
    """A bare client's :class:`Config` from Kafka settings; keys a bare client lacks are dropped."""
    known = {k: v for k, v in settings.items() if k.replace("_", ".") in COMMON}
    known.setdefault("allow.auto.create.topics", False)
    return Config("client", known)


def shared_client(settings: Settings) -> KafkaClient:
    """A started client for these settings, shared by every caller in this process."""
    key = tuple(sorted((str(k), str(v)) for k, v in settings.items()))
    lt = LoopThread.get()
    with _CLIENTS_LOCK:
        client = _CLIENTS.get(key)
        if client is not None and not client._closed:
            return client
        cfg = client_config(settings)

        async def make() -> KafkaClient:
            c = KafkaClient(cfg)
            await c.start()
            return c

        client = lt.run(make())
        _CLIENTS[key] = client
        return client


def close_shared_clients() -> None:
    lt = LoopThread.get()
    with _CLIENTS_LOCK:
        clients = list(_CLIENTS.values())
        _CLIENTS.clear()
    with _IDLE_LOCK:
        idle = [conn for conns in _IDLE.values() for conn in conns]
        _IDLE.clear()
    for conn in idle:
        conn.close()
    for c in clients:
        lt.run(c.close())


class _Fetched:
    __slots__ = (
        "error_code",
        "records",
        "high_watermark",
        "last_stable_offset",
        "log_start_offset",
        "aborted",
    )

    def __init__(
        self,
        error_code: int,
        records: Buffer | None,
        hw: int,
        lso: int,
        log_start: int,
        aborted: list[tuple[int, int]],
    ) -> None:
        self.error_code = error_code
        self.records = records
        self.high_watermark = hw
        self.last_stable_offset = lso
        self.log_start_offset = log_start
        self.aborted = aborted


def _fetched(resp: FetchResponse, tp: TopicPartition) -> _Fetched | None:
    """The partition's part of a Fetch response; None when the metadata is stale (ask again)."""
    if resp.error_code:
        raise error_for_code(resp.error_code)(str(tp))
    if resp.responses and resp.responses[0].partitions:
        p = resp.responses[0].partitions[0]
        if p.error_code not in STALE_METADATA:
            aborted = [(a.producer_id, a.first_offset) for a in p.aborted_transactions or ()]
            return _Fetched(
                p.error_code,
                p.records,
                p.high_watermark,
                p.last_stable_offset,
                p.log_start_offset,
                aborted,
            )
    return None


async def _fetch(
    client: KafkaClient,
    tp: TopicPartition,
    offset: int,
    max_bytes: int,
    isolation_level: int,
    timeout: float,
    min_bytes: int = 1,
) -> _Fetched:
    """One Fetch of one partition at ``offset``; waits for a leader, retries stale metadata."""
    deadline = time.monotonic() + timeout
    await client.wait_for_metadata(tp.topic, timeout)
    while True:
        node = client.cluster.leader_for(tp)
        if node >= 0:
            try:
                conn = await client.connection(node)
                req = fetch_request(tp, offset, max_bytes, isolation_level, min_bytes)
                resp: FetchResponse = await conn.send(req, fetch_version(conn))
            except KafkaError as e:
                if not e.retriable or time.monotonic() > deadline:
                    raise
                client.request_update()
            else:
                f = _fetched(resp, tp)
                if f is not None:
                    return f
                client.request_update()
        if time.monotonic() > deadline:
            raise KafkaTimeoutError(
                f"{tp}: no answer to Fetch at offset {offset} within {timeout}s"
            )
        await client.refresh_metadata()
        await asyncio.sleep(client.retry_backoff)


class _LeaderLink:
    """The blocking connection a :class:`RangeReader` fetches on, to its partition's leader.

    One fetch is outstanding at a time: sent ahead (:meth:`send`), then read (:meth:`result`). A
    failed send is not an error yet: it drops the connection, and :meth:`result`, finding none,
    does what it does for a broken connection or stale metadata: refreshes the metadata (on the
    client's loop), connects to the leader named then and asks again, until ``timeout``. A
    connection left with nothing outstanding goes back to :data:`_IDLE` for the next reader of
    this process.
    """

    def __init__(
        self, client: KafkaClient, tp: TopicPartition, isolation_level: int, timeout: float
    ) -> None:
        self.client = client
        self.tp = tp
        self.isolation_level = isolation_level
        self.timeout = timeout
        self.conn: BlockingConnection | None = None
        self._lt = LoopThread.get()
        self._key: tuple[KafkaClient, int, str, int] | None = None

    def send(self, offset: int, max_bytes: int) -> None:
        try:
            conn = self.conn or self._connect()
            conn.send(
                fetch_request(self.tp, offset, max_bytes, self.isolation_level), fetch_version(conn)
            )
        except KafkaError as e:
            if not e.retriable:
                raise
            self._drop()  # no connection left: result() asks again

    def result(self, offset: int, max_bytes: int) -> _Fetched:
        """The response to the fetch sent (at ``offset``), asking again while it fails."""
        deadline = time.monotonic() + self.timeout
        while True:
            if self.conn is not None:  # else the send failed and dropped the connection
                try:
                    f = _fetched(expect(self.conn.receive(), FetchResponse), self.tp)
                except KafkaError as e:
                    if not e.retriable or time.monotonic() > deadline:
                        raise
                    self._drop()
                else:
                    if f is not None:
                        return f
                    self._drop()  # the partition moved: the connection may be to a follower now
            if time.monotonic() > deadline:
                raise KafkaTimeoutError(
                    f"{self.tp}: no answer to Fetch at offset {offset} within {self.timeout}s"
                )
            self.client.request_update()
            self._lt.run(self.client.refresh_metadata())
            time.sleep(self.client.retry_backoff)
            self.send(offset, max_bytes)

    def _connect(self) -> BlockingConnection:
        client = self.client
        self._lt.run(client.wait_for_metadata(self.tp.topic, self.timeout))
        node = client.cluster.leader_for(self.tp)
        broker = client.cluster.brokers.get(node) if node >= 0 else None
        if broker is None:
            raise LeaderNotAvailableError(f"{self.tp}: no leader known")
        key = (client, node, broker.host, broker.port)
        with _IDLE_LOCK:
            idle = _IDLE.get(key)
            conn = idle.pop() if idle else None
        if conn is None:
            conn = BlockingConnection(
                broker.host, broker.port, **client.connection_options(node)
            ).connect()
        self.conn = conn
        self._key = key
        return conn

    def _drop(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def release(self) -> None:
        """Done with the link: an idle, healthy connection is kept for the next reader."""
        conn, self.conn = self.conn, None
        if conn is None:
            return
        if conn.in_flight or not conn.connected or self._key is None:
            conn.close()
            return
        with _IDLE_LOCK:
            idle = _IDLE.setdefault(self._key, [])
            if len(idle) < _IDLE_PER_BROKER:
                idle.append(conn)
                return
        conn.close()


#: Idle blocking connections by (client, node, host, port): the tasks of one Spark worker
#: process run one after another and take the connection the last one left.
_IDLE: dict[tuple[KafkaClient, int, str, int], list[BlockingConnection]] = {}
_IDLE_LOCK = threading.Lock()
_IDLE_PER_BROKER = 4


async def end_offsets_async(
    client: KafkaClient, tps: list[TopicPartition], isolation_level: int = 0, timeout: float = 60.0
) -> dict[TopicPartition, int]:
    """Each partition's end: the high watermark (last stable offset for read_committed).

    Taken from Fetch responses, not ListOffsets(latest): that is where the high watermark is
    defined, and some brokers (Tansu) answer ListOffsets(latest) with the last batch's base
    offset plus one. One small fetch per partition, at its log start offset.
    """
    if not tps:
        return {}
    starts = await list_offsets(client, dict.fromkeys(tps, EARLIEST), isolation_level, timeout)

    async def one(tp: TopicPartition) -> int:
        offset = starts[tp][0] or 0
        for _ in range(5):
            f = await _fetch(client, tp, offset, 1, isolation_level, timeout, min_bytes=0)
            if f.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:  # retention moved the start
                r = await list_offsets(client, {tp: EARLIEST}, isolation_level, timeout)
                offset = r[tp][0] or 0
                continue
            if f.error_code:
                raise error_for_code(f.error_code)(f"{tp}: Fetch for its high watermark")
            if isolation_level == 1 and f.last_stable_offset >= 0:
                return f.last_stable_offset
            return f.high_watermark
        raise KafkaTimeoutError(f"{tp}: no high watermark (the log start keeps moving)")

    values = await asyncio.gather(*(one(tp) for tp in tps))
    return dict(zip(tps, values, strict=True))


def end_offsets(
    client: KafkaClient, tps: list[TopicPartition], isolation_level: int = 0, timeout: float = 60.0
) -> dict[TopicPartition, int]:
    """:func:`end_offsets_async` from any thread but the client's loop."""
    return LoopThread.get().run(end_offsets_async(client, list(tps), isolation_level, timeout))


class RangeReader:
    """Iterate offsets ``[start_offset, end_offset)`` of one partition as Arrow record batches.

    ``end_offset`` None reads up to the high watermark (last stable offset for read_committed)
    seen by the first fetch. Batches follow Spark's Kafka schema (see ``spark_schema``) and
    never hold records outside the range; transaction markers and aborted records leave gaps
    in the offsets, so a batch may hold fewer records than its offset span.
    """

    def __init__(
        self,
        client: KafkaClient,
        topic: str,
        partition: int,
        start_offset: int,
        end_offset: int | None = None,
        *,
        include_headers: bool = False,
        isolation_level: int = 0,
        chunk_records: int = 65536,
        max_bytes: int = 8 * 1024 * 1024,
        fail_on_data_loss: bool = True,
        timeout: float = 60.0,
        verify_crc: bool = True,
    ) -> None:
        self.client = client
        self.tp = TopicPartition(topic, partition)
        self.start_offset = start_offset
        self.end_offset = end_offset
        self.include_headers = include_headers
        self.isolation_level = isolation_level
        self.chunk_records = chunk_records
        self.max_bytes = max_bytes
        self.fail_on_data_loss = fail_on_data_loss
        self.timeout = timeout
        self.verify_crc = verify_crc
        self.lost = 0  # offsets skipped because they no longer exist
        self.records = 0
        self._lt = LoopThread.get()

    def _submit(self, offset: int) -> tuple[int, int]:
        self._link.send(offset, self.max_bytes)
        return offset, self.max_bytes

    def _builder(self, previous: ArrowBatchBuilder | None) -> ArrowBatchBuilder:
        return ArrowBatchBuilder(
            self.tp.topic,
            self.tp.partition,
            include_headers=self.include_headers,
            read_committed=self.isolation_level == 1,
            verify_crc=self.verify_crc,
            # an aborted transaction may span two chunks
            aborted_pids=previous.aborted_pids if previous is not None else None,
        )

    def _lose(self, what: str, frm: int, to: int) -> None:
        if self.fail_on_data_loss:
            raise DataLossError(
                f"{self.tp}: {what}: offsets [{frm}, {to}) are gone. Set failOnDataLoss to false "
                "to skip them."
            )
        self.lost += max(to - frm, 0)

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        self._link = _LeaderLink(self.client, self.tp, self.isolation_level, self.timeout)
        try:
            yield from self._read()
        finally:
            self._link.release()

    def _read(self) -> Iterator[pa.RecordBatch]:
        position = self.start_offset
        end = self.end_offset
        builder = self._builder(None)
        chunk_start = position
        pending: tuple[int, int] | None = (
            self._submit(position) if end is None or position < end else None
        )
        while pending is not None:
            f = self._link.result(*pending)
            pending = None
            if f.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                low = self._log_start()
                if position < low:
                    self._lose(
                        "deleted before they were read",
                        position,
                        min(low, end) if end is not None else low,
                    )
                    if len(builder):  # what was read before the gap, then a new chunk after it
                        batch = builder.build(chunk_start, position)
                        self.records += batch.num_rows
                        if batch.num_rows:
                            yield batch
                        builder = self._builder(builder)
                    position = chunk_start = low
                else:
                    high = self._high_watermark()
                    stop = end if end is not None else high
                    self._lose("the log ends before them", max(position, high), stop)
                    break
                if end is not None and position >= end:
                    break
                pending = self._submit(position)
                continue
            if f.error_code:
                raise error_for_code(f.error_code)(f"{self.tp} at offset {position}")
            limit = (
                f.last_stable_offset
                if self.isolation_level == 1 and f.last_stable_offset >= 0
                else f.high_watermark
            )
            if end is None:
                end = limit
            if position >= end:
                break
            records = f.records
            if not records:
                if limit <= position:
                    if self.isolation_level == 1 and f.high_watermark > position:
                        # an open transaction holds the last stable offset back: wait for it
                        time.sleep(0.05)
                        pending = self._submit(position)
                        continue
                    self._lose("the log ends before them", position, end)
                    break
                self.max_bytes *= 2  # one batch bigger than max_bytes: ask for more
                pending = self._submit(position)
                continue
            nxt = next_fetch_offset(records)
            if nxt is not None and nxt > position:
                if nxt < end:
                    pending = self._submit(nxt)  # in flight while this thread decodes
                builder.add_record_set(records, f.aborted)
                position = nxt
            else:
                got = builder.add_record_set(records, f.aborted)
                if got <= position:
                    self.max_bytes *= 2
                    pending = self._submit(position)
                    continue
                position = got
                if position < end:
                    pending = self._submit(position)
            if len(builder) >= self.chunk_records or position >= end:
                batch = builder.build(chunk_start, end)
                self.records += batch.num_rows
                if batch.num_rows:
                    yield batch
                builder = self._builder(builder)
                chunk_start = position
        if len(builder):
            batch = builder.build(chunk_start, end)
            self.records += batch.num_rows
            if batch.num_rows:
                yield batch

    def _offsets(self, spec: int) -> int:
        r = self._lt.run(
            list_offsets(self.client, {self.tp: spec}, self.isolation_level, self.timeout)
        )
        off = r[self.tp][0]
        return off if off is not None else 0

    def _log_start(self) -> int:
        return self._offsets(EARLIEST)

    def _high_watermark(self) -> int:
        return end_offsets(self.client, [self.tp], self.isolation_level, self.timeout)[self.tp]


__all__ = [
    "DataLossError",
    "RangeReader",
    "client_config",
    "close_shared_clients",
    "end_offsets",
    "end_offsets_async",
    "next_fetch_offset",
    "shared_client",
]
