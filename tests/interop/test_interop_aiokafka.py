"""aiokafka against a real Gregor broker."""

from __future__ import annotations

import asyncio
import time

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from interop_clients import aio_consume, aio_produce, aio_to_rec, ck_consume
from interop_helpers import (
    BASE_TS,
    CODEC_IDS,
    Rec,
    assert_same_per_partition,
    create_topic,
    make_records,
    stored_codecs,
    topic_name,
)

P = 3
#: aiokafka refuses records with neither key nor value.
AIO = {"both_null": False}


def test_roundtrip_10k(broker) -> None:  # noqa: ANN001
    topic = topic_name("aio-rt")
    create_topic(broker.bootstrap_servers, topic, P)
    recs = make_records(10_000, P, **AIO)
    metas = aio_produce(broker.bootstrap_servers, topic, recs)
    assert sorted((m.partition, m.offset) for m in metas) == sorted(
        (p, o) for p in range(P) for o in range(sum(1 for r in recs if r.partition == p))
    )
    got = aio_consume(broker.bootstrap_servers, topic, P, len(recs))
    assert len(got) == len(recs)
    assert_same_per_partition(recs, got)


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_codecs(broker, codec: str) -> None:  # noqa: ANN001
    topic = topic_name(f"aio-{codec}")
    create_topic(broker.bootstrap_servers, topic, P)
    recs = make_records(600, P, **AIO)
    aio_produce(
        broker.bootstrap_servers, topic, recs, compression_type=None if codec == "none" else codec
    )
    for p in range(P):
        assert set(stored_codecs(broker.data_dir, topic, p)) == {CODEC_IDS[codec]}
    got = aio_consume(broker.bootstrap_servers, topic, P, len(recs))
    assert_same_per_partition(recs, got)
    # librdkafka decodes what aiokafka compressed, through the broker.
    assert_same_per_partition(recs, ck_consume(broker.bootstrap_servers, topic, P, len(recs)))


@pytest.mark.parametrize("acks", [0, 1, "all"])
def test_acks(broker, acks: object) -> None:  # noqa: ANN001
    topic = topic_name(f"aio-acks{acks}")
    create_topic(broker.bootstrap_servers, topic, P)
    recs = make_records(1_000, P, **AIO)
    aio_produce(broker.bootstrap_servers, topic, recs, acks=acks)
    got = aio_consume(broker.bootstrap_servers, topic, P, len(recs))
    assert_same_per_partition(recs, got)


def test_offsets_seek_and_long_poll(broker) -> None:  # noqa: ANN001
    topic = topic_name("aio-lp")
    create_topic(broker.bootstrap_servers, topic, P)
    recs = [Rec(2, b"k", str(i).encode(), (), BASE_TS + 1000 * i) for i in range(30)]
    aio_produce(broker.bootstrap_servers, topic, recs)

    async def run() -> None:
        c = AIOKafkaConsumer(
            bootstrap_servers=broker.bootstrap_servers,
            group_id=None,
            enable_auto_commit=False,
            fetch_max_wait_ms=290_000,
            request_timeout_ms=305_000,
        )
        await c.start()
        try:
            tp = TopicPartition(topic, 2)
            found = await c.offsets_for_times({tp: BASE_TS + 1000 * 12 + 1})
            assert (found[tp].offset, found[tp].timestamp) == (13, BASE_TS + 13_000)
            assert await c.beginning_offsets([tp]) == {tp: 0}
            assert await c.end_offsets([tp]) == {tp: 30}
            c.assign([tp])
            await c.seek_to_end(tp)
            assert await c.position(tp) == 30
            # The consumer now waits in a fetch that may last 290 s; a record produced one
            # second later must still reach it within the 60 s budget.
            produced = asyncio.get_running_loop().run_in_executor(None, _produce_later, topic)
            deadline = time.monotonic() + 60  # the claim itself: woken, not after 290 s
            got: list[tuple[int, Rec]] = []
            while not got and time.monotonic() < deadline:
                for msgs in (await c.getmany(timeout_ms=500)).values():
                    got.extend((m.offset, aio_to_rec(m)) for m in msgs)
            await produced
            assert [(o, r.value) for o, r in got] == [(30, b"late")]
            # aiokafka's next 290 s long poll (from offset 31) may already be in flight on the
            # connection its ListOffsets for the seek must use; a broker answers one request at
            # a time per connection, as Kafka does, so the seek waits for that poll. A record
            # produced a second later answers the poll; aiokafka drops that stale answer, then
            # resets to offset 0 and reads everything.
            woken = asyncio.get_running_loop().run_in_executor(None, _produce_later, topic, b"wake")
            await c.seek_to_beginning(tp)
            again: list[int] = []
            while len(again) < 32:
                for msgs in (await c.getmany(timeout_ms=500)).values():
                    again.extend(m.offset for m in msgs)
            await woken
            assert again == list(range(32))
        finally:
            await c.stop()

    def _produce_later(topic: str, value: bytes = b"late") -> None:
        time.sleep(1.0)
        aio_produce(broker.bootstrap_servers, topic, [Rec(2, None, value, (), BASE_TS + 99_000)])

    asyncio.run(run())
