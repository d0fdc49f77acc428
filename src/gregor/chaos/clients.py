"""One face on four Kafka client libraries: confluent-kafka, kafka-python, aiokafka, Gregor's.

A worker process uses one ``ClientAdapter``: an idempotent producer (transactional when the
slot is), and a consumer in the slot's group with ``isolation.level=read_committed``,
``auto.offset.reset=earliest`` and no auto-commit. Every method blocks until the library says
how it went and raises on any error; the worker turns errors into outcomes. Timeouts are short
so that an operation ends well within the harness's own timeout. ``epoch`` counts the
consumer's assignment changes (rebalance callbacks, ``assign``, ``seek``): the checker holds a
consumer to monotonic, gap-free reads only within one epoch.
"""

from __future__ import annotations

import asyncio
from typing import Any

from gregor.chaos.workload import key_of, topic_partition, topics

__all__ = ["CLIENTS", "ClientAdapter", "make_client"]

REQUEST_TIMEOUT_MS = 5000
DELIVERY_TIMEOUT_MS = 15000
TRANSACTION_TIMEOUT_MS = 15000
SESSION_TIMEOUT_MS = 6000
POLL_TIMEOUT_S = 1.0
MAX_RECORDS = 64


class ClientAdapter:
    name = ""

    def __init__(
        self, bootstrap: str, *, txn_id: str | None, group: str, keys: int, client_id: str
    ) -> None:
        self.bootstrap = bootstrap
        self.txn_id = txn_id
        self.group = group
        self.keys = keys
        self.client_id = client_id
        self.epoch = 0

    def bump(self, *_: Any) -> None:
        self.epoch += 1

    def open(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def send(self, key: int, value: int) -> int:
        """Send ``value`` to ``key`` and wait for the acknowledgement; its offset."""
        raise NotImplementedError

    def begin(self) -> None:
        raise NotImplementedError

    def send_offsets(self, offsets: dict[int, int]) -> None:
        raise NotImplementedError

    def commit_txn(self) -> None:
        raise NotImplementedError

    def abort_txn(self) -> None:
        raise NotImplementedError

    def assign(self, keys: list[int]) -> None:
        raise NotImplementedError

    def subscribe(self, keys: list[int]) -> None:
        raise NotImplementedError

    def poll(self) -> list[tuple[int, int, int]]:
        """One poll: (key, offset, value) of each record returned, in order."""
        raise NotImplementedError

    def commit(self, offsets: dict[int, int]) -> None:
        raise NotImplementedError

    def committed(self, keys: list[int]) -> dict[int, int | None]:
        raise NotImplementedError

    def seek(self, offsets: dict[int, int | None]) -> None:
        raise NotImplementedError


def _record(topic: Any, partition: Any, offset: Any, value: Any) -> tuple[int, int, int]:
    return key_of(str(topic), int(partition)), int(offset), int(value or b"-1")


class ConfluentClient(ClientAdapter):
    name = "confluent"

    def open(self) -> None:
        import confluent_kafka as ck

        self.ck = ck
        conf: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap,
            "client.id": self.client_id,
            "acks": "all",
            "enable.idempotence": True,
            "request.timeout.ms": REQUEST_TIMEOUT_MS,
            "message.timeout.ms": DELIVERY_TIMEOUT_MS,
            "linger.ms": 1,
            "log_level": 4,
        }
        if self.txn_id:
            conf.update(
                {"transactional.id": self.txn_id, "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS}
            )
        self.producer = ck.Producer(conf)
        if self.txn_id:
            self.producer.init_transactions(20)
        self.consumer = ck.Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "client.id": self.client_id,
                "group.id": self.group,
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "auto.offset.reset": "earliest",
                "session.timeout.ms": SESSION_TIMEOUT_MS,
                "heartbeat.interval.ms": 1000,
                "max.poll.interval.ms": 60000,
                "enable.partition.eof": False,
                "log_level": 4,
                "partition.assignment.strategy": "roundrobin",
            }
        )

    def close(self) -> None:
        self.consumer.close()
        self.producer.flush(2)

    def _tp(self, key: int, offset: int | None = None) -> Any:
        t, p = topic_partition(key)
        return (
            self.ck.TopicPartition(t, p) if offset is None else self.ck.TopicPartition(t, p, offset)
        )

    def send(self, key: int, value: int) -> int:
        got: list[Any] = []
        t, p = topic_partition(key)
        self.producer.produce(
            t,
            str(value).encode(),
            str(key).encode(),
            partition=p,
            on_delivery=lambda err, msg: got.append((err, msg)),
        )
        self.producer.flush(DELIVERY_TIMEOUT_MS / 1000 + 5)
        if not got:
            raise TimeoutError("no delivery report")
        err, msg = got[0]
        if err is not None:
            raise RuntimeError(f"delivery failed: {err}")
        return int(msg.offset())

    def begin(self) -> None:
        self.producer.begin_transaction()

    def send_offsets(self, offsets: dict[int, int]) -> None:
        self.producer.send_offsets_to_transaction(
            [self._tp(k, o) for k, o in offsets.items()],
            self.consumer.consumer_group_metadata(),
            20,
        )

    def commit_txn(self) -> None:
        self.producer.commit_transaction(20)

    def abort_txn(self) -> None:
        self.producer.abort_transaction(20)

    def assign(self, keys: list[int]) -> None:
        self.consumer.assign([self._tp(k) for k in keys])
        self.bump()

    def subscribe(self, keys: list[int]) -> None:
        self.consumer.subscribe(
            topics(self.keys), on_assign=self.bump, on_revoke=self.bump, on_lost=self.bump
        )

    def poll(self) -> list[tuple[int, int, int]]:
        # librdkafka hands consumer errors (a failed offset fetch, a broker gone) over as
        # events among the messages, and its position has moved past the messages that came
        # with them: those are this poll's result (raising would drop them, and the history
        # would show the consumer skipping offsets it was given). An error fails the poll
        # only when nothing came with it, or when it is fatal.
        out = []
        errors = []
        for m in self.consumer.consume(MAX_RECORDS, POLL_TIMEOUT_S):
            error = m.error()
            if error is not None:
                errors.append(error)
                continue
            out.append(_record(m.topic(), m.partition(), m.offset(), m.value()))
        if errors and (not out or any(e.fatal() for e in errors)):
            raise RuntimeError(f"consume: {errors[0]}")
        return out

    def commit(self, offsets: dict[int, int]) -> None:
        self.consumer.commit(
            offsets=[self._tp(k, o) for k, o in offsets.items()], asynchronous=False
        )

    def committed(self, keys: list[int]) -> dict[int, int | None]:
        got = self.consumer.committed([self._tp(k) for k in keys], timeout=10)
        return {
            key_of(tp.topic, tp.partition): (tp.offset if tp.offset >= 0 else None) for tp in got
        }

    def seek(self, offsets: dict[int, int | None]) -> None:
        for k, o in offsets.items():
            self.consumer.seek(self._tp(k, self.ck.OFFSET_BEGINNING if o is None else o))
        self.bump()


