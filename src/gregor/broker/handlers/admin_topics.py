"""Topic administration: CreateTopics, DeleteTopics, CreatePartitions, DeleteRecords.

Each request carries many topics and each topic gets its own result: one bad topic never fails
the others. A name given twice in one request is ambiguous, so every copy of it is refused with
INVALID_REQUEST (one result per distinct name). The handlers only turn each request into arguments
(by version) and answers; the checks and changes are ``TopicAdmin``'s, which raises Kafka's
error for a broken rule; ``validate_only`` runs every check and changes nothing.

CreateTopics from v4 lets ``num_partitions`` / ``replication_factor`` be -1 for the broker's
``num.partitions`` / ``default.replication.factor``; older versions must give real numbers.
An explicit replica assignment replaces both (they must then be -1) and must number its
partitions 0..n-1. From v5 a created topic is answered with its partition count, replication
factor and every config with its value and source; from v7 with its topic id.

DeleteRecords raises a partition's log start offset (at most to the high watermark; -1 means
the high watermark) and answers the new low watermark; a topic whose cleanup.policy is
compact only refuses it with POLICY_VIOLATION, as Kafka does.

A client with a ``controller_mutation_rate`` quota (KIP-599) spends the partitions it creates
or deletes from its bucket (``broker.quota_manager``); once the bucket is negative, CreateTopics
v6+, CreatePartitions v3+ and DeleteTopics v5+ refuse each further topic with
THROTTLING_QUOTA_EXCEEDED, older versions go on. The answer carries the throttle time.
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter

from gregor.broker.access.quota_manager import MutationQuota
from gregor.broker.common.errors import code_of, message_of
from gregor.broker.common.events import log_event
from gregor.broker.config.dynamic_configs import broker_layers
from gregor.broker.config.topic_configs import describe_topic
from gregor.broker.handlers.authz import AclOperation, ResourceType, allowed, cluster_allowed
from gregor.broker.handlers.registry import handles
from gregor.broker.state import RequestContext
from gregor.protocol.errors import (
    ErrorCode,
    InvalidConfigError,
    InvalidReplicaAssignmentError,
    InvalidRequestError,
    KafkaError,
)
from gregor.protocol.messages.create_partitions import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
)
from gregor.protocol.messages.create_topics import CreateTopicsRequest, CreateTopicsResponse
from gregor.protocol.messages.delete_records import DeleteRecordsRequest, DeleteRecordsResponse
from gregor.protocol.messages.delete_topics import DeleteTopicsRequest, DeleteTopicsResponse
from gregor.protocol.primitives import ZERO_UUID

log = logging.getLogger("gregor.broker.admin")

CTTopic = CreateTopicsResponse.Topics
CTConfig = CreateTopicsResponse.Topics.Configs


#: Kafka's message for a topic refused by the controller mutation quota.
THROTTLED = "The throttling quota has been exceeded."


def _mutation_quota(ctx: RequestContext, strict_from: int) -> MutationQuota | None:
    """The client's controller_mutation_rate quota (KIP-599), strict from ``strict_from``."""
    quotas = ctx.broker.quotas
    if not quotas.active:
        return None
    return quotas.mutation_quota(
        ctx.conn.principal, ctx.client_id, strict=ctx.version >= strict_from
    )


def _ct_error(name: str, code: int, message: str | None) -> CTTopic:
    return CTTopic(
        name=name,
        topic_id=ZERO_UUID,
        error_code=code,
        error_message=message,
        num_partitions=-1,
        replication_factor=-1,
        configs=[],
    )


def _layout(
    t: CreateTopicsRequest.Topics, version: int
) -> tuple[int | None, int | None, list[list[int]] | None]:
    """The request's partitions, replication factor (None: the broker's default, v4+) and
    explicit assignment; raises for a malformed assignment."""
    if t.assignments:
        if t.num_partitions != -1 or t.replication_factor != -1:
            raise InvalidRequestError(
                "num_partitions and replication_factor must be -1 when a replica assignment is given"
            )
        ordered = sorted(t.assignments, key=lambda a: a.partition_index)
        if [a.partition_index for a in ordered] != list(range(len(ordered))):
            raise InvalidReplicaAssignmentError(
                "partitions of a replica assignment must be numbered 0 to n-1"
            )
        return None, None, [list(a.broker_ids) for a in ordered]
    num_partitions: int | None = t.num_partitions
    replication_factor: int | None = t.replication_factor
    if version >= 4:
        num_partitions = None if num_partitions == -1 else num_partitions
        replication_factor = None if replication_factor == -1 else replication_factor
    return num_partitions, replication_factor, None


