"""AlterPartitionReassignments and ListPartitionReassignments (KIP-455), v0.

Kafka's rules: altering needs ALTER on the cluster, listing DESCRIBE on the cluster (else a
top-level CLUSTER_AUTHORIZATION_FAILED). Each partition of an alter answers NONE once its
reassignment is recorded (the data moves afterwards: the new replicas fetch from the leader,
and the change that brings the whole target into the ISR completes it and drops the old
replicas), or UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT (empty, repeated or
unregistered brokers), NO_REASSIGNMENT_IN_PROGRESS (a cancel, null replicas, with nothing to
cancel). A list names every partition with a reassignment in progress (null topics: all of
them); partitions that do not exist or are not being reassigned are left out. The rules are
``gregor.cluster.changes.reassign_partitions``; the change is one metadata-store change, so
any broker answers, on one node and in a cluster alike.
"""

from __future__ import annotations

from gregor.broker.common.errors import code_of
from gregor.broker.handlers.authz import AclOperation, cluster_allowed
from gregor.broker.handlers.registry import handles
from gregor.broker.state import RequestContext
from gregor.protocol.errors import ErrorCode
from gregor.protocol.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
)
from gregor.protocol.messages.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)

AlterTopic = AlterPartitionReassignmentsResponse.Responses
AlterPartition = AlterPartitionReassignmentsResponse.Responses.Partitions
ListTopic = ListPartitionReassignmentsResponse.Topics
ListPartition = ListPartitionReassignmentsResponse.Topics.Partitions
_DENIED = "The principal is not authorized to reassign partitions."


@handles(AlterPartitionReassignmentsRequest)
async def handle_alter_partition_reassignments(
    ctx: RequestContext, req: AlterPartitionReassignmentsRequest
) -> AlterPartitionReassignmentsResponse:
    asked = [
        (t.name, p.partition_index, None if p.replicas is None else list(p.replicas))
        for t in req.topics
        for p in t.partitions
    ]
    top, top_message = ErrorCode.NONE, None
    if cluster_allowed(ctx, AclOperation.ALTER):
        results = [
            (ErrorCode.NONE, None) if e is None else (code_of(e), str(e))
            for e in await ctx.broker.cluster_admin.reassign_partitions(asked)
        ]
    else:
        top, top_message = ErrorCode.CLUSTER_AUTHORIZATION_FAILED, _DENIED
        results = [(top, _DENIED)] * len(asked)
    by_topic: dict[str, list[AlterPartition]] = {}
    for (topic, index, _), (code, message) in zip(asked, results, strict=True):
        by_topic.setdefault(topic, []).append(
            AlterPartition(partition_index=index, error_code=code, error_message=message)
        )
    return AlterPartitionReassignmentsResponse(
        error_code=top,
        error_message=top_message,
        responses=[AlterTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
    )


@handles(ListPartitionReassignmentsRequest)
async def handle_list_partition_reassignments(
    ctx: RequestContext, req: ListPartitionReassignmentsRequest
) -> ListPartitionReassignmentsResponse:
    if not cluster_allowed(ctx, AclOperation.DESCRIBE):
        return ListPartitionReassignmentsResponse(
            error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            error_message="The principal is not authorized to describe the cluster.",
        )
    image = ctx.broker.image
    if req.topics is None:
        asked = [(t.name, [p.partition for p in t.partitions]) for t in image.topics.values()]
    else:
        asked = [(t.name, list(t.partition_indexes)) for t in req.topics]
    out: list[ListTopic] = []
    for name, indexes in asked:
        partitions = []
        for index in indexes:
            p = image.partition(name, index)
            if p is not None and p.reassigning:
                partitions.append(
                    ListPartition(
                        partition_index=index,
                        replicas=list(p.replicas),
                        adding_replicas=list(p.adding_replicas),
                        removing_replicas=list(p.removing_replicas),
                    )
                )
        if partitions:
            out.append(ListTopic(name=name, partitions=partitions))
    return ListPartitionReassignmentsResponse(topics=out)
