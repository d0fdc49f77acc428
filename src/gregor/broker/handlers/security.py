"""SaslHandshake and SaslAuthenticate once a connection needs no login, and the SCRAM
credential APIs (AlterUserScramCredentials, DescribeUserScramCredentials).

The login itself runs in ``broker.authenticator`` before a SASL connection reaches any
handler; what arrives here is a SASL request on a connection that is already authenticated or
on a listener without SASL, which Kafka answers ILLEGAL_SASL_STATE.

AlterUserScramCredentials turns each upsertion's salted password into Kafka's stored form
(salt, stored key, server key, iterations; the salted password itself is not kept) and
applies all of them in one metadata change, answering per user. DescribeUserScramCredentials
lists each user's mechanisms and iteration counts (never the keys); no users means all.
"""

from __future__ import annotations

from gregor.broker.common.errors import code_of, message_of
from gregor.broker.handlers.authz import AclOperation, cluster_allowed
from gregor.broker.handlers.registry import handles
from gregor.broker.state import RequestContext
from gregor.protocol.errors import ErrorCode
from gregor.protocol.messages.alter_user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
)
from gregor.protocol.messages.describe_user_scram_credentials import (
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)
from gregor.protocol.messages.sasl_authenticate import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
)
from gregor.protocol.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse
from gregor.security.scram import (
    MECHANISM_IDS,
    MECHANISM_NAMES,
    ScramCredential,
    credential_from_salted_password,
)


@handles(SaslHandshakeRequest)
async def handle_sasl_handshake(
    ctx: RequestContext, req: SaslHandshakeRequest
) -> SaslHandshakeResponse:
    return SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])


@handles(SaslAuthenticateRequest)
async def handle_sasl_authenticate(
    ctx: RequestContext, req: SaslAuthenticateRequest
) -> SaslAuthenticateResponse:
    return SaslAuthenticateResponse(
        error_code=ErrorCode.ILLEGAL_SASL_STATE,
        error_message="SaslAuthenticate request received after successful authentication",
        auth_bytes=b"",
    )


@handles(AlterUserScramCredentialsRequest)
async def handle_alter_user_scram_credentials(
    ctx: RequestContext, req: AlterUserScramCredentialsRequest
) -> AlterUserScramCredentialsResponse:
    if not cluster_allowed(ctx, AclOperation.ALTER):
        users = dict.fromkeys([d.name for d in req.deletions] + [u.name for u in req.upsertions])
        return AlterUserScramCredentialsResponse(
            throttle_time_ms=0,
            results=[
                AlterUserScramCredentialsResponse.Results(
                    user=user, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message=None
                )
                for user in users
            ],
        )
    # A mechanism number Kafka does not know stays unknown (as "") for the change to refuse.
    deletions = [(d.name, MECHANISM_NAMES.get(d.mechanism, "")) for d in req.deletions]
    upsertions: list[tuple[str, ScramCredential]] = []
    for u in req.upsertions:
        mechanism = MECHANISM_NAMES.get(u.mechanism, "")
        if mechanism:
            cred = credential_from_salted_password(
                mechanism, bytes(u.salted_password), bytes(u.salt), u.iterations
            )
        else:
            cred = ScramCredential("", b"", b"", b"", u.iterations)
        upsertions.append((u.name, cred))
    results = await ctx.broker.cluster_admin.alter_scram_credentials(deletions, upsertions)
    return AlterUserScramCredentialsResponse(
        throttle_time_ms=0,
        results=[
            AlterUserScramCredentialsResponse.Results(
                user=user,
                error_code=code_of(err) if err else 0,
                error_message=message_of(err) if err else None,
            )
            for user, err in results.items()
        ],
    )


def _described(ctx: RequestContext, user: str) -> DescribeUserScramCredentialsResponse.Results:
    R = DescribeUserScramCredentialsResponse.Results
    creds = ctx.broker.image.scram_credentials.get(user)
    if not creds:
        return R(
            user=user,
            error_code=ErrorCode.RESOURCE_NOT_FOUND,
            error_message="Attempt to describe a user credential that does not exist",
        )
    return R(
        user=user,
        error_code=0,
        error_message=None,
        credential_infos=[
            R.CredentialInfos(mechanism=MECHANISM_IDS[m], iterations=c.iterations)
            for m, c in sorted(creds.items())
        ],
    )


@handles(DescribeUserScramCredentialsRequest)
async def handle_describe_user_scram_credentials(
    ctx: RequestContext, req: DescribeUserScramCredentialsRequest
) -> DescribeUserScramCredentialsResponse:
    R = DescribeUserScramCredentialsResponse.Results
    if not cluster_allowed(ctx, AclOperation.DESCRIBE):
        return DescribeUserScramCredentialsResponse(
            throttle_time_ms=0,
            error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            error_message=None,
            results=[],
        )
    if not req.users:
        results = [_described(ctx, user) for user in sorted(ctx.broker.image.scram_credentials)]
    else:
        names = [u.name for u in req.users]
        results = []
        for name in dict.fromkeys(names):
            if names.count(name) > 1:
                results.append(
                    R(
                        user=name,
                        error_code=ErrorCode.DUPLICATE_RESOURCE,
                        error_message="Cannot describe SCRAM credentials for the same user twice in a single request",
                    )
                )
            else:
                results.append(_described(ctx, name))
    return DescribeUserScramCredentialsResponse(
        throttle_time_ms=0, error_code=0, error_message=None, results=results
    )
