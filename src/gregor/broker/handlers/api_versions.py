"""ApiVersions: advertise exactly the handler table."""

from __future__ import annotations

from gregor.broker.handlers.registry import HANDLERS, handles
from gregor.broker.state import RequestContext
from gregor.protocol.errors import ErrorCode
from gregor.protocol.framing import encode_response
from gregor.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse


def supported_api_keys() -> list[ApiVersionsResponse.ApiKeys]:
    return [
        ApiVersionsResponse.ApiKeys(api_key=k, min_version=e.min_version, max_version=e.max_version)
        for k, e in sorted(HANDLERS.items())
    ]


def unsupported_version_response(correlation_id: int) -> bytes:
    """UNSUPPORTED_VERSION in the v0 layout, listing what we do support (KIP-511 behaviour)."""
    resp = ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=supported_api_keys())
    return encode_response(ApiVersionsRequest.API_KEY, 0, correlation_id, resp)


@handles(ApiVersionsRequest)
async def handle_api_versions(ctx: RequestContext, req: ApiVersionsRequest) -> ApiVersionsResponse:
    return ApiVersionsResponse(error_code=0, api_keys=supported_api_keys(), throttle_time_ms=0)
