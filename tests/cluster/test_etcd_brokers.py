"""Brokers on one etcd: a real client sees every registered broker and one controller; a
SIGKILLed controller disappears after its session timeout and another broker takes over.

Waits poll a condition (the client's Metadata), bounded by the test timeout; no sleeps.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ClusterMetadata

from gregor.testing import BrokerProcess
from gregor.testing.etcd import EtcdProcess, etcd_binary

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(etcd_binary() is None, reason="no etcd binary (scripts/system-deps.sh)"),
]


@pytest.fixture
def brokers() -> Iterator[list[BrokerProcess]]:
    with EtcdProcess() as etcd:
        url = f"{etcd.url}/brokers/{uuid.uuid4().hex}"
        members = [
            BrokerProcess({"node.id": n, "metadata.store": url, "broker.session.timeout.ms": 2000})
            for n in (1, 2)
        ]
        try:
            for b in members:
                b.start()
            yield members
        finally:
            for b in members:
                b.close()


def metadata_until(admin: AdminClient, condition: Callable[[ClusterMetadata], bool]) -> ClusterMetadata:
    while True:
        try:
            md = admin.list_topics(timeout=10)
        except KafkaException:  # asked the killed broker before the client noticed: ask again
            continue
        if condition(md):
            return md


def test_clients_see_every_broker_one_controller_and_failover(brokers: list[BrokerProcess]) -> None:
    first, second = brokers
    admin = AdminClient({"bootstrap.servers": second.bootstrap_servers})
    md = metadata_until(admin, lambda m: sorted(m.brokers) == [1, 2])
    assert md.controller_id == 1
    assert {n: (b.host, b.port) for n, b in md.brokers.items()} == {
        1: ("127.0.0.1", first.port), 2: ("127.0.0.1", second.port),
    }
    cluster = admin.describe_cluster().result(10)
    assert sorted(n.id for n in cluster.nodes) == [1, 2] and cluster.controller.id == 1
    first.kill()  # SIGKILL: its etcd lease ends after broker.session.timeout.ms
    md = metadata_until(admin, lambda m: sorted(m.brokers) == [2] and m.controller_id == 2)
    assert md.brokers[2].port == second.port
