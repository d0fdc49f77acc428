"""Produce and consume ``Rec`` lists with each real client: confluent-kafka, kafka-python,
aiokafka and kcat. Consumers use ``assign()`` (no group coordination) and return
``(offset, Rec)`` in the order the client delivered them."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterable

from interop_helpers import Rec

# No budgets by default: a consumer drains until it has what it waits for, a producer flushes
# until everything is delivered, however long a busy machine takes (the test's timeout is the
# backstop). A budget is given only where a test checks that nothing arrives.

# --- confluent-kafka (librdkafka) ---


def ck_producer(bootstrap: str, **conf: object):  # noqa: ANN201
    from confluent_kafka import Producer

    return Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **conf})


def ck_produce(bootstrap: str, topic: str, recs: Iterable[Rec], **conf: object) -> list:
    """Produce and wait for every delivery report; returns the delivered messages in order."""
    p = ck_producer(bootstrap, **conf)
    errors: list = []
    delivered: list = []

    def on_delivery(err, msg) -> None:  # noqa: ANN001
        if err is not None:
            errors.append(err)
        else:
            delivered.append(msg)

    for r in recs:
        while True:
            try:
                p.produce(
                    topic,
                    value=r.value,
                    key=r.key,
                    partition=r.partition,
                    timestamp=r.timestamp,
                    headers=list(r.headers) or None,
                    on_delivery=on_delivery,
                )
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    assert p.flush() == 0, "undelivered messages left after flush"
    assert errors == []
    return delivered


def ck_consumer(bootstrap: str, **conf: object):  # noqa: ANN201
    from confluent_kafka import Consumer

    base = {
        "bootstrap.servers": bootstrap,
        "group.id": "interop-assign",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
    }
    base.update(conf)
    return Consumer(base)


def ck_to_rec(msg) -> Rec:  # noqa: ANN001
    return Rec(
        msg.partition(), msg.key(), msg.value(), tuple(msg.headers() or ()), msg.timestamp()[1]
    )


def ck_consume(
    bootstrap: str, topic: str, partitions: int, count: int, **conf: object
) -> list[tuple[int, Rec]]:
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition

    c = ck_consumer(bootstrap, **conf)
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        return ck_drain(c, count)
    finally:
        c.close()


def ck_drain(c, count: int, budget: float | None = None) -> list[tuple[int, Rec]]:  # noqa: ANN001
    """Up to ``count`` records; with a ``budget``, what came within that many seconds."""
    out: list[tuple[int, Rec]] = []
    deadline = None if budget is None else time.monotonic() + budget
    while len(out) < count and (deadline is None or time.monotonic() < deadline):
        for m in c.consume(1000, 0.5):
            assert m.error() is None, m.error()
            out.append((m.offset(), ck_to_rec(m)))
    return out


# --- kafka-python ---


def kp_produce(bootstrap: str, topic: str, recs: Iterable[Rec], **conf: object) -> list:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, **conf)
    try:
        futs = [
            p.send(
                topic,
                value=r.value,
                key=r.key,
                partition=r.partition,
                timestamp_ms=r.timestamp,
                headers=list(r.headers) or None,
            )
            for r in recs
        ]
        p.flush()
        return [f.get() for f in futs]
    finally:
        p.close(timeout=10)


def kp_consumer(bootstrap: str, **conf: object):  # noqa: ANN201
    from kafka import KafkaConsumer

    base: dict = {
        "bootstrap_servers": bootstrap,
        "group_id": None,
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
    }
    base.update(conf)
    return KafkaConsumer(**base)


def kp_to_rec(m, with_headers: bool = True) -> Rec:  # noqa: ANN001
    headers = tuple(tuple(h) for h in (m.headers or ())) if with_headers else ()
    return Rec(m.partition, m.key, m.value, headers, m.timestamp)


def kp_drain(c, count: int, budget: float | None = None) -> list[tuple[int, Rec]]:  # noqa: ANN001
    """Up to ``count`` records; with a ``budget``, what came within that many seconds."""
    out: list[tuple[int, Rec]] = []
    deadline = None if budget is None else time.monotonic() + budget
    while len(out) < count and (deadline is None or time.monotonic() < deadline):
        for _tp, msgs in c.poll(timeout_ms=500, max_records=5000).items():
            out.extend((m.offset, kp_to_rec(m)) for m in msgs)
    return out


def kp_consume(
    bootstrap: str, topic: str, partitions: int, count: int, **conf: object
) -> list[tuple[int, Rec]]:
    from kafka import TopicPartition

    c = kp_consumer(bootstrap, **conf)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        return kp_drain(c, count)
    finally:
        c.close()


# --- aiokafka ---


async def _aio_produce(bootstrap: str, topic: str, recs: list[Rec], conf: dict) -> list:
    from aiokafka import AIOKafkaProducer

    p = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, **conf)
    await p.start()
    try:
        futs = [
            await p.send(
                topic,
                value=r.value,
                key=r.key,
                partition=r.partition,
                timestamp_ms=r.timestamp,
                headers=list(r.headers) or None,
            )
            for r in recs
        ]
        return list(await asyncio.gather(*futs))
    finally:
        await p.stop()


def aio_produce(bootstrap: str, topic: str, recs: Iterable[Rec], **conf: object) -> list:
    return asyncio.run(_aio_produce(bootstrap, topic, list(recs), conf))


def aio_to_rec(m) -> Rec:  # noqa: ANN001
    return Rec(m.partition, m.key, m.value, tuple(tuple(h) for h in (m.headers or ())), m.timestamp)


async def _aio_consume(
    bootstrap: str, topic: str, partitions: int, count: int, conf: dict
) -> list[tuple[int, Rec]]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    c = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        **conf,
    )
    await c.start()
    out: list[tuple[int, Rec]] = []
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        await c.seek_to_beginning(*tps)
        while len(out) < count:
            batch = await c.getmany(timeout_ms=500, max_records=5000)
            for _tp, msgs in batch.items():
                out.extend((m.offset, aio_to_rec(m)) for m in msgs)
    finally:
        await c.stop()
    return out


def aio_consume(
    bootstrap: str, topic: str, partitions: int, count: int, **conf: object
) -> list[tuple[int, Rec]]:
    return asyncio.run(_aio_consume(bootstrap, topic, partitions, count, conf))


# --- kcat (Debian's, built on an older librdkafka) ---

KCAT = shutil.which("kcat") or shutil.which("kafkacat")


def kcat(
    bootstrap: str, *args: str, input: bytes | None = None, timeout: float | None = None
) -> bytes:
    assert KCAT is not None
    proc = subprocess.run(
        [KCAT, "-b", bootstrap, "-q", *args],
        input=input,
        capture_output=True,
        timeout=timeout,
        env={**os.environ, "LC_ALL": "C"},
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    return proc.stdout


def kcat_produce(
    bootstrap: str,
    topic: str,
    partition: int,
    lines: list[tuple[bytes | None, bytes | None]],
    *extra: str,
) -> None:
    """Produce key/value pairs to one partition with ``-K`` and ``-Z`` (empty means null).

    kcat reads one message per line; a key is everything before the first tab."""
    data = b"".join((k or b"") + b"\t" + (v or b"") + b"\n" for k, v in lines)
    kcat(bootstrap, "-P", "-t", topic, "-p", str(partition), "-K", "\t", "-Z", *extra, input=data)


def kcat_consume_json(bootstrap: str, topic: str, count: int, *extra: str) -> list[dict]:
    """Consume ``count`` messages from the beginning of every partition with ``-J`` output."""
    out = kcat(bootstrap, "-C", "-t", topic, "-o", "beginning", "-c", str(count), "-J", *extra)
    return [json.loads(line) for line in out.decode().splitlines() if line.strip()]
