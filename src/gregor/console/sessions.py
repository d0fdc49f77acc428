"""Logged-in visitors and what logging in may cost: ``Session``, ``SessionStore``,
``LoginThrottle`` and the signed token of the login form.

Theory of operation. A session exists only in this process's memory. Its cookie carries a
random 256-bit id and nothing else; the store keys sessions by the id's SHA-256, so the ids
themselves are not kept, and nothing in the cookie can be read or forged into another
session. A session holds the Kafka client the console uses for that visitor: with
``--auth sasl`` a client of its own, logged in with the visitor's credentials (which live in
that client's settings, in memory, for as long as the session does, and nowhere else); with
``--auth password`` or ``none`` the console's one shared client. Each session also has its
CSRF token, which every form carries and every state-changing request must return.

A session ends at logout, after ``idle_timeout_s`` without a page view (the overview's chart
polls do not count as one), after ``session_lifetime_s`` whatever it does, or when the store is
full and it is the least recently used of the shared-client sessions; ending closes its own
client. Expired sessions are dropped when looked up and by ``reap()``, which the console
runs every few seconds. ``clock`` is the monotonic clock (a test may pass its own).

``LoginThrottle`` (``gregor.security.login_throttle``, shared with the schema registry) bounds
what login attempts can make the console do to the cluster.

The login form itself carries a stateless token (``LoginToken``): an HMAC, with a key made at
start, of the time and a nonce that is also in a cookie, so a login form can only be posted by
the browser that was shown it, within ``LOGIN_FORM_TTL_S``.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import os
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

LOGIN_FORM_TTL_S = 3600.0

Clock = Callable[[], float]


class SessionsFull(Exception):
    """Every session slot is taken by a session with a client of its own."""


@dataclass(eq=False)
class Session:
    #: Shown to the visitor: whom the console acts as for them.
    principal: str
    admin: Any  # an AIOAdminClient
    client_config: dict[str, Any] = field(repr=False)
    #: The admin client is this session's own (closed when the session ends).
    owns_client: bool
    created: float
    last_seen: float
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32), repr=False)
    key: bytes = b""
    #: Per-topic end offsets at the previous chart poll (records/s between polls).
    throughput: dict[str, Any] = field(default_factory=dict)


def _key(cookie: str) -> bytes:
    return hashlib.sha256(_b(cookie)).digest()


class SessionStore:
    def __init__(
        self,
        idle_timeout_s: float,
        lifetime_s: float,
        max_sessions: int,
        clock: Clock = time.monotonic,
    ) -> None:
        self.idle_timeout_s = idle_timeout_s
        self.lifetime_s = lifetime_s
        self.max_sessions = max_sessions
        self.clock = clock
        self._sessions: OrderedDict[bytes, Session] = OrderedDict()  # least recently used first

    def __len__(self) -> int:
        return len(self._sessions)

    def sessions(self) -> list[Session]:
        return list(self._sessions.values())

    def _expired(self, s: Session, now: float) -> bool:
        return now - s.last_seen > self.idle_timeout_s or now - s.created > self.lifetime_s

    async def add(self, make: Callable[[float], Session]) -> tuple[str, Session]:
        """Store ``make(now)`` under a new id; returns (cookie value, session)."""
        await self.reap()
        if len(self._sessions) >= self.max_sessions:
            shared = next((k for k, s in self._sessions.items() if not s.owns_client), None)
            if shared is None:
                raise SessionsFull
            await self._end(self._sessions[shared])
        cookie = secrets.token_urlsafe(32)
        session = make(self.clock())
        session.key = _key(cookie)
        self._sessions[session.key] = session
        return cookie, session

    async def get(self, cookie: str | None, touch: bool = True) -> Session | None:
        """The live session of ``cookie``, its idle time restarted when ``touch``."""
        if not cookie:
            return None
        session = self._sessions.get(_key(cookie))
        if session is None:
            return None
        now = self.clock()
        if self._expired(session, now):
            await self._end(session)
            return None
        if touch:
            session.last_seen = now
            self._sessions.move_to_end(session.key)
        return session

    async def end(self, session: Session) -> None:
        await self._end(session)

    async def _end(self, session: Session) -> None:
        if self._sessions.pop(session.key, None) is not None and session.owns_client:
            await session.admin.close()

    async def reap(self) -> int:
        """End every expired session; returns how many."""
        now = self.clock()
        gone = [s for s in self._sessions.values() if self._expired(s, now)]
        for s in gone:
            await self._end(s)
        return len(gone)

    async def close(self) -> None:
        for s in list(self._sessions.values()):
            await self._end(s)


class LoginToken:
    """The login form's token: ``issued.nonce.mac``, the nonce also in the form's cookie."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._secret = os.urandom(32)
        self.clock = clock

    def _mac(self, issued: str, nonce: str) -> str:
        digest = hmac.new(self._secret, f"{issued}.{nonce}".encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).decode().rstrip("=")

    def issue(self, nonce: str | None = None) -> tuple[str, str]:
        """(token for the form, nonce for the cookie): the browser's nonce when it has one, so
        that every login form it has open (another tab, a reload) stays valid."""
        if not nonce or len(nonce) > 64 or not all(c.isalnum() or c in "-_" for c in nonce):
            nonce = secrets.token_urlsafe(16)
        issued = str(int(self.clock()))
        return f"{issued}.{nonce}.{self._mac(issued, nonce)}", nonce

    def check(self, token: str, cookie_nonce: str | None) -> bool:
        issued, _, rest = token.partition(".")
        nonce, _, mac = rest.partition(".")
        if not (issued.isdigit() and nonce and mac and cookie_nonce):
            return False
        if not hmac.compare_digest(_b(mac), _b(self._mac(issued, nonce))):
            return False
        if not hmac.compare_digest(_b(nonce), _b(cookie_nonce)):
            return False
        return 0 <= self.clock() - int(issued) <= LOGIN_FORM_TTL_S


def _b(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def same_secret(given: str, expected: str) -> bool:
    """Constant-time comparison of two secrets of any length."""
    return hmac.compare_digest(
        hashlib.sha256(_b(given)).digest(), hashlib.sha256(_b(expected)).digest()
    )


async def run_every(seconds: float, fn: Callable[[], Any]) -> None:
    while True:
        await asyncio.sleep(seconds)
        await fn()
