"""Ending a transaction from another client than the producer that wrote it (a transaction handle).

A Spark driver commits the transactions its tasks wrote: the tasks flush, hand over
``Producer.transaction_handle()`` and close; the driver calls ``AdminClient.end_transactions``.
"""

from __future__ import annotations

import json
import pickle

import pytest
from client_helpers import BrokerInfo, create_topic

from gregor.client import (
    AdminClient,
    Consumer,
    IllegalStateError,
    KafkaError,
    Producer,
    TopicPartition,
    TransactionHandle,
)

END_TXN = 26


def _read(bootstrap: str, tp: TopicPartition, isolation: str, expect: int) -> list[bytes]:
    """Every value of ``tp`` under ``isolation`` once ``expect`` are there (and one more poll)."""
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


def _write_open(bootstrap: str, topic: str, tid: str, values: list[bytes]) -> TransactionHandle:
    """Write ``values`` in a transaction, hand it over, close the producer without ending it."""
    with Producer({"bootstrap.servers": bootstrap, "transactional.id": tid}) as p:
        p.init_transactions()
        p.begin_transaction()
        for v in values:
            p.send(topic, v, partition=0)
        p.flush()
        return p.transaction_handle()


def _admin(broker: BrokerInfo) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap_servers})


def test_another_client_commits_a_handed_over_transaction(
    broker: BrokerInfo, topic_name: str
) -> None:
    broker.require(END_TXN)
    create_topic(broker, topic_name, 1)
    values = [b"v%d" % i for i in range(5)]
    handle = _write_open(broker.bootstrap_servers, topic_name, f"{topic_name}-tx", values)
    assert handle.transactional_id == f"{topic_name}-tx"
    assert handle.producer_id >= 0 and handle.producer_epoch >= 0
    # it travels as a task's commit message does: pickled, or as JSON in a decision record
    assert pickle.loads(pickle.dumps(handle)) == handle
    assert TransactionHandle(*json.loads(json.dumps(handle))) == handle
    with _admin(broker) as admin:
        assert admin.end_transactions([handle], True) == {handle: None}
    tp = TopicPartition(topic_name, 0)
    assert _read(broker.bootstrap_servers, tp, "read_committed", 5) == values


def test_ending_again_the_same_way_succeeds_the_other_way_fails(
    broker: BrokerInfo, topic_name: str
) -> None:
    broker.require(END_TXN)
    if broker.name == "tansu":
        pytest.xfail("Tansu 0.6.0 accepts EndTxn(abort) of a committed transaction")
    create_topic(broker, topic_name, 1)
    handle = _write_open(broker.bootstrap_servers, topic_name, f"{topic_name}-tx", [b"a", b"b"])
    with _admin(broker) as admin:
        assert admin.end_transactions([handle], True) == {handle: None}
        assert admin.end_transactions([tuple(handle)], True) == {handle: None}  # a retried commit
        got = admin.end_transactions([handle], False)[handle]
        assert isinstance(got, KafkaError) and got.name == "INVALID_TXN_STATE"
        with pytest.raises(KafkaError, match="EndTxn.abort. of") as raised:
            admin.end_transactions([handle], False, raise_on_error=True)
        assert raised.value.name == "INVALID_TXN_STATE"
    assert _read(broker.bootstrap_servers, TopicPartition(topic_name, 0), "read_committed", 2) == [
        b"a",
        b"b",
    ]


def test_aborting_by_handle_hides_the_records(broker: BrokerInfo, topic_name: str) -> None:
    broker.require(END_TXN)
    create_topic(broker, topic_name, 1)
    handle = _write_open(broker.bootstrap_servers, topic_name, f"{topic_name}-tx", [b"gone"] * 3)
    with _admin(broker) as admin:
        assert admin.end_transactions([handle], False) == {handle: None}
    with Producer({"bootstrap.servers": broker.bootstrap_servers}) as p:
        p.send(topic_name, b"after", partition=0).result(30)
    tp = TopicPartition(topic_name, 0)
    assert _read(broker.bootstrap_servers, tp, "read_committed", 1) == [b"after"]
    assert _read(broker.bootstrap_servers, tp, "read_uncommitted", 4) == [b"gone"] * 3 + [b"after"]


def test_a_fenced_handle_cannot_commit(broker: BrokerInfo, topic_name: str) -> None:
    """A newer InitProducerId for the id aborts the open transaction and fences its handle."""
    broker.require(END_TXN)
    if broker.name == "tansu":
        pytest.xfail("Tansu 0.6.0 closes the connection on EndTxn with a fenced epoch")
    create_topic(broker, topic_name, 1)
    tid = f"{topic_name}-tx"
    old = _write_open(broker.bootstrap_servers, topic_name, tid, [b"old"])
    other = _write_open(broker.bootstrap_servers, topic_name, f"{topic_name}-other", [b"other"])
    with Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": tid}) as p:
        p.init_transactions()
    with _admin(broker) as admin:
        got = admin.end_transactions([old, other], True)
    assert got[other] is None
    err = got[old]
    assert isinstance(err, KafkaError) and err.name in ("PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH")
    assert _read(broker.bootstrap_servers, TopicPartition(topic_name, 0), "read_committed", 1) == [
        b"other"
    ]


def test_a_handle_needs_an_open_transaction(broker: BrokerInfo, topic_name: str) -> None:
    broker.require(END_TXN)
    with Producer({"bootstrap.servers": broker.bootstrap_servers}) as plain:
        with pytest.raises(IllegalStateError, match="transactional.id"):
            plain.transaction_handle()
    with Producer(
        {"bootstrap.servers": broker.bootstrap_servers, "transactional.id": f"{topic_name}-tx"}
    ) as p:
        p.init_transactions()
        with pytest.raises(IllegalStateError, match="no transaction"):
            p.transaction_handle()
        p.begin_transaction()
        assert p.transaction_handle() == (
            f"{topic_name}-tx",
            p.aio.producer_id,
            p.aio.producer_epoch,
        )
        p.abort_transaction()
