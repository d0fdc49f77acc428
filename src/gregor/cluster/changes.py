"""Metadata changes as pure functions: old image in, new image out, or a Kafka error.

Every store applies its changes with these functions, so validation, error classes and the
shape of the resulting image are the same whichever store holds the data; a store only adds
serialisation, durability and publishing around them. Each function returns a new image with
``version`` one higher and ``controller_id`` recomputed, and never touches the image it was
given, so a refused change leaves nothing behind.

What is checked here is the shape of a change (names, replica lists, epochs). Choosing the
replicas, checking topic names against Kafka's rules and validating config values is the
caller's job (the broker's topic admin), as it needs the broker's configuration.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Mapping, Sequence

from gregor.cluster.image import (
    AclBinding,
    BrokerRegistration,
    ConfigResourceKey,
    DelegationToken,
    MetadataImage,
    PartitionImage,
    QuotaEntity,
    ScramCredential,
    TopicImage,
)
from gregor.protocol.errors import (
    BrokerIdNotRegisteredError,
    DelegationTokenNotFoundError,
    DuplicateResourceError,
    FencedLeaderEpochError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidRequestError,
    InvalidTopicError,
    InvalidUpdateVersionError,
    KafkaError,
    NoReassignmentInProgressError,
    ResourceNotFoundError,
    TopicAlreadyExistsError,
    UnacceptableCredentialError,
    UnknownTopicOrPartitionError,
    UnsupportedSaslMechanismError,
)
from gregor.security import quotas as quota_rules
from gregor.security.acls import AclBindingFilter, binding_error, filter_error
from gregor.security.scram import MAX_ITERATIONS, MECHANISM_IDS, MIN_ITERATIONS

NIL_UUID = uuid.UUID(int=0)


def controller_for(brokers: Mapping[int, BrokerRegistration]) -> int:
    """The local stores' controller: the lowest unfenced registered node id, -1 when none."""
    live = [node_id for node_id, reg in brokers.items() if not reg.fenced]
    return min(live) if live else -1


def _next(
    image: MetadataImage,
    *,
    topics: Mapping[str, TopicImage] | None = None,
    topics_by_id: Mapping[uuid.UUID, TopicImage] | None = None,
    brokers: Mapping[int, BrokerRegistration] | None = None,
    next_producer_id: int | None = None,
    scram_credentials: Mapping[str, Mapping[str, ScramCredential]] | None = None,
    config_resources: Mapping[ConfigResourceKey, Mapping[str, str]] | None = None,
    acls: Sequence[AclBinding] | None = None,
    client_quotas: Mapping[QuotaEntity, Mapping[str, float]] | None = None,
    delegation_tokens: Mapping[str, DelegationToken] | None = None,
    features: Mapping[str, int] | None = None,
) -> MetadataImage:
    """``image`` with the given parts replaced, ``version`` + 1 and the controller recomputed."""
    brokers = image.brokers if brokers is None else brokers
    return MetadataImage(
        version=image.version + 1,
        cluster_id=image.cluster_id,
        controller_id=controller_for(brokers),
        topics=image.topics if topics is None else topics,
        topics_by_id=image.topics_by_id if topics_by_id is None else topics_by_id,
        brokers=brokers,
        next_producer_id=image.next_producer_id if next_producer_id is None else next_producer_id,
        scram_credentials=image.scram_credentials
        if scram_credentials is None
        else scram_credentials,
        config_resources=image.config_resources if config_resources is None else config_resources,
        acls=image.acls if acls is None else tuple(acls),
        client_quotas=image.client_quotas if client_quotas is None else client_quotas,
        delegation_tokens=image.delegation_tokens
        if delegation_tokens is None
        else delegation_tokens,
        features=image.features if features is None else features,
        controller_epoch=image.controller_epoch,
    )


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
    return _next(image, topics=topics, topics_by_id=by_id)


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
    return _next(image, topics=topics, topics_by_id=by_id), topic


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
    return _next(image, brokers=brokers)


