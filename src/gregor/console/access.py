"""Who may do what: the ACLs page (or a note that no authorizer is configured) and the users
page (the SCRAM credentials of each user, by mechanism and iterations)."""

from __future__ import annotations

from aiohttp import web

from gregor.console.guard import why
from gregor.console.html import table
from gregor.console.pages import respond, session_admin


async def acls(request: web.Request) -> web.Response:
    from gregor.client.acls import AclBindingFilter
    from gregor.protocol.errors import SecurityDisabledError

    try:
        found = await session_admin(request).describe_acls(AclBindingFilter())
    except SecurityDisabledError:
        return respond(
            request,
            "ACLs",
            "<p id='no-authorizer'>No authorizer is configured: every request is allowed.</p>",
            "/acls",
        )
    rows = [
        (
            b.resource_type.name,
            b.name,
            b.pattern_type.name,
            b.principal,
            b.host,
            b.operation.name,
            b.permission_type.name,
        )
        for b in found
    ]
    body = table(
        ["Resource", "Name", "Pattern", "Principal", "Host", "Operation", "Permission"],
        rows,
        "acls",
    )
    return respond(request, "ACLs", body, "/acls")


async def users(request: web.Request) -> web.Response:
    found = await session_admin(request).describe_user_scram_credentials()
    rows = [
        (
            u,
            ", ".join(f"{m.kafka_name} ({i} iterations)" for m, i in sorted(c))
            if not isinstance(c, Exception)
            else why(c),
        )
        for u, c in sorted(found.items())
    ]
    return respond(
        request,
        "Users (SCRAM credentials)",
        table(["User", "Credentials"], rows, "users"),
        "/users",
    )
