"""Delegation tokens (KIP-48): what a token is, its HMAC, the SCRAM credentials a token login
checks, and Kafka's rules for creating, renewing, expiring and describing tokens.

A token is issued to an owner by a logged-in principal (the requester). Its id is random; its
HMAC is HMAC-SHA512 of the id under the cluster's ``delegation.token.secret.key``, so every
broker with the same secret derives the same HMAC and nothing secret is stored: the metadata
store keeps only the ``DelegationToken`` (owner, requester, renewers and the three
timestamps). A client logs in with SCRAM, user name = the token id, password = the base64 of
the HMAC, and the ``tokenauth=true`` extension; the session's principal is then the token's
owner, marked as token-authenticated (such a session may not create or renew tokens).

Timestamps are milliseconds since the epoch. ``expiry_timestamp_ms`` moves with each renewal
but never past ``max_timestamp_ms``; a token whose expiry has passed cannot log in, be renewed
or be expired again (DELEGATION_TOKEN_EXPIRED), and the controller's periodic check removes it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from gregor.protocol.errors import (
    DelegationTokenExpiredError,
    DelegationTokenOwnerMismatchError,
    InvalidPrincipalTypeError,
    KafkaError,
)
from gregor.security.sasl import SCRAM_SHA_256, SCRAM_SHA_512
from gregor.security.scram import MIN_ITERATIONS, ScramCredential, make_credential

#: Kafka's defaults: the longest a token can live, and how long a creation or renewal lasts.
DEFAULT_MAX_LIFETIME_MS = 7 * 24 * 3600 * 1000
DEFAULT_EXPIRY_TIME_MS = 24 * 3600 * 1000
DEFAULT_EXPIRY_CHECK_INTERVAL_MS = 3600 * 1000
#: The only principal type a token's owner and renewers may have.
USER_TYPE = "User"


@dataclass(frozen=True, slots=True)
class DelegationToken:
    token_id: str
    owner: str  # "User:alice"
    requester: str  # who created it ("User:admin"); the owner unless created for someone else
    renewers: tuple[str, ...]
    issue_timestamp_ms: int
    expiry_timestamp_ms: int
    max_timestamp_ms: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "renewers", tuple(self.renewers))

    def expired(self, now_ms: int) -> bool:
        return self.expiry_timestamp_ms < now_ms or self.max_timestamp_ms < now_ms

    def owner_or_renewer(self, principal: str) -> bool:
        """Whether ``principal`` may renew, expire and see this token (KIP-48, KIP-373)."""
        return principal in (self.owner, self.requester) or principal in self.renewers


def new_token_id() -> str:
    """A random id, base64url without padding as Kafka makes them (22 characters)."""
    return base64.urlsafe_b64encode(os.urandom(16)).rstrip(b"=").decode()


def token_hmac(secret: str, token_id: str) -> bytes:
    return hmac.new(secret.encode(), token_id.encode(), hashlib.sha512).digest()


def token_password(token_hmac_bytes: bytes) -> str:
    """The password a client logs in with: the HMAC in base64."""
    return base64.b64encode(token_hmac_bytes).decode()


def new_token(
    owner: str,
    requester: str,
    renewers: Sequence[str],
    max_lifetime_ms: int,
    now_ms: int,
    broker_max_lifetime_ms: int = DEFAULT_MAX_LIFETIME_MS,
    expiry_time_ms: int = DEFAULT_EXPIRY_TIME_MS,
) -> DelegationToken:
    """A token as CreateDelegationToken makes it: a ``max_lifetime_ms`` of 0 or less (or more
    than the broker allows) takes ``delegation.token.max.lifetime.ms``; it first expires after
    ``delegation.token.expiry.time.ms`` or at its maximum, whichever is sooner."""
    lifetime = (
        broker_max_lifetime_ms
        if max_lifetime_ms <= 0
        else min(max_lifetime_ms, broker_max_lifetime_ms)
    )
    max_ts = now_ms + lifetime
    return DelegationToken(
        new_token_id(),
        owner,
        requester,
        tuple(renewers),
        now_ms,
        min(now_ms + expiry_time_ms, max_ts),
        max_ts,
    )


def _changeable(token: DelegationToken, principal: str, now_ms: int) -> None:
    if not token.owner_or_renewer(principal):
        raise DelegationTokenOwnerMismatchError(
            f"{principal} is not the owner or a renewer of this token"
        )
    if token.expired(now_ms):
        raise DelegationTokenExpiredError("Delegation Token is expired.")


def renewed(
    token: DelegationToken, principal: str, renew_period_ms: int, now_ms: int, expiry_time_ms: int
) -> DelegationToken:
    """RenewDelegationToken: the token expiring ``renew_period_ms`` from now (a negative period:
    ``delegation.token.expiry.time.ms``), never past its maximum."""
    _changeable(token, principal, now_ms)
    period = expiry_time_ms if renew_period_ms < 0 else renew_period_ms
    return _with_expiry(token, min(token.max_timestamp_ms, now_ms + period))


def expired_by(
    token: DelegationToken, principal: str, expiry_period_ms: int, now_ms: int
) -> DelegationToken | None:
    """ExpireDelegationToken: None (remove it now) for a negative period, else the token
    expiring ``expiry_period_ms`` from now, never past its maximum."""
    _changeable(token, principal, now_ms)
    if expiry_period_ms < 0:
        return None
    return _with_expiry(token, min(token.max_timestamp_ms, now_ms + expiry_period_ms))


def _with_expiry(token: DelegationToken, expiry_ms: int) -> DelegationToken:
    return DelegationToken(
        token.token_id,
        token.owner,
        token.requester,
        token.renewers,
        token.issue_timestamp_ms,
        expiry_ms,
        token.max_timestamp_ms,
    )


def find_by_hmac(
    tokens: Iterable[DelegationToken], secret: str, mac: bytes
) -> DelegationToken | None:
    for token in tokens:
        if hmac.compare_digest(token_hmac(secret, token.token_id), mac):
            return token
    return None


def principal_parts(principal: str) -> tuple[str, str]:
    """("User", "alice") for "User:alice"."""
    kind, _, name = principal.partition(":")
    return kind, name


def check_principal(kind: str, name: str) -> KafkaError | None:
    """INVALID_PRINCIPAL_TYPE for an owner or renewer that is not a named ``User``."""
    if kind != USER_TYPE:
        return InvalidPrincipalTypeError(
            f"Principal type {kind} is not supported; only {USER_TYPE} is"
        )
    if not name:
        return InvalidPrincipalTypeError("a principal needs a name")
    return None


@dataclass(frozen=True, slots=True)
class TokenLogin:
    """What a SCRAM login with ``tokenauth=true`` checks against: the token's credential for
    the mechanism, whose session it becomes, and when it ends."""

    credential: ScramCredential
    owner: str
    expiry_timestamp_ms: int


class TokenCredentials:
    """SCRAM credentials of tokens, made on a token's first login on this broker (one PBKDF2
    run per mechanism, Kafka's minimum iteration count, a random salt) and kept while the
    token exists."""

    def __init__(self) -> None:
        self._made: dict[tuple[str, str], tuple[str, ScramCredential]] = {}

    def login(
        self, token: DelegationToken | None, secret: str | None, mechanism: str, now_ms: int
    ) -> TokenLogin | None:
        if (
            token is None
            or not secret
            or token.expired(now_ms)
            or mechanism not in (SCRAM_SHA_256, SCRAM_SHA_512)
        ):
            return None
        password = token_password(token_hmac(secret, token.token_id))
        key = (token.token_id, mechanism)
        made = self._made.get(key)
        if made is None or made[0] != password:
            made = (password, make_credential(mechanism, password, MIN_ITERATIONS))
            self._made[key] = made
        return TokenLogin(made[1], token.owner, token.expiry_timestamp_ms)

    def forget(self, keep: Iterable[str]) -> None:
        """Drop the credentials of tokens not in ``keep`` (removed or expired away)."""
        live = set(keep)
        for key in [k for k in self._made if k[0] not in live]:
            del self._made[key]
