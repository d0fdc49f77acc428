"""Metadata changes as pure functions: old image in, new image out, or a Kafka error.

Every store applies its changes with these functions, so validation, error classes and the
shape of the resulting image are the same whichever store holds the data; a store only adds
serialisation, durability and publishing around them. Each function returns a new image with
``version`` one higher and ``controller_id`` recomputed, and never touches the image it was
given, so a refused change leaves nothing behind. The access parts of the image (SCRAM
credentials, ACLs, client quotas, delegation tokens) change in ``access_changes``, on the same
contract.

What is checked here is the shape of a change (names, replica lists, epochs). Choosing the
replicas, checking topic names against Kafka's rules and validating config values is the
caller's job (the broker's topic admin), as it needs the broker's configuration.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Mapping, Sequence

from gregor.cluster.change_base import next_image
from gregor.cluster.image import (
    BrokerRegistration,
    MetadataImage,
    PartitionImage,
    TopicImage,
)
from gregor.protocol.errors import (
    BrokerIdNotRegisteredError,
    FencedLeaderEpochError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidRequestError,
    InvalidTopicError,
    InvalidUpdateVersionError,
    KafkaError,
    NoReassignmentInProgressError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)

NIL_UUID = uuid.UUID(int=0)


def _new_partition(index: int, replicas: Sequence[int]) -> PartitionImage:
    reps = tuple(replicas)
    return PartitionImage(index, reps[0], 0, 0, reps, reps)


def _check_assignments(
    assignments: Sequence[Sequence[int]], replication_factor: int | None
) -> None:
    if not assignments:
        raise InvalidPartitionsError("at least one partition is needed")
    rf = replication_factor if replication_factor is not None else len(assignments[0])
    for i, reps in enumerate(assignments):
        if not reps:
            raise InvalidReplicaAssignmentError(f"partition {i} has no replicas")
        if len(set(reps)) != len(reps):
            raise InvalidReplicaAssignmentError(
                f"partition {i} lists a replica twice: {list(reps)}"
            )
        if any(not isinstance(b, int) or b < 0 for b in reps):
            raise InvalidReplicaAssignmentError(
                f"partition {i} has an invalid broker id: {list(reps)}"
            )
        if len(reps) != rf:
            raise InvalidReplicaAssignmentError(
                f"partition {i} has {len(reps)} replicas, expected {rf} like the others"
            )


def _topic(image: MetadataImage, name: str) -> TopicImage:
    topic = image.topics.get(name)
    if topic is None:
        raise UnknownTopicOrPartitionError(f"Topic '{name}' does not exist.")
    return topic


def _replace_topic(image: MetadataImage, topic: TopicImage) -> MetadataImage:
    topics = dict(image.topics)
    by_id = dict(image.topics_by_id)
    topics[topic.name] = topic
    by_id[topic.topic_id] = topic
    return next_image(image, topics=topics, topics_by_id=by_id)


def create_topic(
    image: MetadataImage,
    name: str,
    assignments: Sequence[Sequence[int]],
    configs: Mapping[str, str],
    internal: bool = False,
    topic_id: uuid.UUID | None = None,
) -> tuple[MetadataImage, TopicImage]:
    if not isinstance(name, str) or not name:
        raise InvalidTopicError(f"invalid topic name {name!r}")
    if name in image.topics:
        raise TopicAlreadyExistsError(f"Topic '{name}' already exists.")
    if topic_id is None:
        topic_id = uuid.uuid4()
    elif topic_id == NIL_UUID:
        raise InvalidRequestError("the all-zero topic id is reserved")
    elif topic_id in image.topics_by_id:
        raise TopicAlreadyExistsError(f"a topic with id {topic_id} already exists")
    _check_assignments(assignments, None)
    topic = TopicImage(
        name,
        topic_id,
        tuple(_new_partition(i, reps) for i, reps in enumerate(assignments)),
        dict(configs),
        internal,
    )
    return _replace_topic(image, topic), topic


def delete_topic(image: MetadataImage, name: str) -> tuple[MetadataImage, TopicImage]:
    topic = _topic(image, name)
    topics = {n: t for n, t in image.topics.items() if n != name}
    by_id = {i: t for i, t in image.topics_by_id.items() if i != topic.topic_id}
    return next_image(image, topics=topics, topics_by_id=by_id), topic


def add_partitions(
    image: MetadataImage, name: str, assignments: Sequence[Sequence[int]]
) -> tuple[MetadataImage, TopicImage]:
    topic = _topic(image, name)
    if not assignments:
        raise InvalidPartitionsError("at least one new partition is needed")
    rf = len(topic.partitions[0].target_replicas) if topic.partitions else None
    _check_assignments(assignments, rf)
    start = len(topic.partitions)
    added = tuple(_new_partition(start + i, reps) for i, reps in enumerate(assignments))
    new = dataclasses.replace(topic, partitions=topic.partitions + added)
    return _replace_topic(image, new), new


def alter_topic_configs(
    image: MetadataImage, name: str, configs: Mapping[str, str]
) -> tuple[MetadataImage, TopicImage]:
    topic = _topic(image, name)
    new = dataclasses.replace(topic, configs=dict(configs))
    return _replace_topic(image, new), new


def alter_partition(
    image: MetadataImage,
    topic_name: str,
    partition: int,
    *,
    leader: int,
    leader_epoch: int,
    isr: Sequence[int],
    expected_partition_epoch: int,
) -> tuple[MetadataImage, PartitionImage]:
    """Compare-and-set one partition's leader, leader_epoch and ISR.

    Refused with FENCED_LEADER_EPOCH when ``leader_epoch`` is below the current one, with
    INVALID_UPDATE_VERSION when ``expected_partition_epoch`` is not the current
    partition_epoch (someone else changed it first), and with INVALID_REQUEST when the new
    state is not well formed (ISR outside the replicas, leader outside the ISR, a new leader
    without a higher leader_epoch).
    """
    topic = _topic(image, topic_name)
    current = topic.partition(partition)
    if current is None:
        raise UnknownTopicOrPartitionError(f"Partition {topic_name}-{partition} does not exist.")
    new_isr = tuple(isr)
    if len(set(new_isr)) != len(new_isr):
        raise InvalidRequestError(f"ISR {list(new_isr)} lists a replica twice")
    if any(b not in current.replicas for b in new_isr):
        raise InvalidRequestError(
            f"ISR {list(new_isr)} is not a subset of the replicas {list(current.replicas)}"
        )
    if leader != -1 and leader not in new_isr:
        raise InvalidRequestError(f"leader {leader} is not in the ISR {list(new_isr)}")
    if leader_epoch < current.leader_epoch:
        raise FencedLeaderEpochError(
            f"leader_epoch {leader_epoch} is older than the current {current.leader_epoch}"
        )
    if expected_partition_epoch != current.partition_epoch:
        raise InvalidUpdateVersionError(
            f"partition_epoch {expected_partition_epoch} is not the current {current.partition_epoch}"
        )
    if leader != current.leader and leader_epoch == current.leader_epoch:
        raise InvalidRequestError(
            f"a new leader ({current.leader} -> {leader}) needs a leader_epoch above {leader_epoch}"
        )
    new = _complete_reassignment(
        dataclasses.replace(
            current,
            leader=leader,
            leader_epoch=leader_epoch,
            partition_epoch=current.partition_epoch + 1,
            isr=new_isr,
        )
    )
    return _replace_partition(image, topic, new), new


def _replace_partition(
    image: MetadataImage, topic: TopicImage, new: PartitionImage
) -> MetadataImage:
    partitions = list(topic.partitions)
    partitions[new.partition] = new
    return _replace_topic(image, dataclasses.replace(topic, partitions=tuple(partitions)))


def _complete_reassignment(p: PartitionImage) -> PartitionImage:
    """``p`` with its reassignment completed if every target replica is in the ISR (KIP-455):
    the replicas become the target, the removed replicas leave the ISR, and a leader that is
    being removed hands over to the first target replica (leader epoch bumped). Otherwise
    ``p`` unchanged."""
    if not p.reassigning:
        return p
    target = p.target_replicas
    if any(r not in p.isr for r in target):
        return p
    leader, leader_epoch = p.leader, p.leader_epoch
    if leader not in target:
        leader, leader_epoch = target[0], leader_epoch + 1
    return dataclasses.replace(
        p,
        leader=leader,
        leader_epoch=leader_epoch,
        replicas=target,
        isr=tuple(r for r in p.isr if r in target),
        offline_replicas=tuple(r for r in p.offline_replicas if r in target),
        adding_replicas=(),
        removing_replicas=(),
    )


#: One partition of a reassignment request: (topic, partition, target replicas or None to cancel).
Reassignment = tuple[str, int, Sequence[int] | None]


def reassign_partitions(
    image: MetadataImage, reassignments: Sequence[Reassignment]
) -> tuple[MetadataImage, list[KafkaError | None]]:
    """AlterPartitionReassignments (KIP-455) in one change; per partition None or its error.

    A target starts a reassignment: ``replicas`` becomes the target followed by the original
    replicas not in it, with ``adding_replicas`` / ``removing_replicas`` set; the leader then
    brings the new replicas into the ISR, and the change that makes the whole target part of
    the ISR completes it (``_complete_reassignment``). A target for a partition already being
    reassigned replaces that reassignment (computed from the original replicas). None cancels
    one in progress: the replicas go back to the original ones (NO_REASSIGNMENT_IN_PROGRESS
    when there is none). Targets must name distinct registered brokers
    (INVALID_REPLICA_ASSIGNMENT)."""
    results: list[KafkaError | None] = []
    current = image
    for topic_name, index, target in reassignments:
        try:
            topic = _topic(current, topic_name)
            p = topic.partition(index)
            if p is None:
                raise UnknownTopicOrPartitionError(
                    f"Partition {topic_name}-{index} does not exist."
                )
            new = _reassign(current, p, target)
        except KafkaError as e:
            results.append(e)
            continue
        if new != p:
            current = _replace_partition(current, topic, new)
        results.append(None)
    return current, results


def _reassign(
    image: MetadataImage, p: PartitionImage, target: Sequence[int] | None
) -> PartitionImage:
    if target is None and not p.reassigning:
        raise NoReassignmentInProgressError(
            f"No reassignment in progress for partition {p.partition}."
        )
    if target is not None:
        target = tuple(target)
        if not target:
            raise InvalidReplicaAssignmentError("The target replica set is empty.")
        if len(set(target)) != len(target) or any(b < 0 for b in target):
            raise InvalidReplicaAssignmentError(
                f"The target replicas {list(target)} are not distinct broker ids."
            )
        unknown = [b for b in target if b not in image.brokers]
        if unknown:
            raise InvalidReplicaAssignmentError(
                f"The target replicas {list(target)} name brokers that are not registered: {unknown}."
            )
        if target == p.replicas and not p.reassigning:
            return p
    base = _revert(p)
    if target is not None and target != base.replicas:
        removing = tuple(r for r in base.replicas if r not in target)
        base = _complete_reassignment(
            dataclasses.replace(
                base,
                replicas=target + removing,
                adding_replicas=tuple(r for r in target if r not in base.replicas),
                removing_replicas=removing,
            )
        )
    return dataclasses.replace(base, partition_epoch=p.partition_epoch + 1)


def _revert(p: PartitionImage) -> PartitionImage:
    """``p`` with its reassignment in progress (if any) undone, as Kafka does before starting
    another or on a cancel: the adding replicas leave the replicas and the ISR at once, and a
    leader among them hands over to the first original replica in the ISR."""
    if not p.reassigning:
        return p
    original = p.original_replicas
    isr = tuple(r for r in p.isr if r in original)
    if not isr:
        raise InvalidReplicaAssignmentError(
            f"No original replica {list(original)} is in the ISR {list(p.isr)}: the reassignment "
            "in progress cannot be undone without losing data."
        )
    leader, leader_epoch = p.leader, p.leader_epoch
    if leader != -1 and leader not in isr:
        leader, leader_epoch = isr[0], leader_epoch + 1
    return dataclasses.replace(
        p,
        leader=leader,
        leader_epoch=leader_epoch,
        replicas=original,
        isr=isr,
        offline_replicas=tuple(r for r in p.offline_replicas if r in original),
        adding_replicas=(),
        removing_replicas=(),
    )


def register_broker(image: MetadataImage, registration: BrokerRegistration) -> MetadataImage:
    """Add or replace (re-registration after a restart) a broker's registration; its broker
    epoch becomes the new image's version."""
    if registration.node_id < 0:
        raise InvalidRequestError(f"invalid broker id {registration.node_id}")
    listeners = [ep.listener for ep in registration.endpoints]
    if len(set(listeners)) != len(listeners):
        raise InvalidRequestError(
            f"broker {registration.node_id} lists a listener twice: {listeners}"
        )
    brokers = dict(image.brokers)
    brokers[registration.node_id] = dataclasses.replace(registration, epoch=image.version + 1)
    return next_image(image, brokers=brokers)


