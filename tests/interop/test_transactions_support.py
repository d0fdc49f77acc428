"""Transactional producers and consumers of confluent-kafka, kafka-python and aiokafka behind
one small synchronous interface, for the transaction interop tests (no tests here).

Run as a script it is the consume-transform-produce worker of
``test_transactions_eos.py``::

    python test_transactions_support.py ctp CLIENT BOOTSTRAP IN OUT GROUP TXN_ID PAUSE_AT

It reads IN with a read_committed consumer (``assign()`` with GROUP for committed offsets),
and runs one transaction per TXN_SIZE records: the transformed records go to OUT and the
consumed offsets to the transaction (``send_offsets_to_transaction``). At batch PAUSE_AT
(0: never) it stops after flushing, before committing, prints ``PAUSED`` and waits to be
killed. It exits when it has committed everything up to the end of IN.
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any

__test__ = False

CLIENTS = ["confluent", "kafka-python", "aiokafka"]
BUDGET_S = 60.0
TXN_SIZE = 15  # records per transaction in the worker

TP = tuple[str, int]


# --- producers -----------------------------------------------------------------------------


class CkProducer:
    def __init__(self, bootstrap: str, transactional_id: str | None, **conf: Any) -> None:
        from confluent_kafka import Producer

        base: dict[str, Any] = {"bootstrap.servers": bootstrap, "linger.ms": 5}
        if transactional_id is not None:
            base["transactional.id"] = transactional_id
        base.update(conf)
        self.p = Producer(base)
        self.errors: list[Any] = []

    def _report(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.errors.append(err)

    def init(self) -> None:
        self.p.init_transactions(BUDGET_S)

    def begin(self) -> None:
        self.p.begin_transaction()

    def send(self, topic: str, partition: int, value: bytes, key: bytes | None = None) -> None:
        while True:
            try:
                self.p.produce(
                    topic, value=value, key=key, partition=partition, on_delivery=self._report
                )
                break
            except BufferError:
                self.p.poll(0.05)
        self.p.poll(0)

    def flush(self) -> None:
        assert self.p.flush(BUDGET_S) == 0
        assert self.errors == [], self.errors

    def send_offsets(self, offsets: dict[TP, int], group: str, consumer: Any) -> None:
        from confluent_kafka import TopicPartition

        self.p.send_offsets_to_transaction(
            [TopicPartition(t, p, o) for (t, p), o in offsets.items()],
            consumer.c.consumer_group_metadata(),
            BUDGET_S,
        )

    def commit(self) -> None:
        self.p.commit_transaction(BUDGET_S)

    def abort(self) -> None:
        self.p.abort_transaction(BUDGET_S)

    def close(self) -> None:
        from confluent_kafka import KafkaException

        try:
            self.p.flush(5)
        except KafkaException:  # a fenced producer reports its fatal error again
            pass

    @staticmethod
    def is_fenced(e: BaseException) -> bool:
        from confluent_kafka import KafkaError, KafkaException

        if not isinstance(e, KafkaException):
            return False
        err = e.args[0]
        return err.fatal() and err.code() in (
            KafkaError._FENCED,
            KafkaError.PRODUCER_FENCED,
            KafkaError.INVALID_PRODUCER_EPOCH,
        )


class KpProducer:
    def __init__(self, bootstrap: str, transactional_id: str | None, **conf: Any) -> None:
        from kafka import KafkaProducer

        base: dict[str, Any] = {"bootstrap_servers": bootstrap, "linger_ms": 5}
        if transactional_id is not None:
            base["transactional_id"] = transactional_id
        base.update(conf)
        self.p = KafkaProducer(**base)
        self.futures: list[Any] = []

    def init(self) -> None:
        self.p.init_transactions()

    def begin(self) -> None:
        self.p.begin_transaction()

    def send(self, topic: str, partition: int, value: bytes, key: bytes | None = None) -> None:
        self.futures.append(self.p.send(topic, value=value, key=key, partition=partition))

    def flush(self) -> None:
        self.p.flush(BUDGET_S)
        futures, self.futures = self.futures, []
        for f in futures:
            f.get(timeout=BUDGET_S)

    def send_offsets(self, offsets: dict[TP, int], group: str, consumer: Any) -> None:
        from kafka import TopicPartition
        from kafka.structs import OffsetAndMetadata

        self.p.send_offsets_to_transaction(
            {TopicPartition(t, p): OffsetAndMetadata(o, "", -1) for (t, p), o in offsets.items()},
            group,
        )

    def commit(self) -> None:
        self.p.commit_transaction()

    def abort(self) -> None:
        self.p.abort_transaction()

    def close(self) -> None:
        try:
            self.p.close(timeout=5)
        except Exception:  # noqa: BLE001 - a fenced producer may fail to close cleanly
            pass

    @staticmethod
    def is_fenced(e: BaseException) -> bool:
        from kafka.errors import InvalidProducerEpochError, ProducerFencedError

        return isinstance(e, ProducerFencedError | InvalidProducerEpochError)


class AioProducer:
    """aiokafka's producer driven on a private event loop. ``send`` only queues: the loop runs
    while whole batches of sends are awaited (``flush``, and before ``send_offsets``,
    ``commit`` and ``abort``), so the producer's background tasks run the way they do in an
    asyncio application rather than in short bursts between calls."""

    def __init__(self, bootstrap: str, transactional_id: str | None, **conf: Any) -> None:
        from aiokafka import AIOKafkaProducer

        self.loop = asyncio.new_event_loop()
        base: dict[str, Any] = {"bootstrap_servers": bootstrap, "linger_ms": 5}
        if transactional_id is not None:
            base["transactional_id"] = transactional_id
        base.update(conf)

        async def make() -> Any:
            return AIOKafkaProducer(**base)

        self.p = self.run(make())
        self.pending: list[tuple[str, int, bytes, bytes | None]] = []
        self.started = False

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def init(self) -> None:
        self.run(self.p.start())  # start() runs InitProducerId for a transactional producer
        self.started = True

    def begin(self) -> None:
        self.run(self.p.begin_transaction())

    def send(self, topic: str, partition: int, value: bytes, key: bytes | None = None) -> None:
        self.pending.append((topic, partition, value, key))

    def flush(self) -> None:
        if not self.started:
            self.init()
        pending, self.pending = self.pending, []

        async def drain() -> None:
            futures = [await self.p.send(t, value=v, key=k, partition=q) for t, q, v, k in pending]
            await asyncio.wait_for(asyncio.gather(*futures), BUDGET_S)

        self.run(drain())

    def send_offsets(self, offsets: dict[TP, int], group: str, consumer: Any) -> None:
        from aiokafka import TopicPartition

        self.flush()
        self.run(
            self.p.send_offsets_to_transaction(
                {TopicPartition(t, p): o for (t, p), o in offsets.items()}, group
            )
        )

    def commit(self) -> None:
        self.flush()
        self.run(self.p.commit_transaction())

    def abort(self) -> None:
        self.flush()
        self.run(self.p.abort_transaction())

    def close(self) -> None:
        if self.started:
            try:
                self.run(self.p.stop())
            except Exception:  # noqa: BLE001 - a fenced producer may fail to stop cleanly
                pass
        self.loop.close()

    @staticmethod
    def is_fenced(e: BaseException) -> bool:
        from aiokafka.errors import InvalidProducerEpoch, ProducerFenced

        return isinstance(e, ProducerFenced | InvalidProducerEpoch)


PRODUCERS = {"confluent": CkProducer, "kafka-python": KpProducer, "aiokafka": AioProducer}


def producer(client: str, bootstrap: str, transactional_id: str | None = None, **conf: Any) -> Any:
    return PRODUCERS[client](bootstrap, transactional_id, **conf)


# --- consumers (assign(); the group only holds committed offsets) --------------------------


class CkConsumer:
    def __init__(self, bootstrap: str, isolation: str, group: str | None) -> None:
        from confluent_kafka import Consumer

        self.c = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group or "txn-readers",
                "isolation.level": isolation,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )
        self.use_committed = group is not None

    def assign(self, tps: list[TP]) -> None:
        from confluent_kafka import OFFSET_BEGINNING, OFFSET_INVALID, TopicPartition

        start = OFFSET_INVALID if self.use_committed else OFFSET_BEGINNING
        self.c.assign([TopicPartition(t, p, start) for t, p in tps])

    def poll(self, timeout: float = 0.5) -> list[tuple[int, int, bytes | None]]:
        out = []
        for m in self.c.consume(1000, timeout):
            assert m.error() is None, m.error()
            out.append((m.partition(), m.offset(), m.value()))
        return out

    def close(self) -> None:
        self.c.close()


class KpConsumer:
    def __init__(self, bootstrap: str, isolation: str, group: str | None) -> None:
        from kafka import KafkaConsumer

        self.c = KafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=group,
            isolation_level=isolation,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )

    def assign(self, tps: list[TP]) -> None:
        from kafka import TopicPartition

        self.c.assign([TopicPartition(t, p) for t, p in tps])

    def poll(self, timeout: float = 0.5) -> list[tuple[int, int, bytes | None]]:
        out = []
        for _tp, msgs in self.c.poll(timeout_ms=int(timeout * 1000), max_records=5000).items():
            out.extend((m.partition, m.offset, m.value) for m in msgs)
        return sorted(out)

    def close(self) -> None:
        self.c.close()


class AioConsumer:
    def __init__(self, bootstrap: str, isolation: str, group: str | None) -> None:
        from aiokafka import AIOKafkaConsumer

        self.loop = asyncio.new_event_loop()

        async def make() -> Any:
            c = AIOKafkaConsumer(
                bootstrap_servers=bootstrap,
                group_id=group,
                isolation_level=isolation,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
            )
            await c.start()
            return c

        self.c = self.loop.run_until_complete(make())

    def assign(self, tps: list[TP]) -> None:
        from aiokafka import TopicPartition

        async def assign() -> None:
            self.c.assign([TopicPartition(t, p) for t, p in tps])

        self.loop.run_until_complete(assign())

    def poll(self, timeout: float = 0.5) -> list[tuple[int, int, bytes | None]]:
        batch = self.loop.run_until_complete(
            self.c.getmany(timeout_ms=int(timeout * 1000), max_records=5000)
        )
        return sorted((m.partition, m.offset, m.value) for msgs in batch.values() for m in msgs)

    def close(self) -> None:
        self.loop.run_until_complete(self.c.stop())
        self.loop.close()


CONSUMERS = {"confluent": CkConsumer, "kafka-python": KpConsumer, "aiokafka": AioConsumer}


def consumer(
    client: str,
    bootstrap: str,
    tps: list[TP],
    isolation: str = "read_committed",
    group: str | None = None,
) -> Any:
    c = CONSUMERS[client](bootstrap, isolation, group)
    c.assign(tps)
    return c


def read(
    client: str, bootstrap: str, tps: list[TP], isolation: str, count: int, linger: float = 1.0
) -> list[tuple[int, int, bytes | None]]:
    """(partition, offset, value) as ``client``'s consumer delivers them: until ``count``
    records came (however long that takes), then ``linger`` seconds more so that extra
    (duplicate) records show."""
    c = consumer(client, bootstrap, tps, isolation)
    try:
        out: list[tuple[int, int, bytes | None]] = []
        while len(out) < count:
            out += c.poll()
        end = time.monotonic() + linger
        while time.monotonic() < end:
            out += c.poll(0.2)
        return out
    finally:
        c.close()


def settled_end_offsets(bootstrap: str, topic: str, partition: int) -> tuple[int, int]:
    """``end_offsets`` once no transaction is open on the partition (the last stable offset
    has reached the high watermark). Kafka writes a transaction's markers after it has
    answered EndTxn, Gregor before it answers; a client's commit or abort has returned on
    both, and the markers follow on Kafka."""
    while True:
        hw, lso = end_offsets(bootstrap, topic, partition)
        if hw == lso:
            return hw, lso
        time.sleep(0.05)


def end_offsets(bootstrap: str, topic: str, partition: int) -> tuple[int, int]:
    """(latest offset for read_uncommitted, for read_committed), i.e. the high watermark and
    the last stable offset, from ListOffsets on the wire."""
    from interop_helpers import RawClient

    from gregor.protocol.messages.list_offsets import ListOffsetsRequest

    out = []
    for isolation in (0, 1):
        req = ListOffsetsRequest(
            replica_id=-1,
            isolation_level=isolation,
            topics=[
                ListOffsetsRequest.Topics(
                    name=topic,
                    partitions=[
                        ListOffsetsRequest.Topics.Partitions(
                            partition_index=partition, timestamp=-1
                        )
                    ],
                )
            ],
        )
        with RawClient(bootstrap) as c:
            p = c.request(req, 5).topics[0].partitions[0]
        assert p.error_code == 0
        out.append(p.offset)
    return out[0], out[1]


# --- the consume-transform-produce worker ---------------------------------------------------


def _offsets(bootstrap: str, topic: str, group: str) -> tuple[dict[int, int], dict[int, int]]:
    """(end offset, committed offset of ``group`` or 0) per partition, read with
    confluent-kafka whatever the worker's client (bookkeeping, not the thing under test)."""
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        md = c.list_topics(topic, timeout=BUDGET_S)
        parts = sorted(md.topics[topic].partitions)
        ends = {
            p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=BUDGET_S)[1] for p in parts
        }
        while True:
            try:
                committed = c.committed([TopicPartition(topic, p) for p in parts], timeout=BUDGET_S)
                break
            except KafkaException as e:
                # librdkafka hands these up instead of retrying: Kafka answers them while it
                # makes and loads __consumer_offsets, where Gregor has it before it answers.
                if e.args[0].code() not in (
                    KafkaError.NOT_COORDINATOR,
                    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                ):
                    raise
                time.sleep(0.1)
        return ends, {tp.partition: max(tp.offset, 0) for tp in committed}
    finally:
        c.close()


