"""Hold-and-release on a real cluster: the proxy keeps back one request (EndTxn, Produce)
while the client retries, then delivers it late into the producer's next transaction.

On Gregor today a late EndTxn of the same producer epoch commits the next transaction while it
is open (Kafka's transaction version 1 behaves the same; KIP-890's transaction version 2, an
epoch bump per transaction, is the fix): that test is ``xfail(strict=True)`` until it lands.
A zombie's EndTxn from an older epoch is fenced, unless the coordinator is built with the
``endtxn-old-epoch`` bug; a late Produce is deduplicated."""

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


@pytest.mark.xfail(
    strict=True,
    reason="needs transaction version 2 (KIP-890: EndTxn v5, an epoch bump per transaction)",
)
def test_a_late_end_txn_of_the_same_epoch_does_not_end_the_next_transaction() -> None:
    out = scenario("hold-endtxn")
    assert out["t1_commit"] == "ok"
    assert out["observer_saw_v2_before_t2_ended"] is False
    assert out["anomalies"] == {}
