"""Enforcing the registry's ACLs: each endpoint's operation, checked before its handler.

Theory of operation. With ``--authorizer acl`` (Confluent's
``confluent.schema.registry.authorizer.class`` set to its ACL authorizer) a middleware after
the basic-auth one looks up the matched route in ``ENDPOINTS`` (from the operation table of
Confluent's Schema Registry security plugin, extended to the endpoints that table leaves out)
and asks the ``RegistryAuthorizer`` whether the request's principal may do that operation on
that subject (or on the registry). A refusal is Confluent's 403 answer, error code 40301,
``User is denied operation <op> on Subject: <name>``; the handler never runs.

Three kinds of endpoint are not one operation on one subject. A schema by id needs SUBJECT_READ
on at least one subject using the id (Confluent's SCHEMA_READ). Listings (``GET /subjects``,
``GET /schemas``, the subjects and versions of an id) answer only what the principal may read
rather than 403, as Confluent does; GLOBAL_SUBJECTS_READ lists every subject. ``GET /`` and
``GET /schemas/types`` reveal nothing and need only a login. A route missing from the table is
refused to everyone but super users (fail closed: a new endpoint must be given its operation).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from aiohttp import web
from aiohttp.typedefs import Middleware

from gregor.schema_registry.acls import Operation, RegistryAuthorizer
from gregor.schema_registry.auth import PRINCIPAL
from gregor.schema_registry.http import REGISTRY, VISIBLE, Handler, error_answer
from gregor.security.log_text import printable

log = logging.getLogger("gregor.schema_registry")

DENIED = 40301
#: Needs only a login.
OPEN = "open"
#: SUBJECT_READ on one of the subjects using the id in the path.
SCHEMA_READ = "schema_read"
#: Answered filtered to the subjects the principal may read.
FILTERED = "filtered"

_O = Operation
#: (method, route) -> the operation it needs, or OPEN / SCHEMA_READ / FILTERED.
ENDPOINTS: Mapping[tuple[str, str], Operation | str] = {
    ("GET", "/"): OPEN,
    ("GET", "/schemas/types"): OPEN,
    ("GET", "/schemas"): FILTERED,
    ("GET", "/schemas/ids/{id}"): SCHEMA_READ,
    ("GET", "/schemas/ids/{id}/schema"): SCHEMA_READ,
    ("GET", "/schemas/ids/{id}/subjects"): FILTERED,
    ("GET", "/schemas/ids/{id}/versions"): FILTERED,
    ("GET", "/subjects"): FILTERED,
    ("GET", "/subjects/{subject}/versions"): _O.SUBJECT_READ,
    ("GET", "/subjects/{subject}/versions/{version}"): _O.SUBJECT_READ,
    ("GET", "/subjects/{subject}/versions/{version}/schema"): _O.SUBJECT_READ,
    ("GET", "/subjects/{subject}/versions/{version}/referencedby"): _O.SUBJECT_READ,
    ("POST", "/subjects/{subject}"): _O.SUBJECT_READ,
    ("POST", "/subjects/{subject}/versions"): _O.SUBJECT_WRITE,
    ("POST", "/compatibility/subjects/{subject}/versions"): _O.SUBJECT_WRITE,
    ("POST", "/compatibility/subjects/{subject}/versions/{version}"): _O.SUBJECT_WRITE,
    ("DELETE", "/subjects/{subject}"): _O.SUBJECT_DELETE,
    ("DELETE", "/subjects/{subject}/versions/{version}"): _O.SUBJECT_DELETE,
    ("GET", "/config/{subject}"): _O.SUBJECT_COMPATIBILITY_READ,
    ("PUT", "/config/{subject}"): _O.SUBJECT_COMPATIBILITY_WRITE,
    ("DELETE", "/config/{subject}"): _O.SUBJECT_COMPATIBILITY_WRITE,
    ("GET", "/mode/{subject}"): _O.SUBJECT_COMPATIBILITY_READ,
    ("PUT", "/mode/{subject}"): _O.SUBJECT_COMPATIBILITY_WRITE,
    ("DELETE", "/mode/{subject}"): _O.SUBJECT_COMPATIBILITY_WRITE,
    ("GET", "/config"): _O.GLOBAL_COMPATIBILITY_READ,
    ("PUT", "/config"): _O.GLOBAL_COMPATIBILITY_WRITE,
    ("DELETE", "/config"): _O.GLOBAL_COMPATIBILITY_WRITE,
    ("GET", "/mode"): _O.GLOBAL_COMPATIBILITY_READ,
    ("PUT", "/mode"): _O.GLOBAL_COMPATIBILITY_WRITE,
    ("DELETE", "/mode"): _O.GLOBAL_COMPATIBILITY_WRITE,
    ("GET", "/contexts"): _O.GLOBAL_SUBJECTS_READ,
}


def denied(operation: Operation, subject: str | None) -> web.Response:
    on = f"Subject: {subject}" if subject is not None else "Registry"
    return error_answer(403, DENIED, f"User is denied operation {operation.value} on {on}")


def _route(request: web.Request) -> tuple[str, str] | None:
    resource = request.match_info.route.resource
    if resource is None:
        return None  # no route: the handler answers 404/405
    method = "GET" if request.method == "HEAD" else request.method
    return method, resource.canonical


def acl_middleware(authorizer: RegistryAuthorizer) -> Middleware:
    @web.middleware
    async def authorize(request: web.Request, handler: Handler) -> web.StreamResponse:
        route = _route(request)
        if route is None:
            return await handler(request)
        principal = request.get(PRINCIPAL)
        if principal is None:  # no login to authorize: refuse (the server requires one)
            return error_answer(401, 401, "Unauthorized")
        need = ENDPOINTS.get(route)
        if principal in authorizer.super_users or need == OPEN:
            return await handler(request)
        subject = request.match_info.get("subject")
        if need is None:
            log.warning("schema registry: %s %s has no operation: refused", *route)
            return error_answer(403, DENIED, "User is denied this operation")
        if need == FILTERED:
            if not (
                route == ("GET", "/subjects")
                and authorizer.authorize(principal, Operation.GLOBAL_SUBJECTS_READ)
            ):
                request[VISIBLE] = lambda s: authorizer.authorize(
                    principal, Operation.SUBJECT_READ, s
                )
            return await handler(request)
        if need == SCHEMA_READ:
            raw = request.match_info.get("id", "")
            users = request.app[REGISTRY].state.id_users.get(int(raw)) if raw.isdigit() else None
            if users and not authorizer.readable(principal, {s for s, _ in users}):
                return _refuse(principal, Operation.SUBJECT_READ, sorted(users)[0][0])
            return await handler(request)
        assert isinstance(need, Operation)
        if not authorizer.authorize(principal, need, None if need.is_global else subject):
            return _refuse(principal, need, subject)
        return await handler(request)

    return authorize


def _refuse(principal: str, operation: Operation, subject: str | None) -> web.Response:
    log.info(
        "schema registry: %s denied %s on %s",
        printable(principal),
        operation.name,
        f"subject {printable(subject)}" if subject is not None else "the registry",
    )
    return denied(operation, None if operation.is_global else subject)
