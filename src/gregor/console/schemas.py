"""The Schemas pages, read-only: the subjects of a Confluent-compatible schema registry with their
latest versions and compatibility levels, a subject's versions, config and mode, one version
pretty-printed with its references, and a line diff of two versions.

The registry is ``ConsoleSettings.schema_registry_url`` (``gregor console --schema-registry``,
``$GREGOR_SCHEMA_REGISTRY_URL``, or the registry a broker serves beside the console); without
one the Schemas link is not in the nav and ``/schemas`` says how to set it. The pages ask the
registry through its REST API with the project's client (``RegistryClient``, run in a thread
by ``asyncio.to_thread``): it already decodes the registry's ``error_code`` and ``message``
and quotes subjects as ``gregor schemas`` does, and each page makes only a few small calls. With
``--auth sasl`` each call carries the visitor's own user name and password (kept only in their
session's client settings) as HTTP basic auth, so the registry's authentication and subject
ACLs decide what each visitor sees; otherwise no credentials are sent.

Subjects are escaped in HTML and quoted in URLs (``/`` included). A subject that is a dot
segment (``.`` or ``..``), which browsers fold out of a path, is linked as
``/schemas/_?subject=NAME``: the ``subject`` query parameter names the subject when present.
The registry's refusals are pages: an unknown subject or version 404 with its message, 401 or
403 a page saying it refused, unreachable a 503 page with a retry link, an answer without the
fields of Confluent's API a 502 page; a ``from``/``to`` or version that is not a positive
integer or ``latest`` is a 400 page.
"""

from __future__ import annotations

import asyncio
import difflib
import json
from collections.abc import Callable
from html import escape
from typing import Any, TypeVar
from urllib.parse import quote, urlencode

from aiohttp import web

from gregor.client.schema_registry import RegistryClient, RegistryHTTPError, RegistryUnreachable
from gregor.console.html import SCHEMAS_NAV, link, page, table
from gregor.console.pages import respond, session_config
from gregor.console.state import STATE

T = TypeVar("T")
ACTIVE = "/schemas"
#: Requests to the registry at once for one page (each is a thread and a connection).
CONCURRENT_CALLS = 8
#: Subjects browsers fold out of a path as dot segments.
DOT_SEGMENTS = (".", "..")


class BadRequest(ValueError):
    """The visitor's request names no version (a 400 page)."""


class RegistryPage(Exception):
    """An answer of the registry that ends a page with the console's own error page."""

    def __init__(self, status: int, title: str, text: str) -> None:
        super().__init__(text)
        self.status = status
        self.title = title
        self.text = text


@web.middleware
async def schemas_nav(request: web.Request, handler: Any) -> web.StreamResponse:
    """The nav shows Schemas only when the console has a registry."""
    SCHEMAS_NAV.set(request.app[STATE].settings.schema_registry_url is not None)
    return await handler(request)


def subject_href(subject: str, tail: str = "", query: dict[str, str] | None = None) -> str:
    params = dict(query or {})
    if subject in DOT_SEGMENTS:
        path, params = "/schemas/_", {"subject": subject, **params}
    else:
        path = "/schemas/" + quote(subject, safe="")
    return path + tail + ("?" + urlencode(params) if params else "")


def _subject(request: web.Request) -> str:
    return request.query.get("subject", request.match_info["subject"])


def _registry(request: web.Request) -> RegistryClient | None:
    settings = request.app[STATE].settings
    if settings.schema_registry_url is None:
        return None
    if settings.auth == "sasl":
        config = session_config(request)
        return RegistryClient(
            settings.schema_registry_url,
            str(config.get("sasl.username", "")),
            str(config.get("sasl.password", "")),
            timeout_s=30.0,
        )
    return RegistryClient(settings.schema_registry_url, timeout_s=30.0)


async def _ask(registry: RegistryClient, path: str, **query: str | bool) -> Any:
    """One GET; the registry's refusals and silence as ``RegistryPage``."""
    try:
        return await asyncio.to_thread(registry.call, "GET", path, None, **query)
    except RegistryUnreachable as e:
        raise RegistryPage(503, "Schema registry unreachable", str(e)) from None
    except RegistryHTTPError as e:
        if e.status == 404:
            raise RegistryPage(404, "Not found", f"The schema registry answered: {e}") from None
        if e.status in (401, 403):
            raise RegistryPage(
                403, "The schema registry refused", f"The schema registry refused: {e}"
            ) from None
        raise RegistryPage(
            502, "The schema registry failed", f"The schema registry answered: {e}"
        ) from None


async def _maybe(registry: RegistryClient, path: str, **query: str | bool) -> Any:
    """A GET whose refusal (no ACL for it) is shown in place of its answer."""
    try:
        return await _ask(registry, path, **query)
    except RegistryPage as e:
        if e.status == 503:
            raise
        return None


