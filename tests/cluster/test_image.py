"""The metadata image and delta: immutability, lookup helpers, and deltas derived by comparison."""

from __future__ import annotations

import dataclasses
import uuid

import pytest

from gregor.cluster import changes
from gregor.cluster.image import (
    EMPTY,
    BrokerEndpoint,
    BrokerRegistration,
    MetadataDelta,
    MetadataImage,
    PartitionImage,
    TopicImage,
)

TID_A = uuid.UUID(int=0xA)
TID_B = uuid.UUID(int=0xB)


def part(i: int, replicas: tuple[int, ...] = (1,), **kw: int) -> PartitionImage:
    return PartitionImage(
        i,
        kw.get("leader", replicas[0]),
        kw.get("leader_epoch", 0),
        kw.get("partition_epoch", 0),
        replicas,
        replicas,
    )


def image_with(
    *topics: TopicImage, brokers: dict[int, BrokerRegistration] | None = None, version: int = 1
) -> MetadataImage:
    return MetadataImage(
        version=version,
        cluster_id="c",
        controller_id=-1,
        topics={t.name: t for t in topics},
        topics_by_id={t.topic_id: t for t in topics},
        brokers=brokers or {},
        next_producer_id=0,
    )


def broker(node_id: int, fenced: bool = False) -> BrokerRegistration:
    return BrokerRegistration(
        node_id,
        (
            BrokerEndpoint("PLAINTEXT", f"h{node_id}", 9092, "PLAINTEXT"),
            BrokerEndpoint("INTERNAL", f"i{node_id}", 9093, "PLAINTEXT"),
        ),
        rack=None,
        fenced=fenced,
    )


def test_images_are_frozen_and_hold_copies_not_references() -> None:
    configs = {"retention.ms": "1000"}
    replicas = [1, 2]
    p = PartitionImage(0, 1, 0, 0, replicas, replicas)  # type: ignore[arg-type]
    t = TopicImage("a", TID_A, [p], configs, False)  # type: ignore[arg-type]
    configs["retention.ms"] = "2"
    replicas.append(3)
    assert t.configs == {"retention.ms": "1000"}
    assert p.replicas == (1, 2) and p.isr == (1, 2) and isinstance(t.partitions, tuple)
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.name = "b"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.leader = 2  # type: ignore[misc]
    with pytest.raises(TypeError):
        t.configs["x"] = "y"  # type: ignore[index]
    img = image_with(t)
    with pytest.raises(TypeError):
        img.topics["b"] = t  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        img.version = 9  # type: ignore[misc]


def test_topic_partitions_must_be_numbered_in_order() -> None:
    with pytest.raises(ValueError):
        TopicImage("a", TID_A, (part(1),), {}, False)
    with pytest.raises(ValueError):
        TopicImage("a", TID_A, (part(0), part(0)), {}, False)


def test_image_maps_must_hold_the_same_topics() -> None:
    t = TopicImage("a", TID_A, (part(0),), {}, False)
    with pytest.raises(ValueError):
        MetadataImage(1, "c", -1, {"a": t}, {}, {}, 0)
    with pytest.raises(ValueError):
        MetadataImage(1, "c", -1, {"a": t}, {TID_B: t}, {}, 0)


def test_lookup_helpers() -> None:
    t = TopicImage("a", TID_A, (part(0), part(1, (2, 1))), {}, False)
    img = image_with(t, brokers={3: broker(3), 1: broker(1), 2: broker(2, fenced=True)})
    assert img.topic("a") is t and img.topic("zz") is None
    assert img.topic_by_id(TID_A) is t and img.topic_by_id(TID_B) is None
    assert img.partition("a", 1) == part(1, (2, 1))
    assert img.partition("a", 2) is None and img.partition("a", -1) is None
    assert img.partition("zz", 0) is None
    assert t.partition(0) is t.partitions[0] and t.partition(5) is None
    assert img.live_broker_ids() == [1, 3]
    b = img.brokers[1]
    assert b.endpoint("INTERNAL") == BrokerEndpoint("INTERNAL", "i1", 9093, "PLAINTEXT")
    assert b.endpoint("SSL") is None


def test_empty_image() -> None:
    assert (EMPTY.version, EMPTY.cluster_id, EMPTY.controller_id, EMPTY.next_producer_id) == (
        0,
        "",
        -1,
        0,
    )
    assert not EMPTY.topics and not EMPTY.topics_by_id and not EMPTY.brokers
    assert EMPTY.live_broker_ids() == []


