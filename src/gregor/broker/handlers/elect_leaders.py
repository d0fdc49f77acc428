"""ElectLeaders (v0-2): preferred-replica and unclean leader elections, asked by an admin.

Kafka's rules: the request needs ALTER on the cluster (else CLUSTER_AUTHORIZATION_FAILED,
top level from v1); v0 elects preferred replicas only; a null partition list means every
partition. Each partition answers NONE when its leader moved, or ELECTION_NOT_NEEDED,
PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION.
The rules themselves are ``gregor.broker.controller.controller.elect``; the change is a compare-and-set
in the metadata store, so it works on one node (where there is never anything to elect) and
in a cluster alike.
"""

from __future__ import annotations

from gregor.broker.handlers.authz import AclOperation, cluster_allowed
from gregor.broker.handlers.registry import handles
from gregor.broker.state import RequestContext
from gregor.protocol.errors import ErrorCode
from gregor.protocol.messages.elect_leaders import ElectLeadersRequest, ElectLeadersResponse

Result = ElectLeadersResponse.ReplicaElectionResults
PartResult = ElectLeadersResponse.ReplicaElectionResults.PartitionResult
_MESSAGES = {
    ErrorCode.ELECTION_NOT_NEEDED: "Leader election not needed for topic partition.",
    ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE: "The preferred replica is not alive or not in the ISR.",
    ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE: "No live replica can be elected.",
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "This server does not host this topic-partition.",
}


@handles(ElectLeadersRequest)
async def handle_elect_leaders(
    ctx: RequestContext, req: ElectLeadersRequest
) -> ElectLeadersResponse:
    election_type = req.election_type if ctx.version >= 1 else 0
    asked = (
        None
        if req.topic_partitions is None
        else [(t.topic, index) for t in req.topic_partitions for index in t.partitions]
    )
    if not cluster_allowed(ctx, AclOperation.ALTER):
        denied = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        results = {tp: denied for tp in asked or []}
        top = denied
    elif election_type not in (0, 1):
        results = {tp: ErrorCode.INVALID_REQUEST for tp in asked or []}
        top = ErrorCode.INVALID_REQUEST
    else:
        results = await ctx.broker.cluster_admin.elect_leaders(election_type, asked)
        top = ErrorCode.NONE
    by_topic: dict[str, list[PartResult]] = {}
    for (topic, index), code in results.items():
        message = None if not code else _MESSAGES.get(code, code.name)
        by_topic.setdefault(topic, []).append(
            PartResult(partition_id=index, error_code=code, error_message=message)
        )
    return ElectLeadersResponse(
        throttle_time_ms=0,
        error_code=top if ctx.version >= 1 else 0,
        replica_election_results=[
            Result(topic=t, partition_result=ps) for t, ps in by_topic.items()
        ],
    )
