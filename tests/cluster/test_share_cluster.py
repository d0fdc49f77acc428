"""Share groups in a three-broker cluster: the share-partition leaders persist through the
share coordinators on other brokers (WriteShareGroupState over the inter-broker channels), and
after a partition leader is SIGKILLed the new leader rebuilds the share partition from that
state: acknowledged records stay done, released ones come back with their delivery count."""

from __future__ import annotations

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from replication_helpers import create_topic, partition_until

from gregor.client import AdminClient
from gregor.testing.cluster import ClusterProcess
from gregor.testing.etcd import etcd_binary

pytestmark = [
    pytest.mark.process,
    pytest.mark.timeout(300),
    pytest.mark.skipif(etcd_binary() is None, reason="no etcd binary (scripts/system-deps.sh)"),
]


def share_consumer(cluster: ClusterProcess) -> ShareConsumer:
    c = ShareConsumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": "workers",
            "share.acknowledgement.mode": "explicit",
        }
    )
    c.subscribe(["work"])
    return c


def test_share_state_survives_a_leader_kill(cluster: ClusterProcess) -> None:
    create_topic(cluster, "work", 2, 3)
    with AdminClient({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
        assert admin.incremental_alter_configs(
            {("group", "workers"): [("share.auto.offset.reset", 0, "earliest")]}
        ) == {(32, "workers"): None}
    expected = [b"w-%03d" % i for i in range(100)]
    p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for i, v in enumerate(expected):
        p.produce("work", v, partition=i % 2)
    assert p.flush(60) == 0
    c = share_consumer(cluster)
    seen: set[bytes] = set()
    try:
        while len(seen) < len(expected):
            for m in c.poll(0.5):
                if m.error() is None:
                    seen.add(m.value())
                    keep = int(m.value()[2:]) < 50
                    c.acknowledge(m, AcknowledgeType.ACCEPT if keep else AcknowledgeType.RELEASE)
            c.commit_sync(30)
    finally:
        c.close()
    killed = partition_until(cluster, "work", 0, lambda pm: len(pm.isrs) == 3).leader
    cluster.kill(killed)
    partition_until(cluster, "work", 0, lambda pm: pm.leader not in (-1, killed))
    c = share_consumer(cluster)
    again: dict[bytes, int] = {}
    try:
        while len(again) < 50:
            for m in c.poll(0.5):
                if m.error() is None:
                    again[m.value()] = m.delivery_count()
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
            c.commit_sync(30)
    finally:
        c.close()
    assert again == {v: 2 for v in expected[50:]}
