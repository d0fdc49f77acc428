"""Metadata: brokers, controller, cluster id, topics with ids, partitions and leader epochs.

Topic list semantics by version: v0 sends an empty list to mean "all topics"; from v1 a null
list means all topics and an empty list means none. From v4 the request says whether missing
topics may be auto-created (older versions: allowed when the broker allows it). From v10
topics carry ids, and from v12 a request may name a topic by id alone.
"""

from __future__ import annotations

import uuid
from typing import Any

from gregor.broker.handlers.registry import handles
from gregor.broker.topics import topic_name_error
from gregor.protocol.errors import ErrorCode
from gregor.protocol.messages.metadata import MetadataRequest, MetadataResponse

ZERO_UUID = uuid.UUID(int=0)

Topic = MetadataResponse.Topics
Partition = MetadataResponse.Topics.Partitions


def _topic_entry(broker: Any, ts: Any) -> Topic:
    parts = [
        Partition(
            error_code=0,
            partition_index=p.partition,
            leader_id=p.leader,
            leader_epoch=p.leader_epoch,
            replica_nodes=list(p.replicas),
            isr_nodes=list(p.isr),
            offline_replicas=[],
        )
        for p in ts.partitions
    ]
    return Topic(
        error_code=0,
        name=ts.name,
        topic_id=ts.topic_id,
        is_internal=ts.internal,
        partitions=parts,
        topic_authorized_operations=-2147483648,
    )


@handles(MetadataRequest)
async def handle_metadata(ctx: Any, req: MetadataRequest) -> MetadataResponse:
    broker = ctx.broker
    version = ctx.version
    store = broker.metadata
    topics: list[Topic] = []
    all_topics = req.topics is None or (version == 0 and not req.topics)
    if all_topics:
        for ts in list(store.topics.values()):
            topics.append(_topic_entry(broker, ts))
    else:
        allow_create = broker.config["auto.create.topics.enable"] and (
            version < 4 or req.allow_auto_topic_creation
        )
        for t in req.topics:
            name = t.name
            if name is None and t.topic_id is not None and t.topic_id != ZERO_UUID:
                ts = store.topics_by_id.get(t.topic_id)
                if ts is None:
                    topics.append(Topic(error_code=ErrorCode.UNKNOWN_TOPIC_ID, name=None, topic_id=t.topic_id))
                else:
                    topics.append(_topic_entry(broker, ts))
                continue
            ts = store.topics.get(name)
            if ts is not None:
                topics.append(_topic_entry(broker, ts))
                continue
            if topic_name_error(name) is not None:
                topics.append(Topic(error_code=ErrorCode.INVALID_TOPIC_EXCEPTION, name=name, topic_id=ZERO_UUID))
                continue
            if allow_create:
                code = await broker.auto_create_topic(name)
                ts = store.topics.get(name)
                if code == 0 and ts is not None:
                    topics.append(_topic_entry(broker, ts))
                    continue
                topics.append(Topic(error_code=code or ErrorCode.LEADER_NOT_AVAILABLE, name=name, topic_id=ZERO_UUID))
                continue
            topics.append(Topic(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name=name, topic_id=ZERO_UUID))
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=broker.metadata_brokers(MetadataResponse.Brokers),
        cluster_id=store.cluster_id,
        controller_id=broker.controller_id,
        topics=topics,
        cluster_authorized_operations=-2147483648,
    )