def unregister_broker(image: MetadataImage, node_id: int) -> MetadataImage:
    if node_id not in image.brokers:
        raise BrokerIdNotRegisteredError(f"broker {node_id} is not registered")
    brokers = {n: r for n, r in image.brokers.items() if n != node_id}
    return next_image(image, brokers=brokers)


def allocate_producer_ids(image: MetadataImage, count: int) -> tuple[MetadataImage, int]:
    """Reserve ``count`` producer ids; returns the new image and the first id of the block."""
    if count < 1:
        raise InvalidRequestError(f"cannot allocate {count} producer ids")
    first = image.next_producer_id
    return next_image(image, next_producer_id=first + count), first


#: Kafka's ConfigResource type of a topic: a topic's overrides live with the topic.
TOPIC_RESOURCE = 2


def alter_config_resource(
    image: MetadataImage, resource_type: int, name: str, configs: Mapping[str, str]
) -> MetadataImage:
    """Replace the whole override set of a non-topic config resource (a broker by node id or
    "" for the cluster-wide default, a group, ...); an empty set removes the entry. Which
    names and values are allowed is the caller's business."""
    if resource_type == TOPIC_RESOURCE:
        raise InvalidRequestError("topic configs are altered with alter_topic_configs")
    if not isinstance(resource_type, int) or resource_type <= 0 or not isinstance(name, str):
        raise InvalidRequestError(f"invalid config resource ({resource_type!r}, {name!r})")
    if any(not isinstance(k, str) or not isinstance(v, str) for k, v in configs.items()):
        raise InvalidRequestError("config names and values must be strings")
    resources = dict(image.config_resources)
    if configs:
        resources[(resource_type, name)] = dict(configs)
    else:
        resources.pop((resource_type, name), None)
    return next_image(image, config_resources=resources)


def update_features(image: MetadataImage, levels: Mapping[str, int]) -> tuple[MetadataImage, int]:
    """Finalize the given feature levels (validated by the caller against the broker's
    supported ranges); the new image's version, which is the finalized features' epoch."""
    new = next_image(image, features={**image.features, **levels})
    return new, new.version
