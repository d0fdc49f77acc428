"""The asyncio producer: partitioning, batching, ordered retries, idempotence, transactions.

Theory of operation. ``send`` picks a partition (explicit, murmur2 of the key, or sticky for
null keys), appends the record to the :class:`RecordAccumulator` and returns a
:class:`ProduceFuture`; nothing else happens on the caller's path, so the synchronous facade can
call :meth:`AIOProducer.send_nowait` straight from the user's thread.

A single sender task on the event loop (:mod:`gregor.client.producer.sender`) drains ready
batches (full, lingered, or flushed), groups them by partition leader and sends one Produce
request per broker, keeping at most ``max.in.flight.requests.per.connection`` requests
outstanding per broker and as many batches of one partition. Order per partition: with
idempotence each batch carries its producer id, epoch and base sequence, and a failed batch
blocks its partition until the batches sent after it have come back too, then everything goes
out again in sequence order (the broker rejects a sequence gap, so nothing is written twice or
out of order). Without idempotence a retried batch may land after a later one, as with Kafka's
producer; ``max.in.flight`` 1 rules it out.

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
from collections.abc import Mapping

from gregor.client.core.client import KafkaClient, spawn
from gregor.client.core.config import Config, Settings, SettingValue
from gregor.client.core.errors import (
    BufferFullError,
    ConfigError,
    IllegalStateError,
    KafkaConnectionError,
    KafkaTimeoutError,
    UnsupportedForBrokerError,
)
from gregor.client.core.metadata import TopicPartition
from gregor.client.producer._send_py import Headers, Payload
from gregor.client.producer.accumulator import RecordAccumulator
from gregor.client.producer.fast_send import ProducerCore
from gregor.client.producer.futures import ProduceFuture, RecordMetadata
from gregor.client.producer.partitioner import StickyPartitioner
from gregor.client.producer.sender import Sender
from gregor.client.producer.transaction_manager import (
    GroupMetadata,
    TransactionHandle,
    TransactionManager,
)
from gregor.protocol.errors import KafkaError
from gregor.protocol.messages import (
    InitProducerIdRequest,
)


class NoTopicMetadataError(KafkaTimeoutError):
    """``send_nowait`` for a topic whose partitions are not known yet (``send`` waits for them)."""


log = logging.getLogger("gregor.client.producer")

COMPRESSION_TYPES = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
_ACKS = {"all": -1, "-1": -1, "0": 0, "1": 1}

__all__ = ["AIOProducer", "ProduceFuture", "RecordMetadata", "COMPRESSION_TYPES"]


class AIOProducer(Sender, ProducerCore):
    """An asyncio Kafka producer. ``async with AIOProducer({...}) as p: await p.send(...)``.

    ``send_nowait`` (per record) is ``ProducerCore``'s (``producer.fast_send``); the sender task
    and the producer id are :class:`~gregor.client.producer.sender.Sender`'s."""

    accumulator: RecordAccumulator

    def __init__(self, config: Settings | None = None, **kwargs: SettingValue) -> None:
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
        conflicts = (
            acks != -1 or cfg["max.in.flight.requests.per.connection"] > 5 or cfg["retries"] == 0
        )
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
                self.transactional_id,
                self._client,
                lambda: (self.producer_id, self.producer_epoch),
                self._max_block,
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

    async def __aexit__(self, *exc: object) -> None:
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
        value: Payload = None,
        key: Payload = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: Headers | None = None,
    ) -> ProduceFuture:
        """Queue a record; the returned future resolves when the broker has it."""
        if self._client.cluster.partitions_for(topic) is None:
            await self._client.wait_for_metadata(topic, self._max_block)
        deadline = time.monotonic() + self._max_block
        while True:
            try:
                return self.send_nowait(
                    topic, value, key, partition, timestamp_ms, headers, block=False
                )
            except BufferFullError:
                if time.monotonic() >= deadline:
                    raise KafkaTimeoutError(
                        f"buffer.memory full for {self._max_block:.1f}s"
                    ) from None
                await asyncio.sleep(0.001)

    async def send_and_wait(
        self,
        topic: str,
        value: Payload = None,
        key: Payload = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: Headers | None = None,
    ) -> RecordMetadata:
        fut = await self.send(topic, value, key, partition, timestamp_ms, headers)
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
        group: str | GroupMetadata,
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
