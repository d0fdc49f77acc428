"""Topic administration: CreateTopics, DeleteTopics, CreatePartitions, DeleteRecords.

Each request carries many topics and each topic gets its own result: one bad topic never fails
the others. A name given twice in one request is ambiguous, so every copy of it is refused with
INVALID_REQUEST (one result per distinct name). The changes themselves go through ``Broker``
methods, which persist the metadata and log a structured line per change; ``validate_only``
runs every check and changes nothing.

CreateTopics from v4 lets ``num_partitions`` / ``replication_factor`` be -1 for the broker's
``num.partitions`` / ``default.replication.factor``; older versions must give real numbers.
An explicit replica assignment replaces both (they must then be -1) and must number its
partitions 0..n-1. From v5 a created topic is answered with its partition count, replication
factor and every config with its value and source; from v7 with its topic id.

DeleteRecords raises a partition's log start offset (at most to the high watermark; -1 means
the high watermark) and answers the new low watermark; a topic whose cleanup.policy is
compact only refuses it with POLICY_VIOLATION, as Kafka does.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

from gregor.broker.handlers.registry import handles
from gregor.broker.logging import log_event
from gregor.broker.topic_configs import describe_topic
from gregor.broker.topics import topic_name_error
from gregor.protocol.errors import ErrorCode
from gregor.protocol.messages.create_partitions import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
)
from gregor.protocol.messages.create_topics import CreateTopicsRequest, CreateTopicsResponse
from gregor.protocol.messages.delete_records import DeleteRecordsRequest, DeleteRecordsResponse
from gregor.protocol.messages.delete_topics import DeleteTopicsRequest, DeleteTopicsResponse
from gregor.protocol.primitives import ZERO_UUID
from gregor.storage.errors import StorageError

log = logging.getLogger("gregor.broker.admin")

CTTopic = CreateTopicsResponse.Topics
CTConfig = CreateTopicsResponse.Topics.Configs


def _ct_error(name: str, code: int, message: str) -> CTTopic:
    return CTTopic(
        name=name, topic_id=ZERO_UUID, error_code=code, error_message=message,
        num_partitions=-1, replication_factor=-1, configs=[],
    )


def _resolve_layout(
    broker: Any, t: Any, version: int
) -> tuple[int, str | None, int, int, list[list[int]] | None]:
    """Check the requested partition layout; returns (error, message, partitions,
    replication factor, explicit assignment or None)."""
    if t.assignments:
        if t.num_partitions != -1 or t.replication_factor != -1:
            return (
                ErrorCode.INVALID_REQUEST,
                "num_partitions and replication_factor must be -1 when a replica assignment is given",
                0, 0, None,
            )
        ordered = sorted(t.assignments, key=lambda a: a.partition_index)
        if [a.partition_index for a in ordered] != list(range(len(ordered))):
            return (
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                "partitions of a replica assignment must be numbered 0 to n-1",
                0, 0, None,
            )
        lists = [list(a.broker_ids) for a in ordered]
        return 0, None, len(lists), len(lists[0]), lists
    num_partitions, replication_factor = t.num_partitions, t.replication_factor
    if version >= 4:
        if num_partitions == -1:
            num_partitions = int(broker.config["num.partitions"])
        if replication_factor == -1:
            replication_factor = int(broker.config["default.replication.factor"])
    if num_partitions < 1:
        return (
            ErrorCode.INVALID_PARTITIONS,
            f"Number of partitions must be larger than 0 (got {t.num_partitions}).",
            0, 0, None,
        )
    if replication_factor < 1:
        return (
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"Replication factor must be larger than 0 (got {t.replication_factor}).",
            0, 0, None,
        )
    return 0, None, num_partitions, replication_factor, None


def _collision(broker: Any, name: str) -> str | None:
    """An existing topic whose name equals ``name`` once '.' and '_' are made the same (their
    metric names would clash, so Kafka refuses the second one)."""
    if name in broker.metadata.topics or topic_name_error(name) is not None:
        return None
    key = name.replace(".", "_")
    for other in broker.metadata.topics:
        if other.replace(".", "_") == key:
            return other
    return None


def _create_one(broker: Any, t: Any, version: int, validate_only: bool) -> CTTopic:
    other = _collision(broker, t.name)
    if other is not None:
        return _ct_error(t.name, ErrorCode.INVALID_TOPIC_EXCEPTION, f"Topic '{t.name}' collides with existing topic: {other}")
    code, message, num_partitions, replication_factor, assignments = _resolve_layout(broker, t, version)
    if code:
        return _ct_error(t.name, code, message or "")
    configs = {c.name: c.value for c in t.configs}
    code, message, ts = broker.create_topic(
        t.name, num_partitions, replication_factor, assignments, configs, validate_only
    )
    if code:
        return _ct_error(t.name, code, message or "")
    described = describe_topic(configs, broker.config.raw) if version >= 5 else []
    return CTTopic(
        name=t.name,
        topic_id=ts.topic_id if ts is not None and not validate_only else ZERO_UUID,
        error_code=0,
        error_message=None,
        num_partitions=num_partitions,
        replication_factor=replication_factor,
        configs=[
            CTConfig(
                name=e.name, value=e.value, read_only=e.read_only,
                config_source=int(e.source), is_sensitive=e.is_sensitive,
            )
            for e in described
        ],
    )


@handles(CreateTopicsRequest)
async def handle_create_topics(ctx: Any, req: CreateTopicsRequest) -> CreateTopicsResponse:
    counts = Counter(t.name for t in req.topics)
    validate_only = bool(req.validate_only) if ctx.version >= 1 else False
    results: list[CTTopic] = []
    done: set[str] = set()
    for t in req.topics:
        if t.name in done:
            continue
        done.add(t.name)
        if counts[t.name] > 1:
            results.append(
                _ct_error(t.name, ErrorCode.INVALID_REQUEST, f"Topic '{t.name}' appears more than once in the request.")
            )
            continue
        results.append(_create_one(ctx.broker, t, ctx.version, validate_only))
    return CreateTopicsResponse(throttle_time_ms=0, topics=results)


DTResult = DeleteTopicsResponse.Responses

_DELETE_MESSAGES = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "This server does not host this topic.",
    ErrorCode.TOPIC_DELETION_DISABLED: "Topic deletion is disabled (delete.topic.enable=false).",
}


@handles(DeleteTopicsRequest)
async def handle_delete_topics(ctx: Any, req: DeleteTopicsRequest) -> DeleteTopicsResponse:
    broker = ctx.broker
    store = broker.metadata
    if ctx.version >= 6:
        wanted = [(t.name, t.topic_id or ZERO_UUID) for t in req.topics]
    else:
        wanted = [(name, ZERO_UUID) for name in req.topic_names]
    counts = Counter(wanted)
    results: list[DTResult] = []
    done: set[tuple[str | None, Any]] = set()
    for name, topic_id in wanted:
        if (name, topic_id) in done:
            continue
        done.add((name, topic_id))
        if counts[(name, topic_id)] > 1:
            results.append(DTResult(
                name=name, topic_id=topic_id, error_code=ErrorCode.INVALID_REQUEST,
                error_message="The topic appears more than once in the request.",
            ))
            continue
        if name is not None and topic_id != ZERO_UUID:
            results.append(DTResult(
                name=name, topic_id=topic_id, error_code=ErrorCode.INVALID_REQUEST,
                error_message="Give a topic's name or its id, not both.",
            ))
            continue
        if name is None:
            ts = store.topics_by_id.get(topic_id)
            if ts is None:
                results.append(DTResult(
                    name=None, topic_id=topic_id, error_code=ErrorCode.UNKNOWN_TOPIC_ID,
                    error_message=f"No topic has the id {topic_id}.",
                ))
                continue
            name = ts.name
        ts = store.topics.get(name)
        topic_id = ts.topic_id if ts is not None else ZERO_UUID
        code = broker.delete_topic(name)
        results.append(DTResult(
            name=name, topic_id=topic_id, error_code=code,
            error_message=_DELETE_MESSAGES.get(code, f"error {code}") if code else None,
        ))
    return DeleteTopicsResponse(throttle_time_ms=0, responses=results)


CPResult = CreatePartitionsResponse.Results


@handles(CreatePartitionsRequest)
async def handle_create_partitions(ctx: Any, req: CreatePartitionsRequest) -> CreatePartitionsResponse:
    broker = ctx.broker
    counts = Counter(t.name for t in req.topics)
    results: list[CPResult] = []
    done: set[str] = set()
    for t in req.topics:
        if t.name in done:
            continue
        done.add(t.name)
        if counts[t.name] > 1:
            results.append(CPResult(
                name=t.name, error_code=ErrorCode.INVALID_REQUEST,
                error_message=f"Topic '{t.name}' appears more than once in the request.",
            ))
            continue
        assignments = [list(a.broker_ids) for a in t.assignments] if t.assignments else None
        code, message = broker.add_partitions(t.name, t.count, assignments, validate_only=req.validate_only)
        results.append(CPResult(name=t.name, error_code=code, error_message=message if code else None))
    return CreatePartitionsResponse(throttle_time_ms=0, results=results)


DRTopic = DeleteRecordsResponse.Topics
DRPart = DeleteRecordsResponse.Topics.Partitions


def _delete_records(broker: Any, topic: str, index: int, offset: int) -> DRPart:
    ts = broker.topic(topic)
    if ts is None or not 0 <= index < len(ts.partitions):
        return DRPart(partition_index=index, low_watermark=-1, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    plog = broker.get_log(topic, index)
    if plog is None:
        return DRPart(partition_index=index, low_watermark=-1, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER)
    if not plog.config.delete:
        # As in Kafka: a compact-only topic keeps the latest value of every key; deleting a
        # prefix would drop keys, so it is a policy violation.
        return DRPart(partition_index=index, low_watermark=-1, error_code=ErrorCode.POLICY_VIOLATION)
    before = plog.log_start_offset
    try:
        low_watermark = plog.delete_records(offset)
    except StorageError as e:
        code = e.error_code if e.error_code >= 0 else ErrorCode.UNKNOWN_SERVER_ERROR
        return DRPart(partition_index=index, low_watermark=-1, error_code=code)
    if low_watermark != before:
        log_event(
            log, "records.deleted", topic=topic, partition=index,
            log_start_offset=low_watermark, previous_log_start_offset=before,
        )
    return DRPart(partition_index=index, low_watermark=low_watermark, error_code=0)


@handles(DeleteRecordsRequest)
async def handle_delete_records(ctx: Any, req: DeleteRecordsRequest) -> DeleteRecordsResponse:
    topics = [
        DRTopic(
            name=t.name,
            partitions=[_delete_records(ctx.broker, t.name, p.partition_index, p.offset) for p in t.partitions],
        )
        for t in req.topics
    ]
    return DeleteRecordsResponse(throttle_time_ms=0, topics=topics)
