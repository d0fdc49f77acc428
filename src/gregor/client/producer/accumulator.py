"""Per-partition batching for the producer.

Theory of operation. ``append`` (any thread, under one lock) adds a record to the open batch
at the tail of its partition's queue, opening a new one when the tail is full or closed. A
batch is *ready* when it is full, when it has waited ``linger.ms``, when a flush is asked for,
or when the producer is closing. The sender (on the event loop) ``drain``s ready batches of
partitions whose leader is known and which are not blocked, closing them so no more records
join. A batch that fails with a retriable error goes back to the front of its queue, in
sequence order, so retries keep the order records were sent in. ``buffer.memory`` bounds the
bytes of record data queued and in flight; ``append`` waits for room.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from gregor.client.core.metadata import TopicPartition
from gregor.client.producer._send_py import RECORD_OVERHEAD, PartitionQueue, ProducerBatch, to_bytes
from gregor.client.producer.fast_send import AccumulatorCore
from gregor.client.producer.futures import BatchResult
from gregor.protocol.records import RecordBatchBuilder

__all__ = ["RECORD_OVERHEAD", "PartitionQueue", "ProducerBatch", "RecordAccumulator", "to_bytes"]


class RecordAccumulator(AccumulatorCore):
    """``append`` (per record) is ``AccumulatorCore``'s (``producer.fast_send``)."""

    def __init__(
        self,
        *,
        batch_size: int,
        linger_ms: int,
        buffer_memory: int,
        compression: int,
        compression_level: int | None,
        wakeup: Callable[[], None],
    ) -> None:
        self.batch_size = batch_size
        self.linger = linger_ms / 1000
        self.buffer_memory = buffer_memory
        self.compression = compression
        self.compression_level = compression_level
        self.queues: dict[TopicPartition, PartitionQueue] = {}
        self.lock = threading.Lock()
        self.room = threading.Condition(self.lock)
        self.bytes_used = 0
        self.flushing = 0
        self.closing = False
        self.incomplete: set[ProducerBatch] = set()
        self._wakeup = wakeup

    def queue(self, tp: TopicPartition) -> PartitionQueue:
        q = self.queues.get(tp)
        if q is None:
            q = self.queues[tp] = PartitionQueue()
        return q

    def _new_batch(self, tp: TopicPartition, q: PartitionQueue) -> ProducerBatch:
        """Open a new batch at the tail of ``q`` (under the lock; ``append`` calls this)."""
        builder = RecordBatchBuilder(
            compression=self.compression, compression_level=self.compression_level
        )
        batch = ProducerBatch(tp, builder, time.monotonic())
        q.batches.append(batch)
        self.incomplete.add(batch)
        return batch

    def _wait_for_room(self, size: int, max_block: float) -> None:
        if max_block <= 0:
            from gregor.client.core.errors import BufferFullError

            raise BufferFullError(f"buffer.memory ({self.buffer_memory} bytes) is full")
        deadline = time.monotonic() + max_block
        while self.bytes_used + size > self.buffer_memory and self.bytes_used > 0:
            left = deadline - time.monotonic()
            if left <= 0:
                from gregor.client.core.errors import KafkaTimeoutError

                raise KafkaTimeoutError(f"buffer.memory full for {max_block:.1f}s")
            self.room.wait(min(left, 0.05))

    def release(self, batch: ProducerBatch) -> None:
        with self.lock:
            self.incomplete.discard(batch)
            self.bytes_used -= batch.size
            self.room.notify_all()

    def ready_batches(
        self, now: float, can_send: Callable[[TopicPartition, PartitionQueue], bool]
    ) -> tuple[list[ProducerBatch], float | None]:
        """Close and return the first ready batch of each sendable partition.

        Also returns the earliest time a not-yet-ready batch becomes ready (None if none).
        """
        out: list[ProducerBatch] = []
        next_time: float | None = None
        linger = self.linger
        force = self.flushing > 0 or self.closing
        with self.lock:
            for tp, q in self.queues.items():
                if not q.batches:
                    continue
                first = q.batches[0]
                if first.retry_at > now:
                    if next_time is None or first.retry_at < next_time:
                        next_time = first.retry_at
                    continue
                ready = (
                    force
                    or first.closed
                    or len(q.batches) > 1
                    or first.size >= self.batch_size
                    or now - first.created >= linger
                )
                if not ready:
                    t = first.created + linger
                    if next_time is None or t < next_time:
                        next_time = t
                    continue
                if not can_send(tp, q):
                    continue
                q.batches.popleft()
                first.closed = True
                out.append(first)
        return out, next_time

    def requeue(self, batch: ProducerBatch, retry_at: float) -> None:
        """Put a failed batch back at the front of its queue, in sequence order."""
        with self.lock:
            q = self.queue(batch.tp)
            batch.retry_at = retry_at
            i = 0
            for i, b in enumerate(q.batches):  # noqa: B007
                if not b.closed or b.base_sequence < 0 or b.base_sequence > batch.base_sequence:
                    break
            else:
                i = len(q.batches)
            q.batches.insert(i, batch)

    def expired(self, now: float, delivery_timeout: float) -> list[ProducerBatch]:
        """Queued batches older than ``delivery.timeout.ms`` (removed from their queues)."""
        out: list[ProducerBatch] = []
        with self.lock:
            for q in self.queues.values():
                while q.batches and now - q.batches[0].created >= delivery_timeout:
                    b = q.batches.popleft()
                    b.closed = True
                    out.append(b)
        return out

    def abort_all(self) -> list[ProducerBatch]:
        """Remove every queued (not in-flight) batch."""
        with self.lock:
            out = [b for q in self.queues.values() for b in q.batches]
            for q in self.queues.values():
                q.batches.clear()
        return out

    def has_unsent(self) -> bool:
        with self.lock:
            return any(q.batches for q in self.queues.values())

    def pending_results(self) -> list[BatchResult]:
        with self.lock:
            return [b.result for b in self.incomplete]

    def partitions_with_data(self) -> set[TopicPartition]:
        with self.lock:
            return {tp for tp, q in self.queues.items() if q.batches}
