"""The MetadataStore contract: one scenario set that every store must pass.

Each test gets a ``StoreKind`` from the ``kind`` fixture and runs a scenario on a started store.
To add a store, add a fixture param that returns a ``StoreKind`` whose ``open`` makes a
store over the same durable place on every call (so reopening is a restart) and say whether it
is ``durable`` (restart keeps topics), ``local`` (a cancelled change still completes) and
``elects`` (the controller is elected, the first live broker registered, instead of the lowest
live id). The etcd store runs against a real etcd (one per module, a key prefix per test); its
tests are skipped only where the etcd binary is not installed (``scripts/system-deps.sh``
installs it).
The file store's format and the factory are tested in ``tests/cluster/test_file_store.py``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from gregor.cluster.file_store import FileMetadataStore
from gregor.cluster.image import BrokerEndpoint, BrokerRegistration, MetadataDelta, MetadataImage
from gregor.cluster.memory_store import MemoryMetadataStore
from gregor.cluster.store import MetadataStore
from gregor.protocol.errors import (
    BrokerIdNotRegisteredError,
    FencedLeaderEpochError,
    InconsistentClusterIdError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidRequestError,
    InvalidTopicError,
    InvalidUpdateVersionError,
    KafkaError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from gregor.security.acls import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from gregor.security.scram import make_credential
from gregor.testing.etcd import EtcdProcess, etcd_binary

Scenario = Callable[[MetadataStore], Awaitable[None]]


@dataclass
class StoreKind:
    name: str
    open: Callable[[str | None], MetadataStore]
    durable: bool
    local: bool
    elects: bool = False


@pytest.fixture(scope="module")
def etcd() -> Iterator[EtcdProcess]:
    if etcd_binary() is None:
        pytest.skip("no etcd binary (apt-get install etcd-server; scripts/system-deps.sh does)")
    with EtcdProcess() as server:
        yield server


@pytest.fixture(params=["file", "memory", "etcd"])
def kind(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreKind]:
    if request.param == "file":
        yield StoreKind(
            "file", lambda cid: FileMetadataStore(tmp_path, cid), durable=True, local=True
        )
    elif request.param == "memory":
        yield StoreKind("memory", lambda cid: MemoryMetadataStore(cid), durable=False, local=True)
    elif request.param == "etcd":
        from gregor.cluster.etcd_store import EtcdMetadataStore

        url = f"{request.getfixturevalue('etcd').url}/contract/{uuid.uuid4().hex}"
        yield StoreKind(
            "etcd", lambda cid: EtcdMetadataStore(url, cid), durable=True, local=True, elects=True
        )


def run(kind: StoreKind, scenario: Scenario, cluster_id: str | None = None) -> None:
    async def main() -> None:
        store = kind.open(cluster_id)
        await store.start()
        try:
            await scenario(store)
        finally:
            await store.close()

    asyncio.run(main())


async def reopen(kind: StoreKind, cluster_id: str | None = None) -> MetadataImage:
    """Start a second store over the same durable place and return what it loaded."""
    store = kind.open(cluster_id)
    try:
        return await store.start()
    finally:
        await store.close()


def reg(node_id: int, fenced: bool = False) -> BrokerRegistration:
    return BrokerRegistration(
        node_id,
        (
            BrokerEndpoint("PLAINTEXT", "localhost", 9092 + node_id, "PLAINTEXT"),
            BrokerEndpoint("REPLICATION", "10.0.0.1", 19092 + node_id, "PLAINTEXT"),
        ),
        rack="r1",
        fenced=fenced,
    )


class Recorder:
    """A listener that keeps every delta and checks it runs after the image was swapped."""

    def __init__(self, store: MetadataStore) -> None:
        self.store = store
        self.deltas: list[MetadataDelta] = []
        store.subscribe(self)

    def __call__(self, delta: MetadataDelta) -> None:
        assert self.store.image is delta.image
        self.deltas.append(delta)


async def refused(
    store: MetadataStore, rec: Recorder, error: type[KafkaError], change: Awaitable[object]
) -> None:
    """``change`` raises ``error`` and leaves the image as it was, publishing nothing."""
    before, seen = store.image, len(rec.deltas)
    with pytest.raises(error):
        await change
    assert store.image is before and len(rec.deltas) == seen


# --- start and lifecycle ---


def test_start_sets_a_cluster_id_and_an_empty_image(kind: StoreKind) -> None:
    async def scenario(store: MetadataStore) -> None:
        img = store.image
        assert len(img.cluster_id) == 22 and img.controller_id == -1
        assert not img.topics and not img.topics_by_id and not img.brokers
        assert img.next_producer_id == 0
        assert await store.start() is img  # a second start changes nothing

    run(kind, scenario)


def test_a_started_store_that_reaches_its_state_confirms_its_session(kind: StoreKind) -> None:
    async def scenario(store: MetadataStore) -> None:
        assert store.session_confirmed() is True  # etcd: the lease was just granted
        await store.register_broker(reg(1))
        assert store.session_confirmed() is True

    run(kind, scenario)


def test_start_uses_the_cluster_id_given(kind: StoreKind) -> None:
    async def scenario(store: MetadataStore) -> None:
        assert store.image.cluster_id == "my-cluster"

    run(kind, scenario, cluster_id="my-cluster")


def test_changes_need_a_started_open_store(kind: StoreKind) -> None:
    async def main() -> None:
        store = kind.open(None)
        with pytest.raises(RuntimeError):
            await store.create_topic("a", [[1]], {})
        await store.start()
        await store.close()
        with pytest.raises(RuntimeError):
            await store.create_topic("a", [[1]], {})
        stream = store.watch()
        assert [d async for d in stream] == []

    asyncio.run(main())


# --- topics ---


def test_create_topic(kind: StoreKind) -> None:
    async def scenario(store: MetadataStore) -> None:
        rec = Recorder(store)
        v0 = store.image.version
        t = await store.create_topic(
            "orders", [[1, 2], [2, 1], [1, 2]], {"cleanup.policy": "compact"}
        )
        assert store.image.version == v0 + 1
        assert store.image.topic("orders") is t and store.image.topic_by_id(t.topic_id) is t
        assert [
            (p.partition, p.leader, p.leader_epoch, p.partition_epoch, p.replicas, p.isr)
            for p in t.partitions
        ] == [
            (0, 1, 0, 0, (1, 2), (1, 2)),
            (1, 2, 0, 0, (2, 1), (2, 1)),
            (2, 1, 0, 0, (1, 2), (1, 2)),
        ]
        assert t.configs == {"cleanup.policy": "compact"} and t.internal is False
        tid = uuid.UUID("12345678-1234-5678-1234-567812345678")
        internal = await store.create_topic(
            "__consumer_offsets", [[1]], {}, internal=True, topic_id=tid
        )
        assert internal.topic_id == tid and internal.internal is True
        assert store.image.partition("__consumer_offsets", 0) == internal.partitions[0]
        assert [d.created_topics for d in rec.deltas] == [(t,), (internal,)]
        assert {n: dict(ps) for n, ps in rec.deltas[0].changed_partitions.items()} == {
            "orders": {p.partition: p for p in t.partitions}
        }

    run(kind, scenario)


def test_create_topic_refusals(kind: StoreKind) -> None:
    async def scenario(store: MetadataStore) -> None:
        rec = Recorder(store)
        t = await store.create_topic("a", [[1]], {})
        await refused(store, rec, TopicAlreadyExistsError, store.create_topic("a", [[1]], {}))
        await refused(
            store,
            rec,
            TopicAlreadyExistsError,
            store.create_topic("b", [[1]], {}, topic_id=t.topic_id),
        )
        await refused(
            store,
            rec,
            InvalidRequestError,
            store.create_topic("b", [[1]], {}, topic_id=uuid.UUID(int=0)),
        )
        await refused(store, rec, InvalidTopicError, store.create_topic("", [[1]], {}))
        await refused(store, rec, InvalidPartitionsError, store.create_topic("b", [], {}))
        bad_assignments: list[list[list[int]]] = [[[]], [[1, 1]], [[1, 2], [1]], [[-1]]]
        for bad in bad_assignments:
            await refused(
                store, rec, InvalidReplicaAssignmentError, store.create_topic("b", bad, {})
            )
        assert list(store.image.topics) == ["a"]

    run(kind, scenario)


def test_delete_topic(kind: StoreKind) -> None:
    async def scenario(store: MetadataStore) -> None:
        rec = Recorder(store)
        t = await store.create_topic("a", [[1], [1]], {})
        keep = await store.create_topic("b", [[1]], {})
        assert await store.delete_topic("a") is t
        assert store.image.topic("a") is None and store.image.topic_by_id(t.topic_id) is None
        assert store.image.topic("b") is keep
        assert rec.deltas[-1].deleted_topics == (t,) and not rec.deltas[-1].created_topics
        await refused(store, rec, UnknownTopicOrPartitionError, store.delete_topic("a"))
        again = await store.create_topic("a", [[1]], {})
        assert again.topic_id != t.topic_id and rec.deltas[-1].created_topics == (again,)

    run(kind, scenario)


def test_add_partitions(kind: StoreKind) -> None:
    async def scenario(store: MetadataStore) -> None:
        rec = Recorder(store)
        t = await store.create_topic("a", [[1, 2]], {"k": "v"})
        t2 = await store.add_partitions("a", [[2, 1], [1, 2]])
        assert t2.topic_id == t.topic_id and t2.configs == {"k": "v"}
        assert t2.partitions[0] == t.partitions[0]
        assert [(p.partition, p.leader, p.replicas, p.isr) for p in t2.partitions[1:]] == [
            (1, 2, (2, 1), (2, 1)),
            (2, 1, (1, 2), (1, 2)),
        ]
        assert store.image.topic("a") is t2 and store.image.topic_by_id(t.topic_id) is t2
        d = rec.deltas[-1]
        assert not d.created_topics and not d.changed_configs
        assert {n: dict(ps) for n, ps in d.changed_partitions.items()} == {
            "a": {1: t2.partitions[1], 2: t2.partitions[2]}
        }
        await refused(store, rec, UnknownTopicOrPartitionError, store.add_partitions("zz", [[1]]))
        await refused(store, rec, InvalidPartitionsError, store.add_partitions("a", []))
        await refused(store, rec, InvalidReplicaAssignmentError, store.add_partitions("a", [[1]]))
        await refused(
            store, rec, InvalidReplicaAssignmentError, store.add_partitions("a", [[1, 1]])
        )

    run(kind, scenario)


def test_alter_topic_configs_replaces_the_override_set(kind: StoreKind) -> None:
    async def scenario(store: MetadataStore) -> None:
        rec = Recorder(store)
        t = await store.create_topic("a", [[1]], {"retention.ms": "1", "cleanup.policy": "compact"})
        t2 = await store.alter_topic_configs("a", {"retention.ms": "2"})
        assert t2.configs == {"retention.ms": "2"} and t2.partitions == t.partitions
        assert store.image.topic("a") is t2
        assert rec.deltas[-1].changed_configs == {"a"} and not rec.deltas[-1].changed_partitions
        t3 = await store.alter_topic_configs("a", {})
        assert t3.configs == {}
        await refused(store, rec, UnknownTopicOrPartitionError, store.alter_topic_configs("zz", {}))

    run(kind, scenario)


def test_alter_config_resource_replaces_the_override_set(kind: StoreKind) -> None:
    async def scenario(store: MetadataStore) -> None:
        rec = Recorder(store)
        assert store.image.config_resources == {} and store.image.config_resource(4, "1") == {}
        await store.alter_config_resource(
            4, "1", {"log.retention.ms": "1000", "message.max.bytes": "2000"}
        )
        await store.alter_config_resource(4, "", {"log.retention.ms": "5000"})
        await store.alter_config_resource(32, "g", {"consumer.session.timeout.ms": "50000"})
        assert store.image.config_resource(4, "1") == {
            "log.retention.ms": "1000",
            "message.max.bytes": "2000",
        }
        assert rec.deltas[-1].changed_config_resources == {(32, "g")}
        assert not rec.deltas[-1].is_empty and not rec.deltas[-1].changed_configs
        v = store.image.version
        await store.alter_config_resource(4, "1", {"message.max.bytes": "3000"})  # the whole set
        assert store.image.config_resource(4, "1") == {"message.max.bytes": "3000"}
        await store.alter_config_resource(32, "g", {})  # empty: the entry goes
        assert store.image.version == v + 2
        assert dict(store.image.config_resources) == {
            (4, "1"): {"message.max.bytes": "3000"},
            (4, ""): {"log.retention.ms": "5000"},
        }
        assert rec.deltas[-1].changed_config_resources == {(32, "g")}
        await refused(
            store, rec, InvalidRequestError, store.alter_config_resource(2, "t", {"a": "b"})
        )

    run(kind, scenario)


# --- partition state ---


def test_alter_partition_is_a_compare_and_set_on_partition_epoch(kind: StoreKind) -> None:
    async def scenario(store: MetadataStore) -> None:
        rec = Recorder(store)
        await store.create_topic("a", [[1, 2, 3], [1, 2, 3]], {})
        shrunk = await store.alter_partition(
            "a", 1, leader=1, leader_epoch=0, isr=[1, 2], expected_partition_epoch=0
        )
        assert (shrunk.leader, shrunk.leader_epoch, shrunk.partition_epoch, shrunk.isr) == (
            1,
            0,
            1,
            (1, 2),
        )
        assert shrunk.replicas == (1, 2, 3) and store.image.partition("a", 1) is shrunk
        assert {n: dict(ps) for n, ps in rec.deltas[-1].changed_partitions.items()} == {
            "a": {1: shrunk}
        }
        moved = await store.alter_partition(
            "a", 1, leader=2, leader_epoch=1, isr=[2], expected_partition_epoch=1
        )
        assert (moved.leader, moved.leader_epoch, moved.partition_epoch, moved.isr) == (
            2,
            1,
            2,
            (2,),
        )
        no_leader = await store.alter_partition(
            "a", 1, leader=-1, leader_epoch=2, isr=[], expected_partition_epoch=2
        )
        assert (no_leader.leader, no_leader.isr, no_leader.partition_epoch) == (-1, (), 3)
        assert store.image.partition("a", 0).partition_epoch == 0  # type: ignore[union-attr]

        def alter(leader: int, epoch: int, isr: list[int], expected: int) -> Awaitable[object]:
            return store.alter_partition(
                "a",
                0,
                leader=leader,
                leader_epoch=epoch,
                isr=isr,
                expected_partition_epoch=expected,
            )

        await refused(store, rec, InvalidUpdateVersionError, alter(1, 0, [1], 7))
        await store.alter_partition(
            "a", 0, leader=1, leader_epoch=3, isr=[1, 2, 3], expected_partition_epoch=0
        )
        await refused(store, rec, FencedLeaderEpochError, alter(1, 2, [1], 1))
        await refused(store, rec, InvalidRequestError, alter(1, 3, [1, 4], 1))  # not a replica
        await refused(store, rec, InvalidRequestError, alter(1, 3, [1, 1], 1))
        await refused(store, rec, InvalidRequestError, alter(3, 3, [1, 2], 1))  # leader not in ISR
        await refused(
            store, rec, InvalidRequestError, alter(2, 3, [1, 2], 1)
        )  # new leader, same epoch
        await refused(
            store,
            rec,
            UnknownTopicOrPartitionError,
            store.alter_partition(
                "a", 2, leader=1, leader_epoch=0, isr=[1], expected_partition_epoch=0
            ),
        )
        await refused(
            store,
            rec,
            UnknownTopicOrPartitionError,
            store.alter_partition(
                "zz", 0, leader=1, leader_epoch=0, isr=[1], expected_partition_epoch=0
            ),
        )

    run(kind, scenario)


def test_reassignment_adds_then_completes_when_the_target_is_in_sync(kind: StoreKind) -> None:
    async def scenario(store: MetadataStore) -> None:
        for n in (1, 2, 3, 4):
            await store.register_broker(reg(n))
        await store.create_topic("a", [[1, 2], [1, 2]], {})
        results = await store.reassign_partitions(
            [
                ("a", 0, [3, 4]),
                ("a", 1, [1, 9]),
                ("a", 5, [1]),
                ("zz", 0, [1]),
                ("a", 1, [2, 2]),
                ("a", 1, None),
            ]
        )
        assert [type(r).__name__ if r else None for r in results] == [
            None,
            "InvalidReplicaAssignmentError",
            "UnknownTopicOrPartitionError",
            "UnknownTopicOrPartitionError",
            "InvalidReplicaAssignmentError",
            "NoReassignmentInProgressError",
        ]
        p = store.image.partition("a", 0)
        assert p is not None
        assert (p.replicas, p.adding_replicas, p.removing_replicas, p.isr) == (
            (3, 4, 1, 2),
            (3, 4),
            (1, 2),
            (1, 2),
        )
        assert (p.leader, p.leader_epoch, p.partition_epoch, p.target_replicas) == (1, 0, 1, (3, 4))
        # The leader brings 3 into the ISR: not done yet; then 4: done, and leader 1 hands over.
        p = await store.alter_partition(
            "a", 0, leader=1, leader_epoch=0, isr=[1, 2, 3], expected_partition_epoch=1
        )
        assert p.reassigning and p.replicas == (3, 4, 1, 2)
        p = await store.alter_partition(
            "a", 0, leader=1, leader_epoch=0, isr=[1, 2, 3, 4], expected_partition_epoch=2
        )
        assert (p.replicas, p.isr, p.leader, p.leader_epoch, p.partition_epoch) == (
            (3, 4),
            (3, 4),
            3,
            1,
            3,
        )
        assert not p.reassigning and store.image.partition("a", 0) is p
        if kind.durable:
            loaded = (await reopen(kind, store.image.cluster_id)).partition("a", 0)
            assert loaded == p

    run(kind, scenario)


def test_reassignment_cancel_replace_and_shrink(kind: StoreKind) -> None:
    async def scenario(store: MetadataStore) -> None:
        for n in (1, 2, 3, 4):
            await store.register_broker(reg(n))
        await store.create_topic("a", [[1, 2, 3]], {})
        # Dropping a replica that is in the ISR completes at once (the target is in sync).
        assert await store.reassign_partitions([("a", 0, [2, 1])]) == [None]
        p = store.image.partition("a", 0)
        assert p is not None and (p.replicas, p.isr, p.leader, p.leader_epoch) == (
            (2, 1),
            (1, 2),
            1,
            0,
        )
        # Start 2,1 -> 4,1; replace it with 3,2 (reverted first); then cancel.
        await store.reassign_partitions([("a", 0, [4, 1])])
        p = store.image.partition("a", 0)
        assert p is not None and (p.replicas, p.adding_replicas, p.removing_replicas) == (
            (4, 1, 2),
            (4,),
            (2,),
        )
        await store.reassign_partitions([("a", 0, [3, 2])])
        p = store.image.partition("a", 0)
        assert p is not None and (p.replicas, p.adding_replicas, p.removing_replicas) == (
            (3, 2, 1),
            (3,),
            (1,),
        )
        if kind.durable:
            assert (await reopen(kind, store.image.cluster_id)).partition("a", 0) == p
        await store.reassign_partitions([("a", 0, None)])
        p = store.image.partition("a", 0)
        assert p is not None and (p.replicas, p.isr, p.reassigning, p.leader) == (
            (2, 1),
            (1, 2),
            False,
            1,
        )
        # The same replicas, nothing in progress: nothing to do, no new image.
        version = store.image.version
        assert await store.reassign_partitions([("a", 0, [2, 1])]) == [None]
        assert store.image.version == version and store.image.partition("a", 0) == p

    run(kind, scenario)


def test_concurrent_alter_partition_has_one_winner(kind: StoreKind) -> None:
    async def scenario(store: MetadataStore) -> None:
        await store.create_topic("a", [[1, 2, 3]], {})
        results = await asyncio.gather(
            *(
                store.alter_partition(
                    "a", 0, leader=1, leader_epoch=0, isr=isr, expected_partition_epoch=0
                )
                for isr in ([1], [1, 2], [1, 3], [1, 2, 3])
            ),
            return_exceptions=True,
        )
        won = [r for r in results if not isinstance(r, BaseException)]
        lost = [r for r in results if isinstance(r, BaseException)]
        assert len(won) == 1 and all(isinstance(e, InvalidUpdateVersionError) for e in lost)
        assert store.image.partition("a", 0) == won[0]
        assert won[0].partition_epoch == 1  # type: ignore[union-attr]

    run(kind, scenario)


# --- brokers ---


def test_broker_registration(kind: StoreKind) -> None:
    async def scenario(store: MetadataStore) -> None:
        rec = Recorder(store)

        # Local stores: the lowest live id. Electing stores: the first registered, until it goes.
        def controller(lowest: int, elected: int) -> int:
            return elected if kind.elects else lowest

        await store.register_broker(reg(3))
        assert store.image.controller_id == 3 and store.image.live_broker_ids() == [3]
        await store.register_broker(reg(1))
        await store.register_broker(reg(2, fenced=True))
        img = store.image
        assert img.controller_id == controller(1, 3) and img.live_broker_ids() == [1, 3]
        # The broker epoch is the version of the change that registered it.
        assert img.brokers[1] == dataclasses.replace(reg(1), epoch=img.version - 1)
        assert img.brokers[1].endpoint("REPLICATION") == BrokerEndpoint(
            "REPLICATION", "10.0.0.1", 19093, "PLAINTEXT"
        )
        assert dict(rec.deltas[-1].changed_brokers) == {
            2: dataclasses.replace(reg(2, fenced=True), epoch=img.version)
        }
        await store.register_broker(
            reg(2)
        )  # re-registration replaces, here unfencing it: a new epoch
        assert store.image.live_broker_ids() == [1, 2, 3]
        assert dict(rec.deltas[-1].changed_brokers) == {
            2: dataclasses.replace(reg(2), epoch=img.version + 1)
        }
        await store.unregister_broker(1)
        assert store.image.controller_id == controller(2, 3) and sorted(store.image.brokers) == [
            2,
            3,
        ]
        assert dict(rec.deltas[-1].changed_brokers) == {1: None}
        await refused(store, rec, BrokerIdNotRegisteredError, store.unregister_broker(1))
        await refused(store, rec, InvalidRequestError, store.register_broker(reg(-1)))
        twice = BrokerRegistration(5, (reg(5).endpoints[0], reg(5).endpoints[0]), None)
        await refused(store, rec, InvalidRequestError, store.register_broker(twice))
        await store.unregister_broker(2)
        await store.unregister_broker(3)
        assert store.image.controller_id == -1 and store.image.live_broker_ids() == []

    run(kind, scenario)


# --- producer ids ---


def test_producer_id_blocks_never_overlap(kind: StoreKind) -> None:
    async def scenario(store: MetadataStore) -> None:
        rec = Recorder(store)
        assert await store.allocate_producer_ids(1000) == 0
        assert await store.allocate_producer_ids(10) == 1000
        assert store.image.next_producer_id == 1010
        await refused(store, rec, InvalidRequestError, store.allocate_producer_ids(0))
        firsts = await asyncio.gather(*(store.allocate_producer_ids(5) for _ in range(20)))
        assert sorted(firsts) == list(range(1010, 1110, 5))
        assert store.image.next_producer_id == 1110

    run(kind, scenario)


# --- publishing ---


def test_listeners_run_in_order_before_the_change_returns(kind: StoreKind) -> None:
    async def scenario(store: MetadataStore) -> None:
        calls: list[tuple[str, int]] = []

        def first(d: MetadataDelta) -> None:
            calls.append(("first", d.image.version))

        def broken(d: MetadataDelta) -> None:
            calls.append(("broken", d.image.version))
            raise RuntimeError("listener bug")

        def last(d: MetadataDelta) -> None:
            calls.append(("last", d.image.version))

        for listener in (first, broken, last):
            store.subscribe(listener)
        v = store.image.version
        await store.create_topic("a", [[1]], {})
        assert calls == [("first", v + 1), ("broken", v + 1), ("last", v + 1)]
        assert store.image.topic("a") is not None  # a failing listener does not undo the change
        await store.allocate_producer_ids(1)
        assert calls[3:] == [("first", v + 2), ("broken", v + 2), ("last", v + 2)]

    run(kind, scenario)


def test_watch_yields_the_published_deltas(kind: StoreKind) -> None:
    async def scenario(store: MetadataStore) -> None:
        rec = Recorder(store)
        stream = store.watch()  # registered now, not at the first __anext__
        late = store.watch()
        await store.create_topic("a", [[1]], {})
        await store.register_broker(reg(1))
        await store.delete_topic("a")
        got = [await anext(stream) for _ in range(3)]
        assert got == rec.deltas and all(a is b for a, b in zip(got, rec.deltas, strict=True))
        assert got[0].created_topics and got[1].changed_brokers and got[2].deleted_topics
        await late.aclose()  # type: ignore[attr-defined]
        await store.allocate_producer_ids(1)
        assert (await anext(stream)).image is store.image
        ending = asyncio.ensure_future(anext(stream))
        await store.close()
        with pytest.raises(StopAsyncIteration):
            await ending
        assert [d async for d in late] == []

    run(kind, scenario)


def test_versions_go_up_by_one_per_change_and_never_on_a_refusal(kind: StoreKind) -> None:
    async def scenario(store: MetadataStore) -> None:
        rec = Recorder(store)
        v0 = store.image.version
        await store.create_topic("a", [[1]], {})
        with pytest.raises(TopicAlreadyExistsError):
            await store.create_topic("a", [[1]], {})
        await store.add_partitions("a", [[1]])
        await store.alter_topic_configs("a", {"k": "v"})
        await store.alter_partition(
            "a", 0, leader=1, leader_epoch=1, isr=[1], expected_partition_epoch=0
        )
        await store.register_broker(reg(1))
        await store.allocate_producer_ids(3)
        await store.unregister_broker(1)
        await store.delete_topic("a")
        versions = [(d.previous.version, d.image.version) for d in rec.deltas]
        assert versions == [(v0 + i, v0 + i + 1) for i in range(8)]
        assert store.image.version == v0 + 8

    run(kind, scenario)


def test_concurrent_changes_lose_no_update(kind: StoreKind) -> None:
    async def scenario(store: MetadataStore) -> None:
        rec = Recorder(store)
        v0 = store.image.version
        await asyncio.gather(
            *(store.create_topic(f"t{i}", [[1]], {}) for i in range(30)),
            *(store.register_broker(reg(n)) for n in range(5)),
        )
        results = await asyncio.gather(
            *(store.create_topic("same", [[1]], {}) for _ in range(5)), return_exceptions=True
        )
        assert sum(not isinstance(r, BaseException) for r in results) == 1
        assert all(
            isinstance(r, TopicAlreadyExistsError) for r in results if isinstance(r, BaseException)
        )
        await asyncio.gather(*(store.add_partitions(f"t{i}", [[1]]) for i in range(30)))
        img = store.image
        assert sorted(img.topics) == sorted([f"t{i}" for i in range(30)] + ["same"])
        assert all(len(img.topics[f"t{i}"].partitions) == 2 for i in range(30))
        assert sorted(img.brokers) == [0, 1, 2, 3, 4] and img.controller_id == 0
        assert img.version == v0 + 66
        assert [d.image.version for d in rec.deltas] == list(range(v0 + 1, v0 + 67))
        assert all(a.image is b.previous for a, b in zip(rec.deltas, rec.deltas[1:], strict=False))

    run(kind, scenario)


def test_a_cancelled_change_still_completes_and_is_published(kind: StoreKind) -> None:
    if not kind.local:
        pytest.skip("a remote store may or may not apply a cancelled change")

    async def scenario(store: MetadataStore) -> None:
        rec = Recorder(store)
        stream = store.watch()
        call = asyncio.ensure_future(store.create_topic("a", [[1]], {}))
        await asyncio.sleep(0)  # the call has begun; cancel it before it returns
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        delta = await anext(stream)
        assert [t.name for t in delta.created_topics] == ["a"] and rec.deltas == [delta]
        assert store.image.topic("a") is not None
        if kind.durable:
            assert (await reopen(kind)).topic("a") is not None

    run(kind, scenario)


# --- durability (stores that keep data across a restart) ---


def test_restart_keeps_everything_but_broker_registrations(kind: StoreKind) -> None:
    if not kind.durable:
        pytest.skip(f"the {kind.name} store keeps nothing across a restart")
    before: list[MetadataImage] = []

    async def scenario(store: MetadataStore) -> None:
        await store.register_broker(reg(1))
        await store.create_topic("a", [[1, 2], [2, 1]], {"retention.ms": "5"})
        await store.create_topic("b", [[1, 2]], {}, internal=True)
        await store.add_partitions("b", [[2, 1]])
        await store.alter_topic_configs("b", {"cleanup.policy": "compact"})
        await store.alter_partition(
            "a", 1, leader=1, leader_epoch=4, isr=[1], expected_partition_epoch=0
        )
        await store.create_topic("gone", [[1, 2]], {})
        await store.delete_topic("gone")
        await store.allocate_producer_ids(1000)
        await store.alter_config_resource(4, "", {"log.retention.ms": "7"})
        await store.alter_config_resource(32, "g", {"consumer.heartbeat.interval.ms": "6000"})
        before.append(store.image)

    run(kind, scenario)
    old = before[0]

    async def restarted(store: MetadataStore) -> None:
        img = store.image
        assert (img.cluster_id, img.version, img.next_producer_id) == (
            old.cluster_id,
            old.version,
            1000,
        )
        assert img.topics == old.topics and list(img.topics) == ["a", "b"]
        assert img.topics_by_id == old.topics_by_id
        assert img.config_resources == old.config_resources
        assert img.config_resource(32, "g") == {"consumer.heartbeat.interval.ms": "6000"}
        assert img.brokers == {} and img.controller_id == -1
        assert await store.allocate_producer_ids(10) == 1000  # blocks never overlap across restarts
        v = store.image.version
        await store.create_topic("c", [[1]], {})
        assert store.image.version == v + 1

    run(kind, restarted)

    async def restarted_again(store: MetadataStore) -> None:
        assert store.image.next_producer_id == 1010 and store.image.version == old.version + 2
        assert sorted(store.image.topics) == ["a", "b", "c"]

    run(kind, restarted_again)


def test_refused_change_leaves_durable_state_untouched(kind: StoreKind) -> None:
    if not kind.durable:
        pytest.skip(f"the {kind.name} store keeps nothing across a restart")

    async def scenario(store: MetadataStore) -> None:
        await store.create_topic("a", [[1, 2]], {})
        want = store.image
        for change in (
            store.create_topic("a", [[1]], {}),
            store.add_partitions("a", [[1]]),
            store.alter_partition(
                "a", 0, leader=1, leader_epoch=0, isr=[1], expected_partition_epoch=3
            ),
            store.delete_topic("zz"),
        ):
            with pytest.raises(KafkaError):
                await change
        got = await reopen(kind)
        assert (got.version, got.topics) == (want.version, want.topics)

    run(kind, scenario)


def test_a_different_cluster_id_is_refused_at_start(kind: StoreKind) -> None:
    if not kind.durable:
        pytest.skip(f"the {kind.name} store keeps nothing across a restart")

    async def scenario(store: MetadataStore) -> None:
        assert store.image.cluster_id == "first"

    run(kind, scenario, cluster_id="first")
    run(kind, scenario, cluster_id=None)  # none given: the stored one
    with pytest.raises(InconsistentClusterIdError, match="'second' does not match 'first'"):
        run(kind, scenario, cluster_id="second")


# --- SCRAM credentials ---


def test_alter_scram_credentials_answers_per_user_and_keeps_salted_credentials(
    kind: StoreKind,
) -> None:
    alice256 = make_credential("SCRAM-SHA-256", "alice-pw", 4096, b"salt-a")
    alice512 = make_credential("SCRAM-SHA-512", "alice-pw", 8192, b"salt-b")
    bob = make_credential("SCRAM-SHA-256", "bob-pw", 16384, b"salt-c")

    async def scenario(store: MetadataStore) -> None:
        rec = Recorder(store)
        v = store.image.version
        results = await store.alter_scram_credentials([], [("alice", alice256), ("bob", bob)])
        assert results == {"alice": None, "bob": None}
        assert store.image.version == v + 1 and len(rec.deltas) == 1
        assert store.image.scram_credential("alice", "SCRAM-SHA-256") == alice256
        assert store.image.scram_credential("alice", "SCRAM-SHA-512") is None
        # The same user twice, too few / too many iterations, an unknown mechanism, an empty
        # name and deleting what is not there fail that user only; the others still change.
        results = await store.alter_scram_credentials(
            [
                ("carol", "SCRAM-SHA-256"),
                ("bob", "SCRAM-SHA-256"),
                ("dave", "SCRAM-SHA-256"),
                ("erin", "MD5"),
            ],
            [
                ("alice", alice512),
                ("dave", make_credential("SCRAM-SHA-256", "x", 4096)),
                ("frank", make_credential("SCRAM-SHA-256", "x", 4095)),
                ("gina", make_credential("SCRAM-SHA-512", "x", 16385)),
                ("", make_credential("SCRAM-SHA-256", "x", 4096)),
            ],
        )
        assert {u: type(e).__name__ if e else None for u, e in results.items()} == {
            "carol": "ResourceNotFoundError",
            "bob": None,
            "dave": "DuplicateResourceError",
            "erin": "UnsupportedSaslMechanismError",
            "alice": None,
            "frank": "UnacceptableCredentialError",
            "gina": "UnacceptableCredentialError",
            "": "UnacceptableCredentialError",
        }
        assert str(results["frank"]) == "Too few iterations"
        image = store.image
        assert dict(image.scram_credentials["alice"]) == {
            "SCRAM-SHA-256": alice256,
            "SCRAM-SHA-512": alice512,
        }
        assert set(image.scram_credentials) == {"alice"}  # bob deleted, nobody else added
        results = await store.alter_scram_credentials(
            [
                ("alice", "SCRAM-SHA-256"),
            ],
            [],
        )
        assert results == {"alice": None}
        assert set(store.image.scram_credentials["alice"]) == {"SCRAM-SHA-512"}

    run(kind, scenario)
    if kind.durable:

        async def restarted(store: MetadataStore) -> None:
            assert dict(store.image.scram_credentials) == {"alice": {"SCRAM-SHA-512": alice512}}

        run(kind, restarted)


# --- ACLs ---


def acl(
    name: str,
    pattern: PatternType = PatternType.LITERAL,
    principal: str = "User:alice",
    operation: AclOperation = AclOperation.READ,
    permission: AclPermissionType = AclPermissionType.ALLOW,
    resource_type: ResourceType = ResourceType.TOPIC,
) -> AclBinding:
    return AclBinding(resource_type, name, pattern, principal, "*", operation, permission)


def test_acls_are_created_once_deleted_by_filter_and_durable(kind: StoreKind) -> None:
    read_t = acl("t")
    write_t = acl("t", operation=AclOperation.WRITE)
    prefixed = acl("pay-", PatternType.PREFIXED, principal="User:bob")
    deny_group = acl(
        "g",
        operation=AclOperation.ALL,
        permission=AclPermissionType.DENY,
        resource_type=ResourceType.GROUP,
    )
    cluster = acl("kafka-cluster", operation=AclOperation.ALTER, resource_type=ResourceType.CLUSTER)

    async def scenario(store: MetadataStore) -> None:
        rec = Recorder(store)
        v = store.image.version
        results = await store.create_acls([read_t, write_t, prefixed, deny_group, read_t])
        assert results == [None] * 5
        assert store.image.version == v + 1 and len(rec.deltas) == 1
        assert store.image.acls == (read_t, write_t, prefixed, deny_group)
        # A binding that exists is accepted again and held once; invalid ones are refused alone.
        results = await store.create_acls(
            [
                read_t,
                acl("", operation=AclOperation.READ),
                acl("t", principal="alice"),
                acl("other", resource_type=ResourceType.CLUSTER),
                acl("t", operation=AclOperation.ANY),
                acl("t", PatternType.MATCH),
                cluster,
            ]
        )
        assert [type(e).__name__ if e else None for e in results] == [
            None,
            "InvalidRequestError",
            "InvalidRequestError",
            "InvalidRequestError",
            "InvalidRequestError",
            "InvalidRequestError",
            None,
        ]
        assert str(results[1]) == "Resource name should not be empty"
        assert str(results[3]) == "The only valid name for the CLUSTER resource is kafka-cluster"
        assert store.image.acls == (read_t, write_t, prefixed, deny_group, cluster)
        # Each filter reports what it removed (both report a binding two of them match); a
        # filter with an UNKNOWN element is refused and removes nothing.
        results2 = await store.delete_acls(
            [
                AclBindingFilter(ResourceType.TOPIC, "t", PatternType.LITERAL),
                AclBindingFilter(
                    ResourceType.ANY,
                    None,
                    PatternType.ANY,
                    "User:alice",
                    operation=AclOperation.READ,
                ),
                AclBindingFilter(ResourceType.UNKNOWN),
                AclBindingFilter(ResourceType.TOPIC, "nothing", PatternType.LITERAL),
            ]
        )
        assert results2[0] == [read_t, write_t]
        assert results2[1] == [read_t]
        assert isinstance(results2[2], InvalidRequestError)
        assert results2[3] == []
        assert store.image.acls == (prefixed, deny_group, cluster)

    run(kind, scenario)
    if kind.durable:

        async def restarted(store: MetadataStore) -> None:
            assert store.image.acls == (prefixed, deny_group, cluster)
            # Other changes keep the ACLs.
            await store.allocate_producer_ids(10)
            assert store.image.acls == (prefixed, deny_group, cluster)

        run(kind, restarted)


# --- client quotas ---


def test_client_quotas_are_set_removed_validated_and_durable(kind: StoreKind) -> None:
    app = (("client-id", "app"),)
    bob_default = (("client-id", None), ("user", "bob"))

    async def scenario(store: MetadataStore) -> None:
        results = await store.alter_client_quotas(
            [
                (
                    [("client-id", "app")],
                    [("producer_byte_rate", 1024.0, False), ("consumer_byte_rate", 2048.0, False)],
                ),
                ([("user", "bob"), ("client-id", None)], [("consumer_byte_rate", 10.0, False)]),
                ([("user", "carol")], [("producer_byte_rate", 0.0, False)]),
                ([("ip", "10.0.0.1"), ("user", "x")], [("producer_byte_rate", 1.0, False)]),
            ]
        )
        assert results[:2] == [None, None]
        assert [type(r).__name__ for r in results[2:]] == [
            "InvalidRequestError",
            "InvalidRequestError",
        ]
        assert store.image.client_quotas == {
            app: {"producer_byte_rate": 1024.0, "consumer_byte_rate": 2048.0},
            bob_default: {"consumer_byte_rate": 10.0},
        }
        before = store.image.client_quotas
        assert await store.alter_client_quotas(
            [([("client-id", "app")], [("producer_byte_rate", 1.0, False)])], validate_only=True
        ) == [None]
        assert store.image.client_quotas == before
        # removing the last key removes the entity; removing an unset key is no error
        assert await store.alter_client_quotas(
            [
                ([("client-id", None), ("user", "bob")], [("consumer_byte_rate", 0.0, True)]),
                (
                    [("client-id", "app")],
                    [("consumer_byte_rate", 0.0, True), ("never_set", 0.0, True)],
                ),
            ]
        ) == [None, None]
        assert store.image.client_quotas == {app: {"producer_byte_rate": 1024.0}}

    run(kind, scenario)
    if kind.durable:

        async def restarted(store: MetadataStore) -> None:
            assert store.image.client_quotas == {app: {"producer_byte_rate": 1024.0}}

        run(kind, restarted)


# --- delegation tokens ---


def test_delegation_tokens_are_created_renewed_removed_and_durable(kind: StoreKind) -> None:
    from gregor.protocol.errors import (
        DelegationTokenNotFoundError,
        DelegationTokenOwnerMismatchError,
    )
    from gregor.security import delegation_tokens as dt

    now = 1_800_000_000_000
    kept = dt.DelegationToken(
        "kept", "User:alice", "User:admin", ("User:bob",), now, now + 1000, now + 5000
    )
    old = dt.DelegationToken("old", "User:carol", "User:carol", (), now - 10, now - 5, now + 5000)

    async def scenario(store: MetadataStore) -> None:
        assert await store.create_delegation_token(kept) == kept
        await store.create_delegation_token(old)
        with pytest.raises(InvalidRequestError):
            await store.create_delegation_token(kept)  # an id is never reused
        # bob renews for 2 s (capped by nothing); carol may not; an unknown id is not found
        assert (
            await store.change_delegation_token(
                "kept", lambda t: dt.renewed(t, "User:bob", 2000, now, 9999)
            )
            == now + 2000
        )
        with pytest.raises(DelegationTokenOwnerMismatchError):
            await store.change_delegation_token(
                "kept", lambda t: dt.renewed(t, "User:carol", 1, now, 9999)
            )
        with pytest.raises(DelegationTokenNotFoundError):
            await store.change_delegation_token("nope", lambda t: None)
        assert await store.remove_expired_delegation_tokens(now) == ["old"]
        assert dict(store.image.delegation_tokens) == {
            "kept": dt.DelegationToken(
                "kept", "User:alice", "User:admin", ("User:bob",), now, now + 2000, now + 5000
            )
        }

    run(kind, scenario)
    if kind.durable:

        async def restarted(store: MetadataStore) -> None:
            token = store.image.delegation_tokens["kept"]
            assert (token.owner, token.requester, token.renewers, token.expiry_timestamp_ms) == (
                "User:alice",
                "User:admin",
                ("User:bob",),
                now + 2000,
            )
            assert await store.change_delegation_token("kept", lambda t: None) == -1
            assert not store.image.delegation_tokens

        run(kind, restarted)


# --- finalized features ---


def test_feature_levels_are_finalized_atomically_and_durable(kind: StoreKind) -> None:
    from gregor.protocol.errors import InvalidUpdateVersionError

    async def scenario(store: MetadataStore) -> None:
        assert dict(store.image.features) == {}  # a new cluster is at the defaults
        seen: list[dict[str, int]] = []

        def lower(current: Mapping[str, int]) -> Mapping[str, int]:
            seen.append(dict(current))
            return {"group.version": 0, "metadata.version": 25}

        epoch = await store.update_features(lower)
        assert seen == [{}]
        assert epoch == store.image.version
        assert dict(store.image.features) == {"group.version": 0, "metadata.version": 25}

        def refuse(current: Mapping[str, int]) -> Mapping[str, int]:
            raise InvalidUpdateVersionError(f"refused at {dict(current)}")

        with pytest.raises(InvalidUpdateVersionError, match="metadata.version"):
            await store.update_features(refuse)
        assert store.image.version == epoch  # a refusal writes nothing
        assert await store.update_features(lambda current: {"group.version": 1}) == epoch + 1
        assert dict(store.image.features) == {"group.version": 1, "metadata.version": 25}

    run(kind, scenario)
    if kind.durable:

        async def restarted(store: MetadataStore) -> None:
            assert dict(store.image.features) == {"group.version": 1, "metadata.version": 25}

        run(kind, restarted)
