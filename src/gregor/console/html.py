"""The console's page shell and the small HTML helpers its pages share (escaped by default).

Every form posts with the CSRF token of the visitor's session. The token and whom the visitor
acts as are set for each request in ``VISITOR`` (a context variable: each request runs in its
own task), so ``form`` and ``page`` do not have to be handed them by every page."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from html import escape
from typing import Any

NAV = (
    ("/", "Overview"),
    ("/topics", "Topics"),
    ("/groups", "Consumer groups"),
    ("/tables", "Tables"),
    ("/acls", "ACLs"),
    ("/users", "Users"),
)
#: The nav link to the Schemas pages, shown when ``SCHEMAS_NAV`` is set for the request (the
#: console has a schema registry).
SCHEMAS_LINK = ("/schemas", "Schemas")
SCHEMAS_NAV: ContextVar[bool] = ContextVar("console_schemas_nav", default=False)


@dataclass(frozen=True)
class Visitor:
    csrf: str = ""
    #: Whom the console acts as for this visitor ("" before login).
    principal: str = ""
    #: The visitor logged in (and may log out).
    logged_in: bool = False


VISITOR: ContextVar[Visitor | None] = ContextVar("console_visitor", default=None)
NOBODY = Visitor()


def visitor() -> Visitor:
    return VISITOR.get() or NOBODY


def page(
    title: str,
    body: str,
    active: str = "/",
    message: str | None = None,
    error: str | None = None,
    nav: bool = True,
) -> str:
    who_is = visitor()
    links = (
        "".join(
            f'<a href="{href}" class="{"active" if href == active else ""}">{escape(label)}</a>'
            for href, label in (*NAV, *((SCHEMAS_LINK,) if SCHEMAS_NAV.get() else ()))
        )
        if nav
        else ""
    )
    who = ""
    if who_is.principal:
        out = form("/logout", "", "Log out", "logout") if who_is.logged_in else ""
        who = (
            f"<span class='who'><span id='principal'>{escape(who_is.principal)}</span>{out}</span>"
        )
    notice = ""
    if message:
        notice += f'<p class="notice" id="message">{escape(message)}</p>'
    if error:
        notice += f'<p class="error" id="error">{escape(error)}</p>'
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>{escape(title)} · Gregor console</title>"
        "<link rel='stylesheet' href='/static/console.css'>"
        "<script src='/static/chart.js'></script><script src='/static/console.js' defer></script>"
        f"</head><body><header><span class='brand'>Gregor</span><nav>{links}</nav>{who}</header>"
        f"<main><h1>{escape(title)}</h1>{notice}{body}</main></body></html>"
    )


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], table_id: str = "") -> str:
    """Cells are escaped unless they are ``Raw``."""
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>"
        + "".join(
            f"<td>{cell if isinstance(cell, Raw) else escape(str(cell))}</td>" for cell in row
        )
        + "</tr>"
        for row in rows
    )
    ident = f" id='{escape(table_id)}'" if table_id else ""
    return f"<table{ident}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


class Raw(str):
    """Markup that is already safe (built by these helpers)."""


def link(href: str, text: str, link_id: str = "") -> Raw:
    ident = f" id='{escape(link_id)}'" if link_id else ""
    return Raw(f"<a{ident} href='{escape(href, quote=True)}'>{escape(text)}</a>")


def hidden(name: str, value: str) -> str:
    return f"<input type='hidden' name='{escape(name, quote=True)}' value='{escape(value, quote=True)}'>"


def form(action: str, fields: str, button: str, form_id: str = "", token: str | None = None) -> str:
    """A form that posts to ``action`` with the visitor's CSRF token (or ``token``)."""
    ident = f" id='{escape(form_id)}'" if form_id else ""
    return (
        f"<form method='post' action='{escape(action, quote=True)}'{ident}>"
        f"{hidden('csrf_token', visitor().csrf if token is None else token)}{fields}"
        f"<button type='submit'>{escape(button)}</button></form>"
    )


def field(
    name: str, label: str, value: str = "", kind: str = "text", options: Sequence[str] = ()
) -> str:
    if options:
        opts = "".join(
            f"<option value='{escape(o, quote=True)}'{' selected' if o == value else ''}>{escape(o)}</option>"
            for o in options
        )
        control = f"<select name='{escape(name)}'>{opts}</select>"
    elif kind == "textarea":
        control = f"<textarea name='{escape(name)}' rows='3'>{escape(value)}</textarea>"
    else:
        control = f"<input type='{kind}' name='{escape(name)}' value='{escape(value, quote=True)}'>"
    return f"<label>{escape(label)} {control}</label>"
