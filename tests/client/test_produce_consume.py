"""Producer and consumer round trips, run against Gregor's broker and against Tansu."""

from __future__ import annotations

import asyncio

import pytest
from client_helpers import BrokerInfo, create_topic

from gregor.client import (
    AIOConsumer,
    AIOProducer,
    BulkReader,
    Consumer,
    IllegalStateError,
    Producer,
    TopicPartition,
    partition_for_key,
)


def _consume_all(bootstrap: str, tps: list[TopicPartition], n: int, **cfg: object) -> list:
    out = []
    with Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest", **cfg}) as c:
        c.assign(tps)
        while len(out) < n:
            out.extend(c.poll(500))
        # nothing more arrives
        out.extend(c.poll(200))
    return out


@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_round_trip_keys_headers_compression(
    broker: BrokerInfo, topic_name: str, compression: str
) -> None:
    create_topic(broker, topic_name, 1)
    n = 300
    with Producer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "compression.type": compression,
            "linger.ms": 2,
        }
    ) as p:
        futs = [
            p.send(
                topic_name,
                None if i % 10 == 3 else b"value-%d" % i,
                key=None if i % 4 == 0 else b"key-%d" % i,
                partition=0,
                timestamp_ms=1_600_000_000_000 + i,
                headers=[("i", str(i).encode()), ("none", None)] if i % 3 == 0 else None,
            )
            for i in range(n)
        ]
        p.flush()
    offsets = [f.result().offset for f in futs]
    assert offsets == list(range(n))
    assert futs[5].result().timestamp == 1_600_000_000_005
    recs = _consume_all(broker.bootstrap_servers, [TopicPartition(topic_name, 0)], n)
    assert [r.offset for r in recs] == list(range(n))
    for i, r in enumerate(recs):
        assert r.key == (None if i % 4 == 0 else b"key-%d" % i)
        assert r.value == (None if i % 10 == 3 else b"value-%d" % i)
        assert r.timestamp == 1_600_000_000_000 + i
        assert r.headers == ((("i", str(i).encode()), ("none", None)) if i % 3 == 0 else ())


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_acks(broker: BrokerInfo, topic_name: str, acks: str) -> None:
    create_topic(broker, topic_name, 1)
    with Producer({"bootstrap.servers": broker.bootstrap_servers, "acks": acks}) as p:
        futs = [p.send(topic_name, b"v%d" % i, partition=0) for i in range(50)]
        p.flush()
    got = [f.result().offset for f in futs]
    assert got == ([-1] * 50 if acks == "0" else list(range(50)))
    assert [
        r.value for r in _consume_all(broker.bootstrap_servers, [TopicPartition(topic_name, 0)], 50)
    ] == [b"v%d" % i for i in range(50)]


def test_keyed_records_use_java_partitioner(broker: BrokerInfo, topic_name: str) -> None:
    create_topic(broker, topic_name, 6)
    keys = [b"user-%d" % i for i in range(60)]
    with Producer({"bootstrap.servers": broker.bootstrap_servers}) as p:
        futs = [p.send(topic_name, b"x", key=k) for k in keys]
        p.flush()
    assert [f.result().partition for f in futs] == [partition_for_key(k, 6) for k in keys]
    tps = [TopicPartition(topic_name, i) for i in range(6)]
    recs = _consume_all(broker.bootstrap_servers, tps, 60)
    assert sorted((r.partition, r.key) for r in recs) == sorted(
        (partition_for_key(k, 6), k) for k in keys
    )


def test_null_keys_stick_to_a_partition_per_batch(broker: BrokerInfo, topic_name: str) -> None:
    create_topic(broker, topic_name, 4)
    with Producer(
        {"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 1000, "batch.size": 100000}
    ) as p:
        futs = [p.send(topic_name, b"v") for _ in range(20)]
        p.flush()
    assert len({f.result().partition for f in futs}) == 1
    assert [f.result().offset for f in futs] == list(range(20))


@pytest.mark.slow
def test_async_producer_and_consumer_positions_seek_pause(
    broker: BrokerInfo, topic_name: str
) -> None:
    create_topic(broker, topic_name, 2)

    async def run() -> None:
        async with AIOProducer({"bootstrap.servers": broker.bootstrap_servers}) as p:
            # One record per batch: Tansu 0.6.0 answers ListOffsets(latest) with the last
            # batch's base offset + 1, which is only right for single-record batches.
            for i in range(40):
                await p.send_and_wait(
                    topic_name, b"%d" % i, partition=i % 2, timestamp_ms=1_000_000 + i * 10
                )
            md = await p.send_and_wait(topic_name, b"last", partition=0, timestamp_ms=2_000_000)
            assert md.offset == 20
        tp0, tp1 = TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)
        async with AIOConsumer(
            {"bootstrap.servers": broker.bootstrap_servers, "auto.offset.reset": "latest"}
        ) as c:
            c.assign([tp0, tp1])
            assert await c.position(tp0) == 21
            assert await c.position(tp1) == 20
            assert await c.beginning_offsets([tp0, tp1]) == {tp0: 0, tp1: 0}
            assert await c.end_offsets([tp0, tp1]) == {tp0: 21, tp1: 20}
            c.seek(tp0, 18)
            c.pause(tp1)
            assert c.paused() == {tp1}
            recs = []
            while len(recs) < 3:
                recs += await c.poll(1000)
            assert [(r.partition, r.offset) for r in recs] == [(0, 18), (0, 19), (0, 20)]
            assert recs[-1].value == b"last"
            c.resume(tp1)
            await c.seek_to_end(tp1)
            c.seek(tp1, 19)
            recs = []
            while len(recs) < 1:
                recs += await c.poll(1000)
            assert [(r.partition, r.offset, r.value) for r in recs] == [(1, 19, b"39")]
            with pytest.raises(IllegalStateError):
                c.seek(TopicPartition(topic_name, 5), 0)

    asyncio.run(run())


