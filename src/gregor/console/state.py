"""What one console keeps while it runs: its settings, its sessions, its login throttle, the
login form's token key and, unless visitors log in with their own credentials, the one Kafka
admin client it shares between them (``ConsoleState``, the application's ``STATE``)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from gregor.console.sessions import Clock, LoginToken, Session, SessionStore
from gregor.console.settings import ConsoleSettings
from gregor.security.login_throttle import LoginThrottle


@dataclass
class ConsoleState:
    settings: ConsoleSettings
    clock: Clock = time.monotonic
    store: SessionStore = field(init=False)
    throttle: LoginThrottle = field(init=False)
    login_token: LoginToken = field(default_factory=LoginToken)
    #: The console's own admin client (``--auth password`` and ``none``); None with ``sasl``.
    shared_admin: Any = None

    def __post_init__(self) -> None:
        s = self.settings
        self.store = SessionStore(
            s.idle_timeout_s, s.session_lifetime_s, s.max_sessions, self.clock
        )
        self.throttle = LoginThrottle(
            s.login_attempts, s.login_window_s, s.max_concurrent_logins, self.clock
        )

    @property
    def session_cookie(self) -> str:
        # __Host-: the browser keeps it only if set over HTTPS, for this host, on path /
        return "__Host-gregor_session" if self.settings.secure else "gregor_session"

    @property
    def login_cookie(self) -> str:
        return "__Host-gregor_login" if self.settings.secure else "gregor_login"

    def shared_session(self, now: float) -> Session:
        s = self.settings
        principal = "no login" if s.auth == "none" else f"console login, as {s.principal()}"
        return Session(
            principal,
            self.shared_admin,
            dict(s.client_config),
            owns_client=False,
            created=now,
            last_seen=now,
        )

    def set_cookie(
        self, response: web.StreamResponse, name: str, value: str, max_age: int | None = None
    ) -> None:
        response.set_cookie(
            name,
            value,
            path="/",
            httponly=True,
            samesite="Strict",
            secure=self.settings.secure,
            max_age=max_age,
        )

    def del_cookie(self, response: web.StreamResponse, name: str) -> None:
        response.del_cookie(
            name, path="/", secure=self.settings.secure, httponly=True, samesite="Strict"
        )


STATE: web.AppKey[ConsoleState] = web.AppKey("console_state", ConsoleState)
SESSION: web.RequestKey[Session] = web.RequestKey("console_session", Session)
