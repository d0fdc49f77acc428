"""Logging in and out, and the session every other request must have.

``sessions`` (a middleware) finds the visitor's session from its cookie; without one a page
request is sent to ``/login`` (the login form and static files excepted), an ``/api/`` call
answers 401 and anything else is refused. With ``--auth none`` a visitor's first page makes
a session on the spot (there is no login, but its forms still need a CSRF token). Every
state-changing request but the login itself must return its session's CSRF token.

``login`` checks the form's own token (``LoginToken``), takes an attempt from the visitor's
address and a slot among the logins in progress (``LoginThrottle``), then, with ``--auth
sasl``, opens a Kafka admin client with the visitor's user name and password (the cluster
decides; its answer is the answer), or with ``--auth password`` compares the console's
password. Every failed login gets the same answer. The password is kept only in the session's
client settings, in memory; it is never logged, never put in a cookie or a page.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
from typing import Any
from urllib.parse import quote

from aiohttp import web

from gregor.client import AIOAdminClient
from gregor.console.guard import SAFE_METHODS, UNREACHABLE, refuse, unreachable_page
from gregor.console.html import VISITOR, Visitor, field, form, hidden, page
from gregor.console.sessions import Session, SessionsFull, same_secret
from gregor.console.state import SESSION, STATE, ConsoleState
from gregor.protocol.errors import KafkaError
from gregor.security.log_text import printable

log = logging.getLogger("gregor.console")

#: How long one login may take (connection, SASL exchange, first metadata).
LOGIN_TIMEOUT_S = 30.0
MAX_USERNAME = 255
MAX_PASSWORD = 1024
FAILED = "Login failed: wrong user name or password."
#: Paths served without a session (besides /static/): the login form, and what browsers ask
#: for by themselves (a 404, not a redirect to the login page).
PUBLIC = ("/login", "/favicon.ico")


def _event(level: int, event: str, **fields: Any) -> None:
    log.log(level, event, extra={"fields": fields})


def local_path(target: str | None) -> str:
    """``target`` when it is a path on this console, else ``/`` (no open redirect: browsers
    read ``//host``, ``/\\host`` and ``/<tab>/host`` as another host, so a path must be printable
    ASCII without spaces or backslashes, and not start with two slashes)."""
    if (
        not target
        or not target.startswith("/")
        or target.startswith("//")
        or any(not (33 <= ord(c) < 127) or c == "\\" for c in target)
    ):
        return "/"
    return target


@web.middleware
async def sessions(request: web.Request, handler: Any) -> web.StreamResponse:
    state = request.app[STATE]
    public = request.path in PUBLIC or request.path.startswith("/static/")
    api = request.path.startswith("/api/")
    session = await state.store.get(
        request.cookies.get(state.session_cookie), touch=not api and not public
    )
    new_cookie = None
    if (
        session is None
        and state.settings.auth == "none"
        and request.method in SAFE_METHODS
        and not public
    ):
        new_cookie, session = await state.store.add(state.shared_session)
    if session is None:
        VISITOR.set(Visitor())
        if public:
            return await handler(request)
        if api:
            return web.json_response({"error": "login required"}, status=401)
        if request.method in SAFE_METHODS:
            raise web.HTTPSeeOther(
                "/login" + ("" if request.path == "/" else "?next=" + quote(request.path_qs))
            )
        return refuse(401, "login required (or your session has ended): reload the page")
    request[SESSION] = session
    if request.method not in SAFE_METHODS and request.path != "/login":
        token = (await request.post()).get("csrf_token")
        if not isinstance(token, str) or not hmac.compare_digest(
            token.encode("utf-8", "surrogateescape"), session.csrf.encode()
        ):
            return refuse(403, "the form's token is missing or not this session's: reload the page")
    VISITOR.set(Visitor(session.csrf, session.principal, logged_in=state.settings.auth != "none"))
    if new_cookie is None:
        return await handler(request)
    try:
        response = await handler(request)
    except web.HTTPException as e:
        state.set_cookie(e, state.session_cookie, new_cookie)
        raise
    state.set_cookie(response, state.session_cookie, new_cookie)
    return response


def _login_page(
    request: web.Request,
    status: int = 200,
    error: str | None = None,
    headers: dict[str, str] | None = None,
    next_path: str | None = None,
) -> web.Response:
    state = request.app[STATE]
    token, nonce = state.login_token.issue(request.cookies.get(state.login_cookie))
    fields = hidden("next", local_path(next_path or request.query.get("next")))
    if state.settings.auth == "sasl":
        fields += field("username", "User name")
    fields += field("password", "Password", kind="password")
    what = (
        "your Kafka user name and password (SASL " + state.settings.sasl_mechanism + ")"
        if state.settings.auth == "sasl"
        else "the console's password"
    )
    notice = "Your session has ended: log in again." if request.query.get("ended") else None
    body = f"<p>Log in with {what}.</p>" + form("/login", fields, "Log in", "login", token=token)
    response = web.Response(
        status=status,
        text=page("Log in", body, "", notice, error, nav=False),
        content_type="text/html",
        headers=headers,
    )
    state.set_cookie(response, state.login_cookie, nonce, max_age=3600)
    return response


async def login_form(request: web.Request) -> web.StreamResponse:
    state = request.app[STATE]
    if state.settings.auth == "none" or SESSION in request:
        raise web.HTTPSeeOther(local_path(request.query.get("next")))
    return _login_page(request)


async def login(request: web.Request) -> web.StreamResponse:
    state = request.app[STATE]
    if state.settings.auth == "none":
        raise web.HTTPSeeOther("/")
    data = await request.post()
    token = data.get("csrf_token")
    if not isinstance(token, str) or not state.login_token.check(
        token, request.cookies.get(state.login_cookie)
    ):
        return refuse(
            403, "this login form has expired or was not shown to this browser: reload it"
        )
    next_path = local_path(str(data.get("next", "/")))
    peer = request.remote or "-"
    wait = state.throttle.admit(peer)
    if wait > 0:
        _event(logging.WARNING, "console.login_throttled", peer=peer)
        return _login_page(
            request,
            429,
            f"Too many login attempts from your address: try again in {wait:.0f} s.",
            {"Retry-After": str(max(1, round(wait)))},
            next_path,
        )
    if not state.throttle.begin():
        _event(logging.WARNING, "console.login_busy", peer=peer)
        return _login_page(
            request,
            503,
            "Too many logins are in progress: try again in a moment.",
            {"Retry-After": "1"},
            next_path,
        )
    username = str(data.get("username", "")) if state.settings.auth == "sasl" else ""
    password = str(data.get("password", ""))
    try:
        session = await _attempt(state, username, password, peer)
    except UNREACHABLE as e:
        return unreachable_page(request, e)
    finally:
        state.throttle.end()
    if session is None:
        return _login_page(request, 401, FAILED, next_path=next_path)
    old = request.get(SESSION)
    if old is not None:  # a new login replaces the browser's session
        await state.store.end(old)
    try:
        cookie, _ = await state.store.add(lambda now: _stamp(session, now))
    except SessionsFull:
        if session.owns_client:
            await session.admin.close()
        _event(logging.WARNING, "console.sessions_full", peer=peer)
        return _login_page(
            request,
            503,
            "The console holds as many sessions as it may: try again later.",
            next_path=next_path,
        )
    _event(
        logging.INFO,
        "console.login",
        user=printable(username),
        peer=peer,
        principal=printable(session.principal),
    )
    response = _see_other(next_path)
    state.set_cookie(response, state.session_cookie, cookie)
    state.del_cookie(response, state.login_cookie)
    return response


def _see_other(location: str) -> web.Response:
    return web.Response(status=303, headers={"Location": location})


def _stamp(session: Session, now: float) -> Session:
    session.created = session.last_seen = now
    return session


def _plausible(username: str, password: str) -> bool:
    return (
        0 < len(username) <= MAX_USERNAME
        and 0 < len(password) <= MAX_PASSWORD
        and printable(username) == username
    )


async def _attempt(state: ConsoleState, username: str, password: str, peer: str) -> Session | None:
    """The session for these credentials, or None when they are refused."""
    settings = state.settings
    if settings.auth == "password":
        assert settings.password is not None
        if not same_secret(password, settings.password):
            _event(
                logging.WARNING, "console.login_failed", peer=peer, reason="wrong console password"
            )
            return None
        return state.shared_session(0.0)
    if not _plausible(username, password):
        _event(
            logging.WARNING,
            "console.login_failed",
            user=printable(username[:MAX_USERNAME]),
            peer=peer,
            reason="not a user name and password",
        )
        return None
    config = {**settings.client_config, "sasl.username": username, "sasl.password": password}
    admin = AIOAdminClient(config)
    try:
        await asyncio.wait_for(admin.start(), LOGIN_TIMEOUT_S)
    except UNREACHABLE:
        await admin.close()
        raise
    except KafkaError as e:
        await admin.close()
        _event(
            logging.WARNING,
            "console.login_failed",
            user=printable(username),
            peer=peer,
            reason=e.name,
        )
        return None
    except BaseException:
        await admin.close()
        raise
    return Session(f"User:{username}", admin, config, owns_client=True, created=0.0, last_seen=0.0)


async def logout(request: web.Request) -> web.StreamResponse:
    state = request.app[STATE]
    session = request[SESSION]
    await state.store.end(session)
    response = _see_other("/login" if state.settings.auth != "none" else "/")
    state.del_cookie(response, state.session_cookie)
    return response
