"""What every page of the console shares: the session's Kafka client and settings, the answer
to a form's post (a redirect back with what happened), the page response, and the parsers of
its forms (``key=value`` lines, the confirmed plan of a destructive action)."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

from aiohttp import web

from gregor.client import AIOAdminClient
from gregor.console.html import form, hidden, page
from gregor.console.state import SESSION


def session_admin(request: web.Request) -> AIOAdminClient:
    admin: AIOAdminClient = request[SESSION].admin
    return admin


def session_config(request: web.Request) -> dict[str, Any]:
    config: dict[str, Any] = request[SESSION].client_config
    return config


def back(location: str, message: str | None = None, error: str | None = None) -> web.HTTPSeeOther:
    """Back to a page after a form's post (303: the browser gets it), with what happened."""
    query = urlencode({k: v for k, v in (("message", message), ("error", error)) if v})
    return web.HTTPSeeOther(location + ("?" + query if query else ""))


def respond(
    request: web.Request, title: str, body: str, active: str, error: str | None = None
) -> web.Response:
    return web.Response(
        text=page(
            title, body, active, request.query.get("message"), error or request.query.get("error")
        ),
        content_type="text/html",
    )


def kv_lines(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        if line.strip():
            key, sep, value = line.partition("=")
            if not sep:
                raise ValueError(f"{line!r} is not key=value")
            out[key.strip()] = value.strip()
    return out


def confirmed_plan(data: Any) -> dict[int, int] | None:
    """The confirmed plan (``{"partition": offset}`` in JSON), or None when there is none."""
    text = data.get("plan")
    if text is None or data.get("confirmed") != "yes":
        return None
    try:
        plan = json.loads(str(text))
        out = {int(k): int(v) for k, v in plan.items()}
    except (ValueError, TypeError, AttributeError):
        raise ValueError("the confirmed plan is not readable") from None
    if not out or any(p < 0 or o < 0 for p, o in out.items()):
        raise ValueError("the confirmed plan is not readable")
    return out


def confirm_form(
    action: str, values: dict[str, str], plan: dict[int, int], button: str, form_id: str
) -> str:
    fields = "".join(hidden(k, v) for k, v in values.items())
    fields += hidden("plan", json.dumps({str(p): o for p, o in sorted(plan.items())})) + hidden(
        "confirmed", "yes"
    )
    return form(action, fields, button, form_id)
