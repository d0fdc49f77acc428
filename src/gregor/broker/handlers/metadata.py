"""Metadata: brokers, controller, cluster id, topics with ids, partitions and leader epochs.

Topic list semantics by version: v0 sends an empty list to mean "all topics"; from v1 a null
list means all topics and an empty list means none. From v4 the request says whether missing
topics may be auto-created (older versions: allowed when the broker allows it). From v10
topics carry ids, and from v12 a request may name a topic by id alone. Authorized operations
(KIP-430) are computed by ``gregor.broker.authorized_ops`` when asked for. The brokers listed are
each live broker's endpoint on the listener this request came in on.
"""

from __future__ import annotations

import uuid

from gregor.broker.authorized_ops import (
    OPERATIONS_NOT_REQUESTED,
    ResourceType,
    authorized_operations,
)
from gregor.broker.errors import code_of
from gregor.broker.handlers.registry import handles
from gregor.broker.state import RequestContext
from gregor.broker.topics import topic_name_error
from gregor.cluster.image import TopicImage
from gregor.protocol.errors import ErrorCode, KafkaError
from gregor.protocol.messages.metadata import MetadataRequest, MetadataResponse

ZERO_UUID = uuid.UUID(int=0)

Topic = MetadataResponse.Topics
Partition = MetadataResponse.Topics.Partitions


def _topic_entry(topic: TopicImage, with_ops: bool = False) -> Topic:
    parts = [
        Partition(
            error_code=0,
            partition_index=p.partition,
            leader_id=p.leader,
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
            authorized_operations(ResourceType.TOPIC, topic.name)
            if with_ops
            else OPERATIONS_NOT_REQUESTED
        ),
    )


async def _named_topic(
    ctx: RequestContext, t: MetadataRequest.Topics, allow_create: bool, with_ops: bool
) -> Topic:
    image = ctx.broker.image
    name = t.name
    if name is None and t.topic_id is not None and t.topic_id != ZERO_UUID:
        by_id = image.topic_by_id(t.topic_id)
        if by_id is None:
            return Topic(error_code=ErrorCode.UNKNOWN_TOPIC_ID, name=None, topic_id=t.topic_id)
        return _topic_entry(by_id, with_ops)
    found = image.topic(name) if name is not None else None
    if found is not None:
        return _topic_entry(found, with_ops)
    if name is None or topic_name_error(name) is not None:
        return Topic(error_code=ErrorCode.INVALID_TOPIC_EXCEPTION, name=name, topic_id=ZERO_UUID)
    if not allow_create:
        return Topic(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name=name, topic_id=ZERO_UUID)
    try:
        created = await ctx.broker.topics.auto_create(name)
    except KafkaError as e:
        return Topic(error_code=code_of(e), name=name, topic_id=ZERO_UUID)
    if created is None:
        return Topic(error_code=ErrorCode.LEADER_NOT_AVAILABLE, name=name, topic_id=ZERO_UUID)
    return _topic_entry(created, with_ops)


@handles(MetadataRequest)
async def handle_metadata(ctx: RequestContext, req: MetadataRequest) -> MetadataResponse:
    broker = ctx.broker
    version = ctx.version
    topics: list[Topic] = []
    # KIP-430: v8+ may ask for the topics' (and, v8-v10, the cluster's) authorized operations.
    topic_ops = version >= 8 and bool(req.include_topic_authorized_operations)
    cluster_ops = 8 <= version <= 10 and bool(req.include_cluster_authorized_operations)
    if req.topics is None or (version == 0 and not req.topics):
        topics = [_topic_entry(t, topic_ops) for t in broker.image.topics.values()]
    else:
        allow_create = bool(broker.config["auto.create.topics.enable"]) and (
            version < 4 or bool(req.allow_auto_topic_creation)
        )
        for t in req.topics:
            topics.append(await _named_topic(ctx, t, allow_create, topic_ops))
    image = broker.image
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=[
            MetadataResponse.Brokers(node_id=node, host=e.host, port=e.port, rack=rack)
            for node, e, rack in broker.endpoints(ctx.conn.listener)
        ],
        cluster_id=image.cluster_id,
        controller_id=image.controller_id,
        topics=topics,
        cluster_authorized_operations=(
            authorized_operations(ResourceType.CLUSTER) if cluster_ops else OPERATIONS_NOT_REQUESTED
        ),
    )