def ctp_worker(
    client: str, bootstrap: str, src: str, dst: str, group: str, txn_id: str, pause_at: int
) -> None:
    p = producer(client, bootstrap, txn_id)
    p.init()  # fences a previous incarnation and aborts its transaction first
    ends, done = _offsets(bootstrap, src, group)
    c = consumer(client, bootstrap, [(src, q) for q in ends], "read_committed", group)
    batch_no = 0
    print("STARTED", done, ends, flush=True)
    while any(done[q] < ends[q] for q in ends):
        polled = c.poll(0.5)
        for i in range(0, len(polled), TXN_SIZE):
            recs = polled[i : i + TXN_SIZE]
            batch_no += 1
            p.begin()
            offsets: dict[TP, int] = {}
            for part, offset, value in recs:
                p.send(dst, part, b"out-" + (value or b""))
                offsets[(src, part)] = offset + 1
            p.send_offsets(offsets, group, c)
            if batch_no == pause_at:
                p.flush()
                print("PAUSED", flush=True)
                time.sleep(3600)
            p.commit()
            for (_, part), nxt in offsets.items():
                done[part] = nxt
            print("COMMITTED", batch_no, len(recs), flush=True)
    print("DONE" if all(done[q] >= ends[q] for q in ends) else "GAVE UP", flush=True)
    c.close()
    p.close()


if __name__ == "__main__":
    if sys.argv[1] == "ctp":
        client, bootstrap, src, dst, group, txn_id, pause_at = sys.argv[2:9]
        ctp_worker(client, bootstrap, src, dst, group, txn_id, int(pause_at))
