"""UpdateFeatures (v0-1): finalize feature levels cluster-wide, with Kafka's checks.

ALTER on the cluster is required (CLUSTER_AUTHORIZATION_FAILED). The updates are checked
together against the finalized levels of the image they are written to (``broker.features``)
and applied all or nothing, as Kafka's controller does: when one is refused, the top-level
error and every feature's result carry that refusal. v0's ``allow_downgrade`` is v1's safe
downgrade; ``validate_only`` (v1) checks without writing.
"""

from __future__ import annotations

from collections.abc import Mapping

from gregor.broker.common.errors import code_of
from gregor.broker.controller import features
from gregor.broker.handlers.authz import AclOperation, cluster_allowed
from gregor.broker.handlers.registry import handles
from gregor.broker.state import RequestContext
from gregor.protocol.errors import ErrorCode, KafkaError
from gregor.protocol.messages.update_features import UpdateFeaturesRequest, UpdateFeaturesResponse


def _answer(req: UpdateFeaturesRequest, error: int, message: str | None) -> UpdateFeaturesResponse:
    return UpdateFeaturesResponse(
        throttle_time_ms=0,
        error_code=error,
        error_message=message,
        results=[
            UpdateFeaturesResponse.Results(
                feature=u.feature, error_code=error, error_message=message
            )
            for u in req.feature_updates
        ],
    )


@handles(UpdateFeaturesRequest)
async def handle_update_features(
    ctx: RequestContext, req: UpdateFeaturesRequest
) -> UpdateFeaturesResponse:
    if not cluster_allowed(ctx, AclOperation.ALTER):
        return _answer(req, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
    updates = [
        features.FeatureUpdate(
            u.feature,
            u.max_version_level,
            u.upgrade_type
            if ctx.version >= 1
            else features.SAFE_DOWNGRADE
            if u.allow_downgrade
            else features.UPGRADE,
        )
        for u in req.feature_updates
    ]

    def change(explicit: Mapping[str, int]) -> Mapping[str, int]:
        return features.apply(explicit, updates)

    try:
        if ctx.version >= 1 and req.validate_only:
            change(ctx.broker.image.features)
        elif updates:
            await ctx.broker.cluster_admin.update_features(change)
    except KafkaError as e:
        return _answer(req, code_of(e), e.message)
    return _answer(req, 0, None)
