"""Metadata: brokers, controller, cluster id, topics with ids, partitions and leader epochs.

Topic list semantics by version: v0 sends an empty list to mean "all topics"; from v1 a null
list means all topics and an empty list means none. From v4 the request says whether missing
topics may be auto-created (older versions: allowed when the broker allows it). From v10
topics carry ids, and from v12 a request may name a topic by id alone. Authorized operations
(KIP-430) are computed by ``gregor.broker.access.authorized_ops`` when asked for. The brokers listed are
each live broker's endpoint on the listener this request came in on; a partition whose leader
is not one of them (no leader, or a leader that died and is not replaced yet) answers
LEADER_NOT_AVAILABLE with leader -1, as Kafka's metadata cache does, so clients ask again
(from v6, LISTENER_NOT_FOUND when the leader is alive but has no endpoint on that listener).

Authorization (``gregor.broker.handlers.authz``), as Kafka: "all topics" lists only those the principal
may DESCRIBE; a named topic it may not describe answers TOPIC_AUTHORIZATION_FAILED whether or
not it exists; auto-creation needs CREATE on the cluster or on the topic.
"""

from __future__ import annotations

import dataclasses
import uuid

from gregor.broker.access.authorized_ops import (
    OPERATIONS_NOT_REQUESTED,
    Authorizer,
    ResourceType,
    authorized_operations,
)
from gregor.broker.common.errors import code_of
from gregor.broker.common.topics import topic_name_error
from gregor.broker.handlers.authz import CLUSTER_NAME, AclOperation, allowed, ops_authorizer
from gregor.broker.handlers.registry import handles
from gregor.broker.state import RequestContext
from gregor.cluster.image import TopicImage
from gregor.protocol.errors import ErrorCode, KafkaError
from gregor.protocol.messages.metadata import MetadataRequest, MetadataResponse

ZERO_UUID = uuid.UUID(int=0)

Topic = MetadataResponse.Topics
Partition = MetadataResponse.Topics.Partitions


@dataclasses.dataclass(frozen=True)
class Live:
    """Which leaders a response may name: brokers with an endpoint on the request's listener."""

    on_listener: frozenset[int]
    registered: frozenset[int]  # every live broker, whatever its listeners
    version: int

    def error(self, leader: int) -> int:
        if leader in self.on_listener:
            return ErrorCode.NONE
        if leader in self.registered and self.version >= 6:
            return ErrorCode.LISTENER_NOT_FOUND
        return ErrorCode.LEADER_NOT_AVAILABLE


def _topic_entry(
    topic: TopicImage, live: Live, with_ops: bool = False, authz: Authorizer | None = None
) -> Topic:
    parts = [
        Partition(
            error_code=live.error(p.leader),
            partition_index=p.partition,
            leader_id=p.leader if p.leader in live.on_listener else -1,
            leader_epoch=p.leader_epoch,
            replica_nodes=list(p.replicas),
            isr_nodes=list(p.isr),
            offline_replicas=list(p.offline_replicas),
        )
        for p in topic.partitions
    ]
    return Topic(
        error_code=0,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=topic.internal,
        partitions=parts,
        topic_authorized_operations=(
            authorized_operations(ResourceType.TOPIC, topic.name, authz)
            if with_ops
            else OPERATIONS_NOT_REQUESTED
        ),
    )


async def _named_topic(
    ctx: RequestContext, t: MetadataRequest.Topics, live: Live, allow_create: bool, with_ops: bool
) -> Topic:
    image = ctx.broker.image
    name = t.name
    authz = ops_authorizer(ctx)
    denied = ErrorCode.TOPIC_AUTHORIZATION_FAILED

    def describable(topic_name: str) -> bool:
        return allowed(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, topic_name)

    if name is None and t.topic_id is not None and t.topic_id != ZERO_UUID:
        by_id = image.topic_by_id(t.topic_id)
        if by_id is None:
            return Topic(error_code=ErrorCode.UNKNOWN_TOPIC_ID, name=None, topic_id=t.topic_id)
        if not describable(by_id.name):
            return Topic(error_code=denied, name=None, topic_id=t.topic_id)
        return _topic_entry(by_id, live, with_ops, authz)
    if name is not None and not describable(name):
        return Topic(error_code=denied, name=name, topic_id=ZERO_UUID)
    found = image.topic(name) if name is not None else None
    if found is not None:
        return _topic_entry(found, live, with_ops, authz)
    if name is None or topic_name_error(name) is not None:
        return Topic(error_code=ErrorCode.INVALID_TOPIC_EXCEPTION, name=name, topic_id=ZERO_UUID)
    if not allow_create:
        return Topic(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name=name, topic_id=ZERO_UUID)
    if not (
        allowed(ctx, AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME)
        or allowed(ctx, AclOperation.CREATE, ResourceType.TOPIC, name)
    ):
        return Topic(error_code=denied, name=name, topic_id=ZERO_UUID)
    try:
        created = await ctx.broker.topics.auto_create(name)
    except KafkaError as e:
        return Topic(error_code=code_of(e), name=name, topic_id=ZERO_UUID)
    if created is None:
        return Topic(error_code=ErrorCode.LEADER_NOT_AVAILABLE, name=name, topic_id=ZERO_UUID)
    return _topic_entry(created, live, with_ops, authz)


@handles(MetadataRequest)
async def handle_metadata(ctx: RequestContext, req: MetadataRequest) -> MetadataResponse:
    broker = ctx.broker
    version = ctx.version
    topics: list[Topic] = []
    # KIP-430: v8+ may ask for the topics' (and, v8-v10, the cluster's) authorized operations.
    topic_ops = version >= 8 and bool(req.include_topic_authorized_operations)
    cluster_ops = 8 <= version <= 10 and bool(req.include_cluster_authorized_operations)
    live_ids = broker.live_broker_ids()  # once: it may look at the liveness sockets
    live_brokers = broker.endpoints(ctx.conn.listener, live_ids)
    live = Live(frozenset(node for node, _, _ in live_brokers), frozenset(live_ids), version)
    if req.topics is None or (version == 0 and not req.topics):
        authz = ops_authorizer(ctx)
        topics = [
            _topic_entry(t, live, topic_ops, authz)
            for t in broker.image.topics.values()
            if allowed(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, t.name)
        ]
    else:
        allow_create = bool(broker.config["auto.create.topics.enable"]) and (
            version < 4 or bool(req.allow_auto_topic_creation)
        )
        for t in req.topics:
            topics.append(await _named_topic(ctx, t, live, allow_create, topic_ops))
    image = broker.image
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=[
            MetadataResponse.Brokers(node_id=node, host=e.host, port=e.port, rack=rack)
            for node, e, rack in live_brokers
        ],
        cluster_id=image.cluster_id,
        controller_id=image.controller_id,
        topics=topics,
        cluster_authorized_operations=(
            authorized_operations(ResourceType.CLUSTER, CLUSTER_NAME, ops_authorizer(ctx))
            if cluster_ops
            else OPERATIONS_NOT_REQUESTED
        ),
    )
