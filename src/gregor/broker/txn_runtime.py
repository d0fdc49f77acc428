"""The asyncio shell around the transaction coordinator state machine.

Theory of operation. ``TransactionCoordinator`` (``gregor.coordinator``) does no I/O; this
runtime owns the rest, all on the broker's event loop (one owner for the coordinator's state
and for every log it appends to):

* ``call(method, ...)`` creates a future for a token, runs the coordinator method and
  *pumps*: each ``__transaction_state`` write in the outbox is appended to its partition at
  once (one node: appended = acknowledged by every replica) and its completion fed back; each
  marker request becomes a COMMIT/ABORT control batch appended to every partition of the
  transaction, with the results fed back; each reply completes its future. One pump usually
  runs a whole EndTxn (prepare record, markers, complete record) before the client hears back.
* A marker written to a ``__consumer_offsets`` partition also tells the group coordinator, so
  the transaction's pending offsets become committed (or are dropped) at that moment.
* One ``TimerHandle`` tracks the coordinator's earliest deadline (transaction timeouts, marker
  retries, transactional id expiry); when it fires the runtime ticks the coordinator and pumps.
* ``__transaction_state`` (``transaction.state.log.num.partitions`` partitions, compacted) is
  created on first use. At start, if it exists, a background task replays each partition
  into the coordinator; its ids answer COORDINATOR_LOAD_IN_PROGRESS until it is loaded, and
  loading finishes transactions found half-way (markers sent again) or starts their timeouts.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Callable
from typing import Any

from gregor.broker.internal_topics import cancel_task, replay_partitions
from gregor.broker.logging import log_event
from gregor.coordinator.transaction_coordinator import (
    MarkerWrite,
    TransactionCoordinator,
    TxnCoordinatorConfig,
    TxnLogWrite,
)
from gregor.protocol.errors import ErrorCode
from gregor.storage.errors import StorageError

log = logging.getLogger("gregor.broker.transactions")

TXN_TOPIC = "__transaction_state"
OFFSETS_TOPIC = "__consumer_offsets"
TXN_TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    "segment.bytes": "104857600",
    "compression.type": "uncompressed",
}

# Verification answers a producer should retry (KIP-890 maps coordinator trouble to a
# retriable produce error).
_RETRIABLE_VERIFY = frozenset({
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_COORDINATOR,
    ErrorCode.CONCURRENT_TRANSACTIONS,
})


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


class TxnRuntime:
    def __init__(self, broker: Any, clock: Callable[[], int] = wall_clock_ms) -> None:
        self.broker = broker
        self.clock = clock
        self.config = TxnCoordinatorConfig.from_props(broker.config.get)
        self.coordinator = TransactionCoordinator(self.config, self._generate_producer_id, clock)
        self._futures: dict[int, asyncio.Future[Any]] = {}
        self._tokens = itertools.count(1)
        self._timer: asyncio.TimerHandle | None = None
        self._timer_deadline: int | None = None
        self._load_task: asyncio.Task[None] | None = None

    def _generate_producer_id(self) -> int:
        return self.broker.producer_ids.generate()

    # --- lifecycle ---

    async def start(self) -> None:
        ts = self.broker.topic(TXN_TOPIC)
        if ts is None:
            return
        for p in ts.partitions:
            self.coordinator.begin_load(p.partition)
        self._load_task = asyncio.create_task(self._load_all([p.partition for p in ts.partitions]))

    async def stop(self) -> None:
        await cancel_task(self._load_task)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    async def _load_all(self, partitions: list[int]) -> None:
        started = time.monotonic()

        def complete(p: int) -> None:
            self.coordinator.complete_load(p, self._leader_epoch(p))
            self._pump()

        batches = await replay_partitions(
            self.broker, TXN_TOPIC, partitions, self.coordinator.load_batches, complete
        )
        log_event(
            log, "transactions.loaded", partitions=len(partitions), batches=batches,
            transactional_ids=len(self.coordinator.txns),
            ms=int((time.monotonic() - started) * 1000),
        )

    def _leader_epoch(self, partition: int) -> int:
        """The coordinator epoch: the leader epoch of the ``__transaction_state`` partition."""
        ts = self.broker.topic(TXN_TOPIC)
        if ts is None or partition >= len(ts.partitions):
            return 0
        return max(ts.partitions[partition].leader_epoch, 0)

    # --- the state topic ---

    def ensure_topic(self) -> None:
        """Create ``__transaction_state`` on first use; new partitions are empty, so they are
        active at once."""
        if self.broker.topic(TXN_TOPIC) is not None:
            return
        code, message, ts = self.broker.create_topic(
            TXN_TOPIC,
            self.config.num_partitions,
            int(self.broker.config.get("transaction.state.log.replication.factor", 1)),
            configs=dict(TXN_TOPIC_CONFIGS),
        )
        if code or ts is None:
            log_event(log, "transactions.state_topic_failed", logging.ERROR, error=code, message=message)
            return
        for p in ts.partitions:
            self.coordinator.begin_load(p.partition)
            self.coordinator.complete_load(p.partition, self._leader_epoch(p.partition))
        self._pump()

    def coordinator_error(self, transactional_id: str) -> int:
        """FindCoordinator for a transactional id: 0 or the error to answer."""
        self.ensure_topic()
        return self.coordinator.partition_error(transactional_id)

    # --- requests ---

    async def call(self, method: Callable[..., None], *args: Any) -> Any:
        """Run a coordinator request method and wait for its result."""
        self.ensure_topic()
        token = next(self._tokens)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._futures[token] = fut
        try:
            method(token, *args)
        finally:
            self._pump()
        try:
            return await fut
        finally:
            self._futures.pop(token, None)

    def verify_produce(
        self, transactional_id: str, topic: str, partition: int, producer_id: int, producer_epoch: int
    ) -> int:
        """KIP-890 verification of a transactional batch that starts a transaction on a
        partition: 0 if the partition was added to the producer's transaction, else the
        Produce error to answer."""
        tp = (topic, partition)
        code = self.coordinator.verify(transactional_id, producer_id, producer_epoch, [tp])[tp]
        if code in _RETRIABLE_VERIFY:
            return ErrorCode.NOT_ENOUGH_REPLICAS
        if code == ErrorCode.PRODUCER_FENCED:
            return ErrorCode.INVALID_PRODUCER_EPOCH
        return code

    # --- the pump ---

    def _pump(self) -> None:
        coord = self.coordinator
        while coord.has_output:
            writes, markers, replies = coord.take()
            for w in writes:
                self._append(w)
            for m in markers:
                self._write_markers(m)
            for r in replies:
                fut = self._futures.pop(r.token, None)
                if fut is not None and not fut.done():
                    fut.set_result(r.result)
        self._reschedule()

    def _append(self, w: TxnLogWrite) -> None:
        ts = self.broker.topic(TXN_TOPIC)
        plog = self.broker.get_log(TXN_TOPIC, w.partition)
        if ts is None or plog is None or w.partition >= len(ts.partitions):
            self.coordinator.write_complete(w.id, ErrorCode.NOT_LEADER_OR_FOLLOWER)
            return
        try:
            plog.append(bytearray(w.batch), leader_epoch=ts.partitions[w.partition].leader_epoch)
        except StorageError as e:
            code = e.error_code if e.error_code > 0 else ErrorCode.UNKNOWN_SERVER_ERROR
            log_event(log, "transactions.append_failed", logging.ERROR, partition=w.partition, error=str(e))
            self.coordinator.write_complete(w.id, code)
            return
        plog.update_high_watermark(plog.log_end_offset)
        self.broker.watchers.notify((TXN_TOPIC, w.partition))
        self.coordinator.write_complete(w.id, 0)

    def _write_markers(self, m: MarkerWrite) -> None:
        results = {
            tp: self.write_marker(tp[0], tp[1], m.producer_id, m.producer_epoch, m.commit, m.coordinator_epoch)
            for tp in m.partitions
        }
        self.coordinator.markers_complete(m.id, results)

    def write_marker(
        self, topic: str, partition: int, producer_id: int, producer_epoch: int, commit: bool,
        coordinator_epoch: int,
    ) -> int:
        """Append a COMMIT/ABORT marker to one partition; returns an error code."""
        ts = self.broker.topic(topic)
        if ts is None or not 0 <= partition < len(ts.partitions):
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        plog = self.broker.get_log(topic, partition)
        if plog is None:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        try:
            plog.append_end_txn_marker(
                producer_id, producer_epoch, commit=commit, coordinator_epoch=coordinator_epoch,
                leader_epoch=ts.partitions[partition].leader_epoch,
            )
        except StorageError as e:
            log_event(log, "transactions.marker_failed", logging.WARNING, topic=topic,
                      partition=partition, producer_id=producer_id, error=str(e))
            return e.error_code if e.error_code > 0 else ErrorCode.UNKNOWN_SERVER_ERROR
        plog.update_high_watermark(plog.log_end_offset)
        self.broker.watchers.notify((topic, partition))
        if topic == OFFSETS_TOPIC:
            self.broker.groups.coordinator.complete_txn_offsets(partition, producer_id, commit)
        return 0

    def _reschedule(self) -> None:
        deadline = self.coordinator.next_deadline()
        if deadline == self._timer_deadline and self._timer is not None:
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._timer_deadline = deadline
        if deadline is None:
            return
        delay = max(deadline - self.clock(), 0) / 1000.0
        self._timer = asyncio.get_running_loop().call_later(delay, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_deadline = None
        try:
            self.coordinator.tick()
        except Exception:  # noqa: BLE001 - a timer bug must not stop the loop's timers
            log.exception("transaction coordinator timer failed")
        self._pump()
