"""Consume-transform-produce with confluent-kafka across a SIGKILL and restart of the broker.

Two transactions (records and ``send_offsets_to_transaction``) commit, the broker is killed
with SIGKILL and restarted on the same data: the same producer goes on with a third
transaction promptly, and a producer fenced by a newer incarnation across the restart gets
a fatal fencing error promptly, not a hang.

The broker answers every request of this exchange correctly after its reload (AddOffsetsToTxn,
TxnOffsetCommit, EndTxn; PRODUCER_FENCED for the zombie). The hang seen first was librdkafka's:
when its only broker goes away it re-bootstraps (KIP-899) and decommissions the broker handle,
but its coordinator cache keeps that handle as the group coordinator, so the TxnOffsetCommit of
``send_offsets_to_transaction`` waits for a state change that never comes, past its timeout
(librdkafka issues #5511 and #5456). The producers here turn re-bootstrap off
(``metadata.recovery.strategy=none``) so that the broker's side is what the test checks.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from interop_helpers import create_topic
from test_transactions_support import read, settled_end_offsets

from gregor.testing import BrokerProcess

BUDGET_S = 30.0
PER_TXN = 5


@pytest.fixture
def broker() -> Iterator[BrokerProcess]:
    with BrokerProcess(
        config={"transaction.state.log.num.partitions": 3, "offsets.topic.num.partitions": 3}
    ) as b:
        yield b


def txn_producer(bs: str, txn_id: str) -> Producer:
    p = Producer(
        {
            "bootstrap.servers": bs,
            "transactional.id": txn_id,
            "linger.ms": 5,
            # librdkafka #5511: see the module docstring.
            "metadata.recovery.strategy": "none",
        }
    )
    p.init_transactions(BUDGET_S)
    return p


def group_consumer(bs: str, group: str, src: str) -> Consumer:
    c = Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": group,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    c.assign([TopicPartition(src, 0)])
    return c


def poll_n(c: Consumer, n: int) -> list[tuple[int, bytes]]:
    out: list[tuple[int, bytes]] = []
    while len(out) < n:
        for m in c.consume(n - len(out), 0.5):
            assert m.error() is None, m.error()
            out.append((m.offset(), m.value()))
    return out


def one_transaction(p: Producer, c: Consumer, src: str, dst: str) -> list[tuple[int, bytes]]:
    """Consume PER_TXN records, write them transformed to ``dst`` and commit the offsets
    with the transaction."""
    recs = poll_n(c, PER_TXN)
    p.begin_transaction()
    for _, v in recs:
        p.produce(dst, value=b"out-" + v, partition=0)
    p.send_offsets_to_transaction(
        [TopicPartition(src, 0, recs[-1][0] + 1)], c.consumer_group_metadata(), BUDGET_S
    )
    p.commit_transaction(BUDGET_S)
    return recs


def committed(bs: str, group: str, src: str) -> int:
    c = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False})
    try:
        return int(c.committed([TopicPartition(src, 0)], timeout=BUDGET_S)[0].offset)
    finally:
        c.close()


def setup_topics(bs: str) -> tuple[str, str, str, str]:
    tag = uuid.uuid4().hex[:8]
    src, dst = f"in-{tag}", f"out-{tag}"
    create_topic(bs, src, 1)
    create_topic(bs, dst, 1)
    plain = Producer({"bootstrap.servers": bs})
    for i in range(4 * PER_TXN):
        plain.produce(src, value=b"%03d" % i, partition=0)
    assert plain.flush(BUDGET_S) == 0
    return src, dst, f"ctp-{tag}", f"txn-{tag}"


def test_transactions_go_on_after_sigkill_restart(broker: BrokerProcess) -> None:
    bs = broker.bootstrap_servers
    src, dst, group, txn_id = setup_topics(bs)
    p = txn_producer(bs, txn_id)
    c = group_consumer(bs, group, src)
    try:
        one_transaction(p, c, src, dst)
        one_transaction(p, c, src, dst)
        assert committed(bs, group, src) == 2 * PER_TXN
        broker.restart(hard=True)
        # The same producer and consumer go on: a third and a fourth transaction commit.
        one_transaction(p, c, src, dst)
        one_transaction(p, c, src, dst)
    finally:
        c.close()
    assert committed(bs, group, src) == 4 * PER_TXN
    # 4 transactions of PER_TXN records, each followed by its commit marker.
    assert settled_end_offsets(bs, dst, 0) == (4 * (PER_TXN + 1), 4 * (PER_TXN + 1))
    got = read("confluent", bs, [(dst, 0)], "read_committed", 4 * PER_TXN, linger=0)
    assert [v for _, _, v in got] == [b"out-%03d" % i for i in range(4 * PER_TXN)]


def test_producer_fenced_across_restart_fails_promptly(broker: BrokerProcess) -> None:
    bs = broker.bootstrap_servers
    src, dst, group, txn_id = setup_topics(bs)
    old = txn_producer(bs, txn_id)
    c = group_consumer(bs, group, src)
    try:
        one_transaction(old, c, src, dst)
        one_transaction(old, c, src, dst)
        broker.restart(hard=True)
        # A new incarnation fences the old one after the restart.
        new = txn_producer(bs, txn_id)
        recs = poll_n(c, PER_TXN)
        old.begin_transaction()
        old.produce(dst, value=b"zombie", partition=0)
        with pytest.raises(KafkaException) as failed:
            old.send_offsets_to_transaction(
                [TopicPartition(src, 0, recs[-1][0] + 1)], c.consumer_group_metadata(), BUDGET_S
            )
            old.commit_transaction(BUDGET_S)
        err = failed.value.args[0]
        assert err.fatal(), err
        assert err.code() in (err._FENCED, err.PRODUCER_FENCED, err.INVALID_PRODUCER_EPOCH), err
        # The new incarnation consumes from the committed offsets and commits.
        c.seek(TopicPartition(src, 0, 2 * PER_TXN))
        one_transaction(new, c, src, dst)
    finally:
        c.close()
    assert committed(bs, group, src) == 3 * PER_TXN
    got = read("confluent", bs, [(dst, 0)], "read_committed", 3 * PER_TXN, linger=0)
    assert [v for _, _, v in got] == [b"out-%03d" % i for i in range(3 * PER_TXN)]