async def _create_one(
    ctx: RequestContext,
    t: CreateTopicsRequest.Topics,
    validate_only: bool,
    quota: MutationQuota | None,
) -> CTTopic:
    version = ctx.version
    configs = {c.name: c.value for c in t.configs if c.value is not None}
    if quota is not None and not validate_only and quota.refused():
        return _ct_error(t.name, ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLED)
    try:
        nulls = [c.name for c in t.configs if c.value is None]
        if nulls:
            raise InvalidConfigError(
                f"Null value not supported for topic configs: {','.join(nulls)}"
            )
        num_partitions, replication_factor, assignments = _layout(t, version)
        created = await ctx.broker.topics.create_topic(
            t.name, num_partitions, replication_factor, assignments, configs, validate_only
        )
    except KafkaError as e:
        return _ct_error(t.name, code_of(e), message_of(e))
    if quota is not None and not validate_only:
        quota.record(created.num_partitions)
    layers = broker_layers(ctx.broker.image, ctx.broker.node_id, ctx.broker.config.raw)
    described = describe_topic(dict(created.configs), layers) if version >= 5 else []
    return CTTopic(
        name=t.name,
        topic_id=created.topic_id,
        error_code=0,
        error_message=None,
        num_partitions=created.num_partitions,
        replication_factor=created.replication_factor,
        configs=[
            CTConfig(
                name=e.name,
                value=e.value,
                read_only=e.read_only,
                config_source=int(e.source),
                is_sensitive=e.is_sensitive,
            )
            for e in described
        ],
    )


@handles(CreateTopicsRequest)
async def handle_create_topics(
    ctx: RequestContext, req: CreateTopicsRequest
) -> CreateTopicsResponse:
    counts = Counter(t.name for t in req.topics)
    validate_only = bool(req.validate_only) if ctx.version >= 1 else False
    quota = _mutation_quota(ctx, strict_from=6)
    results: list[CTTopic] = []
    done: set[str] = set()
    for t in req.topics:
        if t.name in done:
            continue
        done.add(t.name)
        if counts[t.name] > 1:
            results.append(
                _ct_error(
                    t.name,
                    ErrorCode.INVALID_REQUEST,
                    f"Topic '{t.name}' appears more than once in the request.",
                )
            )
            continue
        if not (
            cluster_allowed(ctx, AclOperation.CREATE)
            or allowed(ctx, AclOperation.CREATE, ResourceType.TOPIC, t.name)
        ):
            results.append(_ct_error(t.name, ErrorCode.TOPIC_AUTHORIZATION_FAILED, None))
            continue
        results.append(await _create_one(ctx, t, validate_only, quota))
    return CreateTopicsResponse(
        throttle_time_ms=quota.throttle_ms() if quota else 0, topics=results
    )


DTResult = DeleteTopicsResponse.Responses


@handles(DeleteTopicsRequest)
async def handle_delete_topics(
    ctx: RequestContext, req: DeleteTopicsRequest
) -> DeleteTopicsResponse:
    image = ctx.broker.image
    wanted: list[tuple[str | None, uuid.UUID]]
    if ctx.version >= 6:
        wanted = [(t.name, t.topic_id or ZERO_UUID) for t in req.topics]
    else:
        wanted = [(name, ZERO_UUID) for name in req.topic_names]
    counts = Counter(wanted)
    quota = _mutation_quota(ctx, strict_from=5)
    results: list[DTResult] = []
    done: set[tuple[str | None, uuid.UUID]] = set()
    for name, topic_id in wanted:
        if (name, topic_id) in done:
            continue
        done.add((name, topic_id))
        if counts[(name, topic_id)] > 1:
            results.append(
                DTResult(
                    name=name,
                    topic_id=topic_id,
                    error_code=ErrorCode.INVALID_REQUEST,
                    error_message="The topic appears more than once in the request.",
                )
            )
            continue
        if name is not None and topic_id != ZERO_UUID:
            results.append(
                DTResult(
                    name=name,
                    topic_id=topic_id,
                    error_code=ErrorCode.INVALID_REQUEST,
                    error_message="Give a topic's name or its id, not both.",
                )
            )
            continue
        if name is None:
            by_id = image.topic_by_id(topic_id)
            if by_id is None:
                results.append(
                    DTResult(
                        name=None,
                        topic_id=topic_id,
                        error_code=ErrorCode.UNKNOWN_TOPIC_ID,
                        error_message=f"No topic has the id {topic_id}.",
                    )
                )
                continue
            name = by_id.name
        if not allowed(ctx, AclOperation.DELETE, ResourceType.TOPIC, name):
            results.append(
                DTResult(
                    name=name if ctx.version < 6 or topic_id == ZERO_UUID else None,
                    topic_id=topic_id,
                    error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                    error_message=None,
                )
            )
            continue
        found = image.topic(name)
        topic_id = found.topic_id if found is not None else ZERO_UUID
        if quota is not None and quota.refused():
            results.append(
                DTResult(
                    name=name,
                    topic_id=topic_id,
                    error_code=ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                    error_message=THROTTLED,
                )
            )
            continue
        try:
            await ctx.broker.topics.delete_topic(name)
        except KafkaError as e:
            results.append(
                DTResult(
                    name=name, topic_id=topic_id, error_code=code_of(e), error_message=message_of(e)
                )
            )
            continue
        if quota is not None and found is not None:
            quota.record(len(found.partitions))
        results.append(DTResult(name=name, topic_id=topic_id, error_code=0, error_message=None))
    return DeleteTopicsResponse(
        throttle_time_ms=quota.throttle_ms() if quota else 0, responses=results
    )


