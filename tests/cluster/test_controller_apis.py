"""The controller's APIs between real brokers (3 brokers in this process sharing a memory
metadata store, ``InProcessCluster``, a separate REPLICATION inter-broker listener), spoken
with raw requests as another broker would.

Broker to controller: AlterPartition, AllocateProducerIds and ControlledShutdown are served
and advertised only on the inter-broker listener; the controller fences stale brokers, leader
epochs, partition epochs and ineligible ISR members with Kafka's errors; producer-id blocks
never overlap; a controlled shutdown moves leadership away and keeps the broker out of ISRs
until it registers again; UnregisterBroker refuses an unknown id, and a running broker that
is unregistered registers again. (That leaders' ISR changes and SIGTERM use these APIs is
covered by test_replication.py.)

Controller to broker: LeaderAndIsr (v0-7), UpdateMetadata and StopReplica fence a stale
controller epoch and broker epoch and answer per partition; the controller sends them to the
other brokers as the cluster changes, and a reassignment's removed replica is told to stop
and delete its log.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kafka import KafkaAdminClient
from kafka import TopicPartition as KTopicPartition
from replication_helpers import CLUSTER_CONFIG, create_topic, metadata_until

from gregor.client.conn import BrokerConnection
from gregor.client.errors import KafkaConnectionError
from gregor.cluster.image import MetadataImage
from gregor.protocol.errors import ErrorCode
from gregor.protocol.messages import Message
from gregor.protocol.messages.allocate_producer_ids import AllocateProducerIdsRequest
from gregor.protocol.messages.alter_partition import AlterPartitionRequest
from gregor.protocol.messages.api_versions import ApiVersionsRequest
from gregor.protocol.messages.controlled_shutdown import ControlledShutdownRequest
from gregor.protocol.messages.leader_and_isr import LeaderAndIsrRequest
from gregor.protocol.messages.stop_replica import StopReplicaRequest
from gregor.protocol.messages.unregister_broker import UnregisterBrokerRequest
from gregor.protocol.messages.update_metadata import UpdateMetadataRequest
from gregor.testing.inprocess_cluster import InProcessCluster

pytestmark = [pytest.mark.timeout(300)]

#: AlterPartition, AllocateProducerIds, ControlledShutdown; LeaderAndIsr, StopReplica, UpdateMetadata.
INTER_BROKER = {56: (0, 3), 67: (0, 0), 7: (0, 3), 4: (0, 7), 5: (0, 4), 6: (0, 8)}
TWO_LISTENERS = {
    **CLUSTER_CONFIG,
    "listeners": "PLAINTEXT://127.0.0.1:0,REPLICATION://127.0.0.1:0",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,REPLICATION:PLAINTEXT",
    "inter.broker.listener.name": "REPLICATION",
}
Part = AlterPartitionRequest.Topics.Partitions
Member = AlterPartitionRequest.Topics.Partitions.NewIsrWithEpochs


@pytest.fixture
def cluster() -> Iterator[InProcessCluster]:
    with InProcessCluster(3, config=TWO_LISTENERS) as c:
        yield c


def ask(cluster: InProcessCluster, node: int, listener: str, message: Message, version: int) -> Any:
    async def go() -> Any:
        host, port = cluster.broker(node).bootstrap(listener).rsplit(":", 1)
        conn = await BrokerConnection(
            host, int(port), node_id=node, client_id="controller-api-test", request_timeout_ms=30000
        ).connect()
        try:
            return await conn.request(message, version)
        finally:
            conn.close()

    return asyncio.run(go())


def image(cluster: InProcessCluster) -> MetadataImage:
    """The cluster's metadata as the store holds it (epochs clients never see)."""
    return cluster.image


def controller_of(cluster: InProcessCluster) -> int:
    return metadata_until(cluster, lambda m: m.controller_id > 0).controller_id


def alter(
    broker: int,
    broker_epoch: int,
    topic_id: uuid.UUID,
    leader_epoch: int,
    partition_epoch: int,
    isr: list[tuple[int, int]],
) -> AlterPartitionRequest:
    return AlterPartitionRequest(
        broker_id=broker,
        broker_epoch=broker_epoch,
        topics=[
            AlterPartitionRequest.Topics(
                topic_id=topic_id,
                partitions=[
                    Part(
                        partition_index=0,
                        leader_epoch=leader_epoch,
                        partition_epoch=partition_epoch,
                        new_isr_with_epochs=[Member(broker_id=b, broker_epoch=e) for b, e in isr],
                    )
                ],
            ),
        ],
    )


