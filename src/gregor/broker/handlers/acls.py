"""CreateAcls, DescribeAcls and DeleteAcls (every version the guide lists, v0-v3).

Without an authorizer Kafka answers all three with SECURITY_DISABLED ("No Authorizer is
configured on the broker"): per creation, per filter, or once for DescribeAcls. With one,
DescribeAcls needs DESCRIBE on the cluster and CreateAcls/DeleteAcls need ALTER on the
cluster (CLUSTER_AUTHORIZATION_FAILED otherwise); bindings then live in the metadata store
(``image.acls``), and filters select them as Kafka matches them
(``gregor.security.acls.AclBindingFilter``). v0 has no pattern type: its bindings and
filters are LITERAL (the codec's default).
"""

from __future__ import annotations

from gregor.broker.common.errors import code_of, message_of
from gregor.broker.handlers.authz import cluster_allowed
from gregor.broker.handlers.registry import handles
from gregor.broker.state import RequestContext
from gregor.protocol.errors import ErrorCode, KafkaError
from gregor.protocol.messages.create_acls import CreateAclsRequest, CreateAclsResponse
from gregor.protocol.messages.delete_acls import DeleteAclsRequest, DeleteAclsResponse
from gregor.protocol.messages.describe_acls import DescribeAclsRequest, DescribeAclsResponse
from gregor.security.acls import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    filter_error,
)

NO_AUTHORIZER = "No Authorizer is configured on the broker"


def _cluster_denied(ctx: RequestContext, operation: AclOperation) -> str | None:
    """None when the caller may ``operation`` the cluster, else Kafka's message; only called
    with an authorizer."""
    if cluster_allowed(ctx, operation):
        return None
    return "Cluster authorization failed."


def _filter(
    resource_type: int,
    name: str | None,
    pattern_type: int,
    principal: str | None,
    host: str | None,
    operation: int,
    permission_type: int,
) -> AclBindingFilter:
    return AclBindingFilter(
        ResourceType.of(resource_type),
        name,
        PatternType.of(pattern_type),
        principal,
        host,
        AclOperation.of(operation),
        AclPermissionType.of(permission_type),
    )


@handles(CreateAclsRequest)
async def handle_create_acls(ctx: RequestContext, req: CreateAclsRequest) -> CreateAclsResponse:
    R = CreateAclsResponse.Results
    if ctx.broker.authorizer is None:
        return CreateAclsResponse(
            results=[
                R(error_code=ErrorCode.SECURITY_DISABLED, error_message=NO_AUTHORIZER)
                for _ in req.creations
            ]
        )
    denied = _cluster_denied(ctx, AclOperation.ALTER)
    if denied is not None:
        return CreateAclsResponse(
            results=[
                R(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message=denied)
                for _ in req.creations
            ]
        )
    bindings = [
        AclBinding(
            ResourceType.of(c.resource_type),
            c.resource_name,
            PatternType.of(c.resource_pattern_type),
            c.principal,
            c.host,
            AclOperation.of(c.operation),
            AclPermissionType.of(c.permission_type),
        )
        for c in req.creations
    ]
    errors = await ctx.broker.cluster_admin.create_acls(bindings) if bindings else []
    return CreateAclsResponse(
        results=[
            R(error_code=0, error_message=None)
            if e is None
            else R(error_code=code_of(e), error_message=message_of(e))
            for e in errors
        ]
    )


@handles(DescribeAclsRequest)
async def handle_describe_acls(
    ctx: RequestContext, req: DescribeAclsRequest
) -> DescribeAclsResponse:
    def failed(code: int, message: str) -> DescribeAclsResponse:
        return DescribeAclsResponse(error_code=code, error_message=message, resources=[])

    if ctx.broker.authorizer is None:
        return failed(ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
    denied = _cluster_denied(ctx, AclOperation.DESCRIBE)
    if denied is not None:
        return failed(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, denied)
    f = _filter(
        req.resource_type_filter,
        req.resource_name_filter,
        req.pattern_type_filter,
        req.principal_filter,
        req.host_filter,
        req.operation,
        req.permission_type,
    )
    problem = filter_error(f)
    if problem is not None:
        return failed(ErrorCode.INVALID_REQUEST, problem)
    Res = DescribeAclsResponse.Resources
    resources: dict[
        tuple[ResourceType, str, PatternType], list[DescribeAclsResponse.Resources.Acls]
    ] = {}
    for b in ctx.broker.image.acls:
        if f.matches(b):
            resources.setdefault((b.resource_type, b.resource_name, b.pattern_type), []).append(
                Res.Acls(
                    principal=b.principal,
                    host=b.host,
                    operation=b.operation,
                    permission_type=b.permission_type,
                )
            )
    return DescribeAclsResponse(
        error_code=0,
        error_message=None,
        resources=[
            Res(resource_type=rtype, resource_name=name, pattern_type=ptype, acls=acls)
            for (rtype, name, ptype), acls in resources.items()
        ],
    )


@handles(DeleteAclsRequest)
async def handle_delete_acls(ctx: RequestContext, req: DeleteAclsRequest) -> DeleteAclsResponse:
    FR = DeleteAclsResponse.FilterResults

    def failed(code: int, message: str) -> DeleteAclsResponse:
        return DeleteAclsResponse(
            filter_results=[
                FR(error_code=code, error_message=message, matching_acls=[]) for _ in req.filters
            ]
        )

    if ctx.broker.authorizer is None:
        return failed(ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
    denied = _cluster_denied(ctx, AclOperation.ALTER)
    if denied is not None:
        return failed(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, denied)
    filters = [
        _filter(
            f.resource_type_filter,
            f.resource_name_filter,
            f.pattern_type_filter,
            f.principal_filter,
            f.host_filter,
            f.operation,
            f.permission_type,
        )
        for f in req.filters
    ]
    outcomes = await ctx.broker.cluster_admin.delete_acls(filters) if filters else []
    results: list[DeleteAclsResponse.FilterResults] = []
    for outcome in outcomes:
        if isinstance(outcome, KafkaError):
            results.append(
                FR(error_code=code_of(outcome), error_message=message_of(outcome), matching_acls=[])
            )
            continue
        results.append(
            FR(
                error_code=0,
                error_message=None,
                matching_acls=[
                    FR.MatchingAcls(
                        error_code=0,
                        error_message=None,
                        resource_type=b.resource_type,
                        resource_name=b.resource_name,
                        pattern_type=b.pattern_type,
                        principal=b.principal,
                        host=b.host,
                        operation=b.operation,
                        permission_type=b.permission_type,
                    )
                    for b in outcome
                ],
            )
        )
    return DeleteAclsResponse(filter_results=results)
