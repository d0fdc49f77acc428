"""Brokers on one etcd: a real client sees every registered broker and one controller, and a
topic created through one broker in the others' Metadata; a SIGKILLed controller disappears after its session timeout and another broker takes over.

Waits poll a condition (the client's Metadata), bounded by the test timeout; no sleeps.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ClusterMetadata, NewTopic

from gregor.testing.cluster import ClusterProcess
from gregor.testing.etcd import etcd_binary

pytestmark = [
    pytest.mark.process,
    pytest.mark.slow,
    pytest.mark.skipif(etcd_binary() is None, reason="no etcd binary (scripts/system-deps.sh)"),
]


@pytest.fixture
def cluster() -> Iterator[ClusterProcess]:
    with ClusterProcess(2) as c:
        yield c


def metadata_until(
    admin: AdminClient, condition: Callable[[ClusterMetadata], bool]
) -> ClusterMetadata:
    while True:
        try:
            md = admin.list_topics(timeout=10)
        except KafkaException:  # asked the killed broker before the client noticed: ask again
            continue
        if condition(md):
            return md


def test_clients_see_every_broker_one_controller_and_failover(cluster: ClusterProcess) -> None:
    first, second = cluster.broker(1), cluster.broker(2)
    admin = AdminClient({"bootstrap.servers": second.bootstrap_servers})
    md = metadata_until(admin, lambda m: sorted(m.brokers) == [1, 2])
    assert md.controller_id == 1
    assert {n: (b.host, b.port) for n, b in md.brokers.items()} == {
        1: ("127.0.0.1", first.port),
        2: ("127.0.0.1", second.port),
    }
    described = admin.describe_cluster().result(10)
    assert sorted(n.id for n in described.nodes) == [1, 2] and described.controller.id == 1
    via_first = AdminClient({"bootstrap.servers": first.bootstrap_servers})
    via_first.create_topics([NewTopic("orders", 3)])["orders"].result(10)
    md = metadata_until(admin, lambda m: "orders" in m.topics)
    assert sorted(md.topics["orders"].partitions) == [0, 1, 2]
    cluster.kill(1)  # SIGKILL: its etcd lease ends after broker.session.timeout.ms
    md = metadata_until(admin, lambda m: sorted(m.brokers) == [2] and m.controller_id == 2)
    assert md.brokers[2].port == second.port