def test_advertised_and_served_only_on_the_inter_broker_listener(cluster: InProcessCluster) -> None:
    hello = ApiVersionsRequest(client_software_name="t", client_software_version="1")
    clients = {
        k.api_key: (k.min_version, k.max_version)
        for k in ask(cluster, 1, "PLAINTEXT", hello, 3).api_keys
    }
    brokers = {
        k.api_key: (k.min_version, k.max_version)
        for k in ask(cluster, 1, "REPLICATION", hello, 3).api_keys
    }
    assert {k: brokers.get(k) for k in INTER_BROKER} == INTER_BROKER
    assert not set(INTER_BROKER) & set(clients)
    assert clients[64] == brokers[64] == (0, 0)  # UnregisterBroker: an admin API, everywhere
    with pytest.raises(KafkaConnectionError):  # an API this listener does not serve: closed
        ask(cluster, 1, "PLAINTEXT", AllocateProducerIdsRequest(broker_id=1, broker_epoch=-1), 0)


def test_alter_partition_is_fenced_as_kafka_fences_it(cluster: InProcessCluster) -> None:
    create_topic(cluster, "isr", 1, 3)
    controller = controller_of(cluster)
    other = next(n for n in (1, 2, 3) if n != controller)
    img = image(cluster)
    topic = img.topics["isr"]
    p = topic.partitions[0]
    leader, epoch = p.leader, img.brokers[p.leader].epoch
    dropped = next(r for r in p.isr if r != leader)
    kept = [(r, img.brokers[r].epoch) for r in p.isr if r != dropped]

    def code(req: AlterPartitionRequest, node: int = controller) -> int:
        resp = ask(cluster, node, "REPLICATION", req, 3)
        return resp.error_code or resp.topics[0].partitions[0].error_code

    tid = topic.topic_id
    assert (
        code(alter(leader, epoch, tid, p.leader_epoch, p.partition_epoch, kept), other)
        == ErrorCode.NOT_CONTROLLER
    )
    assert (
        code(alter(leader, epoch + 1000, tid, p.leader_epoch, p.partition_epoch, kept))
        == ErrorCode.STALE_BROKER_EPOCH
    )
    assert (
        code(alter(dropped, -1, tid, p.leader_epoch, p.partition_epoch, kept))
        == ErrorCode.INVALID_REQUEST
    )
    assert (
        code(alter(leader, epoch, tid, p.leader_epoch - 1, p.partition_epoch, kept))
        == ErrorCode.FENCED_LEADER_EPOCH
    )
    assert (
        code(alter(leader, epoch, tid, p.leader_epoch, p.partition_epoch + 5, kept))
        == ErrorCode.INVALID_UPDATE_VERSION
    )
    assert (
        code(alter(leader, epoch, uuid.uuid4(), p.leader_epoch, p.partition_epoch, kept))
        == ErrorCode.UNKNOWN_TOPIC_ID
    )
    shrunk = ask(
        cluster,
        controller,
        "REPLICATION",
        alter(leader, epoch, tid, p.leader_epoch, p.partition_epoch, kept),
        3,
    )
    state = shrunk.topics[0].partitions[0]
    assert (shrunk.error_code, state.error_code, state.leader_id, state.leader_epoch) == (
        0,
        0,
        leader,
        p.leader_epoch,
    )
    assert (sorted(state.isr), state.partition_epoch) == (
        sorted(r for r, _ in kept),
        p.partition_epoch + 1,
    )
    # A member with another broker epoch than its registration's (restarted since) may not join.
    stale_member = kept + [(dropped, img.brokers[dropped].epoch + 1000)]
    assert (
        code(alter(leader, epoch, tid, p.leader_epoch, state.partition_epoch, stale_member))
        == ErrorCode.INELIGIBLE_REPLICA
    )
    # The follower left out is still fetching: its leader brings it back in through the controller.
    metadata_until(cluster, lambda m: sorted(m.topics["isr"].partitions[0].isrs) == [1, 2, 3])


