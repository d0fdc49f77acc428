"""Authorization of requests: the checks Kafka's request handlers make, in one place.

Every handler asks here, never the authorizer directly. Without an authorizer
(``authorizer.class.name`` unset) every check passes, so a broker without security behaves
exactly as before. With one, a check asks it whether the connection's principal, from the
connection's host, may perform an operation on a resource (``gregor.security.authorizer``
holds Kafka's decision rules: super users, DENY wins, implied DESCRIBE).

The error a refused check answers with follows the resource type, as in Kafka:
TOPIC_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED,
TRANSACTIONAL_ID_AUTHORIZATION_FAILED (``denied_error``).
"""

from __future__ import annotations

from collections.abc import Iterable

from gregor.broker.access.authorized_ops import Authorizer
from gregor.broker.state import RequestContext
from gregor.protocol.errors import ErrorCode
from gregor.security.acls import AclOperation, ResourceType

__all__ = [
    "CLUSTER_NAME",
    "AclOperation",
    "ResourceType",
    "allowed",
    "allowed_names",
    "cluster_allowed",
    "denied_error",
    "ops_authorizer",
]

#: The one CLUSTER resource's name.
CLUSTER_NAME = "kafka-cluster"

_DENIED: dict[ResourceType, ErrorCode] = {
    ResourceType.TOPIC: ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    ResourceType.GROUP: ErrorCode.GROUP_AUTHORIZATION_FAILED,
    ResourceType.CLUSTER: ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    ResourceType.TRANSACTIONAL_ID: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    ResourceType.DELEGATION_TOKEN: ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED,
}


def denied_error(resource_type: ResourceType) -> ErrorCode:
    """The error code Kafka answers when an operation on this resource type is refused."""
    return _DENIED.get(resource_type, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)


def allowed(
    ctx: RequestContext, operation: AclOperation, resource_type: ResourceType, name: str
) -> bool:
    """May this request's principal perform ``operation`` on the resource?"""
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return True
    return authorizer.authorize(ctx.conn.principal, ctx.conn.host, operation, resource_type, name)


def cluster_allowed(ctx: RequestContext, operation: AclOperation) -> bool:
    return allowed(ctx, operation, ResourceType.CLUSTER, CLUSTER_NAME)


def allowed_names(
    ctx: RequestContext, operation: AclOperation, resource_type: ResourceType, names: Iterable[str]
) -> set[str]:
    """The names among ``names`` the principal may perform ``operation`` on (each asked once)."""
    unique = set(names)
    if ctx.broker.authorizer is None:
        return unique
    return {n for n in unique if allowed(ctx, operation, resource_type, n)}


def ops_authorizer(ctx: RequestContext) -> Authorizer | None:
    """The KIP-430 authorized-operations callable for this request's principal (None without
    an authorizer: every supported operation is reported)."""
    if ctx.broker.authorizer is None:
        return None
    return lambda resource_type, name, operation: allowed(ctx, operation, resource_type, name)
