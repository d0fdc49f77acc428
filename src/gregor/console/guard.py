"""What every request passes before a page sees it, and what every answer carries.

- ``allowed_host``: the ``Host`` header must name one of the settings' ``allowed_hosts``. A
  page on another site whose name an attacker has rebound to this console's address (DNS
  rebinding) sends its own name, so it is refused before anything is read or done.
- ``same_origin``: a request that may change something (any method but GET, HEAD, OPTIONS)
  must come from the console's own pages: its ``Origin`` (or, without one, its ``Referer``)
  must be this scheme, host and port. The CSRF token of the session (``console.auth``) is
  checked besides.
- ``broker_errors``: a broker that cannot be reached is a page that says so with a retry
  link (503; JSON for ``/api/``), and any other error the cluster answers (an ACL's refusal
  among them) a page with that error, never a bare 500.
- ``security_headers`` (on every answer, static files and errors included): no framing
  (``X-Frame-Options: DENY``, CSP ``frame-ancestors 'none'``), scripts, styles and requests
  from the console itself only, forms posting only to it, no MIME sniffing, referrers only
  to itself, and pages not cached.
"""

from __future__ import annotations

from html import escape
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web

from gregor.client.errors import KafkaConnectionError, KafkaTimeoutError, NoBrokersAvailableError
from gregor.console.html import link, page
from gregor.console.settings import host_name
from gregor.console.state import STATE
from gregor.protocol.errors import KafkaError

SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
UNREACHABLE = (KafkaConnectionError, NoBrokersAvailableError, KafkaTimeoutError, TimeoutError)


def refuse(status: int, text: str) -> web.Response:
    return web.Response(status=status, text=text + "\n")


@web.middleware
async def allowed_host(request: web.Request, handler: Any) -> web.StreamResponse:
    allowed = request.app[STATE].settings.allowed_hosts
    if host_name(request.headers.get("Host", "")) not in allowed:
        return refuse(403, "this is not an allowed host name for the console (see --allowed-host)")
    return await handler(request)


@web.middleware
async def same_origin(request: web.Request, handler: Any) -> web.StreamResponse:
    if request.method not in SAFE_METHODS:
        own = f"{request.app[STATE].settings.scheme}://{request.host}".lower()
        origin = request.headers.get("Origin")
        if origin is None:
            referer = urlsplit(request.headers.get("Referer", ""))
            origin = f"{referer.scheme}://{referer.netloc}" if referer.netloc else ""
        if origin.lower() != own:
            return refuse(403, "cross-origin requests that change something are refused")
    return await handler(request)


def why(e: BaseException) -> str:
    """A cluster's error as a visitor should see it: its Kafka name and its message."""
    if isinstance(e, KafkaError):
        text = str(e)
        return e.name if text in ("", e.name) else f"{e.name}: {text}"
    return str(e) or type(e).__name__


def unreachable_page(request: web.Request, error: BaseException) -> web.Response:
    servers = request.app[STATE].settings.client_config.get("bootstrap.servers", "")
    retry = request.path_qs if request.method == "GET" else "/"
    body = (
        f"<p id='unreachable'>The console cannot reach the cluster at <code>{escape(str(servers))}</code>: "
        f"{escape(why(error))}.</p><p>Check that the brokers run and that this host can reach them, then "
        f"{link(retry, 'retry', 'retry')}.</p>"
    )
    return web.Response(
        status=503,
        text=page("Broker unreachable", body, ""),
        content_type="text/html",
        headers={"Retry-After": "5"},
    )


@web.middleware
async def broker_errors(request: web.Request, handler: Any) -> web.StreamResponse:
    api = request.path.startswith("/api/")
    try:
        return await handler(request)
    except UNREACHABLE as e:
        if api:
            return web.json_response({"error": "broker unreachable", "detail": why(e)}, status=503)
        return unreachable_page(request, e)
    except KafkaError as e:
        status = 403 if e.name.endswith("AUTHORIZATION_FAILED") else 502
        if api:
            return web.json_response({"error": why(e)}, status=status)
        body = f"<p id='refused'>The cluster answered: {escape(why(e))}.</p>"
        return web.Response(
            status=status, text=page("The cluster refused", body, ""), content_type="text/html"
        )


async def security_headers(request: web.Request, response: web.StreamResponse) -> None:
    h = response.headers
    h["X-Frame-Options"] = "DENY"
    h["Content-Security-Policy"] = CSP
    h["X-Content-Type-Options"] = "nosniff"
    h["Referrer-Policy"] = "same-origin"
    h["Cross-Origin-Opener-Policy"] = "same-origin"
    h["Cross-Origin-Resource-Policy"] = "same-origin"
    if not request.path.startswith("/static/"):
        h["Cache-Control"] = "no-store"
