"""The cluster tests' shared fixture: ``cluster``, three brokers on one etcd with the fast
failure detection of ``replication_helpers.CLUSTER_CONFIG`` (a module may define its own)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from replication_helpers import CLUSTER_CONFIG

from gregor.testing.cluster import ClusterProcess


@pytest.fixture
def cluster() -> Iterator[ClusterProcess]:
    with ClusterProcess(3, config=CLUSTER_CONFIG) as c:
        yield c