class KafkaPythonClient(ClientAdapter):
    name = "kafka-python"

    def open(self) -> None:
        import kafka
        from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

        self.kafka = kafka
        servers = self.bootstrap.split(",")
        kw: dict[str, Any] = {}
        if self.txn_id:
            kw = {"transactional_id": self.txn_id, "transaction_timeout_ms": TRANSACTION_TIMEOUT_MS}
        self.producer = kafka.KafkaProducer(
            bootstrap_servers=servers,
            client_id=self.client_id,
            acks="all",
            enable_idempotence=True,
            request_timeout_ms=REQUEST_TIMEOUT_MS,
            delivery_timeout_ms=DELIVERY_TIMEOUT_MS,
            max_block_ms=15000,
            linger_ms=1,
            **kw,
        )
        if self.txn_id:
            self.producer.init_transactions()
        self.consumer = kafka.KafkaConsumer(
            bootstrap_servers=servers,
            client_id=self.client_id,
            group_id=self.group,
            enable_auto_commit=False,
            isolation_level="read_committed",
            auto_offset_reset="earliest",
            session_timeout_ms=SESSION_TIMEOUT_MS,
            heartbeat_interval_ms=1000,
            request_timeout_ms=10000,
            max_poll_interval_ms=60000,
            partition_assignment_strategy=[RoundRobinPartitionAssignor],
        )
        adapter = self

        class Listener(kafka.ConsumerRebalanceListener):  # type: ignore[misc]
            def on_partitions_revoked(self, revoked: Any) -> None:
                adapter.bump()

            def on_partitions_assigned(self, assigned: Any) -> None:
                adapter.bump()

        self.listener = Listener()

    def close(self) -> None:
        self.consumer.close(autocommit=False)
        self.producer.close(2)

    def _tp(self, key: int) -> Any:
        return self.kafka.TopicPartition(*topic_partition(key))

    def send(self, key: int, value: int) -> int:
        t, p = topic_partition(key)
        md = self.producer.send(t, str(value).encode(), str(key).encode(), partition=p).get(
            DELIVERY_TIMEOUT_MS / 1000 + 5
        )
        return int(md.offset)

    def begin(self) -> None:
        self.producer.begin_transaction()

    def send_offsets(self, offsets: dict[int, int]) -> None:
        from kafka.structs import OffsetAndMetadata

        oms = {self._tp(k): OffsetAndMetadata(o, "", -1) for k, o in offsets.items()}
        self.producer.send_offsets_to_transaction(oms, self.group)

    def commit_txn(self) -> None:
        self.producer.commit_transaction()

    def abort_txn(self) -> None:
        self.producer.abort_transaction()

    def assign(self, keys: list[int]) -> None:
        self.consumer.assign([self._tp(k) for k in keys])
        self.bump()

    def subscribe(self, keys: list[int]) -> None:
        self.consumer.subscribe(topics(self.keys), listener=self.listener)

    def poll(self) -> list[tuple[int, int, int]]:
        got = self.consumer.poll(timeout_ms=int(POLL_TIMEOUT_S * 1000), max_records=MAX_RECORDS)
        return [
            _record(r.topic, r.partition, r.offset, r.value) for recs in got.values() for r in recs
        ]

    def commit(self, offsets: dict[int, int]) -> None:
        from kafka.structs import OffsetAndMetadata

        self.consumer.commit(
            {self._tp(k): OffsetAndMetadata(o, "", -1) for k, o in offsets.items()}
        )

    def committed(self, keys: list[int]) -> dict[int, int | None]:
        out: dict[int, int | None] = {}
        for k in keys:
            o = self.consumer.committed(self._tp(k))
            out[k] = None if o is None or o < 0 else int(o)
        return out

    def seek(self, offsets: dict[int, int | None]) -> None:
        for k, o in offsets.items():
            if o is None:
                self.consumer.seek_to_beginning(self._tp(k))
            else:
                self.consumer.seek(self._tp(k), o)
        self.bump()


