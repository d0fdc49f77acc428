"""A small client of Confluent's Schema Registry REST API (Gregor's registry or any compatible
one), on the standard library's HTTP client: what ``gregor schemas`` and the Spark source's
Avro columns need, no more.

``call`` sends one request and returns the decoded JSON body; an answer with an error status
raises :class:`RegistryHTTPError` with the registry's own ``error_code`` and ``message``, an
unreachable registry :class:`RegistryUnreachable`. An https registry is reached with
``ssl_context`` (None: the system's CAs). ``schema_by_id`` caches what it fetched (a
schema id never changes its schema), so a process asks for each id once.
"""

from __future__ import annotations

import base64
import json
import ssl
import threading
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


class RegistryHTTPError(Exception):
    """The registry answered an error: its HTTP status, ``error_code`` and ``message``."""

    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(f"{message} (error {code})")
        self.status = status
        self.code = code
        self.message = message


class RegistryUnreachable(Exception):
    """No answer from the registry (refused, unresolvable, timed out) or not JSON."""


def _error(status: int, text: str) -> RegistryHTTPError:
    try:
        body = json.loads(text)
    except ValueError:
        body = None
    if isinstance(body, dict) and "message" in body:
        code = body.get("error_code", status)
        return RegistryHTTPError(
            status, code if isinstance(code, int) else status, str(body["message"])
        )
    if status == 401:
        return RegistryHTTPError(status, 401, "the schema registry needs a login")
    if status == 403:
        return RegistryHTTPError(status, 403, "the schema registry refused: not authorized")
    return RegistryHTTPError(status, status, f"the schema registry answered HTTP {status}")


class RegistryClient:
    def __init__(
        self,
        url: str,
        user: str | None = None,
        password: str | None = None,
        timeout_s: float = 60.0,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self.ssl_context = ssl_context
        self._auth = (
            "Basic " + base64.b64encode(f"{user}:{password or ''}".encode()).decode()
            if user is not None
            else None
        )
        self._ids: dict[int, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def call(
        self, method: str, path: str, body: Any = None, **query: str | int | bool | None
    ) -> Any:
        params = {
            k: str(v).lower() if isinstance(v, bool) else str(v)
            for k, v in query.items()
            if v is not None and v is not False
        }
        target = self.url + path + ("?" + urllib.parse.urlencode(params) if params else "")
        headers = {"Accept": CONTENT_TYPE}
        if body is not None:
            headers["Content-Type"] = CONTENT_TYPE
        if self._auth is not None:
            headers["Authorization"] = self._auth
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(target, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(
                req, timeout=self.timeout_s, context=self.ssl_context
            ) as resp:
                text = resp.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as e:
            raise _error(e.code, e.read().decode("utf-8", "replace")) from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise RegistryUnreachable(
                f"cannot reach the schema registry at {self.url}: {reason}"
            ) from None
        try:
            return json.loads(text) if text else None
        except ValueError:
            raise RegistryUnreachable(
                f"the schema registry at {self.url} answered something that is not JSON"
            ) from None

    @staticmethod
    def quote(subject: str) -> str:
        return urllib.parse.quote(subject, safe="")

    def subject_version(self, subject: str, version: str | int = "latest") -> dict[str, Any]:
        """``GET /subjects/{subject}/versions/{version}``: subject, version, id, schema,
        schemaType (absent for Avro), references."""
        got = self.call("GET", f"/subjects/{self.quote(subject)}/versions/{version}")
        if not isinstance(got, dict) or not isinstance(got.get("id"), int):
            raise RegistryUnreachable(f"the schema registry at {self.url} answered no schema")
        with self._lock:
            self._ids.setdefault(
                got["id"],
                {k: got[k] for k in ("schema", "schemaType", "references") if k in got},
            )
        return got

    def register(self, subject: str, schema: str, schema_type: str = "AVRO") -> int:
        """``POST /subjects/{subject}/versions``: the schema's id (an identical schema already
        under the subject answers its id again)."""
        body: dict[str, Any] = {"schema": schema}
        if schema_type != "AVRO":
            body["schemaType"] = schema_type
        got = self.call("POST", f"/subjects/{self.quote(subject)}/versions", body)
        if not isinstance(got, dict) or not isinstance(got.get("id"), int):
            raise RegistryUnreachable(f"the schema registry at {self.url} answered no id")
        return int(got["id"])

    def schema_by_id(self, schema_id: int) -> dict[str, Any]:
        """``GET /schemas/ids/{id}`` (cached): schema, for other than Avro schemaType, and its
        references when it has some."""
        with self._lock:
            cached = self._ids.get(schema_id)
        if cached is not None:
            return cached
        got = self.call("GET", f"/schemas/ids/{schema_id}")
        if not isinstance(got, dict) or "schema" not in got:
            raise RegistryUnreachable(f"the schema registry at {self.url} answered no schema")
        entry = {k: got[k] for k in ("schema", "schemaType", "references") if k in got}
        with self._lock:
            self._ids[schema_id] = entry
        return entry


__all__ = ["RegistryClient", "RegistryHTTPError", "RegistryUnreachable"]
