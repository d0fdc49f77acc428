"""The cluster tests' shared fixture: ``cluster``, three brokers with the fast failure
detection of ``replication_helpers.CLUSTER_CONFIG`` (a module may define its own).

A test marked ``process`` (it kills or pauses a broker, waits out a session, or needs etcd
itself) gets broker processes on one etcd (``ClusterProcess``); any other test gets the same
brokers in this process, sharing a memory metadata store (``InProcessCluster``): no etcd, no
process starts, so it runs in the fast run too.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from replication_helpers import CLUSTER_CONFIG

from gregor.testing.cluster import ClusterProcess
from gregor.testing.inprocess_cluster import InProcessCluster


@pytest.fixture
def cluster(request: pytest.FixtureRequest) -> Iterator[ClusterProcess | InProcessCluster]:
    if request.node.get_closest_marker("process") is not None:
        with ClusterProcess(3, config=CLUSTER_CONFIG) as c:
            yield c
    else:
        with InProcessCluster(3, config=CLUSTER_CONFIG) as ic:
            yield ic