def unregister_broker(image: MetadataImage, node_id: int) -> MetadataImage:
    if node_id not in image.brokers:
        raise BrokerIdNotRegisteredError(f"broker {node_id} is not registered")
    brokers = {n: r for n, r in image.brokers.items() if n != node_id}
    return _next(image, brokers=brokers)


def allocate_producer_ids(image: MetadataImage, count: int) -> tuple[MetadataImage, int]:
    """Reserve ``count`` producer ids; returns the new image and the first id of the block."""
    if count < 1:
        raise InvalidRequestError(f"cannot allocate {count} producer ids")
    first = image.next_producer_id
    return _next(image, next_producer_id=first + count), first


def alter_scram_credentials(
    image: MetadataImage,
    deletions: Sequence[tuple[str, str]],
    upsertions: Sequence[tuple[str, ScramCredential]],
) -> tuple[MetadataImage, dict[str, KafkaError | None]]:
    """Delete ``(user, mechanism)`` credentials and add or replace ``(user, credential)`` ones.

    Each user's alterations succeed or fail together, as Kafka's AlterUserScramCredentials
    answers per user: a user named twice in the request (DUPLICATE_RESOURCE), an empty name or
    an iteration count outside [4096, 16384] (UNACCEPTABLE_CREDENTIAL), a mechanism other than
    SCRAM-SHA-256/512 (UNSUPPORTED_SASL_MECHANISM) or the deletion of a credential that does
    not exist (RESOURCE_NOT_FOUND) fails that user only. Returns the new image (version + 1
    even when every user failed) and, per user, None or the error.
    """
    results: dict[str, KafkaError | None] = {}
    seen: dict[str, int] = {}
    for user, _ in deletions:
        seen[user] = seen.get(user, 0) + 1
    for user, _cred in upsertions:
        seen[user] = seen.get(user, 0) + 1
    creds = {u: dict(c) for u, c in image.scram_credentials.items()}
    for user, count in seen.items():
        if count > 1:
            results[user] = DuplicateResourceError(
                "A user credential cannot be altered twice in the same request"
            )
        elif not user:
            results[user] = UnacceptableCredentialError("Username must not be empty")
    for user, mechanism in deletions:
        if user in results:
            continue
        if mechanism not in MECHANISM_IDS:
            results[user] = UnsupportedSaslMechanismError("Unknown SCRAM mechanism")
        elif mechanism not in creds.get(user, {}):
            results[user] = ResourceNotFoundError(
                "Attempt to delete a user credential that does not exist"
            )
        else:
            del creds[user][mechanism]
            if not creds[user]:
                del creds[user]
            results[user] = None
    for user, cred in upsertions:
        if user in results:
            continue
        if cred.mechanism not in MECHANISM_IDS:
            results[user] = UnsupportedSaslMechanismError("Unknown SCRAM mechanism")
        elif cred.iterations < MIN_ITERATIONS:
            results[user] = UnacceptableCredentialError("Too few iterations")
        elif cred.iterations > MAX_ITERATIONS:
            results[user] = UnacceptableCredentialError("Too many iterations")
        else:
            creds.setdefault(user, {})[cred.mechanism] = cred
            results[user] = None
    return _next(image, scram_credentials=creds), results


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
    return _next(image, config_resources=resources)


def create_acls(
    image: MetadataImage, bindings: Sequence[AclBinding]
) -> tuple[MetadataImage, list[KafkaError | None]]:
    """Add ACL bindings; per binding None or the error that refused it (INVALID_REQUEST with
    Kafka's message). Creating a binding that exists succeeds and changes nothing. Returns the
    new image (version + 1 even when every binding was refused)."""
    acls = dict.fromkeys(image.acls)
    results: list[KafkaError | None] = []
    for b in bindings:
        problem = binding_error(b)
        if problem is None:
            acls[b] = None
            results.append(None)
        else:
            results.append(InvalidRequestError(problem))
    return _next(image, acls=list(acls)), results