class AIOKafkaClient(ClientAdapter):
    name = "aiokafka"

    def open(self) -> None:
        import aiokafka

        self.aiokafka = aiokafka
        self.loop = asyncio.new_event_loop()
        kw: dict[str, Any] = {}
        if self.txn_id:
            kw = {"transactional_id": self.txn_id, "transaction_timeout_ms": TRANSACTION_TIMEOUT_MS}

        async def make() -> None:
            self.producer = aiokafka.AIOKafkaProducer(
                bootstrap_servers=self.bootstrap,
                client_id=self.client_id,
                acks="all",
                enable_idempotence=True,
                request_timeout_ms=REQUEST_TIMEOUT_MS,
                linger_ms=1,
                **kw,
            )
            self.consumer = aiokafka.AIOKafkaConsumer(
                bootstrap_servers=self.bootstrap,
                client_id=self.client_id,
                group_id=self.group,
                enable_auto_commit=False,
                isolation_level="read_committed",
                auto_offset_reset="earliest",
                session_timeout_ms=SESSION_TIMEOUT_MS,
                heartbeat_interval_ms=1000,
                request_timeout_ms=10000,
                max_poll_interval_ms=60000,
            )
            await self.producer.start()
            await self.consumer.start()

        self.run(make())
        adapter = self

        class Listener(aiokafka.ConsumerRebalanceListener):  # type: ignore[misc]
            async def on_partitions_revoked(self, revoked: Any) -> None:
                adapter.bump()

            async def on_partitions_assigned(self, assigned: Any) -> None:
                adapter.bump()

        self.listener = Listener()

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(asyncio.wait_for(coro, 25))

    def call(self, fn: Any) -> Any:
        """A plain method that needs the running loop (assign, subscribe, seek)."""

        async def inside() -> Any:
            return fn()

        return self.run(inside())

    def close(self) -> None:
        try:
            self.run(self.consumer.stop())
            self.run(self.producer.stop())
        finally:
            self.loop.close()

    def _tp(self, key: int) -> Any:
        return self.aiokafka.TopicPartition(*topic_partition(key))

    def send(self, key: int, value: int) -> int:
        t, p = topic_partition(key)
        md = self.run(
            self.producer.send_and_wait(t, str(value).encode(), str(key).encode(), partition=p)
        )
        return int(md.offset)

    def begin(self) -> None:
        self.run(self.producer.begin_transaction())

    def send_offsets(self, offsets: dict[int, int]) -> None:
        self.run(
            self.producer.send_offsets_to_transaction(
                {self._tp(k): o for k, o in offsets.items()}, self.group
            )
        )

    def commit_txn(self) -> None:
        self.run(self.producer.commit_transaction())

    def abort_txn(self) -> None:
        self.run(self.producer.abort_transaction())

    def assign(self, keys: list[int]) -> None:
        self.call(lambda: self.consumer.assign([self._tp(k) for k in keys]))
        self.bump()

    def subscribe(self, keys: list[int]) -> None:
        self.call(lambda: self.consumer.subscribe(topics(self.keys), listener=self.listener))

    def poll(self) -> list[tuple[int, int, int]]:
        got = self.run(
            self.consumer.getmany(timeout_ms=int(POLL_TIMEOUT_S * 1000), max_records=MAX_RECORDS)
        )
        return [
            _record(r.topic, r.partition, r.offset, r.value) for recs in got.values() for r in recs
        ]

    def commit(self, offsets: dict[int, int]) -> None:
        self.run(self.consumer.commit({self._tp(k): o for k, o in offsets.items()}))

    def committed(self, keys: list[int]) -> dict[int, int | None]:
        out: dict[int, int | None] = {}
        for k in keys:
            o = self.run(self.consumer.committed(self._tp(k)))
            out[k] = None if o is None or o < 0 else int(o)
        return out

    def seek(self, offsets: dict[int, int | None]) -> None:
        for k, o in offsets.items():
            if o is None:
                self.run(self.consumer.seek_to_beginning(self._tp(k)))
            else:
                self.call(lambda k=k, o=o: self.consumer.seek(self._tp(k), o))
        self.bump()


