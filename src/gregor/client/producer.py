"""The asyncio producer: partitioning, batching, ordered retries, idempotence, transactions.

Theory of operation. ``send`` picks a partition (explicit, murmur2 of the key, or sticky for
null keys), appends the record to the :class:`RecordAccumulator` and returns a
:class:`ProduceFuture`; nothing else happens on the caller's path, so the synchronous facade can
call :meth:`AIOProducer.send_nowait` straight from the user's thread.

A single sender task on the event loop drains ready batches (full, lingered, or flushed),
groups them by partition leader and sends one Produce request per broker, keeping at most
``max.in.flight.requests.per.connection`` requests outstanding per broker and as many batches
of one partition. Order per partition: with idempotence each batch carries its producer id,
epoch and base sequence, and a failed batch blocks its partition until the batches sent after
it have come back too, then everything goes out again in sequence order (the broker rejects
a sequence gap, so nothing is written twice or out of order). Without idempotence a retried
batch may land after a later one, as with Kafka's producer; ``max.in.flight`` 1 rules it out.

Idempotence is on by default (Kafka's default since 3.0): the producer asks any broker for a
producer id with InitProducerId. When the broker has no InitProducerId and the setting was
left at its default, the producer runs without it (and logs that); asking for it explicitly
then fails. A ``transactional.id`` makes the producer transactional: the id comes from the
transaction coordinator, partitions join the transaction (AddPartitionsToTxn) before their
first batch is sent, and commit/abort end it with EndTxn.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from gregor.client.accumulator import PartitionQueue, ProducerBatch, RecordAccumulator
from gregor.client.config import Config
from gregor.client.core import STALE_METADATA, KafkaClient, spawn
from gregor.client.errors import (
    BufferFullError,
    ConfigError,
    IllegalStateError,
    KafkaConnectionError,
    KafkaTimeoutError,
    UnsupportedForBrokerError,
    error_for_code,
)
from gregor.client.fast_send import ProducerCore
from gregor.client.futures import ProduceFuture, RecordMetadata
from gregor.client.metadata import TopicPartition
from gregor.client.partitioner import StickyPartitioner
from gregor.client.transactions import TransactionHandle, TransactionManager, TxnState
from gregor.protocol.errors import ErrorCode, KafkaError
from gregor.protocol.messages import (
    InitProducerIdRequest,
    ProduceRequest,
)


class NoTopicMetadataError(KafkaTimeoutError):
    """``send_nowait`` for a topic whose partitions are not known yet (``send`` waits for them)."""


log = logging.getLogger("gregor.client.producer")

COMPRESSION_TYPES = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
_ACKS = {"all": -1, "-1": -1, "0": 0, "1": 1}
_MAX_SEQUENCE = (1 << 31) - 1

__all__ = ["AIOProducer", "ProduceFuture", "RecordMetadata", "COMPRESSION_TYPES"]

_COORDINATOR_MOVED = (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE)


class AIOProducer(ProducerCore):
    """An asyncio Kafka producer. ``async with AIOProducer({...}) as p: await p.send(...)``.

    ``send_nowait`` (per record) is ``ProducerCore``'s (``client.fast_send``)."""

    accumulator: RecordAccumulator

    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        self.config = cfg = Config("producer", config, **kwargs)
        acks = _ACKS.get(str(cfg["acks"]).lower())
        if acks is None:
            raise ConfigError(f"acks must be all, -1, 0 or 1, got {cfg['acks']!r}")
        self.acks = acks
        codec = COMPRESSION_TYPES.get(str(cfg["compression.type"]).lower())
        if codec is None:
            raise ConfigError(f"unknown compression.type {cfg['compression.type']!r}")
        self.transactional_id: str | None = cfg["transactional.id"]
        idem = cfg["enable.idempotence"]
        explicit = "enable.idempotence" in cfg.explicit
        if self.transactional_id and not idem:
            if explicit:
                raise ConfigError("a transactional producer needs enable.idempotence=true")
            idem = True
        conflicts = acks != -1 or cfg["max.in.flight.requests.per.connection"] > 5 or cfg["retries"] == 0
        if idem and conflicts:
            if explicit or self.transactional_id:
                raise ConfigError(
                    "enable.idempotence needs acks=all, retries > 0 and "
                    "max.in.flight.requests.per.connection <= 5"
                )
            idem = False
        self.idempotence = idem
        self._idempotence_explicit = explicit or bool(self.transactional_id)
        level = cfg["compression.level"]
        self._client = KafkaClient(cfg)
        self._wake_fut: asyncio.Future[None] | None = None
        self._wake_pending = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        self.accumulator = RecordAccumulator(
            batch_size=cfg["batch.size"],
            linger_ms=cfg["linger.ms"],
            buffer_memory=cfg["buffer.memory"],
            compression=codec,
            compression_level=None if level is None or level < 0 else level,
            wakeup=self._wakeup,
        )
        self._sticky = StickyPartitioner(cfg["batch.size"])
        self._tps: dict[str, list[TopicPartition]] = {}
        self._tps_version = -1
        self._ignore_keys = cfg["partitioner.ignore.keys"]
        self._sender: asyncio.Task[None] | None = None
        self._node_in_flight: dict[int, int] = {}
        self._connecting: set[int] = set()
        self._max_in_flight = cfg["max.in.flight.requests.per.connection"]
        self._request_timeout = cfg["request.timeout.ms"] / 1000
        self._delivery_timeout = cfg["delivery.timeout.ms"] / 1000
        self._retry_backoff = cfg["retry.backoff.ms"] / 1000
        self._retry_backoff_max = cfg["retry.backoff.max.ms"] / 1000
        self._max_block = cfg["max.block.ms"] / 1000
        self.producer_id = -1
        self.producer_epoch = -1
        self._need_pid_reset = False
        self._closed = False
        self._started = False
        self._fatal: BaseException | None = None
        self._txn: TransactionManager | None = None
        if self.transactional_id:
            self._txn = TransactionManager(
                self.transactional_id, self._client, lambda: (self.producer_id, self.producer_epoch), self._max_block,
                set_ids=self._take_transaction_epoch,
            )

    # --- lifecycle ---

    async def start(self) -> AIOProducer:
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        await self._client.start()
        if self.idempotence and not self.transactional_id:
            conn = await self._client.any_connection()
            if not conn.supports(InitProducerIdRequest.API_KEY):
                if self._idempotence_explicit:
                    raise UnsupportedForBrokerError(
                        "enable.idempotence=true but the broker has no InitProducerId"
                    )
                log.info("broker has no InitProducerId: producing without idempotence")
                self.idempotence = False
            else:
                await self._init_producer_id()
        self._client.listeners.append(self._wakeup)
        self._sender = spawn(self._run_sender())
        self._started = True
        return self

    async def __aenter__(self) -> AIOProducer:
        return await self.start()

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def close(self, timeout: float | None = None) -> None:
        """Send everything queued (up to ``timeout``), then stop."""
        if self._closed:
            return
        try:
            if self._started:
                await self.flush(timeout)
        except KafkaTimeoutError:
            pass
        finally:
            self._closed = True
            self.accumulator.closing = True
            self._wakeup()
            if self._sender is not None:
                self._sender.cancel()
                try:
                    await self._sender
                except BaseException:
                    pass
            err = KafkaConnectionError("producer closed")
            for b in self.accumulator.abort_all():
                self._fail_batch(b, err)
            for r in self.accumulator.pending_results():
                r.complete(-1, -1, err)
            await self._client.close()

    @property
    def client(self) -> KafkaClient:
        return self._client

    async def partitions_for(self, topic: str) -> list[int]:
        return await self._client.wait_for_metadata(topic, self._max_block)

    # --- sending ---

    async def send(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: Sequence[tuple[str, Any]] | None = None,
    ) -> ProduceFuture:
        """Queue a record; the returned future resolves when the broker has it."""
        if self._client.cluster.partitions_for(topic) is None:
            await self._client.wait_for_metadata(topic, self._max_block)
        deadline = time.monotonic() + self._max_block
        while True:
            try:
                return self.send_nowait(topic, value, key, partition, timestamp_ms, headers, block=False)
            except BufferFullError:
                if time.monotonic() >= deadline:
                    raise KafkaTimeoutError(f"buffer.memory full for {self._max_block:.1f}s") from None
                await asyncio.sleep(0.001)

    async def send_and_wait(self, topic: str, value: Any = None, key: Any = None, **kw: Any) -> RecordMetadata:
        fut = await self.send(topic, value, key, **kw)
        return await fut

    def _check_can_send(self) -> None:
        if self._closed:
            raise IllegalStateError("producer is closed")
        if self._fatal is not None:
            raise self._fatal
        if self._txn is not None:
            self._txn.check_can_send()

    def _topic_partitions(self, topic: str) -> list[TopicPartition]:
        """TopicPartition objects of a topic, made once per metadata version (not per record)."""
        cluster = self._client.cluster
        if self._tps_version != cluster.version:
            self._tps = {}
            self._tps_version = cluster.version
        tm = cluster.topics.get(topic)
        if tm is None or not tm.partitions:
            raise NoTopicMetadataError(f"no metadata for topic {topic!r}")
        tps = [TopicPartition(topic, p) for p in range(len(tm.partitions))]
        self._tps[topic] = tps
        return tps

    async def flush(self, timeout: float | None = None) -> None:
        """Send every queued record and wait for all outstanding deliveries."""
        acc = self.accumulator
        acc.flushing += 1
        self._wakeup()
        try:
            deadline = None if timeout is None else time.monotonic() + timeout
            for r in acc.pending_results():
                w = r.waiter()
                if deadline is None:
                    await w
                else:
                    try:
                        await asyncio.wait_for(w, max(0.0, deadline - time.monotonic()))
                    except TimeoutError:
                        raise KafkaTimeoutError(f"flush did not finish in {timeout}s") from None
        finally:
            acc.flushing -= 1

    # --- the sender ---

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
                timeout = self._retry_backoff if timeout is None else min(timeout, self._retry_backoff)
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
            self._fail_batch(b, KafkaTimeoutError(f"{b.tp}: record expired after delivery.timeout.ms"))
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
                    ProduceRequest.TopicData(name=t, partition_data=pd) for t, pd in topic_data.items()
                ],
            )
            max_version = self._txn.produce_max_version() if self._txn is not None else None
            version = conn.version(ProduceRequest.API_KEY, max_version, min_version=3)
            resp = await conn.send(req, version)
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

    def _on_response(self, batches: list[ProducerBatch], resp: Any) -> None:
        results: dict[TopicPartition, Any] = {}
        for t in resp.responses:
            for p in t.partition_responses:
                results[TopicPartition(t.name, p.index)] = p
        endpoints = resp.node_endpoints
        cluster = self._client.cluster
        for b in batches:
            p = results.get(b.tp)
            if p is None:
                self._on_batch_error(b, ErrorCode.UNKNOWN_SERVER_ERROR, None, "no result for partition")
                continue
            code = p.error_code
            if code == 0:
                self._complete_batch(b, p.base_offset, p.log_append_time_ms)
            elif code == ErrorCode.DUPLICATE_SEQUENCE_NUMBER:
                self._complete_batch(b, p.base_offset, p.log_append_time_ms)
            else:
                cl = p.current_leader
                if cl.leader_id >= 0:
                    cluster.update_leader(b.tp.topic, b.tp.partition, cl.leader_id, cl.leader_epoch, endpoints)
                self._on_batch_error(b, code, None, p.error_message)

    def _complete_batch(self, b: ProducerBatch, base_offset: int, log_append_time: int) -> None:
        self.accumulator.release(b)
        b.result.complete(base_offset, log_append_time if log_append_time is not None else -1)

    def _fail_batch(self, b: ProducerBatch, err: BaseException) -> None:
        self.accumulator.release(b)
        b.result.complete(-1, -1, err)

    def _on_batch_error(self, b: ProducerBatch, code: int, exc: BaseException | None, message: str | None) -> None:
        now = time.monotonic()
        if exc is None:
            exc = error_for_code(code)(message) if code else KafkaError(message)
        retriable = exc.retriable if isinstance(exc, KafkaError) else False
        q = self.accumulator.queue(b.tp)
        if self.idempotence and code in (ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, ErrorCode.UNKNOWN_PRODUCER_ID):
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
            backoff = min(self._retry_backoff * (2 ** min(b.attempts - 1, 10)), self._retry_backoff_max)
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
            resp = await conn.send(req, conn.version(req.API_KEY))
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
                        b.rebuild_with(self.producer_id, self.producer_epoch, seq, bool(self.transactional_id))
                        seq = (seq + b.record_count) & _MAX_SEQUENCE
                q.next_sequence = seq
        self._need_pid_reset = False

    # --- transactions (the state and the coordinator calls are the TransactionManager's) ---

    def _require_transactional(self) -> TransactionManager:
        if self._txn is None:
            raise IllegalStateError("this producer has no transactional.id")
        return self._txn

    async def init_transactions(self) -> None:
        txn = self._require_transactional()
        await self._init_producer_id()
        txn.ready()

    def begin_transaction(self) -> None:
        self._require_transactional().begin()

    async def send_offsets_to_transaction(
        self,
        offsets: Mapping[TopicPartition, int],
        group: Any,
    ) -> None:
        """Commit consumer offsets as part of the transaction.

        ``group`` is a group id or a consumer's group metadata (``consumer.group_metadata()``,
        with generation and member id, which lets the coordinator fence zombies).
        """
        await self._require_transactional().send_offsets(offsets, group)

    def transaction_handle(self) -> TransactionHandle:
        """The open transaction's (transactional id, producer id, epoch), for another process to
        end with ``AdminClient.end_transactions``; ``flush()`` first, and do not end it here."""
        return self._require_transactional().handle()

    async def commit_transaction(self) -> None:
        txn = self._require_transactional()
        txn.check_commit()
        await self.flush()
        txn.check_commit()
        await txn.end(True)

    async def abort_transaction(self) -> None:
        txn = self._require_transactional()
        txn.check_abort()
        err = KafkaError("transaction aborted")
        for b in self.accumulator.abort_all():
            self._fail_batch(b, err)
        for r in self.accumulator.pending_results():
            await r.waiter()
        await txn.end(False)