def delete_acls(
    image: MetadataImage, filters: Sequence[AclBindingFilter]
) -> tuple[MetadataImage, list[KafkaError | list[AclBinding]]]:
    """Remove every binding any filter matches; per filter the bindings it removed (a binding
    two filters match is reported by both) or the error that refused the filter
    (INVALID_REQUEST for a filter with an UNKNOWN element)."""
    results: list[KafkaError | list[AclBinding]] = []
    deleted: set[AclBinding] = set()
    for f in filters:
        problem = filter_error(f)
        if problem is not None:
            results.append(InvalidRequestError(problem))
            continue
        matched = [b for b in image.acls if f.matches(b)]
        deleted.update(matched)
        results.append(matched)
    return _next(image, acls=[b for b in image.acls if b not in deleted]), results


def alter_client_quotas(
    image: MetadataImage,
    entries: Sequence[tuple[Sequence[tuple[str, str | None]], Sequence[tuple[str, float, bool]]]],
    validate_only: bool = False,
) -> tuple[MetadataImage, list[KafkaError | None]]:
    """Apply each entry's (key, value, remove) operations to its entity, as Kafka's
    AlterClientQuotas does: per entry, all of its operations or none (INVALID_REQUEST with
    Kafka's message for a bad entity, key or value; removing a key that is not set is no
    error). ``validate_only`` checks without changing anything. Returns the new image
    (version + 1 even when nothing changed) and, per entry, None or the error."""
    quotas = {e: dict(v) for e, v in image.client_quotas.items()}
    results: list[KafkaError | None] = []
    for pairs, ops in entries:
        try:
            entity = quota_rules.entity_of(pairs)
            keys = quota_rules.validate_entity(entity)
            seen: set[str] = set()
            for key, value, remove in ops:
                if key in seen:
                    raise quota_rules.QuotaError(f"Duplicate quota key {key} in the request")
                seen.add(key)
                if not remove:
                    quota_rules.validate_value(keys, key, value)
        except quota_rules.QuotaError as e:
            results.append(InvalidRequestError(str(e)))
            continue
        if not validate_only:
            values = quotas.setdefault(entity, {})
            for key, value, remove in ops:
                if remove:
                    values.pop(key, None)
                else:
                    values[key] = float(value)
        results.append(None)
    return _next(image, client_quotas=quotas), results


def create_delegation_token(
    image: MetadataImage, token: DelegationToken
) -> tuple[MetadataImage, DelegationToken]:
    """Add a new token (its id is random: a clash is a refusal, never an overwrite)."""
    if token.token_id in image.delegation_tokens:
        raise InvalidRequestError(f"delegation token {token.token_id} exists")
    return _next(image, delegation_tokens={**image.delegation_tokens, token.token_id: token}), token


def change_delegation_token(
    image: MetadataImage, token_id: str, change: Callable[[DelegationToken], DelegationToken | None]
) -> tuple[MetadataImage, int]:
    """Renew or expire a token: ``change`` (``delegation_tokens.renewed`` / ``expired_by``,
    which raise Kafka's refusals) gives its new form, or None to remove it. Returns the new
    expiry timestamp (-1 once removed); DELEGATION_TOKEN_NOT_FOUND when the token is gone."""
    token = image.delegation_tokens.get(token_id)
    if token is None:
        raise DelegationTokenNotFoundError("Delegation Token not found.")
    new = change(token)
    tokens = dict(image.delegation_tokens)
    if new is None:
        del tokens[token_id]
    else:
        tokens[token_id] = new
    return _next(image, delegation_tokens=tokens), -1 if new is None else new.expiry_timestamp_ms


def remove_expired_delegation_tokens(
    image: MetadataImage, now_ms: int
) -> tuple[MetadataImage, list[str]]:
    """Remove every token whose expiry (or maximum) has passed; the ids removed."""
    gone = [t.token_id for t in image.delegation_tokens.values() if t.expired(now_ms)]
    tokens = {i: t for i, t in image.delegation_tokens.items() if i not in gone}
    return _next(image, delegation_tokens=tokens), gone


def update_features(image: MetadataImage, levels: Mapping[str, int]) -> tuple[MetadataImage, int]:
    """Finalize the given feature levels (validated by the caller against the broker's
    supported ranges); the new image's version, which is the finalized features' epoch."""
    new = _next(image, features={**image.features, **levels})
    return new, new.version
