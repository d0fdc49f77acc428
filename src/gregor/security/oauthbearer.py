"""SASL/OAUTHBEARER (RFC 7628) with Kafka's unsecured JWS validator, for development.

The client's one message is ``n,[a=authzid],\\x01auth=Bearer <token>\\x01[key=value\\x01]...\\x01``.
The token is an unsecured JWS (``alg: none``, so ``header.payload.`` with an empty
signature). It is accepted when, as Kafka's ``OAuthBearerUnsecuredValidatorCallbackHandler``
checks: the header says ``alg`` none; the principal claim (``sub``, or
``unsecuredValidatorPrincipalClaimName``) is a non-empty string; ``exp`` is a number and not
in the past, ``iat`` (if present) not in the future, both within the allowed clock skew
(``unsecuredValidatorAllowableClockSkewMs``); and the scope claim (``scope``, or
``unsecuredValidatorScopeClaimName``) holds every scope of
``unsecuredValidatorRequiredScope``. A refused token is answered, as RFC 7628 says, with a JSON
error (``{"status":"invalid_token"}``, or ``insufficient_scope`` with the missing scope); the
client answers ``\\x01`` and the login fails with that JSON as the message.

NOTHING here checks a signature: any client can claim any principal. Use it on development
listeners only, as Kafka documents for its own unsecured validator. Signed tokens are checked
by ``gregor.security.jwt.SignedJwtValidator`` (Kafka's ``OAuthBearerValidatorCallbackHandler``),
which plugs into the same exchange as a ``TokenValidator``.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from gregor.security.sasl import OAUTHBEARER, SaslAuthenticationError

OAUTHBEARER_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
_INITIAL = re.compile(
    r"^n,(?:a=(?P<authzid>[^,]*))?,(?P<kvpairs>\x01(?:[A-Za-z]+=[\x21-\x7e \t\r\n]*\x01)*)\x01$"
)


class TokenRejected(Exception):
    def __init__(self, description: str, scope: str | None = None) -> None:
        super().__init__(description)
        self.scope = scope

    @property
    def json(self) -> str:
        status = "insufficient_scope" if self.scope is not None else "invalid_token"
        scope = f',"scope":"{self.scope}"' if self.scope is not None else ""
        return f'{{"status":"{status}"{scope}}}'


class TokenValidator(Protocol):
    def validate(self, token: str, now_ms: int) -> tuple[str, int]:
        """(principal name, expiry in ms since the epoch), or ``TokenRejected``."""
        ...


@dataclass(frozen=True)
class UnsecuredValidator:
    principal_claim: str = "sub"
    scope_claim: str = "scope"
    required_scope: tuple[str, ...] = ()
    clock_skew_ms: int = 0

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> UnsecuredValidator:
        return cls(
            principal_claim=options.get("unsecuredValidatorPrincipalClaimName", "sub").strip()
            or "sub",
            scope_claim=options.get("unsecuredValidatorScopeClaimName", "scope").strip() or "scope",
            required_scope=tuple(options.get("unsecuredValidatorRequiredScope", "").split()),
            clock_skew_ms=int(options.get("unsecuredValidatorAllowableClockSkewMs", "0") or 0),
        )

    def validate(self, token: str, now_ms: int) -> tuple[str, int]:
        """(principal name, expiry in ms since the epoch), or ``TokenRejected``."""
        parts = token.split(".")
        if len(parts) != 3 or parts[2]:
            raise TokenRejected("not an unsecured JWS (header.payload. with no signature)")
        header, claims = (_b64_json(p) for p in parts[:2])
        if header.get("alg") != "none":
            raise TokenRejected("the unsecured validator needs alg none")
        principal = claims.get(self.principal_claim)
        if not isinstance(principal, str) or not principal.strip():
            raise TokenRejected(f"no principal claim {self.principal_claim!r}")
        exp = claims.get("exp")
        if not isinstance(exp, int | float) or isinstance(exp, bool):
            raise TokenRejected("no numeric exp claim")
        exp_ms = int(exp * 1000)
        if now_ms - self.clock_skew_ms >= exp_ms:
            raise TokenRejected("the token has expired")
        iat = claims.get("iat")
        if iat is not None:
            if not isinstance(iat, int | float) or isinstance(iat, bool):
                raise TokenRejected("iat is not a number")
            if int(iat * 1000) > now_ms + self.clock_skew_ms:
                raise TokenRejected("the token was issued in the future")
            if int(iat * 1000) >= exp_ms:
                raise TokenRejected("the token expires before it was issued")
        scope = claims.get(self.scope_claim, [])
        granted = set(
            scope.split() if isinstance(scope, str) else scope if isinstance(scope, list) else []
        )
        missing = [s for s in self.required_scope if s not in granted]
        if missing:
            raise TokenRejected("a required scope is missing", " ".join(self.required_scope))
        return principal, exp_ms


def _b64_json(part: str) -> dict[str, Any]:
    try:
        value = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    except (ValueError, binascii.Error):
        raise TokenRejected("a token part is not base64url JSON") from None
    if not isinstance(value, dict):
        raise TokenRejected("a token part is not a JSON object")
    return value


class OAuthBearerServer:
    mechanism = OAUTHBEARER

    def __init__(self, validator: TokenValidator, clock: Callable[[], float] = time.time) -> None:
        self._validator = validator
        self._clock = clock
        self.complete = False
        self.principal = ""
        self.extensions: dict[str, str] = {}
        self.expires_at_ms: int | None = None
        self._error: str | None = None

    def evaluate(self, token: bytes) -> bytes:
        if self._error is not None:
            # The client's answer to our error (\x01) ends the exchange in failure.
            raise SaslAuthenticationError(self._error)
        if self.complete:
            raise SaslAuthenticationError(
                "Authentication failed: OAUTHBEARER login already completed"
            )
        try:
            text = bytes(token).decode("utf-8")
        except UnicodeDecodeError:
            text = ""
        m = _INITIAL.match(text)
        if m is None:
            raise SaslAuthenticationError("Invalid OAUTHBEARER client first message")
        pairs = dict(kv.split("=", 1) for kv in m.group("kvpairs").split("\x01") if kv)
        auth = pairs.pop("auth", "")
        scheme, _, bearer = auth.partition(" ")
        if scheme.lower() != "bearer" or not bearer.strip():
            raise SaslAuthenticationError("Invalid OAUTHBEARER client first message")
        try:
            name, expires_at_ms = self._validator.validate(
                bearer.strip(), int(self._clock() * 1000)
            )
        except TokenRejected as e:
            self._error = e.json
            return e.json.encode()
        authzid = m.group("authzid")
        if authzid and authzid != name:
            raise SaslAuthenticationError(
                f"Authentication failed: Client requested an authorization id ({authzid}) that is "
                f"different from the token's principal name ({name})"
            )
        self.extensions = pairs
        self.expires_at_ms = expires_at_ms
        self.complete = True
        self.principal = "User:" + name
        return b""
