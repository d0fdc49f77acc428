"""CreateDelegationToken (v0-3), RenewDelegationToken, ExpireDelegationToken (v0-2) and
DescribeDelegationToken (v0-3), with Kafka's checks in Kafka's order.

Every one of them is refused with DELEGATION_TOKEN_REQUEST_NOT_ALLOWED on a connection that
cannot vouch for its principal (PLAINTEXT, or SSL without a client certificate) or that logged
in with a token itself; then DELEGATION_TOKEN_AUTH_DISABLED when the broker has no
``delegation.token.secret.key``. Create makes a token for the requester, or (v3) for another
owner when the requester may CREATE_TOKENS on that ``User`` resource
(DELEGATION_TOKEN_AUTHORIZATION_FAILED otherwise); owners and renewers must be ``User``
principals (INVALID_PRINCIPAL_TYPE). Renew and expire find the token by its HMAC and are
allowed to its owner, requester and renewers. Describe lists the tokens of the given owners
(null: all; empty: none) that the principal owns, renews or requested, or may DESCRIBE (the
token) or DESCRIBE_TOKENS (its owner's ``User`` resource).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from gregor.broker.common.errors import code_of
from gregor.broker.handlers.authz import AclOperation, ResourceType, allowed
from gregor.broker.handlers.registry import handles
from gregor.broker.state import ANONYMOUS, RequestContext
from gregor.protocol.errors import ErrorCode, KafkaError
from gregor.protocol.messages.create_delegation_token import (
    CreateDelegationTokenRequest,
    CreateDelegationTokenResponse,
)
from gregor.protocol.messages.describe_delegation_token import (
    DescribeDelegationTokenRequest,
    DescribeDelegationTokenResponse,
)
from gregor.protocol.messages.expire_delegation_token import (
    ExpireDelegationTokenRequest,
    ExpireDelegationTokenResponse,
)
from gregor.protocol.messages.renew_delegation_token import (
    RenewDelegationTokenRequest,
    RenewDelegationTokenResponse,
)
from gregor.security.delegation_tokens import DelegationToken, check_principal, principal_parts


def _refusal(ctx: RequestContext) -> ErrorCode | None:
    """Kafka's ``allowTokenRequests`` and then whether tokens are enabled at all."""
    conn = ctx.conn
    if (
        conn.token_authenticated
        or conn.security_protocol == "PLAINTEXT"
        or (conn.security_protocol == "SSL" and conn.principal == ANONYMOUS)
    ):
        return ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    if not ctx.broker.delegation_tokens.enabled:
        return ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED
    return None


def _created(
    error: ErrorCode | int,
    owner: str,
    requester: str,
    token: DelegationToken | None = None,
    mac: bytes = b"",
) -> CreateDelegationTokenResponse:
    owner_type, owner_name = principal_parts(owner)
    requester_type, requester_name = principal_parts(requester)
    return CreateDelegationTokenResponse(
        error_code=error,
        principal_type=owner_type,
        principal_name=owner_name,
        token_requester_principal_type=requester_type,
        token_requester_principal_name=requester_name,
        issue_timestamp_ms=token.issue_timestamp_ms if token else -1,
        expiry_timestamp_ms=token.expiry_timestamp_ms if token else -1,
        max_timestamp_ms=token.max_timestamp_ms if token else -1,
        token_id=token.token_id if token else "",
        hmac=mac,
        throttle_time_ms=0,
    )


@handles(CreateDelegationTokenRequest)
async def handle_create_delegation_token(
    ctx: RequestContext, req: CreateDelegationTokenRequest
) -> CreateDelegationTokenResponse:
    requester = ctx.conn.principal
    owner = requester
    if req.owner_principal_name:
        owner = f"{req.owner_principal_type or ''}:{req.owner_principal_name}"
    refusal = _refusal(ctx)
    if refusal is not None:
        return _created(refusal, owner, requester)
    if owner != requester and not allowed(
        ctx, AclOperation.CREATE_TOKENS, ResourceType.USER, owner
    ):
        return _created(ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED, owner, requester)
    renewers = [f"{r.principal_type}:{r.principal_name}" for r in req.renewers]
    for kind, name in [
        principal_parts(owner),
        *((r.principal_type, r.principal_name) for r in req.renewers),
    ]:
        if check_principal(kind, name) is not None:
            return _created(ErrorCode.INVALID_PRINCIPAL_TYPE, owner, requester)
    manager = ctx.broker.delegation_tokens
    try:
        token = await manager.create(owner, requester, renewers, req.max_lifetime_ms)
    except KafkaError as e:
        return _created(code_of(e), owner, requester)
    return _created(0, owner, requester, token, manager.hmac(token))


