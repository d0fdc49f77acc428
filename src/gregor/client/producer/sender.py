"""The producer's sender: one task on the event loop that turns queued batches into Produce
requests, and the producer id they carry.

Theory of operation. ``_run_sender`` waits until it is woken (a batch opened or filled, a
flush, a metadata update, a response) or a linger or retry time passes, then drains the
accumulator's ready batches of partitions it may send to (a known leader with a live
connection, below ``max.in.flight.requests.per.connection`` per broker and per partition, not
blocked by an earlier failure, registered with the transaction), groups them by leader and
sends one Produce request per broker (``_send_produce``). A batch is built once, with the
producer id, epoch and base sequence it keeps for every retry. Responses complete the batches'
results; a retriable error puts the batch back at the front of its queue in sequence order
and blocks the partition until its other in-flight batches are back; an idempotent producer
whose sequence the broker lost (or that failed a batch for good) takes a new producer id and
renumbers what is queued (``_reset_producer_id``).

:class:`Sender` is a base of :class:`~gregor.client.producer.producer.AIOProducer`, which sets
the fields declared here; the sender calls nothing of the producer's but these fields.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time

from gregor.client.core.client import STALE_METADATA, KafkaClient, spawn
from gregor.client.core.config import Config
from gregor.client.core.errors import KafkaConnectionError, KafkaTimeoutError, error_for_code
from gregor.client.core.metadata import TopicPartition
from gregor.client.producer.accumulator import PartitionQueue, ProducerBatch, RecordAccumulator
from gregor.client.producer.transaction_manager import TransactionManager, TxnState
from gregor.protocol.errors import ErrorCode, KafkaError
from gregor.protocol.messages import (
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProduceRequest,
    ProduceResponse,
)

log = logging.getLogger("gregor.client.producer")

_MAX_SEQUENCE = (1 << 31) - 1
_COORDINATOR_MOVED = (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE)


class Sender:
    """The sender's part of the producer (the fields are set by ``AIOProducer.__init__``)."""

    config: Config
    acks: int
    idempotence: bool
    transactional_id: str | None
    producer_id: int
    producer_epoch: int
    accumulator: RecordAccumulator
    _client: KafkaClient
    _txn: TransactionManager | None
    _closed: bool
    _loop: asyncio.AbstractEventLoop | None
    _loop_thread: int
    _wake_fut: asyncio.Future[None] | None
    _wake_pending: bool
    _node_in_flight: dict[int, int]
    _connecting: set[int]
    _need_pid_reset: bool
    _max_in_flight: int
    _max_block: float
    _request_timeout: float
    _delivery_timeout: float
    _retry_backoff: float
    _retry_backoff_max: float

    def _wakeup(self) -> None:
        loop = self._loop
        if loop is None:
            return
        if threading.get_ident() == self._loop_thread:
            self._set_wake()
        elif not self._wake_pending:
            self._wake_pending = True
            try:
                loop.call_soon_threadsafe(self._set_wake)
            except RuntimeError:  # loop closed
                pass

    def _set_wake(self) -> None:
        self._wake_pending = False
        f = self._wake_fut
        if f is not None and not f.done():
            f.set_result(None)

    async def _run_sender(self) -> None:
        loop = asyncio.get_running_loop()
        acc = self.accumulator
        while True:
            self._wake_fut = loop.create_future()
            now = time.monotonic()
            try:
                await self._housekeeping(now)
            except KafkaError as e:
                log.warning("producer housekeeping failed: %s", e)
            batches, next_time = acc.ready_batches(now, self._can_send)
            if batches:
                by_node: dict[int, list[ProducerBatch]] = {}
                cluster = self._client.cluster
                for b in batches:
                    by_node.setdefault(cluster.leader_for(b.tp), []).append(b)
                for node, bs in by_node.items():
                    self._node_in_flight[node] = self._node_in_flight.get(node, 0) + 1
                    for b in bs:
                        acc.queue(b.tp).in_flight += 1
                    spawn(self._send_produce(node, bs))
                continue  # more may be ready at once
            timeout = None if next_time is None else max(0.0, next_time - time.monotonic())
            if self._need_pid_reset or (self._txn is not None and self._txn.new):
                timeout = (
                    self._retry_backoff if timeout is None else min(timeout, self._retry_backoff)
                )
            if timeout is None or timeout > 0:
                handle = None if timeout is None else loop.call_later(timeout, self._set_wake)
                try:
                    await self._wake_fut
                finally:
                    if handle is not None:
                        handle.cancel()

    async def _housekeeping(self, now: float) -> None:
        acc = self.accumulator
        for b in acc.expired(now, self._delivery_timeout):
            self._fail_batch(
                b, KafkaTimeoutError(f"{b.tp}: record expired after delivery.timeout.ms")
            )
        if self._need_pid_reset and not any(self._node_in_flight.values()):
            await self._reset_producer_id()
        txn = self._txn
        if txn is not None and txn.new and txn.state is TxnState.IN_TRANSACTION:
            await txn.add_partitions()

    def _can_send(self, tp: TopicPartition, q: PartitionQueue) -> bool:
        if self._need_pid_reset:
            return False
        cluster = self._client.cluster
        node = cluster.leader_for(tp)
        if node < 0:
            self._client.request_update()
            return False
        if self._txn is not None and tp not in self._txn.partitions:
            return False
        if q.blocked:
            if q.in_flight:
                return False
            q.blocked = False
        # Up to max.in.flight.requests.per.connection batches of a partition in flight, as
        # Kafka's producer allows: with idempotence the broker keeps them in order; without it
        # a retried batch may land after a later one (set the limit to 1 to rule that out).
        if q.in_flight >= self._max_in_flight:
            return False
        if self._node_in_flight.get(node, 0) >= self._max_in_flight:
            return False
        if self._client.connection_nowait(node) is None:
            if node not in self._connecting:
                self._connecting.add(node)
                spawn(self._connect(node))
            return False
        return True

    async def _connect(self, node: int) -> None:
        try:
            await self._client.connection(node)
        except KafkaError as e:
            log.debug("connect to node %s failed: %s", node, e)
            await asyncio.sleep(self._retry_backoff)
        finally:
            self._connecting.discard(node)
            self._wakeup()

    async def _send_produce(self, node: int, batches: list[ProducerBatch]) -> None:
        acc = self.accumulator
        try:
            conn = self._client.connection_nowait(node)
            if conn is None:
                raise KafkaConnectionError(f"no connection to node {node}")
            topic_data: dict[str, list[ProduceRequest.TopicData.PartitionData]] = {}
            transactional = bool(self.transactional_id)
            for b in batches:
                if b.payload is None:
                    seq = -1
                    if self.idempotence:
                        q = acc.queue(b.tp)
                        seq = q.next_sequence
                        q.next_sequence = (seq + b.record_count) & _MAX_SEQUENCE
                    b.build(self.producer_id, self.producer_epoch, seq, transactional)
                b.attempts += 1
                topic_data.setdefault(b.tp.topic, []).append(
                    ProduceRequest.TopicData.PartitionData(index=b.tp.partition, records=b.payload)
                )
            req = ProduceRequest(
                transactional_id=self.transactional_id,
                acks=self.acks,
                timeout_ms=int(self._request_timeout * 1000),
                topic_data=[
                    ProduceRequest.TopicData(name=t, partition_data=pd)
                    for t, pd in topic_data.items()
                ],
            )
            max_version = self._txn.produce_max_version() if self._txn is not None else None
            version = conn.version(ProduceRequest.API_KEY, max_version, min_version=3)
            resp: ProduceResponse | None = await conn.send(req, version)
        except KafkaError as e:
            for b in batches:
                self._on_batch_error(b, e.code if hasattr(e, "code") else -1, e, None)
        else:
            if resp is None:  # acks=0
                for b in batches:
                    self._complete_batch(b, -1, -1)
            else:
                self._on_response(batches, resp)
        finally:
            self._node_in_flight[node] -= 1
            for b in batches:
                acc.queue(b.tp).in_flight -= 1
            self._wakeup()

    def _on_response(self, batches: list[ProducerBatch], resp: ProduceResponse) -> None:
        results: dict[TopicPartition, ProduceResponse.Responses.PartitionResponses] = {}
        for t in resp.responses:
            for p in t.partition_responses:
                results[TopicPartition(t.name, p.index)] = p
        endpoints = resp.node_endpoints
        cluster = self._client.cluster
        for b in batches:
            r = results.get(b.tp)
            if r is None:
                self._on_batch_error(
                    b, ErrorCode.UNKNOWN_SERVER_ERROR, None, "no result for partition"
                )
                continue
            code = r.error_code
            if code == 0:
                self._complete_batch(b, r.base_offset, r.log_append_time_ms)
            elif code == ErrorCode.DUPLICATE_SEQUENCE_NUMBER:
                self._complete_batch(b, r.base_offset, r.log_append_time_ms)
            else:
                cl = r.current_leader
                if cl.leader_id >= 0:
                    cluster.update_leader(
                        b.tp.topic, b.tp.partition, cl.leader_id, cl.leader_epoch, endpoints
                    )
                self._on_batch_error(b, code, None, r.error_message)

    def _complete_batch(self, b: ProducerBatch, base_offset: int, log_append_time: int) -> None:
        self.accumulator.release(b)
        b.result.complete(base_offset, log_append_time if log_append_time is not None else -1)

    def _fail_batch(self, b: ProducerBatch, err: BaseException) -> None:
        self.accumulator.release(b)
        b.result.complete(-1, -1, err)

    def _on_batch_error(
        self, b: ProducerBatch, code: int, exc: BaseException | None, message: str | None
    ) -> None:
        now = time.monotonic()
        if exc is None:
            exc = error_for_code(code)(message) if code else KafkaError(message)
        retriable = exc.retriable if isinstance(exc, KafkaError) else False
        q = self.accumulator.queue(b.tp)
        if self.idempotence and code in (
            ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
            ErrorCode.UNKNOWN_PRODUCER_ID,
        ):
            if q.blocked:
                retriable = True  # an earlier batch of this partition failed: resend in order
            elif not self.transactional_id:
                # The broker lost our producer state (or a batch failed for good before this
                # one): start a new producer id and resend with fresh sequences.
                self._need_pid_reset = True
                retriable = True
        if code in STALE_METADATA or isinstance(exc, KafkaConnectionError):
            self._client.request_update()
        expired = now - b.created >= self._delivery_timeout
        if retriable and not expired and b.attempts <= self.config["retries"] and not self._closed:
            q.blocked = True
            backoff = min(
                self._retry_backoff * (2 ** min(b.attempts - 1, 10)), self._retry_backoff_max
            )
            self.accumulator.requeue(b, now + backoff)
            return
        if self.idempotence and not self.transactional_id:
            self._need_pid_reset = True  # the sequence now has a gap
        if self._txn is not None:
            self._txn.fail()
        self._fail_batch(b, exc)

    # --- producer ids ---

    async def _init_producer_id(self) -> None:
        async def attempt() -> None:
            req = InitProducerIdRequest(
                transactional_id=self.transactional_id,
                transaction_timeout_ms=self.config["transaction.timeout.ms"],
                producer_id=self.producer_id,
                producer_epoch=self.producer_epoch,
            )
            if self._txn is not None:
                node = await self._txn.coordinator_node()
                conn = await self._client.connection(node)
            else:
                conn = await self._client.any_connection()
            resp: InitProducerIdResponse = await conn.send(req, conn.version(req.API_KEY))
            if resp.error_code:
                if self._txn is not None and resp.error_code in _COORDINATOR_MOVED:
                    self._txn.forget_coordinator()
                raise error_for_code(resp.error_code)()
            self.producer_id = resp.producer_id
            self.producer_epoch = resp.producer_epoch

        await self._client.with_retries(attempt, timeout=self._max_block)
        log.debug("producer id %s epoch %s", self.producer_id, self.producer_epoch)

    def _take_transaction_epoch(self, producer_id: int, producer_epoch: int) -> None:
        """A version 2 EndTxn bumped the epoch (or moved to a new producer id): the next
        transaction writes with it, every partition's sequence starting at 0 again (nothing
        is in flight: the transaction was flushed or aborted)."""
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        with self.accumulator.lock:
            for q in self.accumulator.queues.values():
                q.next_sequence = 0

    async def _reset_producer_id(self) -> None:
        self.producer_id = -1
        self.producer_epoch = -1
        await self._init_producer_id()
        acc = self.accumulator
        with acc.lock:
            for q in acc.queues.values():
                q.next_sequence = 0
                q.blocked = False
                seq = 0
                for b in q.batches:
                    if b.payload is not None:
                        b.rebuild_with(
                            self.producer_id, self.producer_epoch, seq, bool(self.transactional_id)
                        )
                        seq = (seq + b.record_count) & _MAX_SEQUENCE
                q.next_sequence = seq
        self._need_pid_reset = False
