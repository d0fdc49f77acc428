"""Acknowledged data survives a broker restart, graceful (SIGTERM) or not (SIGKILL)."""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import TopicPartition
from conftest import INTEROP_BROKER
from interop_clients import ck_consume, ck_consumer, ck_produce, ck_producer, kp_consume
from interop_helpers import (
    BASE_TS,
    Rec,
    assert_same_per_partition,
    create_topic,
    make_records,
    topic_name,
)

from gregor.testing import BrokerProcess

P = 3


@pytest.fixture
def own_broker():  # noqa: ANN201
    with BrokerProcess(config={"num.partitions": P}) as b:
        yield b


@pytest.mark.parametrize("hard", [False, True], ids=["sigterm", "sigkill"])
def test_data_survives_restart(own_broker, hard: bool) -> None:  # noqa: ANN001
    b = own_broker
    topic = topic_name("restart")
    create_topic(b.bootstrap_servers, topic, P)
    first = make_records(5_000, P)
    ck_produce(b.bootstrap_servers, topic, first, acks="all")
    b.restart(hard=hard)
    if INTEROP_BROKER == "gregor":  # Gregor's own log line (Kafka's differ)
        log = b.read_log()
        if hard:
            assert "unclean shutdown" in log
        else:
            assert "unclean shutdown" not in log
    # Everything is back, and new appends continue the offsets.
    assert_same_per_partition(first, ck_consume(b.bootstrap_servers, topic, P, len(first)))
    second = [
        Rec(r.partition, r.key, r.value, r.headers, r.timestamp + 10**6)
        for r in make_records(600, P)
    ]
    ck_produce(b.bootstrap_servers, topic, second, acks="all")
    assert_same_per_partition(
        first + second, ck_consume(b.bootstrap_servers, topic, P, len(first) + len(second))
    )
    # And a second, independent client agrees.
    got = kp_consume(b.bootstrap_servers, topic, P, len(first) + len(second))
    assert_same_per_partition(first + second, got)


def test_sigkill_mid_write_keeps_every_acknowledged_record(own_broker) -> None:  # noqa: ANN001
    """Kill -9 while a producer is writing: after restart each partition holds a gap-free,
    in-order prefix of what was sent, containing every record whose write was acknowledged."""
    b = own_broker
    topic = topic_name("kill")
    create_topic(b.bootstrap_servers, topic, P)
    acked: set[bytes] = set()
    stop = threading.Event()
    sent: list[Rec] = []

    def produce() -> None:
        p = ck_producer(
            b.bootstrap_servers,
            acks="all",
            **{"linger.ms": 2, "retries": 0, "message.timeout.ms": 5000},
        )

        def report(err, msg) -> None:  # noqa: ANN001
            if err is None:
                acked.add(msg.value())

        i = 0
        while not stop.is_set() and i < 200_000:
            r = Rec(i % P, f"k{i}".encode(), f"v{i:07d}".encode() + b"." * 100, (), BASE_TS + i)
            try:
                p.produce(
                    topic,
                    value=r.value,
                    key=r.key,
                    partition=r.partition,
                    timestamp=r.timestamp,
                    on_delivery=report,
                )
            except BufferError:
                p.poll(0.01)
                continue
            sent.append(r)
            i += 1
            if i % 100 == 0:
                p.poll(0)
                time.sleep(0.001)
        p.flush(10)

    t = threading.Thread(target=produce)
    t.start()
    while len(acked) < 3_000:
        time.sleep(0.01)
    assert len(acked) >= 3_000
    b.kill()
    stop.set()
    t.join()
    acked_before_kill = set(acked)
    b.start()
    # Read everything the broker has now.
    c = ck_consumer(b.bootstrap_servers)
    try:
        highs = [c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(P)]
    finally:
        c.close()
    got = ck_consume(b.bootstrap_servers, topic, P, sum(highs))
    assert len(got) == sum(highs)
    sent_by_part = {p: [r for r in sent if r.partition == p] for p in range(P)}
    for p in range(P):
        mine = [r for _, r in got if r.partition == p]
        assert [o for o, r in got if r.partition == p] == list(range(len(mine)))
        # A prefix of what was sent to this partition, in order, nothing duplicated...
        assert [(r.key, r.value) for r in mine] == [
            (r.key, r.value) for r in sent_by_part[p][: len(mine)]
        ]
    # ...that holds every acknowledged record.
    stored = {r.value for _, r in got}
    assert acked_before_kill <= stored
