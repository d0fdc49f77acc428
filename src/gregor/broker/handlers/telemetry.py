"""Client telemetry (KIP-714): GetTelemetrySubscriptions, PushTelemetry (v0) and
ListClientMetricsResources (v0).

The first two need no ACL, as in Kafka; their rules are ``broker.client_telemetry``'s.
ListClientMetricsResources names every CLIENT_METRICS config resource and needs
DESCRIBE_CONFIGS on the cluster (CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from gregor.broker.common.errors import code_of
from gregor.broker.handlers.authz import AclOperation, cluster_allowed
from gregor.broker.handlers.registry import handles
from gregor.broker.metrics.client_telemetry import ACCEPTED_COMPRESSION, subscriptions_of
from gregor.broker.state import RequestContext
from gregor.protocol.errors import ErrorCode, KafkaError
from gregor.protocol.messages.get_telemetry_subscriptions import (
    GetTelemetrySubscriptionsRequest,
    GetTelemetrySubscriptionsResponse,
)
from gregor.protocol.messages.list_client_metrics_resources import (
    ListClientMetricsResourcesRequest,
    ListClientMetricsResourcesResponse,
)
from gregor.protocol.messages.push_telemetry import PushTelemetryRequest, PushTelemetryResponse


def _client(ctx: RequestContext) -> dict[str, str]:
    """The client's values of the subscriptions' match selectors."""
    peer = ctx.conn.peer
    return {
        "client_id": ctx.client_id or "",
        "client_software_name": ctx.conn.client_software_name,
        "client_software_version": ctx.conn.client_software_version,
        "client_source_address": ctx.conn.host,
        "client_source_port": peer.rsplit(":", 1)[1] if ":" in peer else "",
    }


@handles(GetTelemetrySubscriptionsRequest)
async def handle_get_telemetry_subscriptions(
    ctx: RequestContext, req: GetTelemetrySubscriptionsRequest
) -> GetTelemetrySubscriptionsResponse:
    telemetry = ctx.broker.client_telemetry
    try:
        inst = telemetry.get_subscriptions(req.client_instance_id, _client(ctx))
    except KafkaError as e:
        return GetTelemetrySubscriptionsResponse(
            throttle_time_ms=0,
            error_code=code_of(e),
            client_instance_id=req.client_instance_id,
        )
    return GetTelemetrySubscriptionsResponse(
        throttle_time_ms=0,
        error_code=0,
        client_instance_id=inst.instance_id,
        subscription_id=inst.subscription_id,
        accepted_compression_types=[int(c) for c in ACCEPTED_COMPRESSION],
        push_interval_ms=inst.interval_ms,
        telemetry_max_bytes=telemetry.max_bytes,
        delta_temporality=True,
        requested_metrics=list(inst.metrics),
    )


@handles(PushTelemetryRequest)
async def handle_push_telemetry(
    ctx: RequestContext, req: PushTelemetryRequest
) -> PushTelemetryResponse:
    try:
        ctx.broker.client_telemetry.push(
            req.client_instance_id,
            req.subscription_id,
            req.terminating,
            req.compression_type,
            bytes(req.metrics),
            _client(ctx),
        )
    except KafkaError as e:
        return PushTelemetryResponse(throttle_time_ms=0, error_code=code_of(e))
    return PushTelemetryResponse(throttle_time_ms=0, error_code=0)


@handles(ListClientMetricsResourcesRequest)
async def handle_list_client_metrics_resources(
    ctx: RequestContext, req: ListClientMetricsResourcesRequest
) -> ListClientMetricsResourcesResponse:
    if not cluster_allowed(ctx, AclOperation.DESCRIBE_CONFIGS):
        return ListClientMetricsResourcesResponse(
            throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        )
    names = sorted(subscriptions_of(ctx.broker.image.config_resources))
    return ListClientMetricsResourcesResponse(
        throttle_time_ms=0,
        error_code=0,
        client_metrics_resources=[
            ListClientMetricsResourcesResponse.ClientMetricsResources(name=n) for n in names
        ],
    )
