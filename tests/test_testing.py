"""gregor.testing.InProcessBroker: both forms serve real clients on a free port, restart keeps
data and port, each broker's log holds its own lines, and the process is left as it was."""

from __future__ import annotations

import asyncio
import logging
import socket

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from gregor.client import AIOConsumer, AIOProducer
from gregor.client import TopicPartition as GTopicPartition
from gregor.testing import InProcessBroker

pytestmark = pytest.mark.timeout(120)


def _refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port)).close()
    except ConnectionRefusedError:
        return True
    return False


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> list[int]:
    offsets: list[int] = []
    p = Producer({"bootstrap.servers": bootstrap})
    for v in values:
        p.produce(
            topic,
            v,
            on_delivery=lambda err, msg: offsets.append(msg.offset()) if err is None else None,
        )
    assert p.flush(60) == 0
    return offsets


def _consume(bootstrap: str, topic: str, n: int) -> list[tuple[int, bytes]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "t", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got: list[tuple[int, bytes]] = []
    try:
        while len(got) < n:
            m = c.poll(1.0)
            if m is not None and m.error() is None:
                got.append((m.offset(), m.value()))
    finally:
        c.close()
    return got


def test_sync_form_serves_blocking_clients_and_stops_clean() -> None:
    root_level = logging.getLogger().level
    with InProcessBroker({"num.partitions": "1"}) as broker:
        port = broker.port
        assert port > 0 and broker.bootstrap_servers == f"127.0.0.1:{port}"
        assert broker.running
        assert _produce(broker.bootstrap_servers, "sync", [b"a", b"b"]) == [0, 1]
        assert _consume(broker.bootstrap_servers, "sync", 2) == [(0, b"a"), (1, b"b")]

        async def high_watermark() -> int:
            assert broker.broker is not None
            log = broker.broker.replicas.local_log("sync", 0)
            assert log is not None
            return log.high_watermark

        assert broker.call(high_watermark) == 2
        assert logging.getLogger().level == logging.INFO
        data_dir = broker.data_dir
        assert "event=broker.started node_id=1" in broker.read_log()
    assert not broker.running
    assert _refused(port)
    assert not data_dir.exists()
    assert logging.getLogger().level == root_level


def test_async_form_runs_on_the_callers_loop() -> None:
    async def main() -> tuple[list[int], list[tuple[int, bytes | None]]]:
        async with InProcessBroker() as broker:
            assert broker.broker is not None
            assert broker.broker.bound_listeners == [("PLAINTEXT", "127.0.0.1", broker.port)]
            async with AIOProducer({"bootstrap.servers": broker.bootstrap_servers}) as producer:
                sent = [(await producer.send_and_wait("aio", v)).offset for v in (b"x", b"y", b"z")]
            async with AIOConsumer(
                {"bootstrap.servers": broker.bootstrap_servers, "auto.offset.reset": "earliest"}
            ) as consumer:
                consumer.assign([GTopicPartition("aio", 0)])
                got: list[tuple[int, bytes | None]] = []
                while len(got) < 3:
                    got.extend((r.offset, r.value) for r in await consumer.poll(timeout_ms=1000))
            return sent, got

    sent, got = asyncio.run(main())
    assert sent == [0, 1, 2]
    assert got == [(0, b"x"), (1, b"y"), (2, b"z")]


def test_restart_keeps_data_and_port_and_read_log_starts_over() -> None:
    with InProcessBroker() as broker:
        port = broker.port
        assert _produce(broker.bootstrap_servers, "kept", [b"before"]) == [0]
        assert "event=topic.created topic=kept" in broker.read_log()
        broker.restart()
        assert broker.port == port
        log = broker.read_log()
        assert "event=broker.started" in log and "event=topic.created" not in log
        assert "event=topic.created topic=kept" in broker.read_log(since_start=False)
        assert _produce(broker.bootstrap_servers, "kept", [b"after"]) == [1]
        assert _consume(broker.bootstrap_servers, "kept", 2) == [(0, b"before"), (1, b"after")]


def test_each_broker_logs_only_its_own_lines() -> None:
    with InProcessBroker() as one, InProcessBroker() as two:
        _produce(one.bootstrap_servers, "only-one", [b"1"])
        _produce(two.bootstrap_servers, "only-two", [b"2"])
        logging.getLogger("gregor.client").warning("a client line")
        one_log, two_log = one.read_log(), two.read_log()
    assert f"listeners=PLAINTEXT://127.0.0.1:{one.port}" in one_log
    assert f"listeners=PLAINTEXT://127.0.0.1:{two.port}" in two_log
    assert "topic=only-one" in one_log and "topic=only-two" not in one_log
    assert "topic=only-two" in two_log and "topic=only-one" not in two_log
    assert "a client line" not in one_log + two_log


def test_a_config_the_broker_refuses_fails_start_and_leaves_nothing_running() -> None:
    import threading

    from gregor.broker.config.broker_config import ConfigError

    threads = {t.name for t in threading.enumerate()}
    broker = InProcessBroker({"num.partitions": "0"})
    with pytest.raises(ConfigError, match="num.partitions=0 is below the minimum 1"):
        broker.start()
    assert not broker.running
    assert {t.name for t in threading.enumerate()} == threads
    assert logging.getLogger("gregor").handlers == []
    broker.close()
