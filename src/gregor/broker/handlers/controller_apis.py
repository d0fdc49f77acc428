"""The broker-to-controller APIs at the wire: AlterPartition (v0-3), AllocateProducerIds (v0)
and ControlledShutdown (v0-3), served and advertised only on a clustered broker's
inter-broker listener and only to a principal with CLUSTER_ACTION on the cluster (else
CLUSTER_AUTHORIZATION_FAILED), as Kafka does; and UnregisterBroker (v0), an admin API
(kafka-cluster.sh unregister, Admin.unregisterBroker) that needs ALTER on the cluster.
The decisions are ``gregor.broker.controller_apis.ControllerService``'s.
"""

from __future__ import annotations

from gregor.broker.authz import AclOperation, cluster_allowed
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
from gregor.protocol.messages.unregister_broker import (
    UnregisterBrokerRequest,
    UnregisterBrokerResponse,
)

DENIED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED


@handles(AlterPartitionRequest, inter_broker_only=True)
async def handle_alter_partition(ctx: RequestContext, req: AlterPartitionRequest) -> AlterPartitionResponse:
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
async def handle_unregister_broker(ctx: RequestContext, req: UnregisterBrokerRequest) -> UnregisterBrokerResponse:
    if not cluster_allowed(ctx, AclOperation.ALTER):
        return UnregisterBrokerResponse(
            error_code=DENIED, error_message="The principal is not authorized to unregister brokers."
        )
    return await ctx.broker.controller_service.unregister_broker(req)
