"""Transactional producers of confluent-kafka, kafka-python and aiokafka against a real
broker: commit, abort and zombie fencing, checked with the same client's consumers.

A read_committed consumer must see a committed transaction's records exactly once and none
before the commit; an aborted transaction's records never (a read_uncommitted one sees them);
a second producer with the same transactional id fences the first, whose commit then fails
and whose records stay invisible.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from interop_helpers import create_topic
from test_transactions_support import (
    CLIENTS,
    consumer,
    end_offsets,
    producer,
    read,
    settled_end_offsets,
)

from gregor.testing import BrokerProcess


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    with BrokerProcess(config={"transaction.state.log.num.partitions": 5}) as b:
        yield b
        assert b.running
        assert "event=request.failed" not in b.read_log(), b.read_log()[-4000:]


def new_topic(broker: BrokerProcess, partitions: int = 2) -> str:
    name = f"txn-{uuid.uuid4().hex[:10]}"
    create_topic(broker.bootstrap_servers, name, partitions)
    return name


@pytest.mark.parametrize("client", CLIENTS)
def test_commit_is_seen_once_and_not_before(broker: BrokerProcess, client: str) -> None:
    bs = broker.bootstrap_servers
    topic = new_topic(broker)
    values = [b"c-%03d" % i for i in range(60)]
    watcher = consumer(client, bs, [(topic, 0), (topic, 1)], "read_committed")
    p = producer(client, bs, f"tx-commit-{client}-{topic}")
    try:
        p.init()
        p.begin()
        for v in values:
            p.send(topic, 0, v)
        p.flush()
        # Written but not committed: the LSO holds at the transaction's first offset.
        assert end_offsets(broker.bootstrap_servers, topic, 0) == (60, 0)
        # A non-transactional record on the other partition, written after the transaction's
        # records: once the watcher has it, it has fetched past them and seen nothing.
        plain = producer("confluent", bs)
        plain.send(topic, 1, b"sentinel")
        plain.flush()
        seen: list[tuple[int, int, bytes | None]] = []
        while (1, 0, b"sentinel") not in seen:
            seen += watcher.poll()
        assert seen == [(1, 0, b"sentinel")]
        p.commit()
    finally:
        p.close()
    # 60 records and the COMMIT marker.
    assert settled_end_offsets(broker.bootstrap_servers, topic, 0) == (61, 61)
    after: list[tuple[int, int, bytes | None]] = []
    while len(after) < 60:
        after += watcher.poll()
    after += watcher.poll(1.0)
    watcher.close()
    assert after == [(0, i, v) for i, v in enumerate(values)]
    fresh = read(client, bs, [(topic, 0)], "read_committed", 60)
    assert fresh == [(0, i, v) for i, v in enumerate(values)]


@pytest.mark.parametrize("client", CLIENTS)
def test_abort_is_invisible_to_read_committed(broker: BrokerProcess, client: str) -> None:
    bs = broker.bootstrap_servers
    topic = new_topic(broker)
    p = producer(client, bs, f"tx-abort-{client}-{topic}")
    try:
        p.init()
        p.begin()
        for i in range(30):
            p.send(topic, i % 2, b"aborted-%d" % i)
        p.flush()
        p.abort()
        p.begin()
        for i in range(4):
            p.send(topic, i % 2, b"kept-%d" % i)
        p.commit()
    finally:
        p.close()
    tps = [(topic, 0), (topic, 1)]
    committed = read(client, bs, tps, "read_committed", 4)
    assert sorted(v for _, _, v in committed) == [b"kept-0", b"kept-1", b"kept-2", b"kept-3"]
    everything = read(client, bs, tps, "read_uncommitted", 34)
    assert sorted(v for _, _, v in everything) == sorted(
        [b"aborted-%d" % i for i in range(30)] + [b"kept-%d" % i for i in range(4)]
    )
    # Per partition: 15 aborted, ABORT marker, 2 kept, COMMIT marker.
    assert [settled_end_offsets(broker.bootstrap_servers, topic, q) for q in (0, 1)] == [
        (19, 19),
        (19, 19),
    ]


@pytest.mark.parametrize("client", CLIENTS)
def test_zombie_is_fenced(broker: BrokerProcess, client: str) -> None:
    bs = broker.bootstrap_servers
    topic = new_topic(broker)
    txn_id = f"tx-zombie-{client}-{topic}"
    old = producer(client, bs, txn_id)
    new = None
    try:
        old.init()
        old.begin()
        for i in range(10):
            old.send(topic, 0, b"zombie-%d" % i)
        old.flush()
        new = producer(client, bs, txn_id)
        new.init()  # aborts the old producer's transaction and bumps the epoch
        with pytest.raises(Exception) as info:  # noqa: B017 - each client has its own type
            old.commit()
        assert type(old).is_fenced(info.value), repr(info.value)
        new.begin()
        for i in range(5):
            new.send(topic, 0, b"new-%d" % i)
        new.commit()
    finally:
        old.close()
        if new is not None:
            new.close()
    got = read(client, bs, [(topic, 0)], "read_committed", 5)
    assert [v for _, _, v in got] == [b"new-%d" % i for i in range(5)]
    raw = read(client, bs, [(topic, 0)], "read_uncommitted", 15)
    assert [v for _, _, v in raw] == [b"zombie-%d" % i for i in range(10)] + [
        b"new-%d" % i for i in range(5)
    ]
