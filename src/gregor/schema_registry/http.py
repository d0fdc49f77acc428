"""The REST API: Confluent Schema Registry's endpoints on aiohttp.

Theory of operation. Each handler reads and checks its path, query and body, calls one
``SchemaRegistry`` operation and answers JSON with Confluent's content type
(``application/vnd.schemaregistry.v1+json``). Every failure is answered as Confluent answers
it, ``{"error_code": ..., "message": ...}``: the registry's own errors with their codes, an
unknown path or method as 404/405, a body that is not JSON as 400, a body over
``MAX_BODY_BYTES`` as 413, and anything unexpected as 500 with a generic message (the
traceback goes to the log, never to the client).

Inputs are hostile: bodies are bounded before they are read, subjects are checked (not empty,
no control characters, at most ``MAX_SUBJECT_LENGTH``), versions and ids are bounded integers,
query flags are ``true``/``false``, and every body field is checked for its type. Fields this
registry does not implement (``metadata``, ``ruleSet``) are accepted and ignored.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Middleware

from gregor.schema_registry import errors
from gregor.schema_registry.formats import SCHEMA_TYPES
from gregor.schema_registry.records import MAX_SUBJECT_LENGTH, parse_references
from gregor.schema_registry.registry import Candidate, SchemaRegistry
from gregor.schema_registry.state import SchemaVersion

log = logging.getLogger("gregor.schema_registry")

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
MAX_BODY_BYTES = 16 * 1024 * 1024
MAX_ID = 2**31 - 1
REGISTRY: web.AppKey[SchemaRegistry] = web.AppKey("schema_registry", SchemaRegistry)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
#: Set by the ACL authorizer: which subjects a listing may show (absent: all of them).
VISIBLE: web.RequestKey[Callable[[str], bool]] = web.RequestKey("visible_subjects")


def answer(data: Any, status: int = 200) -> web.Response:
    return web.Response(
        body=json.dumps(data, ensure_ascii=False).encode(),
        status=status,
        headers={"Content-Type": CONTENT_TYPE},
    )


def error_answer(status: int, code: int, message: str) -> web.Response:
    return answer({"error_code": code, "message": message}, status)


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except errors.RegistryError as e:
        return answer(e.body(), e.status)
    except web.HTTPRequestEntityTooLarge:
        return error_answer(413, 413, f"Request body larger than {MAX_BODY_BYTES} bytes")
    except web.HTTPException as e:
        if e.status >= 400:
            return error_answer(e.status, e.status, f"HTTP {e.status} {e.reason}")
        raise
    except Exception:
        log.exception("schema registry: unexpected error on %s %s", request.method, request.path)
        return error_answer(500, 500, "Internal Server Error")


# --- request parsing ---


def _flag(request: web.Request, name: str, default: bool = False) -> bool:
    raw = request.query.get(name)
    if raw is None:
        return default
    return raw.strip().lower() == "true"


def _int_query(request: web.Request, name: str, default: int) -> int:
    raw = request.query.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise errors.bad_request(
            f"the query parameter {name} is not an integer: {raw[:50]!r}"
        ) from None
    if not -1 <= value <= MAX_ID:
        raise errors.bad_request(f"the query parameter {name} is out of range: {value}")
    return value


def _page(request: web.Request, items: list[Any]) -> list[Any]:
    offset = max(_int_query(request, "offset", 0), 0)
    limit = _int_query(request, "limit", -1)
    return items[offset:] if limit < 0 else items[offset : offset + limit]


def _subject(request: web.Request) -> str:
    subject = request.match_info["subject"]
    if (
        not subject
        or len(subject) > MAX_SUBJECT_LENGTH
        or any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in subject)
    ):
        raise errors.RegistryError(
            422, 42208, "Invalid subject: empty, too long, or with control characters"
        )
    return subject


def _schema_id(request: web.Request) -> int:
    raw = request.match_info["id"]
    if not raw.isdigit() or len(raw) > 10 or not 0 < int(raw) <= MAX_ID:
        raise errors.schema_not_found(f"Schema {raw[:50]} not found")
    return int(raw)


async def _body(request: web.Request) -> dict[str, Any]:
    raw = await request.read()
    try:
        body = json.loads(raw) if raw else None
    except (ValueError, RecursionError) as e:
        raise errors.bad_request(f"the body is not JSON: {e}") from None
    if not isinstance(body, dict):
        raise errors.unprocessable("the body must be a JSON object")
    return body


def _candidate(body: dict[str, Any]) -> Candidate:
    schema = body.get("schema")
    if not isinstance(schema, str) or not schema.strip():
        raise errors.invalid_schema("the field 'schema' is required and must be a non-empty string")
    schema_type = body.get("schemaType", "AVRO")
    if schema_type is None:
        schema_type = "AVRO"
    if not isinstance(schema_type, str) or schema_type.upper() not in SCHEMA_TYPES:
        raise errors.invalid_schema(
            f"unknown schema type {schema_type!r} (known: {', '.join(SCHEMA_TYPES)})"
        )
    refs = parse_references(body.get("references"))
    if refs is None:
        raise errors.invalid_schema("'references' must be a list of {name, subject, version}")
    return Candidate(schema_type.upper(), schema, refs)


def _level(body: dict[str, Any]) -> Any:
    """A config body's level: ``compatibility`` (the API's name) or ``compatibilityLevel`` (what
    confluent-kafka's ``ServerConfig`` sends when built with ``compatibility_level``)."""
    return body.get("compatibility", body.get("compatibilityLevel"))


def _version_json(sv: SchemaVersion, schema: str) -> dict[str, Any]:
    out: dict[str, Any] = {"subject": sv.subject, "version": sv.version, "id": sv.id}
    if sv.schema_type != "AVRO":
        out["schemaType"] = sv.schema_type
    if sv.references:
        out["references"] = [r.to_json() for r in sv.references]
    out["schema"] = schema
    return out


def _visible(request: web.Request, subject: str) -> bool:
    visible = request.get(VISIBLE)
    return visible is None or visible(subject)


def _registry(request: web.Request) -> SchemaRegistry:
    return request.app[REGISTRY]


# --- handlers ---

routes = web.RouteTableDef()


@routes.get("/")
async def root(request: web.Request) -> web.Response:
    return answer({})


@routes.get("/schemas/types")
async def schema_types(request: web.Request) -> web.Response:
    return answer(["JSON", "PROTOBUF", "AVRO"])


@routes.get("/schemas")
async def list_schemas(request: web.Request) -> web.Response:
    reg = _registry(request)
    prefix = request.query.get("subjectPrefix") or ""
    deleted = _flag(request, "deleted")
    latest_only = _flag(request, "latestOnly")
    out = []
    for subject in reg.state.all_subjects():
        if not subject.startswith(prefix) or not _visible(request, subject):
            continue
        versions = reg.state.versions(subject, deleted=deleted)
        if latest_only:
            versions = versions[-1:]
        out += [_version_json(sv, sv.schema) for sv in versions]
    return answer(_page(request, out))


@routes.get("/schemas/ids/{id}")
async def schema_by_id(request: web.Request) -> web.Response:
    reg = _registry(request)
    sv = reg.schema_by_id(_schema_id(request))
    out: dict[str, Any] = {}
    if sv.schema_type != "AVRO":
        out["schemaType"] = sv.schema_type
    if sv.references:
        out["references"] = [r.to_json() for r in sv.references]
    out["schema"] = await reg.formatted(sv, request.query.get("format"))
    if _flag(request, "fetchMaxId"):
        out["maxId"] = reg.state.max_id
    return answer(out)


@routes.get("/schemas/ids/{id}/schema")
async def raw_schema_by_id(request: web.Request) -> web.Response:
    reg = _registry(request)
    sv = reg.schema_by_id(_schema_id(request))
    return web.Response(
        body=(await reg.formatted(sv, request.query.get("format"))).encode(),
        headers={"Content-Type": CONTENT_TYPE},
    )


@routes.get("/schemas/ids/{id}/subjects")
async def subjects_by_id(request: web.Request) -> web.Response:
    reg = _registry(request)
    users = reg.id_users(
        _schema_id(request), request.query.get("subject"), _flag(request, "deleted")
    )
    subjects = {sv.subject for sv in users if _visible(request, sv.subject)}
    return answer(_page(request, sorted(subjects)))


@routes.get("/schemas/ids/{id}/versions")
async def versions_by_id(request: web.Request) -> web.Response:
    reg = _registry(request)
    users = reg.id_users(
        _schema_id(request), request.query.get("subject"), _flag(request, "deleted")
    )
    visible = [sv for sv in users if _visible(request, sv.subject)]
    return answer(
        _page(request, [{"subject": sv.subject, "version": sv.version} for sv in visible])
    )


@routes.get("/subjects")
async def list_subjects(request: web.Request) -> web.Response:
    reg = _registry(request)
    subjects = reg.subjects(
        request.query.get("subjectPrefix"),
        _flag(request, "deleted"),
        _flag(request, "deletedOnly") or _flag(request, "deleted_only"),
    )
    return answer(_page(request, [s for s in subjects if _visible(request, s)]))


@routes.get("/subjects/{subject}/versions")
async def list_versions(request: web.Request) -> web.Response:
    reg = _registry(request)
    versions = reg.versions(
        _subject(request),
        _flag(request, "deleted"),
        _flag(request, "deletedOnly") or _flag(request, "deleted_only"),
    )
    return answer(_page(request, versions))


@routes.get("/subjects/{subject}/versions/{version}")
async def get_version(request: web.Request) -> web.Response:
    reg = _registry(request)
    sv = reg.get_version(
        _subject(request), request.match_info["version"], _flag(request, "deleted")
    )
    return answer(_version_json(sv, await reg.formatted(sv, request.query.get("format"))))


@routes.get("/subjects/{subject}/versions/{version}/schema")
async def get_version_schema(request: web.Request) -> web.Response:
    reg = _registry(request)
    sv = reg.get_version(
        _subject(request), request.match_info["version"], _flag(request, "deleted")
    )
    return web.Response(
        body=(await reg.formatted(sv, request.query.get("format"))).encode(),
        headers={"Content-Type": CONTENT_TYPE},
    )


@routes.get("/subjects/{subject}/versions/{version}/referencedby")
async def referenced_by(request: web.Request) -> web.Response:
    reg = _registry(request)
    return answer(
        _page(request, reg.referenced_by(_subject(request), request.match_info["version"]))
    )


@routes.post("/subjects/{subject}/versions")
async def register(request: web.Request) -> web.Response:
    reg = _registry(request)
    subject = _subject(request)
    body = await _body(request)
    candidate = _candidate(body)
    schema_id, version = body.get("id"), body.get("version")
    for name, value in (("id", schema_id), ("version", version)):
        if value is not None and (
            not isinstance(value, int) or isinstance(value, bool) or not 0 < value <= MAX_ID
        ):
            raise errors.unprocessable(f"'{name}' must be an integer in [1, 2^31-1]")
    sv = await reg.register(subject, candidate, _flag(request, "normalize"), schema_id, version)
    return answer({"id": sv.id, "version": sv.version})


@routes.post("/subjects/{subject}")
async def lookup(request: web.Request) -> web.Response:
    reg = _registry(request)
    subject = _subject(request)
    candidate = _candidate(await _body(request))
    sv = await reg.lookup(
        subject, candidate, _flag(request, "normalize"), _flag(request, "deleted")
    )
    return answer(_version_json(sv, await reg.formatted(sv, request.query.get("format"))))


@routes.delete("/subjects/{subject}")
async def delete_subject(request: web.Request) -> web.Response:
    reg = _registry(request)
    return answer(await reg.delete_subject(_subject(request), _flag(request, "permanent")))


@routes.delete("/subjects/{subject}/versions/{version}")
async def delete_version(request: web.Request) -> web.Response:
    reg = _registry(request)
    return answer(
        await reg.delete_version(
            _subject(request), request.match_info["version"], _flag(request, "permanent")
        )
    )


async def _compatibility(request: web.Request, version: str | None) -> web.Response:
    reg = _registry(request)
    subject = _subject(request)
    candidate = _candidate(await _body(request))
    if version is not None and not reg.state.subjects.get(subject):
        raise errors.subject_not_found(subject)
    messages = await reg.check_compatibility(
        subject, version, candidate, _flag(request, "normalize")
    )
    out: dict[str, Any] = {"is_compatible": not messages}
    if _flag(request, "verbose"):
        out["messages"] = messages
    return answer(out)


@routes.post("/compatibility/subjects/{subject}/versions/{version}")
async def compatibility_version(request: web.Request) -> web.Response:
    return await _compatibility(request, request.match_info["version"])


@routes.post("/compatibility/subjects/{subject}/versions")
async def compatibility_all(request: web.Request) -> web.Response:
    return await _compatibility(request, None)


@routes.get("/config")
async def get_global_config(request: web.Request) -> web.Response:
    return answer({"compatibilityLevel": _registry(request).get_config(None, True)})


@routes.put("/config")
async def put_global_config(request: web.Request) -> web.Response:
    body = await _body(request)
    return answer({"compatibility": await _registry(request).set_config(None, _level(body))})


@routes.delete("/config")
async def delete_global_config(request: web.Request) -> web.Response:
    return answer({"compatibilityLevel": await _registry(request).delete_config(None)})


@routes.get("/config/{subject}")
async def get_config(request: web.Request) -> web.Response:
    level = _registry(request).get_config(_subject(request), _flag(request, "defaultToGlobal"))
    return answer({"compatibilityLevel": level})


@routes.put("/config/{subject}")
async def put_config(request: web.Request) -> web.Response:
    subject = _subject(request)
    body = await _body(request)
    return answer({"compatibility": await _registry(request).set_config(subject, _level(body))})


@routes.delete("/config/{subject}")
async def delete_config(request: web.Request) -> web.Response:
    return answer({"compatibilityLevel": await _registry(request).delete_config(_subject(request))})


@routes.get("/mode")
async def get_global_mode(request: web.Request) -> web.Response:
    return answer({"mode": _registry(request).get_mode(None, True)})


@routes.put("/mode")
async def put_global_mode(request: web.Request) -> web.Response:
    body = await _body(request)
    return answer(
        {"mode": await _registry(request).set_mode(None, body.get("mode"), _flag(request, "force"))}
    )


@routes.delete("/mode")
async def delete_global_mode(request: web.Request) -> web.Response:
    return answer({"mode": await _registry(request).delete_mode(None)})


@routes.get("/mode/{subject}")
async def get_mode(request: web.Request) -> web.Response:
    mode = _registry(request).get_mode(_subject(request), _flag(request, "defaultToGlobal"))
    return answer({"mode": mode})


@routes.put("/mode/{subject}")
async def put_mode(request: web.Request) -> web.Response:
    subject = _subject(request)
    body = await _body(request)
    return answer(
        {
            "mode": await _registry(request).set_mode(
                subject, body.get("mode"), _flag(request, "force")
            )
        }
    )


@routes.delete("/mode/{subject}")
async def delete_mode(request: web.Request) -> web.Response:
    return answer({"mode": await _registry(request).delete_mode(_subject(request))})


@routes.get("/contexts")
async def contexts(request: web.Request) -> web.Response:
    return answer(_page(request, _registry(request).contexts()))


#: The endpoints that append to the topic: a registry that is not the writer forwards them.
WRITES: frozenset[object] = frozenset(
    {
        register,
        delete_subject,
        delete_version,
        put_global_config,
        delete_global_config,
        put_config,
        delete_config,
        put_global_mode,
        delete_global_mode,
        put_mode,
        delete_mode,
    }
)


def make_app(registry: SchemaRegistry, middlewares: Sequence[Middleware] = ()) -> web.Application:
    """The API; ``middlewares`` (authentication) run inside the error answers."""
    app = web.Application(
        client_max_size=MAX_BODY_BYTES, middlewares=[error_middleware, *middlewares]
    )
    app[REGISTRY] = registry
    app.add_routes(routes)
    return app