class GregorClient(ClientAdapter):
    name = "gregor"

    def open(self) -> None:
        import gregor.client as gc

        self.gc = gc
        conf: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap,
            "client.id": self.client_id,
            "acks": "all",
            "enable.idempotence": True,
            "request.timeout.ms": REQUEST_TIMEOUT_MS,
            "delivery.timeout.ms": DELIVERY_TIMEOUT_MS,
            "max.block.ms": 15000,
            "linger.ms": 1,
        }
        if self.txn_id:
            conf.update(
                {"transactional.id": self.txn_id, "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS}
            )
        self.producer = gc.Producer(conf)
        if self.txn_id:
            self.producer.init_transactions()
        self.consumer = gc.Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "client.id": self.client_id,
                "group.id": self.group,
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "auto.offset.reset": "earliest",
                "session.timeout.ms": SESSION_TIMEOUT_MS,
                "heartbeat.interval.ms": 1000,
                "max.poll.interval.ms": 60000,
                "request.timeout.ms": 10000,
                "default.api.timeout.ms": 15000,
                "partition.assignment.strategy": "roundrobin",
            }
        )
        adapter = self

        class Listener(gc.RebalanceListener):
            def on_partitions_revoked(self, revoked: Any) -> None:
                adapter.bump()

            def on_partitions_assigned(self, assigned: Any) -> None:
                adapter.bump()

        self.listener = Listener()

    def close(self) -> None:
        self.consumer.close(autocommit=False)
        self.producer.close(2)

    def _tp(self, key: int) -> Any:
        return self.gc.TopicPartition(*topic_partition(key))

    def send(self, key: int, value: int) -> int:
        t, p = topic_partition(key)
        md = self.producer.send(t, str(value).encode(), str(key).encode(), partition=p).result(
            DELIVERY_TIMEOUT_MS / 1000 + 5
        )
        return int(md.offset)

    def begin(self) -> None:
        self.producer.begin_transaction()

    def send_offsets(self, offsets: dict[int, int]) -> None:
        self.producer.send_offsets_to_transaction(
            {self._tp(k): o for k, o in offsets.items()}, self.consumer.group_metadata()
        )

    def commit_txn(self) -> None:
        self.producer.commit_transaction()

    def abort_txn(self) -> None:
        self.producer.abort_transaction()

    def assign(self, keys: list[int]) -> None:
        self.consumer.assign([self._tp(k) for k in keys])
        self.bump()

    def subscribe(self, keys: list[int]) -> None:
        self.consumer.subscribe(topics(self.keys), listener=self.listener)

    def poll(self) -> list[tuple[int, int, int]]:
        got = self.consumer.poll(int(POLL_TIMEOUT_S * 1000), MAX_RECORDS)
        return [_record(r.topic, r.partition, r.offset, r.value) for r in got]

    def commit(self, offsets: dict[int, int]) -> None:
        self.consumer.commit({self._tp(k): o for k, o in offsets.items()})

    def committed(self, keys: list[int]) -> dict[int, int | None]:
        got = self.consumer.committed([self._tp(k) for k in keys])
        return {
            key_of(tp.topic, tp.partition): (
                None if om is None or om.offset < 0 else int(om.offset)
            )
            for tp, om in got.items()
        }

    def seek(self, offsets: dict[int, int | None]) -> None:
        for k, o in offsets.items():
            if o is None:
                self.consumer.seek_to_beginning(self._tp(k))
            else:
                self.consumer.seek(self._tp(k), o)
        self.bump()


CLIENTS: dict[str, type[ClientAdapter]] = {
    c.name: c for c in (ConfluentClient, KafkaPythonClient, AIOKafkaClient, GregorClient)
}


def make_client(name: str, bootstrap: str, **kw: Any) -> ClientAdapter:
    try:
        cls = CLIENTS[name]
    except KeyError:
        raise ValueError(f"unknown client {name!r}: one of {', '.join(CLIENTS)}") from None
    return cls(bootstrap, **kw)