R = TypeVar("R", RenewDelegationTokenResponse, ExpireDelegationTokenResponse)


async def _changed(
    ctx: RequestContext, response: type[R], change: Callable[[], Awaitable[int]]
) -> R:
    """Renew or expire: the refusals, then the change's new expiry timestamp or its error."""
    refusal = _refusal(ctx)
    if refusal is not None:
        return response(error_code=refusal, expiry_timestamp_ms=-1, throttle_time_ms=0)
    try:
        expiry = await change()
    except KafkaError as e:
        return response(error_code=code_of(e), expiry_timestamp_ms=-1, throttle_time_ms=0)
    return response(error_code=0, expiry_timestamp_ms=expiry, throttle_time_ms=0)


@handles(RenewDelegationTokenRequest)
async def handle_renew_delegation_token(
    ctx: RequestContext, req: RenewDelegationTokenRequest
) -> RenewDelegationTokenResponse:
    manager = ctx.broker.delegation_tokens
    return await _changed(
        ctx,
        RenewDelegationTokenResponse,
        lambda: manager.renew(bytes(req.hmac), ctx.conn.principal, req.renew_period_ms),
    )


@handles(ExpireDelegationTokenRequest)
async def handle_expire_delegation_token(
    ctx: RequestContext, req: ExpireDelegationTokenRequest
) -> ExpireDelegationTokenResponse:
    manager = ctx.broker.delegation_tokens
    return await _changed(
        ctx,
        ExpireDelegationTokenResponse,
        lambda: manager.expire(bytes(req.hmac), ctx.conn.principal, req.expiry_time_period_ms),
    )


def _visible(ctx: RequestContext, token: DelegationToken, owners: list[str] | None) -> bool:
    if owners is not None and not any(token.owner_or_renewer(o) for o in owners):
        return False
    return (
        token.owner_or_renewer(ctx.conn.principal)
        or allowed(ctx, AclOperation.DESCRIBE, ResourceType.DELEGATION_TOKEN, token.token_id)
        or allowed(ctx, AclOperation.DESCRIBE_TOKENS, ResourceType.USER, token.owner)
    )


@handles(DescribeDelegationTokenRequest)
async def handle_describe_delegation_token(
    ctx: RequestContext, req: DescribeDelegationTokenRequest
) -> DescribeDelegationTokenResponse:
    refusal = _refusal(ctx)
    if refusal is not None:
        return DescribeDelegationTokenResponse(error_code=refusal, tokens=[], throttle_time_ms=0)
    owners = (
        None
        if req.owners is None
        else [f"{o.principal_type}:{o.principal_name}" for o in req.owners]
    )
    manager = ctx.broker.delegation_tokens
    T = DescribeDelegationTokenResponse.Tokens
    tokens = []
    for token in manager.tokens() if owners != [] else []:
        if not _visible(ctx, token, owners):
            continue
        owner_type, owner_name = principal_parts(token.owner)
        requester_type, requester_name = principal_parts(token.requester)
        tokens.append(
            T(
                principal_type=owner_type,
                principal_name=owner_name,
                token_requester_principal_type=requester_type,
                token_requester_principal_name=requester_name,
                issue_timestamp=token.issue_timestamp_ms,
                expiry_timestamp=token.expiry_timestamp_ms,
                max_timestamp=token.max_timestamp_ms,
                token_id=token.token_id,
                hmac=manager.hmac(token),
                renewers=[
                    T.Renewers(principal_type=kind, principal_name=name)
                    for kind, name in map(principal_parts, token.renewers)
                ],
            )
        )
    return DescribeDelegationTokenResponse(error_code=0, tokens=tokens, throttle_time_ms=0)
