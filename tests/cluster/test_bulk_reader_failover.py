"""Gregor's bulk reader (``RangeReader``, the Spark source's reader) while the partition leader
is SIGKILLed: mid-read, with a fetch in flight on its blocking connection, and between two
reads, when the connection it left for the next reader goes to the dead broker. Both reads
return every record exactly once, in offset order.
"""

from __future__ import annotations

import pytest
from confluent_kafka import Producer
from replication_helpers import create_topic, partition_until

from gregor.client.bulk import _IDLE, RangeReader, close_shared_clients, shared_client
from gregor.testing.cluster import ClusterProcess
from gregor.testing.etcd import etcd_binary

pytestmark = [
    pytest.mark.process,
    pytest.mark.slow,
    pytest.mark.skipif(etcd_binary() is None, reason="no etcd binary (scripts/system-deps.sh)"),
]

RECORDS = 4000


def kill_leader(cluster: ClusterProcess, topic: str) -> int:
    leader = partition_until(cluster, topic, 0, lambda p: len(p.isrs) == 3).leader
    cluster.kill(leader)
    partition_until(cluster, topic, 0, lambda p, gone=leader: p.leader not in (gone, -1))
    return leader


def test_range_reader_survives_leader_kills(cluster: ClusterProcess) -> None:
    create_topic(cluster, "bulk", 1, 3, {"min.insync.replicas": "2"})
    values = [b"%08d" % i + b"." * 120 for i in range(RECORDS)]
    p = Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "acks": "all",
            "enable.idempotence": True,
            "batch.size": 16384,
        }
    )
    for v in values:
        p.produce("bulk", v, partition=0)
    assert p.flush(60) == 0
    client = shared_client(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "retry.backoff.ms": 100,
            "metadata.max.age.ms": 2000,
        }
    )
    try:
        # small fetches and chunks: the first chunk is handed out with the next fetch in flight
        reader = iter(
            RangeReader(client, "bulk", 0, 0, RECORDS, chunk_records=500, max_bytes=16384)
        )
        got = [next(reader)]
        killed = kill_leader(cluster, "bulk")
        got += list(reader)
        assert [o for b in got for o in b.column("offset").to_pylist()] == list(range(RECORDS))
        assert [v for b in got for v in b.column("value").to_pylist()] == values
        assert any(
            conns for key, conns in _IDLE.items() if key[0] is client
        )  # the reader left its connection

        cluster.restart(killed)
        kill_leader(
            cluster, "bulk"
        )  # the connection left behind leads to a dead broker or a follower
        again = list(RangeReader(client, "bulk", 0, 100, RECORDS - 100, chunk_records=1000))
        assert [o for b in again for o in b.column("offset").to_pylist()] == list(
            range(100, RECORDS - 100)
        )
        assert [v for b in again for v in b.column("value").to_pylist()] == values[100:-100]
    finally:
        close_shared_clients()
