"""ApiVersions: advertise exactly the handler table (the inter-broker APIs only on a clustered
broker's inter-broker listener) and, from v3, the supported and finalized features
(``broker.features``; the finalized features' epoch is the metadata image's version)."""

from __future__ import annotations

from gregor.broker.controller import features
from gregor.broker.handlers.registry import HANDLERS, handles
from gregor.broker.state import RequestContext
from gregor.protocol.errors import ErrorCode
from gregor.protocol.framing import encode_response
from gregor.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse


def supported_api_keys(inter_broker: bool) -> list[ApiVersionsResponse.ApiKeys]:
    return [
        ApiVersionsResponse.ApiKeys(api_key=k, min_version=e.min_version, max_version=e.max_version)
        for k, e in sorted(HANDLERS.items())
        if inter_broker or not e.inter_broker_only
    ]


def unsupported_version_response(correlation_id: int, inter_broker: bool) -> bytes:
    """UNSUPPORTED_VERSION in the v0 layout, listing what we do support (KIP-511 behaviour)."""
    resp = ApiVersionsResponse(
        error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=supported_api_keys(inter_broker)
    )
    return encode_response(ApiVersionsRequest.API_KEY, 0, correlation_id, resp)


@handles(ApiVersionsRequest)
async def handle_api_versions(ctx: RequestContext, req: ApiVersionsRequest) -> ApiVersionsResponse:
    inter_broker = ctx.broker.serves_inter_broker_apis(ctx.conn.listener)
    if ctx.version >= 3:  # KIP-511: what the client is, for client telemetry's matching
        ctx.conn.client_software_name = req.client_software_name
        ctx.conn.client_software_version = req.client_software_version
    image = ctx.broker.image
    return ApiVersionsResponse(
        error_code=0,
        api_keys=supported_api_keys(inter_broker),
        throttle_time_ms=0,
        supported_features=[
            ApiVersionsResponse.SupportedFeatures(
                name=f.name, min_version=f.min_level, max_version=f.max_level
            )
            for f in features.SUPPORTED.values()
        ],
        finalized_features_epoch=image.version,
        finalized_features=[
            ApiVersionsResponse.FinalizedFeatures(
                name=name, max_version_level=lv, min_version_level=lv
            )
            for name, lv in sorted(features.finalized(image.features).items())
            if lv > 0
        ],
    )
