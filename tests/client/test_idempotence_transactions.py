"""Idempotence and transactions, on every broker that implements InitProducerId and friends."""

from __future__ import annotations

import asyncio

import pytest
from client_helpers import BrokerInfo, create_topic

from gregor.client import AIOProducer, Consumer, IllegalStateError, Producer, TopicPartition
from gregor.client.core.client import KafkaClient
from gregor.client.core.config import Config
from gregor.protocol.messages import FetchRequest
from gregor.protocol.records import iter_batches

INIT_PRODUCER_ID = 22
ADD_PARTITIONS_TO_TXN = 24
ADD_OFFSETS_TO_TXN = 25
END_TXN = 26
TXN_OFFSET_COMMIT = 28
FIND_COORDINATOR = 10
OFFSET_FETCH = 9


def _raw_batches(bootstrap: str, topic: str, partition: int) -> list:
    """Batch headers of a partition as stored (fetched with the plain Fetch API)."""

    async def run() -> list:
        client = KafkaClient(Config("client", {"bootstrap.servers": bootstrap}))
        client.add_topics([topic])
        await client.start()
        try:
            node = client.cluster.leader_for(TopicPartition(topic, partition))
            conn = await client.connection(node)
            req = FetchRequest(
                max_wait_ms=200,
                min_bytes=1,
                max_bytes=1 << 20,
                session_epoch=-1,
                topics=[
                    FetchRequest.Topics(
                        topic=topic,
                        partitions=[
                            FetchRequest.Topics.Partitions(
                                partition=partition, fetch_offset=0, partition_max_bytes=1 << 20
                            )
                        ],
                    )
                ],
            )
            resp = await conn.send(req, min(conn.version(FetchRequest.API_KEY), 12))
            data = resp.responses[0].partitions[0].records
            return [h for _, h in iter_batches(bytes(data), allow_partial_tail=True)]
        finally:
            await client.close()

    return asyncio.run(run())


def _read(bootstrap: str, tp: TopicPartition, isolation: str, expect: int) -> list[bytes]:
    out: list[bytes] = []
    with Consumer(
        {
            "bootstrap.servers": bootstrap,
            "auto.offset.reset": "earliest",
            "isolation.level": isolation,
        }
    ) as c:
        c.assign([tp])
        while len(out) < expect:
            out += [r.value for r in c.poll(300)]
        out += [r.value for r in c.poll(300)]
    return out


def test_idempotent_batches_carry_producer_id_and_sequences(
    broker: BrokerInfo, topic_name: str
) -> None:
    broker.require(INIT_PRODUCER_ID)
    create_topic(broker, topic_name, 1)
    with Producer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "enable.idempotence": True,
            "batch.size": 1000,
        }
    ) as p:
        assert p.aio.idempotence
        futs = [p.send(topic_name, b"%04d" % i + b"." * 90, partition=0) for i in range(60)]
        p.flush()
        pid, epoch = p.aio.producer_id, p.aio.producer_epoch
    assert pid >= 0
    assert [f.result().offset for f in futs] == list(range(60))
    headers = _raw_batches(broker.bootstrap_servers, topic_name, 0)
    assert len(headers) > 1
    seq = 0
    for h in headers:
        assert (h.producer_id, h.producer_epoch) == (pid, epoch)
        assert h.base_sequence == seq  # sequences continue across batches, no gaps
        seq += h.records_count
    assert seq == 60


def test_explicit_idempotence_needs_init_producer_id(gregor_broker: BrokerInfo) -> None:
    if gregor_broker.supports(INIT_PRODUCER_ID):
        pytest.skip("this broker implements InitProducerId")
    from gregor.client import UnsupportedForBrokerError

    with pytest.raises(UnsupportedForBrokerError):
        Producer({"bootstrap.servers": gregor_broker.bootstrap_servers, "enable.idempotence": True})
    # left at its default, idempotence quietly turns off and producing works
    with Producer({"bootstrap.servers": gregor_broker.bootstrap_servers}) as p:
        assert p.aio.idempotence is False


@pytest.mark.slow
def test_transactions_commit_abort_and_read_committed(broker: BrokerInfo, topic_name: str) -> None:
    broker.require(INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, END_TXN, FIND_COORDINATOR)
    create_topic(broker, topic_name, 1)
    tp = TopicPartition(topic_name, 0)
    with Producer(
        {"bootstrap.servers": broker.bootstrap_servers, "transactional.id": f"tx-{topic_name}"}
    ) as p:
        with pytest.raises(IllegalStateError):
            p.send(topic_name, b"no", partition=0)
        p.init_transactions()
        p.begin_transaction()
        for i in range(5):
            p.send(topic_name, b"c1-%d" % i, partition=0)
        p.commit_transaction()
        p.begin_transaction()
        for i in range(4):
            p.send(topic_name, b"ab-%d" % i, partition=0)
        p.flush()
        p.abort_transaction()
        p.begin_transaction()
        p.send(topic_name, b"c2-0", partition=0)
        p.commit_transaction()
    committed = [b"c1-%d" % i for i in range(5)] + [b"c2-0"]
    everything = [b"c1-%d" % i for i in range(5)] + [b"ab-%d" % i for i in range(4)] + [b"c2-0"]
    assert _read(broker.bootstrap_servers, tp, "read_committed", 6) == committed
    assert _read(broker.bootstrap_servers, tp, "read_uncommitted", 10) == everything


@pytest.mark.slow
def test_send_offsets_to_transaction(broker: BrokerInfo, topic_name: str) -> None:
    broker.require(
        INIT_PRODUCER_ID,
        ADD_PARTITIONS_TO_TXN,
        ADD_OFFSETS_TO_TXN,
        TXN_OFFSET_COMMIT,
        END_TXN,
        OFFSET_FETCH,
    )
    create_topic(broker, topic_name, 1)
    group = f"g-{topic_name}"
    tp = TopicPartition(topic_name, 0)

    async def run() -> None:
        async with AIOProducer(
            {"bootstrap.servers": broker.bootstrap_servers, "transactional.id": f"tx2-{topic_name}"}
        ) as p:
            await p.init_transactions()
            p.begin_transaction()
            await p.send(topic_name, b"out", partition=0)
            await p.send_offsets_to_transaction({tp: 42}, group)
            await p.commit_transaction()

    asyncio.run(run())
    with Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group}) as c:
        got = c.committed([tp])
    assert got[tp] is not None and got[tp].offset == 42
