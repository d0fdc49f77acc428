"""The producer's per-record path, pure-Python reference; ``_send.pyx`` compiles the same.

Theory of operation. :class:`ProducerCore` and :class:`AccumulatorCore` are the bases of
``AIOProducer`` and ``RecordAccumulator`` and hold what one ``send`` reads and writes: the
producer's state flags, its cache of TopicPartition objects per topic, and the accumulator's
byte counters and queues. ``send_nowait`` picks the partition and timestamp and calls
``append``, which adds the record to the open batch of that partition (opening one through
``RecordAccumulator._new_batch`` when there is none or it is full) and returns the record's
:class:`ProduceFuture`. ``producer.fast_send`` picks this module or the compiled one
(``GREGOR_NO_EXTENSIONS=1`` forces this one); the compiled ``send_nowait`` takes the common
case itself (bytes or no key and value, no headers, known topic) and hands anything else to
this module's, so both behave alike (``tests/client/test_send_paths.py``).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from gregor.client.core.metadata import TopicPartition
from gregor.client.producer.futures import BatchResult, ProduceFuture
from gregor.client.producer.partitioner import StickyPartitioner, partition_for_key
from gregor.protocol.errors import KafkaError
from gregor.protocol.records import RecordBatchBuilder
from gregor.protocol.records.header import NO_SEQUENCE

if TYPE_CHECKING:
    from gregor.client.core.client import KafkaClient
    from gregor.client.producer.transaction_manager import TransactionManager

IMPLEMENTATION = "python"

Buffer = bytes | bytearray | memoryview
#: A record's key or value, or a header's value, as a caller gives it (str is sent as UTF-8).
Payload = str | Buffer | None
#: A record's headers as a caller gives them: (name, value) pairs (a bytes name is UTF-8).
Headers = Sequence[tuple[str | bytes, Payload]]

#: Per-record overhead estimate (varint lengths, attributes, deltas) for size accounting.
RECORD_OVERHEAD = 12

_new_tuple = tuple.__new__
_time_ns = time.time_ns
_get_ident = threading.get_ident


def to_bytes(v: object) -> Buffer | None:
    """A key, value or header value as bytes (str is UTF-8 encoded); TypeError for any other
    type."""
    if v is None or isinstance(v, (bytes, bytearray, memoryview)):
        return v
    if isinstance(v, str):
        return v.encode()
    raise TypeError(f"key and value must be bytes or str, not {type(v).__name__}")


class ProducerBatch:
    __slots__ = (
        "tp",
        "builder",
        "result",
        "created",
        "closed",
        "attempts",
        "size",
        "base_sequence",
        "retry_at",
        "payload",
        "append",
    )

    def __init__(self, tp: TopicPartition, builder: RecordBatchBuilder, now: float) -> None:
        self.tp = tp
        self.builder = builder
        #: ``append(timestamp, key, value, headers)``: the builder's record appender itself
        #: (compiled when the record walk is), called once per record sent.
        self.append = builder.records.append
        self.result = BatchResult(tp.topic, tp.partition)
        self.created = now
        self.closed = False
        self.attempts = 0
        self.size = 0
        self.base_sequence = NO_SEQUENCE
        self.retry_at = 0.0
        self.payload: bytes | None = None

    @property
    def record_count(self) -> int:
        return len(self.builder)

    def build(
        self, producer_id: int, producer_epoch: int, base_sequence: int, transactional: bool
    ) -> bytes:
        """The batch's bytes; built once and kept for retries (same sequence on the wire)."""
        if self.payload is None:
            b = self.builder
            b.producer_id = producer_id
            b.producer_epoch = producer_epoch
            b.base_sequence = base_sequence
            b.is_transactional = transactional
            self.base_sequence = base_sequence
            self.payload = b.build()
        return self.payload

    def rebuild_with(
        self, producer_id: int, producer_epoch: int, base_sequence: int, transactional: bool
    ) -> None:
        """Forget the built bytes so the next send uses a new producer id/epoch/sequence."""
        self.payload = None
        self.base_sequence = NO_SEQUENCE
        self.build(producer_id, producer_epoch, base_sequence, transactional)


class PartitionQueue:
    __slots__ = ("batches", "in_flight", "blocked", "next_sequence")

    def __init__(self) -> None:
        self.batches: deque[ProducerBatch] = deque()
        self.in_flight = 0
        self.blocked = False  # a batch failed: send nothing new until in-flight ones return
        self.next_sequence = 0