def test_producer_id_blocks_come_from_the_controller_and_never_overlap(
    cluster: InProcessCluster,
) -> None:
    controller = controller_of(cluster)
    other = next(n for n in (1, 2, 3) if n != controller)
    blocks = []
    for node in (1, 2, 3):
        resp = ask(
            cluster,
            controller,
            "REPLICATION",
            AllocateProducerIdsRequest(broker_id=node, broker_epoch=-1),
            0,
        )
        assert resp.error_code == 0 and resp.producer_id_len == 1000
        blocks.append(range(resp.producer_id_start, resp.producer_id_start + resp.producer_id_len))
    assert all(a.stop <= b.start for a, b in zip(blocks, blocks[1:], strict=False))
    asked_elsewhere = ask(
        cluster, other, "REPLICATION", AllocateProducerIdsRequest(broker_id=1, broker_epoch=-1), 0
    )
    assert asked_elsewhere.error_code == ErrorCode.NOT_CONTROLLER
    stale = ask(
        cluster,
        controller,
        "REPLICATION",
        AllocateProducerIdsRequest(broker_id=1, broker_epoch=10**9),
        0,
    )
    assert stale.error_code == ErrorCode.STALE_BROKER_EPOCH
    unknown = ask(
        cluster,
        controller,
        "REPLICATION",
        AllocateProducerIdsRequest(broker_id=42, broker_epoch=-1),
        0,
    )
    assert unknown.error_code == ErrorCode.STALE_BROKER_EPOCH


def test_controlled_shutdown_moves_leadership_and_keeps_the_broker_out_of_isrs(
    cluster: InProcessCluster,
) -> None:
    create_topic(cluster, "cs", 3, 3)
    controller = controller_of(cluster)
    leaving = next(n for n in (1, 2, 3) if n != controller)
    resp = ask(
        cluster,
        controller,
        "REPLICATION",
        ControlledShutdownRequest(broker_id=leaving, broker_epoch=-1),
        3,
    )
    assert (resp.error_code, resp.remaining_partitions) == (0, [])

    def moved(m: Any) -> bool:
        parts = m.topics["cs"].partitions.values()
        return all(
            p.leader != leaving and leaving not in p.isrs and len(p.isrs) == 2 for p in parts
        )

    metadata_until(cluster, moved)
    # Still running and fetching, but the controller refuses it back into any ISR: check the
    # leaders' refusals directly with one more request of our own.
    img = image(cluster)
    p = img.topics["cs"].partitions[0]
    back_in = [(r, -1) for r in p.isr] + [(leaving, -1)]
    answer = ask(
        cluster,
        controller,
        "REPLICATION",
        alter(p.leader, -1, img.topics["cs"].topic_id, p.leader_epoch, p.partition_epoch, back_in),
        3,
    )
    assert answer.topics[0].partitions[0].error_code == ErrorCode.INELIGIBLE_REPLICA
    # Registering again (a restart) ends the shutdown: it rejoins every ISR.
    cluster.restart(leaving)
    metadata_until(
        cluster, lambda m: all(len(p.isrs) == 3 for p in m.topics["cs"].partitions.values())
    )


def test_unregister_broker_refuses_an_unknown_id(cluster: InProcessCluster) -> None:
    resp = ask(cluster, 1, "PLAINTEXT", UnregisterBrokerRequest(broker_id=42), 0)
    assert resp.error_code == ErrorCode.BROKER_ID_NOT_REGISTERED and "42" in resp.error_message


def test_an_unregistered_running_broker_registers_again_with_a_new_epoch(
    cluster: InProcessCluster,
) -> None:
    metadata_until(cluster, lambda m: len(m.brokers) == 3)
    before = image(cluster).brokers[3].epoch
    resp = ask(cluster, 1, "PLAINTEXT", UnregisterBrokerRequest(broker_id=3), 0)
    assert resp.error_code == 0
    while True:  # gone, then back: the running broker registers again, as Kafka's does
        reg = image(cluster).brokers.get(3)
        if reg is not None and reg.epoch > before:
            break
    assert "event=broker.registering_again" in cluster.broker(3).read_log()
    metadata_until(cluster, lambda m: sorted(m.brokers) == [1, 2, 3])


# --- controller to broker: LeaderAndIsr, UpdateMetadata, StopReplica ---

LState = LeaderAndIsrRequest.TopicStates.PartitionStates


def leader_and_isr(
    img: MetadataImage,
    broker: int,
    topic: str,
    version: int,
    *,
    controller_epoch: int | None = None,
    broker_epoch: int | None = None,
    leader_epoch_delta: int = 0,
    partition_epoch_delta: int = 0,
) -> LeaderAndIsrRequest:
    t = img.topics[topic]
    p = t.partitions[0]
    fields = {
        "partition_index": 0,
        "controller_epoch": img.controller_epoch,
        "leader": p.leader,
        "leader_epoch": p.leader_epoch + leader_epoch_delta,
        "isr": list(p.isr),
        "partition_epoch": p.partition_epoch + partition_epoch_delta,
        "replicas": list(p.replicas),
    }
    common = {
        "controller_id": img.controller_id,
        "controller_epoch": img.controller_epoch if controller_epoch is None else controller_epoch,
        "broker_epoch": img.brokers[broker].epoch if broker_epoch is None else broker_epoch,
    }
    if version >= 2:
        return LeaderAndIsrRequest(
            **common,
            topic_states=[
                LeaderAndIsrRequest.TopicStates(
                    topic_name=topic, topic_id=t.topic_id, partition_states=[LState(**fields)]
                )
            ],
        )
    return LeaderAndIsrRequest(
        **common,
        ungrouped_partition_states=[
            LeaderAndIsrRequest.UngroupedPartitionStates(topic_name=topic, **fields)
        ],
    )


