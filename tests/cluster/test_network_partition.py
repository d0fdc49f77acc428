"""A leader cut off from the other brokers and from etcd by TCP proxies (all on 127.0.0.1)
stops acknowledging acks=all writes; the others elect a new leader and carry on; when the
network heals, the old leader drops what it took alone and follows.

Each broker reaches etcd through its own proxy, and the others reach its REPLICATION listener
(the inter-broker listener) through another; clients talk to every broker directly. Cutting
a broker's two proxies partitions it from the cluster but not from its clients.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic, PartitionMetadata
from replication_helpers import CLUSTER_CONFIG, read_all
from tcp_proxy import ProxyLoop, TcpProxy, free_port
from test_replication import produce_one

from gregor.client.conn import BrokerConnection
from gregor.protocol.errors import ErrorCode
from gregor.protocol.messages import ProduceRequest, ProduceResponse
from gregor.protocol.records.batch import build_batch
from gregor.testing.cluster import ClusterProcess
from gregor.testing.etcd import etcd_binary

pytestmark = [
    pytest.mark.process,
    pytest.mark.slow,
    pytest.mark.skipif(etcd_binary() is None, reason="no etcd binary (scripts/system-deps.sh)"),
]

PREFIX = "partitioned"


class Partitionable:
    def __init__(self) -> None:
        self.loop = ProxyLoop()
        self.cluster: ClusterProcess
        replication_ports = {n: free_port() for n in (1, 2, 3)}
        self.etcd_proxy = {
            n: TcpProxy(self.loop, lambda: self.cluster.etcd.client_port) for n in (1, 2, 3)
        }  # type: ignore[union-attr]
        self.replication_proxy = {
            n: TcpProxy(self.loop, lambda port=replication_ports[n]: port) for n in (1, 2, 3)
        }
        per_broker = {
            n: {
                "metadata.store": f"etcd://127.0.0.1:{self.etcd_proxy[n].port}/{PREFIX}",
                "listeners": f"PLAINTEXT://127.0.0.1:0,REPLICATION://127.0.0.1:{replication_ports[n]}",
                "advertised.listeners": (
                    f"PLAINTEXT://127.0.0.1:0,REPLICATION://127.0.0.1:{self.replication_proxy[n].port}"
                ),
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,REPLICATION:PLAINTEXT",
                "inter.broker.listener.name": "REPLICATION",
            }
            for n in (1, 2, 3)
        }
        self.cluster = ClusterProcess(3, config=CLUSTER_CONFIG, broker_config=per_broker)

    def cut(self, node: int) -> None:
        self.etcd_proxy[node].cut()
        self.replication_proxy[node].cut()

    def heal(self, node: int) -> None:
        self.etcd_proxy[node].heal()
        self.replication_proxy[node].heal()

    def partition_seen_by(
        self, nodes: list[int], topic: str, condition: object
    ) -> PartitionMetadata:
        """The partition as brokers ``nodes`` report it, asked until ``condition`` holds."""
        bootstrap = ",".join(self.cluster.broker(n).bootstrap_servers for n in nodes)
        while True:
            try:
                md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
            except KafkaException:
                continue
            t = md.topics.get(topic)
            p = t.partitions.get(0) if t is not None and t.error is None else None
            if p is not None and condition(p):  # type: ignore[operator]
                return p


@pytest.fixture
def net() -> Iterator[Partitionable]:
    n = Partitionable()
    try:
        with n.cluster:
            yield n
    finally:
        n.loop.close()


def test_a_cut_off_leader_stops_acknowledging_acks_all(net: Partitionable) -> None:
    c = net.cluster
    everyone = [1, 2, 3]
    admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
    admin.create_topics([NewTopic("cut", 1, 3, config={"min.insync.replicas": "2"})])["cut"].result(
        30
    )
    # A broker may briefly answer leader -1 (LEADER_NOT_AVAILABLE) for a leader whose liveness
    # it has not confirmed yet, so the waits ask for a leader as well as the full ISR.
    net.partition_seen_by(everyone, "cut", lambda p: len(p.isrs) == 3 and p.leader in everyone)
    assert produce_one(c, "cut", b"before") is None
    old = net.partition_seen_by(
        everyone, "cut", lambda p: len(p.isrs) == 3 and p.leader in everyone
    ).leader
    others = [n for n in everyone if n != old]
    net.cut(old)

    async def produce_to_old() -> ProduceResponse:
        conn = await BrokerConnection("127.0.0.1", c.broker(old).port).connect()
        try:
            batch = build_batch([(0, None, b"alone")])
            return await conn.request(
                ProduceRequest(
                    acks=-1,
                    timeout_ms=4000,
                    topic_data=[
                        ProduceRequest.TopicData(
                            name="cut",
                            partition_data=[
                                ProduceRequest.TopicData.PartitionData(index=0, records=batch)
                            ],
                        )
                    ],
                ),
                9,
                timeout=60,
            )
        finally:
            conn.close()

    # The old leader can neither replicate nor shrink its ISR (etcd is unreachable): its
    # acks=all answer is an error, never an acknowledgement.
    refused = asyncio.run(produce_to_old()).responses[0].partition_responses[0]
    assert refused.error_code in (ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NOT_ENOUGH_REPLICAS)
    # The others elect a new leader from the ISR and take writes.
    new = net.partition_seen_by(others, "cut", lambda p: p.leader in others).leader
    via_others = Producer(
        {
            "bootstrap.servers": ",".join(c.broker(n).bootstrap_servers for n in others),
            "acks": "all",
            "message.timeout.ms": 60000,
        }
    )
    errors: list[object] = []
    via_others.produce(
        "cut", b"after", partition=0, on_delivery=lambda err, msg: errors.append(err)
    )
    assert via_others.flush(90) == 0 and errors == [None]
    net.heal(old)
    net.partition_seen_by(everyone, "cut", lambda p: len(p.isrs) == 3 and p.leader == new)
    assert read_all(c, "cut", 1, 2)[0] == [b"before", b"after"]