CPResult = CreatePartitionsResponse.Results


@handles(CreatePartitionsRequest)
async def handle_create_partitions(
    ctx: RequestContext, req: CreatePartitionsRequest
) -> CreatePartitionsResponse:
    counts = Counter(t.name for t in req.topics)
    quota = _mutation_quota(ctx, strict_from=3)
    results: list[CPResult] = []
    done: set[str] = set()
    for t in req.topics:
        if t.name in done:
            continue
        done.add(t.name)
        if counts[t.name] > 1:
            results.append(
                CPResult(
                    name=t.name,
                    error_code=ErrorCode.INVALID_REQUEST,
                    error_message=f"Topic '{t.name}' appears more than once in the request.",
                )
            )
            continue
        if not allowed(ctx, AclOperation.ALTER, ResourceType.TOPIC, t.name):
            results.append(
                CPResult(
                    name=t.name, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, error_message=None
                )
            )
            continue
        assignments = [list(a.broker_ids) for a in t.assignments] if t.assignments else None
        if quota is not None and not req.validate_only and quota.refused():
            results.append(
                CPResult(
                    name=t.name,
                    error_code=ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                    error_message=THROTTLED,
                )
            )
            continue
        before = ctx.broker.image.topic(t.name)
        try:
            await ctx.broker.topics.add_partitions(
                t.name, t.count, assignments, validate_only=req.validate_only
            )
        except KafkaError as e:
            results.append(
                CPResult(name=t.name, error_code=code_of(e), error_message=message_of(e))
            )
            continue
        if quota is not None and not req.validate_only and before is not None:
            quota.record(t.count - len(before.partitions))
        results.append(CPResult(name=t.name, error_code=0, error_message=None))
    return CreatePartitionsResponse(
        throttle_time_ms=quota.throttle_ms() if quota else 0, results=results
    )


DRTopic = DeleteRecordsResponse.Topics
DRPart = DeleteRecordsResponse.Topics.Partitions


def _delete_records(ctx: RequestContext, topic: str, index: int, offset: int) -> DRPart:
    if not allowed(ctx, AclOperation.DELETE, ResourceType.TOPIC, topic):
        return DRPart(
            partition_index=index, low_watermark=-1, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED
        )
    try:
        partition = ctx.broker.replicas.leader_partition(topic, index)
        before = partition.log.log_start_offset
        low_watermark = partition.delete_records(offset)
    except KafkaError as e:
        return DRPart(partition_index=index, low_watermark=-1, error_code=code_of(e))
    if low_watermark != before:
        log_event(
            log,
            "records.deleted",
            topic=topic,
            partition=index,
            log_start_offset=low_watermark,
            previous_log_start_offset=before,
        )
    return DRPart(partition_index=index, low_watermark=low_watermark, error_code=0)


@handles(DeleteRecordsRequest)
async def handle_delete_records(
    ctx: RequestContext, req: DeleteRecordsRequest
) -> DeleteRecordsResponse:
    topics = [
        DRTopic(
            name=t.name,
            partitions=[
                _delete_records(ctx, t.name, p.partition_index, p.offset) for p in t.partitions
            ],
        )
        for t in req.topics
    ]
    return DeleteRecordsResponse(throttle_time_ms=0, topics=topics)
