"""HTTP basic auth for the registry, against the cluster's own SASL users.

Theory of operation. With ``--auth sasl`` every request must carry ``Authorization: Basic``
with a Kafka user's name and password (what Confluent's clients send with
``basic.auth.user.info``). The registry does not keep a user list of its own: it logs in to
the cluster as that user, with the SASL mechanism of its own client settings (PLAIN or
SCRAM-SHA-256/512), and the cluster's answer is the answer, so the registry's users are
exactly the cluster's (PLAIN users of the JAAS config, SCRAM credentials managed with
``gregor users``), and a password changed or a user deleted there is seen here.

A login costs the cluster a connection and a SASL exchange (for SCRAM, thousands of hash
rounds), so what a stranger can make the registry ask is bounded: a ``LoginThrottle`` (logins
in progress at once, a token bucket per client address) before any login, and credentials
that logged in are remembered for ``cache_ttl_s`` (default 60 s: the longest a changed password
or a deleted user is still let in), at most ``MAX_CACHED`` of them, least recently used
forgotten first. The cache keeps the user name and an HMAC-SHA-256 of the password under a key
made at start, never the password; failed logins are not remembered (each takes a token).
Every refusal is the same 401 with ``WWW-Authenticate``; the log names the user (escaped) and
the peer, never the password. Not thread-safe: the registry's event loop owns it.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import logging
import secrets
import time
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Middleware

from gregor.client import (
    AIOAdminClient,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    NoBrokersAvailableError,
)
from gregor.schema_registry.http import Handler, error_answer
from gregor.security.log_text import printable
from gregor.security.login_throttle import Clock, LoginThrottle

log = logging.getLogger("gregor.schema_registry")

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
#: How long one login may take (connection, SASL exchange, first metadata).
LOGIN_TIMEOUT_S = 30.0
MAX_CACHED = 1024
MAX_USERNAME = 255
MAX_PASSWORD = 1024
REALM = "gregor-schema-registry"
#: The principal a request was let in as (``User:name``), for handlers and authorization.
PRINCIPAL = web.RequestKey("principal", str)

UNREACHABLE = (KafkaConnectionError, NoBrokersAvailableError, KafkaTimeoutError, TimeoutError)


class AuthConfigError(ValueError):
    """The registry's client settings cannot check logins (not a SASL listener, or a
    mechanism without a password)."""


def parse_basic(header: str | None) -> tuple[str, str] | None:
    """(user, password) of an ``Authorization: Basic`` header, or None when it is not one."""
    if not header or len(header) > 4 * (MAX_USERNAME + MAX_PASSWORD) or " " not in header:
        return None
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(token.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    user, sep, password = decoded.partition(":")
    if not sep or not 0 < len(user) <= MAX_USERNAME or not 0 < len(password) <= MAX_PASSWORD:
        return None
    if printable(user) != user:
        return None
    return user, password


class SaslBasicAuth:
    """Checks basic-auth credentials by logging in to the cluster (see the module)."""

    def __init__(
        self,
        client_config: Mapping[str, Any],
        *,
        cache_ttl_s: float = 60.0,
        attempts: int = 10,
        window_s: float = 60.0,
        concurrent: int = 4,
        clock: Clock = time.monotonic,
    ) -> None:
        protocol = str(client_config.get("security.protocol", "PLAINTEXT")).upper()
        mechanism = str(client_config.get("sasl.mechanism", "GSSAPI")).upper()
        if protocol not in ("SASL_PLAINTEXT", "SASL_SSL"):
            raise AuthConfigError(
                "basic auth checks a user's password by logging in to the cluster: the "
                f"registry's client needs security.protocol=SASL_PLAINTEXT or SASL_SSL, not {protocol}"
            )
        if mechanism not in MECHANISMS:
            raise AuthConfigError(
                f"basic auth needs a password mechanism ({', '.join(MECHANISMS)}), "
                f"not sasl.mechanism={mechanism}"
            )
        self._config = {
            k: v for k, v in client_config.items() if k not in ("sasl.username", "sasl.password")
        }
        self.cache_ttl_s = cache_ttl_s
        self.clock = clock
        self.throttle = LoginThrottle(attempts, window_s, concurrent, clock)
        self._key = secrets.token_bytes(32)
        self._cache: OrderedDict[tuple[str, bytes], float] = OrderedDict()  # expiry

    def _digest(self, user: str, password: str) -> tuple[str, bytes]:
        mac = hmac.new(self._key, f"{user}\0{password}".encode(), hashlib.sha256).digest()
        return user, mac

    async def _login(self, user: str, password: str) -> bool:
        """Whether the cluster lets ``user`` in with ``password``; raises UNREACHABLE errors."""
        admin = AIOAdminClient({**self._config, "sasl.username": user, "sasl.password": password})
        try:
            async with asyncio.timeout(LOGIN_TIMEOUT_S):
                await admin.start()
        except UNREACHABLE:
            raise
        except KafkaError:
            return False
        finally:
            await admin.close()
        return True

    async def check(self, request: web.Request) -> str | web.Response:
        """The request's principal (``User:name``), or the response refusing it."""
        peer = request.remote or ""
        creds = parse_basic(request.headers.get("Authorization"))
        if creds is None:
            return unauthorized()
        user, password = creds
        key = self._digest(user, password)
        now = self.clock()
        expiry = self._cache.pop(key, None)
        if expiry is not None and expiry > now:
            self._cache[key] = expiry  # most recently used last
            return f"User:{user}"
        wait = self.throttle.admit(peer)
        if wait > 0:
            return _too_many(wait)
        if not self.throttle.begin():
            return _too_many(1.0)
        try:
            ok = await self._login(user, password)
        except UNREACHABLE as e:
            log.warning(
                "schema registry: the login of user %s from %s could not be checked: %s",
                printable(user),
                peer,
                type(e).__name__,
            )
            return _error(503, "The cluster could not be reached to check the login")
        finally:
            self.throttle.end()
        if not ok:
            log.warning("schema registry: login failed for user %s from %s", printable(user), peer)
            return unauthorized()
        self._cache[key] = self.clock() + self.cache_ttl_s
        while len(self._cache) > MAX_CACHED:
            self._cache.popitem(last=False)
        return f"User:{user}"


def _error(status: int, message: str, headers: Mapping[str, str] | None = None) -> web.Response:
    response = error_answer(status, status, message)
    response.headers.update(headers or {})
    return response


def unauthorized() -> web.Response:
    return _error(
        401, "Unauthorized", {"WWW-Authenticate": f'Basic realm="{REALM}", charset="UTF-8"'}
    )


def _too_many(wait_s: float) -> web.Response:
    return _error(429, "Too many login attempts", {"Retry-After": str(max(1, round(wait_s)))})


def auth_middleware(auth: SaslBasicAuth) -> Middleware:
    @web.middleware
    async def authenticate(request: web.Request, handler: Handler) -> web.StreamResponse:
        outcome = await auth.check(request)
        if isinstance(outcome, web.Response):
            return outcome
        request[PRINCIPAL] = outcome
        return await handler(request)

    return authenticate
