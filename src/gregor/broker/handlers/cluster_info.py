"""Cluster and topic descriptions: DescribeCluster, DescribeLogDirs, DescribeTopicPartitions;
and moving replicas between log directories: AlterReplicaLogDirs.

DescribeCluster answers with the live brokers, the controller and the cluster id. This broker
serves the broker endpoints only (endpoint_type 1); asking it for the controllers' endpoints
(v1, type 2) is UNSUPPORTED_ENDPOINT_TYPE, as it is for any Kafka broker.

DescribeLogDirs lists each configured log directory with the partitions it holds, their sizes
on disk, an offset lag of 0 for current logs and, from v4, the total and usable bytes of the
directory's volume. A partition being moved by AlterReplicaLogDirs is also listed in its target
directory as a future replica (``is_future_key``) until the move completes.

AlterReplicaLogDirs (v0-2) needs ALTER on the cluster (else CLUSTER_AUTHORIZATION_FAILED per
partition, as Kafka answers it). Each partition answers NONE once its move has started (the
copy runs in the background: ``ReplicaManager.alter_log_dir``), LOG_DIR_NOT_FOUND for a path
that is not one of this broker's log directories, REPLICA_NOT_AVAILABLE for a partition this
broker does not host.

DescribeTopicPartitions pages through topics sorted by name: it starts at the request's cursor
(topic name and partition index), stops after ``response_partition_limit`` partitions and
returns the place to resume as ``next_cursor`` (null when nothing is left). An empty topic list
means every topic.

Authorized operations come from ``gregor.broker.access.authorized_ops`` (no authorizer yet: every
operation the resource type supports).
"""

from __future__ import annotations

import os
import shutil

from gregor.broker.access.authorized_ops import (
    OPERATIONS_NOT_REQUESTED,
    ResourceType,
    authorized_operations,
)
from gregor.broker.handlers.authz import (
    CLUSTER_NAME,
    AclOperation,
    allowed,
    cluster_allowed,
    ops_authorizer,
)
from gregor.broker.handlers.registry import handles
from gregor.broker.state import RequestContext
from gregor.protocol.errors import ErrorCode
from gregor.protocol.messages.alter_replica_log_dirs import (
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirsResponse,
)
from gregor.protocol.messages.describe_cluster import (
    DescribeClusterRequest,
    DescribeClusterResponse,
)
from gregor.protocol.messages.describe_log_dirs import (
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
)
from gregor.protocol.messages.describe_topic_partitions import (
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
)
from gregor.protocol.primitives import ZERO_UUID

ENDPOINT_BROKERS = 1

# The most partitions one DescribeTopicPartitions response carries (Kafka's
# max.request.partition.size.limit default).
MAX_RESPONSE_PARTITIONS = 2000


@handles(DescribeClusterRequest)
async def handle_describe_cluster(
    ctx: RequestContext, req: DescribeClusterRequest
) -> DescribeClusterResponse:
    image = ctx.broker.image
    endpoint_type = req.endpoint_type if ctx.version >= 1 else ENDPOINT_BROKERS
    if endpoint_type != ENDPOINT_BROKERS:
        return DescribeClusterResponse(
            throttle_time_ms=0,
            error_code=ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
            error_message=f"This broker serves endpoint type {ENDPOINT_BROKERS} (brokers) only.",
            endpoint_type=endpoint_type,
            cluster_id=image.cluster_id,
            controller_id=-1,
            brokers=[],
        )
    if not cluster_allowed(ctx, AclOperation.DESCRIBE):
        return DescribeClusterResponse(
            throttle_time_ms=0,
            error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            error_message=None,
            endpoint_type=endpoint_type,
            cluster_id=image.cluster_id,
            controller_id=-1,
            brokers=[],
        )
    brokers = [
        DescribeClusterResponse.Brokers(broker_id=node, host=e.host, port=e.port, rack=rack)
        for node, e, rack in ctx.broker.endpoints(ctx.conn.listener)
    ]
    ops = (
        authorized_operations(ResourceType.CLUSTER, CLUSTER_NAME, ops_authorizer(ctx))
        if req.include_cluster_authorized_operations
        else OPERATIONS_NOT_REQUESTED
    )
    return DescribeClusterResponse(
        throttle_time_ms=0,
        error_code=0,
        error_message=None,
        endpoint_type=endpoint_type,
        cluster_id=image.cluster_id,
        controller_id=image.controller_id,
        brokers=brokers,
        cluster_authorized_operations=ops,
    )


LDResult = DescribeLogDirsResponse.Results
LDTopic = DescribeLogDirsResponse.Results.Topics
LDPart = DescribeLogDirsResponse.Results.Topics.Partitions


