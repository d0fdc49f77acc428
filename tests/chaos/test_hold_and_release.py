"""Hold-and-release on a real cluster: the proxy keeps back one request (EndTxn, Produce)
while the client retries, then delivers it late into the producer's next transaction.

A late EndTxn of the same producer epoch commits the next transaction while it is open under
Kafka's transaction protocol version 1; version 2 (KIP-890 part 2: an epoch bump at every end,
EndTxn v5) fences it. Gregor's own client speaks version 2 on a cluster that finalized
``transaction.version`` 2, so the late EndTxn is fenced; librdkafka 2.15 (confluent-kafka)
speaks only version 1 (EndTxn v0-1), and on any Kafka its late EndTxn still ends the next
transaction: Kafka's own allowance for version 1 clients, which the checker reports apart
(``late-end-txn``, with the released request). A zombie's EndTxn from an older epoch is fenced, unless the coordinator is built with
the ``endtxn-old-epoch`` bug; a late Produce is deduplicated."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gregor.chaos.cluster import ChaosCluster
from gregor.chaos.history import HistoryWriter
from gregor.chaos.runner import create_topics
from gregor.chaos.scenarios import KEYS, run_scenario
from gregor.protocol.errors import ErrorCode
from gregor.testing.etcd import etcd_binary

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(300),
    pytest.mark.skipif(etcd_binary() is None, reason="no etcd binary (scripts/system-deps.sh)"),
]


def scenario(name: str, client: str = "confluent", bug: str | None = None) -> dict[str, object]:
    with ChaosCluster(3, etcd_members=1, bug=bug) as cluster:
        create_topics(cluster, KEYS)
        return run_scenario(cluster, name, HistoryWriter(None), client=client)


@pytest.fixture(scope="module")
def zombie() -> Iterator[dict[str, object]]:
    yield scenario("hold-endtxn-zombie")


def test_a_zombies_late_end_txn_is_fenced(zombie: dict[str, object]) -> None:
    assert zombie["held"] == 1
    assert [r["error_code"] for r in zombie["released"]] == [ErrorCode.INVALID_PRODUCER_EPOCH]  # type: ignore[attr-defined,index]
    assert zombie["observer_saw_v2_before_t2_ended"] is False
    assert zombie["t2_end"] == "aborted"
    assert zombie["final"] == []  # T1 aborted by the fence, T2 on purpose
    assert zombie["anomalies"] == {}


def test_a_coordinator_that_takes_an_older_epochs_end_txn_fails_the_scenario() -> None:
    out = scenario("hold-endtxn-zombie", bug="endtxn-old-epoch")
    assert [r["error_code"] for r in out["released"]] == [0]  # type: ignore[attr-defined,index]
    assert out["observer_saw_v2_before_t2_ended"] is True
    assert "precommitted-read" in out["anomalies"]  # type: ignore[operator]


def test_a_late_produce_is_deduplicated() -> None:
    out = scenario("hold-produce")
    assert out["held"] == 1
    (answer,) = out["released"]  # type: ignore[misc]
    assert answer["partitions"][0]["error_code"] == 0  # answered as the duplicate it is...
    assert out["final"] == [1_000_002, 1_000_003]  # ...not appended into T2: T1's v1 stays aborted
    assert out["anomalies"] == {}


def test_a_late_end_txn_of_the_same_epoch_does_not_end_the_next_transaction() -> None:
    out = scenario("hold-endtxn", client="gregor")  # transaction version 2
    assert out["t1_commit"] == "ok"
    assert out["held"] == 1
    assert [(r["api_version"], r["error_code"]) for r in out["released"]] == [
        (5, ErrorCode.PRODUCER_FENCED)
    ]  # type: ignore[attr-defined]
    assert out["observer_saw_v2_before_t2_ended"] is False
    assert out["t2_end"] == "aborted"
    assert out["final"] == [1_000_001]  # T1 committed once; T2 aborted on purpose
    assert out["anomalies"] == {}


def test_a_version_1_clients_late_end_txn_ends_the_next_transaction_as_on_kafka() -> None:
    """librdkafka 2.15 speaks only transaction version 1 (EndTxn v0-1): its late EndTxn of the
    same epoch ends the next transaction on Kafka too (KIP-890 part 2 needs the client), so the
    checker reports the reads it causes as that allowance, with the released request."""
    out = scenario("hold-endtxn")
    assert out["t1_commit"] == "ok"
    assert [(r["api_version"], r["error_code"]) for r in out["released"]] == [(1, 0)]  # type: ignore[attr-defined]
    assert out["observer_saw_v2_before_t2_ended"] is True  # T2 committed by T1's late EndTxn
    assert out["anomalies"] == {}
    report = out["report"]
    late = report.allowed["late-end-txn"]  # type: ignore[attr-defined]
    assert {e["anomaly"] for e in late} >= {"precommitted-read"}
    assert {e["held"]["client_id"] for e in late} == {"chaos-s1"}