class AccumulatorCore:
    """The fields of the accumulator ``append`` reads and writes (set by ``RecordAccumulator``)."""

    batch_size: int
    buffer_memory: int
    bytes_used: int
    lock: threading.Lock
    queues: dict[TopicPartition, PartitionQueue]
    _wakeup: Callable[[], None]

    def _wait_for_room(self, size: int, max_block: float) -> None:
        raise NotImplementedError

    def _new_batch(self, tp: TopicPartition, q: PartitionQueue) -> ProducerBatch:
        raise NotImplementedError

    def append(
        self,
        tp: TopicPartition,
        timestamp: int,
        key: Buffer | None,
        value: Buffer | None,
        headers: Sequence[tuple[str, Buffer | None]],
        max_block: float,
    ) -> ProduceFuture:
        """Add a record to its partition's open batch; its future."""
        size = RECORD_OVERHEAD
        if key is None:
            ksize = -1
        else:
            ksize = len(key)
            size += ksize
        if value is None:
            vsize = -1
        else:
            vsize = len(value)
            size += vsize
        if headers:
            size += sum(len(k) + (len(v) if v is not None else 0) + 4 for k, v in headers)
        wake = False
        with self.lock:
            used = self.bytes_used
            if used + size > self.buffer_memory and used > 0:
                self._wait_for_room(size, max_block)
            q = self.queues.get(tp)
            if q is None:
                q = self.queues[tp] = PartitionQueue()
            batches = q.batches
            batch = batches[-1] if batches else None
            if (
                batch is None
                or batch.closed
                or (batch.size + size > self.batch_size and batch.size > 0)
            ):
                if batch is not None and not batch.closed:
                    wake = True  # the previous batch is full: ready now
                batch = self._new_batch(tp, q)
                if len(batches) == 1:
                    wake = True  # the sender must arm a linger timer
            index = batch.append(timestamp, key, value, headers)
            batch.size += size
            self.bytes_used += size
        if wake:
            self._wakeup()
        return _new_tuple(ProduceFuture, (batch.result, index, timestamp, ksize, vsize))


class ProducerCore:
    """The fields of the producer ``send_nowait`` reads (set by ``AIOProducer``)."""

    _closed: bool
    _fatal: BaseException | None
    transactional_id: str | None
    _txn: TransactionManager | None
    _tps: dict[str, list[TopicPartition]]
    _tps_version: int
    _client: KafkaClient
    _ignore_keys: bool
    _sticky: StickyPartitioner
    _max_block: float
    _loop_thread: int
    accumulator: AccumulatorCore

    def _check_can_send(self) -> None:
        raise NotImplementedError

    def _topic_partitions(self, topic: str) -> list[TopicPartition]:
        raise NotImplementedError

    def send_nowait(
        self,
        topic: str,
        value: Payload = None,
        key: Payload = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: Headers | None = None,
        *,
        block: bool = True,
    ) -> ProduceFuture:
        """Queue a record whose topic metadata is known (safe from any thread).

        When ``buffer.memory`` is full this waits up to ``max.block.ms`` for room, except on
        the producer's own event loop (or with ``block=False``), where it raises
        :class:`BufferFullError` at once: ``await send(...)`` waits there instead.
        """
        if self._closed or self._fatal is not None or self.transactional_id:
            self._check_can_send()
        k = key if key is None or isinstance(key, bytes) else to_bytes(key)
        v = value if value is None or isinstance(value, bytes) else to_bytes(value)
        hdrs: Sequence[tuple[str, Buffer | None]] = ()
        if headers:
            hdrs = [
                (hk.decode() if isinstance(hk, bytes) else hk, to_bytes(hv)) for hk, hv in headers
            ]
        tps = self._tps.get(topic)
        if tps is None or self._tps_version != self._client.cluster.version:
            tps = self._topic_partitions(topic)
        n = len(tps)
        if partition is None:
            if k is not None and not self._ignore_keys:
                partition = partition_for_key(k, n)
            else:
                partition = self._sticky.partition(
                    topic, self._client.cluster, n, (len(v) if v is not None else 0) + 12
                )
        elif not 0 <= partition < n:
            raise KafkaError(f"partition {partition} out of range for {topic!r} ({n} partitions)")
        if timestamp_ms is None:
            timestamp_ms = _time_ns() // 1_000_000
        tp = tps[partition]
        if self._txn is not None:
            self._txn.touch(tp)
        # Waiting for room is for other threads; on the loop it would stall the sender itself.
        wait = self._max_block if block and _get_ident() != self._loop_thread else 0.0
        return self.accumulator.append(tp, timestamp_ms, k, v, hdrs, wait)