@handles(DescribeLogDirsRequest)
async def handle_describe_log_dirs(
    ctx: RequestContext, req: DescribeLogDirsRequest
) -> DescribeLogDirsResponse:
    if not cluster_allowed(ctx, AclOperation.DESCRIBE):
        return DescribeLogDirsResponse(
            throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, results=[]
        )
    logs = ctx.broker.logs
    wanted: dict[str, set[int]] | None = None
    if req.topics is not None:
        wanted = {}
        for t in req.topics:
            wanted.setdefault(t.topic, set()).update(t.partitions)
    by_dir: dict[str, dict[str, list[LDPart]]] = {os.path.abspath(d): {} for d in logs.log_dirs}
    for (topic, partition), plog in sorted(logs.logs.items()):
        if wanted is not None and partition not in wanted.get(topic, ()):
            continue
        d = os.path.dirname(plog.dir)
        by_dir.setdefault(d, {}).setdefault(topic, []).append(
            LDPart(
                partition_index=partition,
                partition_size=plog.size,
                offset_lag=0,  # the current log of a leader: no lag
                is_future_key=False,
            )
        )
    for (topic, partition), target in sorted(logs.moving().items()):
        current = logs.get_log(topic, partition)
        if current is None or (wanted is not None and partition not in wanted.get(topic, ())):
            continue
        by_dir.setdefault(target, {}).setdefault(topic, []).append(
            LDPart(
                partition_index=partition,
                partition_size=current.size,
                offset_lag=0,
                is_future_key=True,
            )
        )
    results = []
    for d, topics in by_dir.items():
        try:
            usage = shutil.disk_usage(d)
            total, usable, code = usage.total, usage.free, 0
        except OSError:
            total, usable, code = -1, -1, ErrorCode.KAFKA_STORAGE_ERROR
        results.append(
            LDResult(
                error_code=code,
                log_dir=d,
                topics=[LDTopic(name=name, partitions=parts) for name, parts in topics.items()],
                total_bytes=total,
                usable_bytes=usable,
            )
        )
    return DescribeLogDirsResponse(throttle_time_ms=0, error_code=0, results=results)


DTPTopic = DescribeTopicPartitionsResponse.Topics
DTPPart = DescribeTopicPartitionsResponse.Topics.Partitions
DTPCursor = DescribeTopicPartitionsResponse.NextCursor


def _unknown_topic(name: str, code: int = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION) -> DTPTopic:
    return DTPTopic(
        error_code=code,
        name=name,
        topic_id=ZERO_UUID,
        is_internal=False,
        partitions=[],
        topic_authorized_operations=OPERATIONS_NOT_REQUESTED,
    )


@handles(DescribeTopicPartitionsRequest)
async def handle_describe_topic_partitions(
    ctx: RequestContext, req: DescribeTopicPartitionsRequest
) -> DescribeTopicPartitionsResponse:
    image = ctx.broker.image
    if req.topics:
        names = sorted({t.name for t in req.topics})
    else:
        names = sorted(image.topics)
    cursor = req.cursor
    start_partition = 0
    if cursor is not None:
        if req.topics and cursor.topic_name not in names:
            # Kafka refuses a cursor outside the listed topics; there is no top-level error
            # field, so the cursor's topic is answered as an invalid request.
            return DescribeTopicPartitionsResponse(
                throttle_time_ms=0,
                topics=[_unknown_topic(cursor.topic_name, ErrorCode.INVALID_REQUEST)],
                next_cursor=None,
            )
        names = [n for n in names if n >= cursor.topic_name]
        if names and names[0] == cursor.topic_name:
            start_partition = max(cursor.partition_index, 0)
    limit = min(max(req.response_partition_limit, 1), MAX_RESPONSE_PARTITIONS)
    topics: list[DTPTopic] = []
    next_cursor = None
    remaining = limit
    for i, name in enumerate(names):
        first = start_partition if i == 0 else 0
        ts = image.topic(name)
        if not allowed(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, name):
            if req.topics:  # named: refused; listing all: left out
                topics.append(_unknown_topic(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
            continue
        if ts is None:
            topics.append(_unknown_topic(name))
            continue
        if remaining == 0:
            next_cursor = DTPCursor(topic_name=name, partition_index=first)
            break
        chosen = ts.partitions[first : first + remaining]
        remaining -= len(chosen)
        topics.append(
            DTPTopic(
                error_code=0,
                name=name,
                topic_id=ts.topic_id,
                is_internal=ts.internal,
                partitions=[
                    DTPPart(
                        error_code=0,
                        partition_index=p.partition,
                        leader_id=p.leader,
                        leader_epoch=p.leader_epoch,
                        replica_nodes=list(p.replicas),
                        isr_nodes=list(p.isr),
                        eligible_leader_replicas=[],
                        last_known_elr=[],
                        offline_replicas=list(p.offline_replicas),
                    )
                    for p in chosen
                ],
                topic_authorized_operations=authorized_operations(
                    ResourceType.TOPIC, name, ops_authorizer(ctx)
                ),
            )
        )
        if first + len(chosen) < len(ts.partitions):
            next_cursor = DTPCursor(topic_name=name, partition_index=first + len(chosen))
            break
    return DescribeTopicPartitionsResponse(
        throttle_time_ms=0, topics=topics, next_cursor=next_cursor
    )


@handles(AlterReplicaLogDirsRequest)
async def handle_alter_replica_log_dirs(
    ctx: RequestContext, req: AlterReplicaLogDirsRequest
) -> AlterReplicaLogDirsResponse:
    allowed = cluster_allowed(ctx, AclOperation.ALTER)
    by_topic: dict[str, list[AlterReplicaLogDirsResponse.Results.Partitions]] = {}
    for d in req.dirs:
        for t in d.topics:
            for index in t.partitions:
                code = (
                    ctx.broker.replicas.alter_log_dir(t.name, index, d.path)
                    if allowed
                    else (ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
                )
                by_topic.setdefault(t.name, []).append(
                    AlterReplicaLogDirsResponse.Results.Partitions(
                        partition_index=index, error_code=code
                    )
                )
    return AlterReplicaLogDirsResponse(
        results=[
            AlterReplicaLogDirsResponse.Results(topic_name=name, partitions=ps)
            for name, ps in by_topic.items()
        ]
    )