def test_delta_from_empty_lists_every_topic_and_partition() -> None:
    a = TopicImage("a", TID_A, (part(0), part(1)), {"k": "v"}, False)
    b = TopicImage("b", TID_B, (part(0),), {}, True)
    img = image_with(a, b, brokers={1: broker(1)})
    d = MetadataDelta(EMPTY, img)
    assert d.created_topics == (a, b)
    assert d.deleted_topics == ()
    assert {n: dict(ps) for n, ps in d.changed_partitions.items()} == {
        "a": {0: a.partitions[0], 1: a.partitions[1]},
        "b": {0: b.partitions[0]},
    }
    assert d.changed_configs == frozenset()  # a new topic's configs come with it
    assert dict(d.changed_brokers) == {1: img.brokers[1]}
    assert not d.is_empty


def test_delta_of_each_change_names_only_what_changed() -> None:
    img0 = dataclasses.replace(EMPTY, cluster_id="c")
    img1, a = changes.create_topic(img0, "a", [[1], [1]], {"x": "1"}, topic_id=TID_A)
    img2, b = changes.create_topic(img1, "b", [[1]], {}, topic_id=TID_B)

    img3, _ = changes.add_partitions(img2, "a", [[1]])
    d = MetadataDelta(img2, img3)
    assert d.created_topics == () and d.deleted_topics == ()
    assert list(d.changed_partitions) == ["a"] and list(d.changed_partitions["a"]) == [2]
    assert d.changed_partitions["a"][2] == PartitionImage(2, 1, 0, 0, (1,), (1,))

    img4, _ = changes.alter_topic_configs(img3, "a", {"y": "2"})
    d = MetadataDelta(img3, img4)
    assert d.changed_configs == {"a"} and not d.changed_partitions
    assert img4.topics["a"].configs == {"y": "2"}

    img5, p = changes.alter_partition(
        img4, "a", 1, leader=1, leader_epoch=1, isr=[1], expected_partition_epoch=0
    )
    d = MetadataDelta(img4, img5)
    assert {n: dict(ps) for n, ps in d.changed_partitions.items()} == {"a": {1: p}}
    assert p.partition_epoch == 1 and p.leader_epoch == 1

    img6, gone = changes.delete_topic(img5, "b")
    d = MetadataDelta(img5, img6)
    assert d.deleted_topics == (b,) and d.created_topics == () and not d.changed_partitions

    img7 = changes.register_broker(img6, broker(2))
    img8 = changes.unregister_broker(img7, 2)
    assert dict(MetadataDelta(img6, img7).changed_brokers) == {
        2: dataclasses.replace(broker(2), epoch=img7.version)
    }
    assert dict(MetadataDelta(img7, img8).changed_brokers) == {2: None}
    assert dict(MetadataDelta(img6, img8).changed_brokers) == {}

    img9, first = changes.allocate_producer_ids(img8, 10)
    assert first == 0 and img9.next_producer_id == 10 and MetadataDelta(img8, img9).is_empty
    assert [
        i.version for i in (img0, img1, img2, img3, img4, img5, img6, img7, img8, img9)
    ] == list(range(10))
    assert a.name == "a" and gone is b


def test_topic_recreated_under_the_same_name_is_a_deletion_and_a_creation() -> None:
    img0 = dataclasses.replace(EMPTY, cluster_id="c")
    img1, old = changes.create_topic(img0, "a", [[1]], {"k": "1"}, topic_id=TID_A)
    img2, _ = changes.delete_topic(img1, "a")
    img3, new = changes.create_topic(img2, "a", [[1], [1]], {"k": "2"}, topic_id=TID_B)
    d = MetadataDelta(img1, img3)  # a watcher that skipped a version sees the same thing
    assert d.deleted_topics == (old,) and d.created_topics == (new,)
    assert set(d.changed_partitions["a"]) == {0, 1}
    assert d.changed_configs == frozenset()


def test_delta_properties_are_computed_once() -> None:
    img1, _ = changes.create_topic(dataclasses.replace(EMPTY, cluster_id="c"), "a", [[1]], {})
    d = MetadataDelta(EMPTY, img1)
    assert d.created_topics is d.created_topics
    assert d.changed_partitions is d.changed_partitions
    assert d.changed_brokers is d.changed_brokers


def test_controller_is_the_lowest_unfenced_registered_broker() -> None:
    img = dataclasses.replace(EMPTY, cluster_id="c")
    assert img.controller_id == -1
    img = changes.register_broker(img, broker(5))
    assert img.controller_id == 5
    img = changes.register_broker(img, broker(2, fenced=True))
    assert img.controller_id == 5
    img = changes.register_broker(img, broker(3))
    assert img.controller_id == 3
    img = changes.unregister_broker(img, 3)
    assert img.controller_id == 5
    img = changes.unregister_broker(img, 5)
    assert img.controller_id == -1 and list(img.brokers) == [2]
