"""Seed 109's torn transaction, made deterministic: a transaction marker acknowledged by a stale
partition leader before any follower had it.

The ``stale-leader-marker`` scenario (``gregor.chaos.scenarios``) cuts the leader of one key
off from etcd, the controller and its followers while the transaction coordinator can still
reach it, aborts the transaction (librdkafka, transaction version 1) so the ABORT marker goes to
that stale leader, lets another broker take the partition over, heals, and commits the same
producer's next transaction on the key. Kafka writes a marker with ``requiredAcks = -1``
(``KafkaApis.handleWriteTxnMarkersRequest``): the stale leader cannot answer before the high
watermark covers the marker, so the coordinator writes it again to the new leader and the
aborted value stays aborted.
"""

from __future__ import annotations

import pytest

from gregor.chaos.cluster import ChaosCluster
from gregor.chaos.history import HistoryWriter
from gregor.chaos.runner import create_topics
from gregor.chaos.scenarios import KEYS, run_scenario
from gregor.testing.etcd import etcd_binary

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(300),
    pytest.mark.skipif(etcd_binary() is None, reason="no etcd binary (scripts/system-deps.sh)"),
]


def test_an_abort_marker_acknowledged_by_a_stale_leader_is_written_again_to_the_new_one() -> None:
    with ChaosCluster(3, etcd_members=1) as cluster:
        create_topics(cluster, KEYS)
        out = run_scenario(cluster, "stale-leader-marker", HistoryWriter(None))
    assert len({out["controller"], out["coordinator"], out["leader"]}) == 3
    assert out["t1_end"] == "aborted"
    assert out["leader_moved"] is True  # the controller gave the key to another broker
    assert out["t2_end"] == "committed"
    assert out["final"] == [1_000_003]  # T2's v2 only: T1's v1 (and v1b) stay aborted
    assert out["anomalies"] == {}
