"""The controller's APIs at the wire. Broker to controller: AlterPartition (v0-3),
AllocateProducerIds (v0) and ControlledShutdown (v0-3), decided by
``gregor.broker.controller.controller_apis.ControllerService``; controller to broker: LeaderAndIsr
(v0-7), UpdateMetadata (v0-8) and StopReplica (v0-4), applied by
``gregor.broker.controller.controller_requests.ControllerRequests``. All six are served and advertised
only on a clustered broker's inter-broker listener and only to a principal with
CLUSTER_ACTION on the cluster (else CLUSTER_AUTHORIZATION_FAILED), as Kafka does. And
UnregisterBroker (v0), an admin API (kafka-cluster.sh unregister, Admin.unregisterBroker)
that needs ALTER on the cluster.
"""

from __future__ import annotations

from gregor.broker.handlers.authz import AclOperation, cluster_allowed
from gregor.broker.handlers.registry import handles
from gregor.broker.state import RequestContext
from gregor.protocol.errors import ErrorCode
from gregor.protocol.messages.allocate_producer_ids import (
    AllocateProducerIdsRequest,
    AllocateProducerIdsResponse,
)
from gregor.protocol.messages.alter_partition import AlterPartitionRequest, AlterPartitionResponse
from gregor.protocol.messages.controlled_shutdown import (
    ControlledShutdownRequest,
    ControlledShutdownResponse,
)
from gregor.protocol.messages.leader_and_isr import LeaderAndIsrRequest, LeaderAndIsrResponse
from gregor.protocol.messages.stop_replica import StopReplicaRequest, StopReplicaResponse
from gregor.protocol.messages.unregister_broker import (
    UnregisterBrokerRequest,
    UnregisterBrokerResponse,
)
from gregor.protocol.messages.update_metadata import UpdateMetadataRequest, UpdateMetadataResponse

DENIED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED


@handles(AlterPartitionRequest, inter_broker_only=True)
async def handle_alter_partition(
    ctx: RequestContext, req: AlterPartitionRequest
) -> AlterPartitionResponse:
    if not cluster_allowed(ctx, AclOperation.CLUSTER_ACTION):
        return AlterPartitionResponse(error_code=DENIED)
    return await ctx.broker.controller_service.alter_partition(req, ctx.version)


@handles(AllocateProducerIdsRequest, inter_broker_only=True)
async def handle_allocate_producer_ids(
    ctx: RequestContext, req: AllocateProducerIdsRequest
) -> AllocateProducerIdsResponse:
    if not cluster_allowed(ctx, AclOperation.CLUSTER_ACTION):
        return AllocateProducerIdsResponse(error_code=DENIED)
    return await ctx.broker.controller_service.allocate_producer_ids(req)


@handles(ControlledShutdownRequest, inter_broker_only=True)
async def handle_controlled_shutdown(
    ctx: RequestContext, req: ControlledShutdownRequest
) -> ControlledShutdownResponse:
    if not cluster_allowed(ctx, AclOperation.CLUSTER_ACTION):
        return ControlledShutdownResponse(error_code=DENIED)
    return await ctx.broker.controller_service.controlled_shutdown(req, ctx.version)


@handles(UnregisterBrokerRequest)
async def handle_unregister_broker(
    ctx: RequestContext, req: UnregisterBrokerRequest
) -> UnregisterBrokerResponse:
    if not cluster_allowed(ctx, AclOperation.ALTER):
        return UnregisterBrokerResponse(
            error_code=DENIED,
            error_message="The principal is not authorized to unregister brokers.",
        )
    return await ctx.broker.controller_service.unregister_broker(req)


@handles(LeaderAndIsrRequest, inter_broker_only=True)
async def handle_leader_and_isr(
    ctx: RequestContext, req: LeaderAndIsrRequest
) -> LeaderAndIsrResponse:
    if not cluster_allowed(ctx, AclOperation.CLUSTER_ACTION):
        return LeaderAndIsrResponse(error_code=DENIED)
    return await ctx.broker.controller_requests.leader_and_isr(req, ctx.version)


@handles(UpdateMetadataRequest, inter_broker_only=True)
async def handle_update_metadata(
    ctx: RequestContext, req: UpdateMetadataRequest
) -> UpdateMetadataResponse:
    if not cluster_allowed(ctx, AclOperation.CLUSTER_ACTION):
        return UpdateMetadataResponse(error_code=DENIED)
    return await ctx.broker.controller_requests.update_metadata(req, ctx.version)


@handles(StopReplicaRequest, inter_broker_only=True)
async def handle_stop_replica(ctx: RequestContext, req: StopReplicaRequest) -> StopReplicaResponse:
    if not cluster_allowed(ctx, AclOperation.CLUSTER_ACTION):
        return StopReplicaResponse(error_code=DENIED)
    return await ctx.broker.controller_requests.stop_replica(req, ctx.version)
