"""DescribeClientQuotas and AlterClientQuotas (KIP-546), v0 and v1.

Quotas live in the metadata store (``MetadataImage.client_quotas``), one set of key -> value
per entity, and the broker enforces them (``broker.quota_manager``). Describe needs
DESCRIBE_CONFIGS on the cluster and Alter needs ALTER_CONFIGS, as in Kafka
(CLUSTER_AUTHORIZATION_FAILED otherwise). Describe filters entities with Kafka's components:
match type 0 is that name, 1 the type's default, 2 any name but the default; ``strict``
leaves out entities with other types. A filter naming a type twice, or a match that does
not fit its match type, is INVALID_REQUEST. Alter answers per entry (``access_changes.alter_client_quotas``).
"""

from __future__ import annotations

from gregor.broker.common.errors import code_of, message_of
from gregor.broker.handlers.authz import AclOperation, cluster_allowed
from gregor.broker.handlers.registry import handles
from gregor.broker.state import RequestContext
from gregor.protocol.errors import ErrorCode
from gregor.protocol.messages.alter_client_quotas import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
)
from gregor.protocol.messages.describe_client_quotas import (
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)
from gregor.security import quotas as rules

DEntry = DescribeClientQuotasResponse.Entries


def _filter_error(req: DescribeClientQuotasRequest) -> str | None:
    seen: set[str] = set()
    for c in req.components:
        if c.entity_type in seen:
            return f"Duplicate {c.entity_type} filter component entity type"
        seen.add(c.entity_type)
        if c.match_type not in (0, 1, 2):
            return f"Unknown match type {c.match_type}"
        if c.match_type == 0 and c.match is None:
            return f"Exact match of {c.entity_type} needs a name"
        if c.match_type != 0 and c.match is not None:
            return f"A match of {c.entity_type} by default or any name takes no name"
    return None


@handles(DescribeClientQuotasRequest, 0, 1)
async def handle_describe_client_quotas(
    ctx: RequestContext, req: DescribeClientQuotasRequest
) -> DescribeClientQuotasResponse:
    if not cluster_allowed(ctx, AclOperation.DESCRIBE_CONFIGS):
        return DescribeClientQuotasResponse(
            throttle_time_ms=0,
            error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            error_message=None,
            entries=None,
        )
    problem = _filter_error(req)
    if problem is not None:
        return DescribeClientQuotasResponse(
            throttle_time_ms=0,
            error_code=ErrorCode.INVALID_REQUEST,
            error_message=problem,
            entries=None,
        )
    components = [(c.entity_type, c.match_type, c.match) for c in req.components]
    entries = [
        DEntry(
            entity=[DEntry.Entity(entity_type=t, entity_name=n) for t, n in entity],
            values=[DEntry.Values(key=k, value=v) for k, v in sorted(values.items())],
        )
        for entity, values in ctx.broker.image.client_quotas.items()
        if rules.matches(entity, components, bool(req.strict))
    ]
    return DescribeClientQuotasResponse(
        throttle_time_ms=0, error_code=0, error_message=None, entries=entries
    )


@handles(AlterClientQuotasRequest, 0, 1)
async def handle_alter_client_quotas(
    ctx: RequestContext, req: AlterClientQuotasRequest
) -> AlterClientQuotasResponse:
    def entity(
        e: AlterClientQuotasRequest.Entries,
    ) -> list[AlterClientQuotasResponse.Entries.Entity]:
        return [
            AlterClientQuotasResponse.Entries.Entity(
                entity_type=x.entity_type, entity_name=x.entity_name
            )
            for x in e.entity
        ]

    if not cluster_allowed(ctx, AclOperation.ALTER_CONFIGS):
        return AlterClientQuotasResponse(
            throttle_time_ms=0,
            entries=[
                AlterClientQuotasResponse.Entries(
                    error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                    error_message=None,
                    entity=entity(e),
                )
                for e in req.entries
            ],
        )
    asked = [
        (
            [(x.entity_type, x.entity_name) for x in e.entity],
            [(o.key, o.value, bool(o.remove)) for o in e.ops],
        )
        for e in req.entries
    ]
    results = await ctx.broker.cluster_admin.alter_client_quotas(asked, bool(req.validate_only))
    return AlterClientQuotasResponse(
        throttle_time_ms=0,
        entries=[
            AlterClientQuotasResponse.Entries(
                error_code=code_of(err) if err else 0,
                error_message=message_of(err) if err else None,
                entity=entity(e),
            )
            for e, err in zip(req.entries, results, strict=True)
        ],
    )
