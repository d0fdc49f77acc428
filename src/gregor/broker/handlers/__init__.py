"""Request handlers by API family. Importing this package registers them all.

Each handler is ``async def handle(ctx: RequestContext, request) -> response | None`` and is
registered with the versions it implements; ApiVersions advertises exactly that table.
"""

from gregor.broker.handlers import (  # noqa: E402,F401  (registration)
    acls,
    admin_topics,
    alter_configs,
    api_versions,
    cluster_info,
    configs,
    controller_apis,
    delegation_tokens,
    elect_leaders,
    features,
    fetch,
    groups,
    list_offsets,
    metadata,
    produce,
    producer_ids,
    quotas,
    reassignments,
    security,
    share,
    share_group_offsets,
    share_state,
    telemetry,
    transactions,
)
from gregor.broker.handlers.registry import HANDLERS, HandlerEntry, handles

__all__ = ["HANDLERS", "HandlerEntry", "handles"]
