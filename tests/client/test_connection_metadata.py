"""Connections (version negotiation, pipelining), the metadata cache and KIP-951 leader hints,
fetch sessions, and pattern subscription."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from client_helpers import BrokerInfo, create_topic

from gregor.client import AIOConsumer, Consumer, Producer, TopicPartition, UnsupportedForBrokerError
from gregor.client.core.config import Config
from gregor.client.core.conn import BrokerConnection
from gregor.client.core.metadata import ClusterMetadata
from gregor.protocol.messages import (
    API_KEYS,
    ApiVersionsRequest,
    MetadataRequest,
    MetadataResponse,
    ProduceResponse,
)


def _metadata_response(leader: int, epoch: int) -> MetadataResponse:
    return MetadataResponse(
        brokers=[
            MetadataResponse.Brokers(node_id=1, host="h1", port=1),
            MetadataResponse.Brokers(node_id=2, host="h2", port=2),
        ],
        cluster_id="c",
        controller_id=1,
        topics=[
            MetadataResponse.Topics(
                name="t",
                topic_id=uuid.UUID(int=7),
                partitions=[
                    MetadataResponse.Topics.Partitions(
                        partition_index=0,
                        leader_id=leader,
                        leader_epoch=epoch,
                        replica_nodes=[1, 2],
                        isr_nodes=[1, 2],
                    ),
                ],
            )
        ],
    )


def test_kip951_leader_hint_moves_leader_without_refresh() -> None:
    cm = ClusterMetadata()
    cm.update(_metadata_response(leader=1, epoch=5), ["t"])
    tp = TopicPartition("t", 0)
    assert cm.leader_for(tp) == 1
    v = cm.version
    # A NOT_LEADER_OR_FOLLOWER answer names broker 3 (new to us) at epoch 6, with its endpoint
    endpoint = ProduceResponse.NodeEndpoints(node_id=3, host="h3", port=3)
    assert cm.update_leader("t", 0, 3, 6, [endpoint]) is True
    assert cm.leader_for(tp) == 3 and cm.partition(tp).leader_epoch == 6
    assert (cm.brokers[3].host, cm.brokers[3].port) == ("h3", 3)
    assert cm.version == v + 1
    # a stale hint (older epoch) is ignored
    assert cm.update_leader("t", 0, 1, 5) is False
    assert cm.leader_for(tp) == 3
    # unknown topic: nothing to update
    assert cm.update_leader("nope", 0, 1, 9) is False
    assert cm.topic_names[uuid.UUID(int=7)] == "t"


def test_metadata_drops_deleted_topics_on_full_refresh() -> None:
    cm = ClusterMetadata()
    cm.update(_metadata_response(1, 0), None)
    empty = _metadata_response(1, 0)
    empty.topics = []
    cm.update(empty, ["other"])  # a partial answer keeps what it did not name
    assert "t" in cm.topics
    cm.update(empty, None)  # a full answer is the whole truth
    assert "t" not in cm.topics and cm.topic_names == {}


def test_version_negotiation_and_pipelining(broker: BrokerInfo) -> None:
    host, port = Config(
        "client", {"bootstrap.servers": broker.bootstrap_servers}
    ).bootstrap_servers[0]

    async def run() -> None:
        conn = await BrokerConnection(host, port).connect()
        try:
            lo, hi = conn.api_versions[MetadataRequest.API_KEY]
            assert conn.version(MetadataRequest.API_KEY) == min(hi, API_KEYS[3].max_version)
            assert conn.version(MetadataRequest.API_KEY, max_version=4) == 4
            missing = next(k for k in API_KEYS if k not in conn.api_versions)
            with pytest.raises(UnsupportedForBrokerError):
                conn.version(missing)
            # 50 requests written back to back, answered in order on one connection
            futs = [conn.send(ApiVersionsRequest(), 0) for _ in range(25)]
            futs += [conn.send(MetadataRequest(topics=[]), 1) for _ in range(25)]
            assert conn.in_flight == 50
            results = await asyncio.gather(*futs)
            assert [type(r).__name__ for r in results] == ["ApiVersionsResponse"] * 25 + [
                "MetadataResponse"
            ] * 25
            assert conn.in_flight == 0
        finally:
            conn.close()

    asyncio.run(run())


def test_fetch_session_is_used_incrementally(broker: BrokerInfo, topic_name: str) -> None:
    create_topic(broker, topic_name, 2)
    with Producer({"bootstrap.servers": broker.bootstrap_servers}) as p:
        for i in range(30):
            p.send(topic_name, b"%d" % i, partition=i % 2)
        p.flush()

    async def run() -> None:
        async with AIOConsumer(
            {"bootstrap.servers": broker.bootstrap_servers, "auto.offset.reset": "earliest"}
        ) as c:
            c.assign([TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)])
            got: list = []
            while len(got) < 30:
                got += await c.poll(200)
            assert sorted(int(r.value) for r in got) == list(range(30))

            # A few more fetch rounds: until the session's epoch has moved on (or the broker
            # refused it, or granted none).
            def rounds_done() -> bool:
                s = list(c._fetcher.sessions.values())
                return (
                    bool(c._fetcher.session_errors)
                    or bool(s)
                    and (s[0].session_id == 0 or s[0].epoch >= 2)
                )

            while not rounds_done():
                got += await c.poll(200)
            if c._fetcher.session_errors:
                assert broker.name != "gregor", (
                    f"Gregor refused fetch session epochs: {c._fetcher.session_errors}"
                )
                pytest.xfail(
                    f"{broker.name} refused the epoch-1 fetch that follows session creation "
                    "(KIP-227: the first incremental fetch carries epoch 1)"
                )
            sessions = list(c._fetcher.sessions.values())
            if not sessions or sessions[0].session_id == 0:
                pytest.skip(f"{broker.name} did not grant a fetch session")
            first_id = sessions[0].session_id
            # new data still arrives through the session
            with Producer({"bootstrap.servers": broker.bootstrap_servers}) as p:
                p.send(topic_name, b"late", partition=1).result()
            more: list = []
            while not more:
                more = await c.poll(200)
            assert [(r.partition, r.value) for r in more] == [(1, b"late")]
            session = next(iter(c._fetcher.sessions.values()))
            assert session.session_id == first_id  # the same session all along
            assert c._fetcher.session_errors == 0
            assert session.epoch >= 2  # the later fetches were incremental ones in it

    asyncio.run(run())


@pytest.mark.slow
def test_pattern_subscription(broker: BrokerInfo) -> None:
    broker.require(10, 11, 14, 12, 8, 9)
    prefix = f"pat-{uuid.uuid4().hex[:6]}"
    for i in range(2):
        create_topic(broker, f"{prefix}-{i}", 1)
    with Producer({"bootstrap.servers": broker.bootstrap_servers}) as p:
        p.send(f"{prefix}-0", b"a", partition=0)
        p.send(f"{prefix}-1", b"b", partition=0)
        p.flush()
    with Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": f"g-{prefix}",
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
        }
    ) as c:
        c.subscribe(pattern=f"{prefix}-.*")
        got: list = []
        while len(got) < 2:
            got += c.poll(300)
        assert sorted((r.topic, r.value) for r in got) == [
            (f"{prefix}-0", b"a"),
            (f"{prefix}-1", b"b"),
        ]
        assert c.subscription() == {f"{prefix}-0", f"{prefix}-1"}