def test_long_poll_returns_new_records(broker: BrokerInfo, topic_name: str) -> None:
    create_topic(broker, topic_name, 1)
    tp = TopicPartition(topic_name, 0)
    with (
        Consumer(
            {"bootstrap.servers": broker.bootstrap_servers, "auto.offset.reset": "latest"}
        ) as c,
        Producer({"bootstrap.servers": broker.bootstrap_servers}) as p,
    ):
        c.assign([tp])
        assert c.position(tp) == 0
        assert c.poll(100) == []
        p.send(topic_name, b"late", partition=0).result()
        recs = []
        while not recs:
            recs = c.poll(500)
        assert [(r.offset, r.value) for r in recs] == [(0, b"late")]


def test_bulk_arrow_read(broker: BrokerInfo, topic_name: str) -> None:
    create_topic(broker, topic_name, 1)
    n = 2500
    with Producer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "compression.type": "lz4",
            "batch.size": 8192,
        }
    ) as p:
        for i in range(n):
            p.send(
                topic_name,
                b"v%05d" % i,
                key=None if i % 9 == 0 else b"k%d" % i,
                partition=0,
                timestamp_ms=1_650_000_000_000 + i,
                headers=[("n", b"%d" % i)] if i % 100 == 0 else None,
            )
        p.flush()
    with BulkReader({"bootstrap.servers": broker.bootstrap_servers}) as r:
        rb = r.read(topic_name, 0, 10, 2010, max_bytes=16384)
        whole = r.read(topic_name, 0, 0)
    assert rb.num_rows == 2000
    assert rb.column("offset").to_pylist() == list(range(10, 2010))
    assert rb.column("value").to_pylist() == [b"v%05d" % i for i in range(10, 2010)]
    assert rb.column("key").to_pylist() == [
        None if i % 9 == 0 else b"k%d" % i for i in range(10, 2010)
    ]
    assert rb.column("topic").unique().to_pylist() == [topic_name]
    assert rb.column("partition").unique().to_pylist() == [0]
    assert rb.column("headers").to_pylist()[90] == [{"key": "n", "value": b"100"}]
    assert rb.column("timestamp").cast("int64").to_pylist()[0] == (1_650_000_000_000 + 10) * 1000
    assert whole.num_rows == n


def test_producer_rejects_send_outside_transaction_and_unknown_partition(
    broker: BrokerInfo, topic_name: str
) -> None:
    create_topic(broker, topic_name, 1)
    with Producer({"bootstrap.servers": broker.bootstrap_servers}) as p:
        with pytest.raises(Exception, match="out of range"):
            p.send(topic_name, b"x", partition=3)


def test_offsets_for_times(broker: BrokerInfo, topic_name: str) -> None:
    if broker.name == "tansu":
        pytest.xfail(
            "Tansu 0.6.0 answers a timestamp ListOffsets with offset 0 and the current time"
        )
    create_topic(broker, topic_name, 2)

    async def run() -> None:
        async with AIOProducer({"bootstrap.servers": broker.bootstrap_servers}) as p:
            for i in range(40):
                await p.send(
                    topic_name, b"%d" % i, partition=i % 2, timestamp_ms=1_000_000 + i * 10
                )
            await p.flush()
        tp0, tp1 = TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)
        async with AIOConsumer({"bootstrap.servers": broker.bootstrap_servers}) as c:
            c.assign([tp0, tp1])
            # record i went to partition i % 2 at offset i // 2 with timestamp 1_000_000 + 10 i
            found = await c.offsets_for_times({tp0: 1_000_000 + 10 * 7, tp1: 1_000_000 + 10 * 7})
            assert found == {tp0: (4, 1_000_000 + 80), tp1: (3, 1_000_000 + 70)}
            assert (await c.offsets_for_times({tp0: 3_000_000}))[tp0] is None

    asyncio.run(run())