def _handled(
    fn: Callable[[web.Request, RegistryClient], Any],
) -> Callable[[web.Request], Any]:
    async def handler(request: web.Request) -> web.Response:
        registry = _registry(request)
        if registry is None:
            return _no_registry(request, 200 if request.path == ACTIVE else 404)
        try:
            response: web.Response = await fn(request, registry)
            return response
        except RegistryPage as e:
            body = f"<p id='registry-error'>{escape(e.text)}</p>"
            if e.status == 503:
                body += (
                    f"<p>Check that it runs, then {link(request.path_qs, 'retry', 'retry')}.</p>"
                )
            return web.Response(
                status=e.status, text=page(e.title, body, ACTIVE), content_type="text/html"
            )
        except BadRequest as e:
            return web.Response(
                status=400,
                text=page("Bad request", f"<p id='bad-request'>{escape(str(e))}</p>", ACTIVE),
                content_type="text/html",
            )
        except (KeyError, TypeError, ValueError, AttributeError):
            # an answer without the fields Confluent's API gives: not a page of ours to fail
            body = (
                "<p id='registry-error'>The schema registry answered something that is not "
                "Confluent's Schema Registry API.</p>"
            )
            return web.Response(
                status=502,
                text=page("The schema registry failed", body, ACTIVE),
                content_type="text/html",
            )

    handler.__name__ = fn.__name__
    handler.__doc__ = fn.__doc__
    return handler


def _no_registry(request: web.Request, status: int) -> web.Response:
    body = (
        "<p id='no-registry'>No schema registry is configured. Start the console with "
        "<code>--schema-registry URL</code> (or set <code>GREGOR_SCHEMA_REGISTRY_URL</code>); "
        "beside a broker (<code>console.listener</code>) it uses the registry the broker serves "
        "(<code>schema.registry.listener</code>).</p>"
    )
    return web.Response(status=status, text=page("Schemas", body, ACTIVE), content_type="text/html")


def _version(text: str) -> str:
    """A version as the registry takes it: a positive integer or ``latest``."""
    value = text.strip()
    if value == "latest":
        return value
    if value.isdigit() and value.isascii() and 0 < int(value) < 2**31:
        return str(int(value))
    raise BadRequest(f"{text!r} is not a version (a positive integer or latest)")


def schema_type(answer: dict[str, Any]) -> str:
    return str(answer.get("schemaType") or "AVRO")


def pretty(answer: dict[str, Any]) -> str:
    """Avro and JSON schemas indented (their keys in the order registered); Protobuf as
    registered."""
    text = str(answer.get("schema", ""))
    if schema_type(answer) in ("AVRO", "JSON"):
        try:
            return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
        except ValueError:
            return text
    return text


def _references(refs: Any) -> str:
    if not refs:
        return "-"
    return ", ".join(f"{r.get('name')} → {r.get('subject')} v{r.get('version')}" for r in refs)


def _references_table(subject_refs: Any) -> str:
    rows = [
        (
            r.get("name", ""),
            link(subject_href(str(r.get("subject", ""))), str(r.get("subject", ""))),
            r.get("version", ""),
        )
        for r in subject_refs or []
    ]
    if not rows:
        return "<p id='no-references'>No references.</p>"
    return table(["Name", "Subject", "Version"], rows, "references")


async def _compatibility(registry: RegistryClient, subject: str, global_level: str) -> str:
    got = await _maybe(registry, f"/config/{RegistryClient.quote(subject)}")
    if isinstance(got, dict) and got.get("compatibilityLevel"):
        return str(got["compatibilityLevel"])
    return global_level


async def _subjects(request: web.Request, registry: RegistryClient) -> web.Response:
    subjects = await _ask(registry, "/subjects")
    top = await _maybe(registry, "/config")
    global_level = (
        str(top["compatibilityLevel"]) + " (global)"
        if isinstance(top, dict) and top.get("compatibilityLevel")
        else "-"
    )

    calls = asyncio.Semaphore(CONCURRENT_CALLS)

    async def row(subject: str) -> tuple[Any, ...] | None:
        async with calls:
            latest = await _maybe(
                registry, f"/subjects/{RegistryClient.quote(subject)}/versions/latest"
            )
            if not isinstance(latest, dict):
                return None  # deleted since the list, or not readable
            level = await _compatibility(registry, subject, global_level)
        return (
            link(subject_href(subject), subject),
            link(subject_href(subject, f"/versions/{latest['version']}"), str(latest["version"])),
            schema_type(latest),
            latest["id"],
            level,
        )

    rows = [r for r in await asyncio.gather(*(row(str(s)) for s in subjects)) if r is not None]
    body = table(
        ["Subject", "Latest version", "Type", "Schema id", "Compatibility"], rows, "subjects"
    )
    if not rows:
        body = "<p id='no-subjects'>No subjects (or none you may read).</p>"
    return respond(request, "Schemas", body, ACTIVE)