def lai_codes(resp: Any, version: int) -> list[int]:
    if version >= 5:
        return [p.error_code for t in resp.topics for p in t.partition_errors]
    return [p.error_code for p in resp.partition_errors]


@pytest.mark.parametrize("version", [0, 1, 4, 5, 7])
def test_leader_and_isr_is_fenced_and_answered_per_partition(
    cluster: InProcessCluster, version: int
) -> None:
    create_topic(cluster, "driven", 1, 3)
    img = image(cluster)
    broker = next(n for n in (1, 2, 3) if n != img.controller_id)

    def send(**kw: Any) -> Any:
        return ask(
            cluster,
            broker,
            "REPLICATION",
            leader_and_isr(img, broker, "driven", version, **kw),
            version,
        )

    assert (
        send(controller_epoch=img.controller_epoch - 1).error_code
        == ErrorCode.STALE_CONTROLLER_EPOCH
    )
    if version >= 2:  # broker epochs from v2
        assert (
            send(broker_epoch=img.brokers[broker].epoch + 1000).error_code
            == ErrorCode.STALE_BROKER_EPOCH
        )
    current = send()
    assert current.error_code == 0 and lai_codes(current, version) == [ErrorCode.NONE]
    assert lai_codes(send(leader_epoch_delta=-1), version) == [ErrorCode.STALE_CONTROLLER_EPOCH]
    assert lai_codes(send(partition_epoch_delta=5), version) == [ErrorCode.REQUEST_TIMED_OUT]


def test_update_metadata_and_stop_replica_are_fenced_and_answered(
    cluster: InProcessCluster,
) -> None:
    create_topic(cluster, "driven", 1, 3)
    img = image(cluster)
    broker = next(n for n in (1, 2, 3) if n != img.controller_id)
    epochs = {
        "controller_id": img.controller_id,
        "controller_epoch": img.controller_epoch,
        "broker_epoch": img.brokers[broker].epoch,
    }
    for version in (0, 5, 8):
        stale = ask(
            cluster,
            broker,
            "REPLICATION",
            UpdateMetadataRequest(**{**epochs, "controller_epoch": img.controller_epoch - 1}),
            version,
        )
        assert stale.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
        assert (
            ask(cluster, broker, "REPLICATION", UpdateMetadataRequest(**epochs), version).error_code
            == 0
        )
    p = img.topics["driven"].partitions[0]
    stop = StopReplicaRequest(
        **epochs,
        topic_states=[
            StopReplicaRequest.TopicStates(
                topic_name="driven",
                partition_states=[
                    StopReplicaRequest.TopicStates.PartitionStates(
                        partition_index=0, leader_epoch=p.leader_epoch, delete_partition=True
                    )
                ],
            ),
            StopReplicaRequest.TopicStates(
                topic_name="never-here",
                partition_states=[
                    StopReplicaRequest.TopicStates.PartitionStates(
                        partition_index=0, leader_epoch=0, delete_partition=True
                    )
                ],
            ),
        ],
    )
    resp = ask(cluster, broker, "REPLICATION", stop, 4)
    assert resp.error_code == 0
    # Still a replica at that leader epoch in the store: refused; nothing hosted: done.
    assert [(e.topic_name, e.error_code) for e in resp.partition_errors] == [
        ("driven", ErrorCode.FENCED_LEADER_EPOCH),
        ("never-here", ErrorCode.NONE),
    ]
    assert (cluster.broker(broker).data_dir / "logs" / "driven-0").is_dir()


