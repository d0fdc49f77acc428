"""Replication between brokers over a secured inter-broker listener: a 3-broker cluster
(real brokers in this process sharing a memory metadata store, ``InProcessCluster``) whose brokers reach each other only through a SASL_SSL listener
logging in with PLAIN, or a SASL_PLAINTEXT one logging in with SCRAM-SHA-256 whose credential
is created through the client listener after the brokers start (until then the followers'
logins are refused and they keep trying). Clients use a separate PLAINTEXT listener. The
proof: every replica joins the ISR, acks=all produces are acknowledged, and every record
reads back; the brokers' logs show the refused logins and no password. (Each broker's log
holds the lines logged on the cluster's event loop in that broker's tasks; see
``gregor.testing.inprocess_cluster``.)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from certs import Pki
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from gregor.testing.inprocess_cluster import InProcessCluster

pytestmark = [pytest.mark.timeout(300)]

PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="broker" password="broker-secret" user_broker="broker-secret";'
)
SCRAM_JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    'username="replicator" password="replicator-secret";'
)


def two_listeners(protocol: str) -> dict[str, object]:
    return {
        "listeners": "PLAINTEXT://127.0.0.1:0,BROKER://127.0.0.1:0",
        "listener.security.protocol.map": f"PLAINTEXT:PLAINTEXT,BROKER:{protocol}",
        "inter.broker.listener.name": "BROKER",
        "replica.lag.time.max.ms": 3000,
        "replica.fetch.backoff.ms": 200,
    }


def round_trip(cluster: InProcessCluster, topic: str, count: int = 200) -> None:
    """RF=3 topic: every replica in the ISR, ``count`` acks=all records acknowledged and read."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    while len(admin.list_topics(timeout=10).brokers) < 3:
        pass
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
    while True:
        md = admin.list_topics(topic, timeout=10).topics[topic]
        if md.error is None and 0 in md.partitions and sorted(md.partitions[0].isrs) == [1, 2, 3]:
            break
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "enable.idempotence": True}
    )
    acked: list[bytes] = []
    for i in range(count):
        producer.produce(
            topic,
            b"r%04d" % i,
            partition=0,
            on_delivery=lambda err, msg: acked.append(msg.value()) if err is None else None,
        )
    assert producer.flush(60) == 0
    assert acked == [b"r%04d" % i for i in range(count)]
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": topic,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    while len(got) < count:
        m = consumer.poll(1.0)
        if m is not None and m.error() is None:
            got.append(m.value())
    consumer.close()
    assert got == acked


@pytest.fixture
def sasl_ssl_cluster(pki: Pki) -> Iterator[InProcessCluster]:
    config: dict[str, Any] = {
        **two_listeners("SASL_SSL"),
        "listener.name.broker.ssl.keystore.type": "PEM",
        "listener.name.broker.ssl.keystore.location": str(pki.server.combined),
        "listener.name.broker.ssl.truststore.type": "PEM",
        "listener.name.broker.ssl.truststore.location": str(pki.ca.ca_path),
        "listener.name.broker.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.broker.plain.sasl.jaas.config": PLAIN_JAAS,
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
    }
    with InProcessCluster(3, config=config) as c:
        yield c


def test_replication_over_sasl_ssl_with_plain(sasl_ssl_cluster: InProcessCluster) -> None:
    round_trip(sasl_ssl_cluster, "tls-replicated")
    for node in (1, 2, 3):
        assert "broker-secret" not in sasl_ssl_cluster.broker(node).read_log()


def test_replication_over_sasl_plaintext_with_scram_created_at_run_time() -> None:
    config: dict[str, Any] = {
        **two_listeners("SASL_PLAINTEXT"),
        "listener.name.broker.sasl.enabled.mechanisms": "SCRAM-SHA-256",
        "listener.name.broker.scram-sha-256.sasl.jaas.config": SCRAM_JAAS,
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256",
    }
    with InProcessCluster(3, config=config) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        admin.create_topics([NewTopic("before-credentials", 1, 3)])["before-credentials"].result(30)
        # No credential yet: followers' logins are refused, and they say so.
        while not any("login to broker" in cluster.broker(n).read_log() for n in (1, 2, 3)):
            admin.list_topics(timeout=10)
        admin.alter_user_scram_credentials(
            [
                UserScramCredentialUpsertion(
                    "replicator",
                    ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                    b"replicator-secret",
                )
            ]
        )["replicator"].result(30)
        round_trip(cluster, "scram-replicated")
        # The topic whose followers were refused before the credential existed takes acks=all
        # writes now: its ISR is whole again (or was shrunk and regrown through the controller).
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
        errors: list[object] = []
        for i in range(10):
            producer.produce(
                "before-credentials", b"%d" % i, on_delivery=lambda err, msg: errors.append(err)
            )
        assert producer.flush(60) == 0 and errors == [None] * 10
        for node in (1, 2, 3):
            assert "replicator-secret" not in cluster.broker(node).read_log()
