"""Seed 109's committed-offset regression, made deterministic: a group coordinator cut off from
etcd and the other brokers must not answer OffsetFetch from its cache once the group's
``__consumer_offsets`` partition has moved and a newer commit was acknowledged elsewhere.

The ``stale-coordinator`` scenario (``gregor.chaos.scenarios``) commits offset 5 through the
group's coordinator O, isolates O from etcd and its peers (clients still reach it), waits until
another broker's image shows a new coordinator N, commits 7 through N and sends an OffsetFetch
straight to O. O's etcd lease lapsed before etcd could expire it (the deadline is counted from
the keepalive's send time), which is before N could lead the partition: O answers
NOT_COORDINATOR, and the client looks the coordinator up again.
"""

from __future__ import annotations

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

NOT_SERVING = (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE)


def test_a_coordinator_cut_off_from_etcd_does_not_answer_offset_fetch_from_its_cache() -> None:
    with ChaosCluster(3, etcd_members=1) as cluster:
        create_topics(cluster, KEYS)
        out = run_scenario(cluster, "stale-coordinator", HistoryWriter(None))
    assert out["old_coordinator"] != out["controller"]
    assert out["first_commit"] is None
    assert out["before"] == (0, 0, 5)  # O served the group before the cut
    assert out["coordinator_moved"] is True
    assert out["new_coordinator"] not in (out["old_coordinator"], -1)
    assert out["second_commit"] is None  # 7 acknowledged by the new coordinator
    group_error, partition_error, offset = out["stale_answer"]
    assert (group_error, partition_error, offset) != (0, 0, 5), (
        f"broker {out['old_coordinator']}, cut off, answered the older committed offset 5 "
        f"from its cache after 7 was acknowledged: {out['stale_answer']}"
    )
    assert group_error in NOT_SERVING, out["stale_answer"]
    assert partition_error == group_error  # v2-7: carried on each partition too
    assert offset == -1
    assert out["after_heal"] == 7
    assert out["anomalies"] == {}  # on the old code: committed-offset-regression 1