async def _subject_page(request: web.Request, registry: RegistryClient) -> web.Response:
    subject = _subject(request)
    q = RegistryClient.quote(subject)
    versions = await _ask(registry, f"/subjects/{q}/versions")
    calls = asyncio.Semaphore(CONCURRENT_CALLS)

    async def one(v: int) -> Any:
        async with calls:
            return await _ask(registry, f"/subjects/{q}/versions/{v}")

    answers = await asyncio.gather(*(one(int(v)) for v in versions))
    config = await _maybe(registry, f"/config/{q}", defaultToGlobal=True)
    mode = await _maybe(registry, f"/mode/{q}", defaultToGlobal=True)
    rows = [
        (
            link(subject_href(subject, f"/versions/{a['version']}"), str(a["version"])),
            a["id"],
            schema_type(a),
            _references(a.get("references")),
        )
        for a in answers
    ]
    level = config.get("compatibilityLevel") if isinstance(config, dict) else None
    mode_name = mode.get("mode") if isinstance(mode, dict) else None
    body = (
        f"<p>Compatibility <b id='compatibility'>{escape(str(level or 'not readable'))}</b>, "
        f"mode <b id='mode'>{escape(str(mode_name or 'not readable'))}</b></p>"
        + table(["Version", "Schema id", "Type", "References"], rows, "versions")
    )
    return respond(request, f"Subject {subject}", body, ACTIVE)


async def _version_page(request: web.Request, registry: RegistryClient) -> web.Response:
    subject = _subject(request)
    version = _version(request.match_info["version"])
    q = RegistryClient.quote(subject)
    answer = await _ask(registry, f"/subjects/{q}/versions/{version}")
    versions = await _ask(registry, f"/subjects/{q}/versions")
    this = int(answer["version"])
    others = [int(v) for v in versions if int(v) != this]
    diff_links = (
        "<p id='diff-links'>Diff against "
        + ", ".join(
            link(subject_href(subject, "/diff", {"from": str(v), "to": str(this)}), f"version {v}")
            for v in others
        )
        + "</p>"
        if others
        else ""
    )
    hidden_subject = (
        f"<input type='hidden' name='subject' value='{escape(subject, quote=True)}'>"
        if subject in DOT_SEGMENTS
        else ""
    )
    options = "".join(
        f"<option value='{v}'{' selected' if v == this else ''}>{v}</option>"
        for v in [int(v) for v in versions]
    )
    diff_form = (
        f"<form method='get' action='{escape(subject_href(subject, '/diff').split('?')[0], quote=True)}'"
        f" id='diff-form'>{hidden_subject}<label>From <select name='from'>{options}</select></label>"
        f"<input type='hidden' name='to' value='{this}'><button type='submit'>Diff</button></form>"
    )
    body = (
        f"<p>Schema id <b id='schema-id'>{escape(str(answer['id']))}</b>, type "
        f"<b id='schema-type'>{escape(schema_type(answer))}</b>, "
        f"{link(subject_href(subject), 'all versions', 'subject-link')}</p>"
        f"<pre id='schema'>{escape(pretty(answer))}</pre>"
        "<h2>References</h2>"
        + _references_table(answer.get("references"))
        + "<h2>Diff</h2>"
        + diff_links
        + diff_form
    )
    return respond(request, f"{subject} version {this}", body, ACTIVE)


def diff_lines(old: str, new: str) -> list[tuple[str, str]]:
    """(mark, line) for every line of the two texts: ``+`` added, ``-`` removed, `` `` both."""
    a, b = old.splitlines(), new.splitlines()
    out: list[tuple[str, str]] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            out += [(" ", line) for line in a[i1:i2]]
        else:
            out += [("-", line) for line in a[i1:i2]]
            out += [("+", line) for line in b[j1:j2]]
    return out


CLASSES = {"+": "added", "-": "removed", " ": "same"}


async def _diff_page(request: web.Request, registry: RegistryClient) -> web.Response:
    subject = _subject(request)
    if "from" not in request.query or "to" not in request.query:
        raise BadRequest("a diff needs from= and to= versions (positive integers or latest)")
    old_v, new_v = _version(request.query["from"]), _version(request.query["to"])
    q = RegistryClient.quote(subject)
    old, new = await asyncio.gather(
        _ask(registry, f"/subjects/{q}/versions/{old_v}"),
        _ask(registry, f"/subjects/{q}/versions/{new_v}"),
    )
    lines = diff_lines(pretty(old), pretty(new))
    rendered = "".join(
        f"<span class='{CLASSES[mark]}'>{escape(mark)} {escape(line)}</span>\n"
        for mark, line in lines
    )
    added = sum(1 for mark, _ in lines if mark == "+")
    removed = sum(1 for mark, _ in lines if mark == "-")
    ends = [
        link(subject_href(subject, f"/versions/{a['version']}"), f"version {a['version']}")
        for a in (old, new)
    ]
    body = (
        f"<p id='diff-summary'>From {ends[0]} to {ends[1]}: {added} lines added, "
        f"{removed} removed.</p><pre id='diff'>{rendered}</pre>"
    )
    return respond(request, f"{subject}: diff", body, ACTIVE)


subjects = _handled(_subjects)
subject = _handled(_subject_page)
version = _handled(_version_page)
diff = _handled(_diff_page)