def test_the_controller_drives_the_brokers_with_them(cluster: InProcessCluster) -> None:
    create_topic(cluster, "pushed", 1, 3)
    controller = controller_of(cluster)
    others = [n for n in (1, 2, 3) if n != controller]

    def seen(node: int, api: str) -> bool:
        return (
            f"event=broker.controller_request api={api} controller={controller}"
            in cluster.broker(node).read_log()
        )

    while not all(seen(n, "LeaderAndIsr") and seen(n, "UpdateMetadata") for n in others):
        metadata_until(cluster, lambda m: True)
    # Reassigning the partition away from one of them: it is told to stop and delete.
    leaving = others[0]
    target = [n for n in (1, 2, 3) if n != leaving]
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        tp = KTopicPartition("pushed", 0)
        assert admin.alter_partition_reassignments({tp: target}) == {tp: None}
    finally:
        admin.close()
    while not seen(leaving, "StopReplica"):
        metadata_until(cluster, lambda m: True)
    while (cluster.broker(leaving).data_dir / "logs" / "pushed-0").exists():
        metadata_until(cluster, lambda m: True)
    assert not any(
        seen(controller, api) for api in ("LeaderAndIsr", "UpdateMetadata", "StopReplica")
    )


@pytest.mark.parametrize("version", [0, 1, 2])
def test_older_alter_partition_and_controlled_shutdown_versions(
    cluster: InProcessCluster, version: int
) -> None:
    create_topic(cluster, "older", 1, 3)
    img = image(cluster)
    controller = img.controller_id
    topic = img.topics["older"]
    p = topic.partitions[0]
    dropped = next(r for r in p.isr if r != p.leader)
    kept = [r for r in p.isr if r != dropped]
    by = AlterPartitionRequest.Topics(
        topic_name="older" if version < 2 else "",
        topic_id=topic.topic_id if version >= 2 else uuid.UUID(int=0),
        partitions=[
            Part(
                partition_index=0,
                leader_epoch=p.leader_epoch,
                partition_epoch=p.partition_epoch,
                new_isr=kept,
            )
        ],
    )
    resp = ask(
        cluster,
        controller,
        "REPLICATION",
        AlterPartitionRequest(broker_id=p.leader, broker_epoch=-1, topics=[by]),
        version,
    )
    state = resp.topics[0].partitions[0]
    assert (resp.error_code, state.error_code, sorted(state.isr)) == (0, 0, sorted(kept))
    assert state.partition_epoch == p.partition_epoch + 1
    # ControlledShutdown of a broker that leads nothing here answers no remaining partitions.
    leaving = next(n for n in (1, 2, 3) if n not in (controller, p.leader))
    shut = ask(
        cluster,
        controller,
        "REPLICATION",
        ControlledShutdownRequest(broker_id=leaving, broker_epoch=-1),
        version,
    )
    assert shut.error_code == 0
    assert [
        (r.topic_name, r.partition_index)
        for r in shut.remaining_partitions
        if r.topic_name == "older"
    ] == []


def test_finalized_features_are_cluster_wide(cluster: InProcessCluster) -> None:
    """UpdateFeatures through one broker: every broker's ApiVersions reports the new levels
    (they live in the metadata store), and a refusal through another changes nothing."""
    from gregor.protocol.messages.update_features import UpdateFeaturesRequest

    hello = ApiVersionsRequest(client_software_name="t", client_software_version="1")

    def levels(node: int) -> tuple[dict[str, int], int]:
        av = ask(cluster, node, "PLAINTEXT", hello, 3)
        return {
            f.name: f.max_version_level for f in av.finalized_features
        }, av.finalized_features_epoch

    def update(node: int, name: str, level: int, kind: int) -> int:
        req = UpdateFeaturesRequest(
            timeout_ms=10000,
            feature_updates=[
                UpdateFeaturesRequest.FeatureUpdates(
                    feature=name, max_version_level=level, upgrade_type=kind
                )
            ],
        )
        return int(ask(cluster, node, "PLAINTEXT", req, 1).error_code)

    assert all(
        levels(n)[0]
        == {
            "metadata.version": 29,
            "group.version": 1,
            "share.version": 1,
            "transaction.version": 2,
        }
        for n in (1, 2, 3)
    )
    assert update(2, "group.version", 0, 2) == 0
    while not all(
        levels(n)[0] == {"metadata.version": 29, "share.version": 1, "transaction.version": 2}
        for n in (1, 2, 3)
    ):
        pass  # each broker sees the store's change when its watch delivers it
    assert update(3, "share.version", 2, 1) == ErrorCode.INVALID_UPDATE_VERSION
    assert update(1, "group.version", 1, 1) == 0
    while not all(
        levels(n)[0]
        == {
            "metadata.version": 29,
            "group.version": 1,
            "share.version": 1,
            "transaction.version": 2,
        }
        for n in (1, 2, 3)
    ):
        pass  # share.version stayed at 1 everywhere; group.version is back
