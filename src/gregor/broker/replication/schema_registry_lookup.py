"""What the leader's schema ID validation knows of the schema registry: which subjects a schema
id is registered under, the id's record name and (for the ``decode`` level) a decoder of its
schema, asked over the registry's REST API and kept in a bounded cache.

Theory of operation. ``SchemaLookup.facts(ids)`` answers a ``SchemaFacts`` per id from the
cache, asking the registry (``GET /schemas/ids/{id}/subjects``, and ``GET /schemas/ids/{id}``
only when a record name strategy needs the name or the ``decode`` level needs the schema) for
the ids it does not hold. A schema's references are fetched with it
(``GET /subjects/{subject}/versions/{version}``, at most ``MAX_REFERENCES`` of them, each a
lookup from the same budget) and the schema parsed once into a ``schema_decoder``
``PayloadDecoder`` kept in the id's cache entry, under the same bounds. The cache is an
LRU of at most ``CACHE_SIZE`` ids: an id the registry knows is kept ``POSITIVE_TTL`` seconds
(a subject may be deleted later), an id it does not know ``NEGATIVE_TTL`` seconds; an id
known but not under the subject a record needs is asked again once its facts are
``RECHECK_INTERVAL`` old (the same schema registered under a new subject keeps its id). Concurrent
produces asking for the same id share one request. Lookups of ids not cached are bounded by a
token bucket (``LOOKUPS_PER_SECOND``, burst ``LOOKUP_BURST``): a client sending random ids
costs the registry at most that rate, and past it the uncached ids get a retriable error, while
the ids already cached (every well-behaved producer's) keep being answered from the cache.

The registry unreachable, slow (``REQUEST_TIMEOUT``) or answering anything but a schema or
"not found" raises ``RegistryUnavailable``: the produce is refused with a retriable error,
never accepted unchecked. The URLs (``confluent.schema.registry.url``, a list) are tried in
order, each with the broker's login (``confluent.basic.auth.user.info``) and TLS context
(``confluent.ssl.*``; ``config.schema_registry_security``); a registry refusing the login (401,
403) is an error like any other, so the produce is refused with the same retriable error.
aiohttp is imported when the first lookup runs (it is the schema-registry extra).

Record names, as Confluent's serializers name subjects: Avro's full name (``namespace.name``),
Protobuf's first message with its package (from the ``serialized`` descriptor), JSON Schema's
``title``. All state lives on the broker's event loop.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import ssl
import time
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from gregor.broker.replication.schema_decoder import PayloadDecoder, Reference, decoder_for

if TYPE_CHECKING:
    import aiohttp

CACHE_SIZE = 10_000
POSITIVE_TTL = 300.0
NEGATIVE_TTL = 5.0
#: an id known but not under the subject a record needs is asked again at most this often
RECHECK_INTERVAL = 1.0
LOOKUPS_PER_SECOND = 50.0
LOOKUP_BURST = 100.0
REQUEST_TIMEOUT = 5.0
#: a schema with more references than this (all levels) gets a decoder that refuses
MAX_REFERENCES = 32
MAX_BODY = 4 << 20  # a registry answer larger than this is not believed
_NOT_FOUND = (40403, 40401)  # schema not found, subject not found
ACCEPT = "application/vnd.schemaregistry.v1+json, application/json"


class RegistryUnavailable(Exception):
    """The registry could not answer (unreachable, slow, an error, or the lookup budget spent)."""


@dataclass(frozen=True, slots=True)
class SchemaFacts:
    """One schema id as the registry knows it; ``subjects`` None: not registered."""

    subjects: frozenset[str] | None
    #: the record name (None: the schema has none); only fetched when a strategy needs it
    record_name: str | None = None
    named: bool = False  # record_name was looked up
    #: the schema's decoder; only built when the ``decode`` level needs it
    decoder: PayloadDecoder | None = None


def record_name_of(schema_type: str, schema: str) -> str | None:
    """The record name Confluent's RecordNameStrategy takes from a schema, or None."""
    try:
        if schema_type == "PROTOBUF":
            return _protobuf_name(schema)
        doc = json.loads(schema)
    except (ValueError, RecursionError):
        return None
    if not isinstance(doc, dict):
        return None
    if schema_type == "JSON":
        title = doc.get("title")
        return title if isinstance(title, str) and title else None
    name = doc.get("name")
    if doc.get("type") not in ("record", "enum", "fixed") or not isinstance(name, str) or not name:
        return None
    namespace = doc.get("namespace")
    if "." in name or not isinstance(namespace, str) or not namespace:
        return name
    return f"{namespace}.{name}"


def _protobuf_name(serialized: str) -> str | None:
    from google.protobuf import descriptor_pb2
    from google.protobuf.message import DecodeError

    try:
        fd = descriptor_pb2.FileDescriptorProto.FromString(
            base64.b64decode(serialized, validate=True)
        )
    except (binascii.Error, DecodeError, ValueError):
        return None
    if not fd.message_type:
        return None
    first = fd.message_type[0].name
    return f"{fd.package}.{first}" if fd.package else first


class SchemaLookup:
    """The registry's facts of schema ids, cached (see the module's theory of operation)."""

    def __init__(
        self,
        urls: tuple[str, ...],
        login: tuple[str, str] | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.urls = urls
        self._login = login  # (user, password): HTTP basic auth on every request; never shown
        self._tls = tls
        self._cache: OrderedDict[int, tuple[SchemaFacts, float]] = OrderedDict()
        self._inflight: dict[tuple[int, bool, bool], asyncio.Future[SchemaFacts]] = {}
        self._tokens = LOOKUP_BURST
        self._refilled = time.monotonic()
        self._session: aiohttp.ClientSession | None = None
        #: registry requests made (the tests' and the metrics' count of lookups)
        self.requests = 0

    async def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    def cached(self, schema_id: int, named: bool, decode: bool = False) -> SchemaFacts | None:
        hit = self._cache.get(schema_id)
        if hit is None:
            return None
        facts, expires = hit
        if time.monotonic() >= expires or (
            facts.subjects and ((named and not facts.named) or (decode and facts.decoder is None))
        ):
            return None
        self._cache.move_to_end(schema_id)
        return facts

    def forget_stale(self, ids: Iterable[int]) -> bool:
        """Drop the cached facts of ``ids`` older than ``RECHECK_INTERVAL`` (an id may have been
        registered under another subject since); True if any was dropped."""
        now = time.monotonic()
        dropped = False
        for schema_id in ids:
            hit = self._cache.get(schema_id)
            if hit is not None and hit[1] - POSITIVE_TTL + RECHECK_INTERVAL <= now:
                del self._cache[schema_id]
                dropped = True
        return dropped

    async def facts(
        self, ids: Iterable[int], named: bool, decode: bool = False
    ) -> dict[int, SchemaFacts]:
        """Each id's facts (with the record name when ``named``, the decoder when ``decode``);
        raises RegistryUnavailable."""
        out: dict[int, SchemaFacts] = {}
        missing: list[int] = []
        for schema_id in ids:
            facts = self.cached(schema_id, named, decode)
            if facts is None:
                missing.append(schema_id)
            else:
                out[schema_id] = facts
        if missing:
            futures = [self._shared(i, named, decode) for i in missing]
            looked = await asyncio.gather(*futures, return_exceptions=True)
            for schema_id, result in zip(missing, looked, strict=True):
                if isinstance(result, BaseException):
                    raise result
                out[schema_id] = result
        return out

    def _shared(self, schema_id: int, named: bool, decode: bool) -> asyncio.Future[SchemaFacts]:
        key = (schema_id, named, decode)
        fut = self._inflight.get(key)
        if fut is None:
            if not self._spend():
                fut = asyncio.get_running_loop().create_future()
                fut.set_exception(
                    RegistryUnavailable(
                        "too many lookups of unknown schema ids; the schema registry is asked "
                        f"at most {LOOKUPS_PER_SECOND:g} times a second"
                    )
                )
                return fut
            fut = asyncio.ensure_future(self._lookup(schema_id, named, decode))
            self._inflight[key] = fut
            fut.add_done_callback(lambda _: self._inflight.pop(key, None))
        return fut

    def _spend(self) -> bool:
        """Take one lookup from the token bucket; False when it is empty."""
        now = time.monotonic()
        self._tokens = min(LOOKUP_BURST, self._tokens + (now - self._refilled) * LOOKUPS_PER_SECOND)
        self._refilled = now
        if self._tokens < 1:
            return False
        self._tokens -= 1
        return True

    async def _lookup(self, schema_id: int, named: bool, decode: bool) -> SchemaFacts:
        body = await self._get(f"/schemas/ids/{schema_id}/subjects")
        if body is None:
            facts = SchemaFacts(None, None, True)
        else:
            if not isinstance(body, list) or not all(isinstance(s, str) for s in body):
                raise RegistryUnavailable(f"schema registry: unexpected answer for id {schema_id}")
            facts = SchemaFacts(frozenset(body))
            if named or decode:
                schema = await self._get(f"/schemas/ids/{schema_id}?format=serialized")
                name = decoder = None
                if isinstance(schema, dict) and isinstance(schema.get("schema"), str):
                    schema_type = str(schema.get("schemaType") or "AVRO")
                    name = record_name_of(schema_type, schema["schema"])
                    if decode:
                        decoder = await self._decoder(schema_id, schema_type, schema)
                facts = SchemaFacts(
                    facts.subjects if schema is not None else None, name, True, decoder
                )
        ttl = POSITIVE_TTL if facts.subjects else NEGATIVE_TTL
        self._cache[schema_id] = (facts, time.monotonic() + ttl)
        self._cache.move_to_end(schema_id)
        while len(self._cache) > CACHE_SIZE:
            self._cache.popitem(last=False)
        return facts

    async def _decoder(
        self, schema_id: int, schema_type: str, schema: dict[str, Any]
    ) -> PayloadDecoder:
        """The decoder of ``schema`` (the registry's answer for ``schema_id``), with its
        references fetched depth first, each once, at most ``MAX_REFERENCES``."""
        refs: list[Reference] = []
        seen: set[str] = set()

        async def resolve(body: dict[str, Any], depth: int) -> str | None:
            for ref in body.get("references") or ():
                if not isinstance(ref, dict):
                    return "a reference is not an object"
                name, subject, version = ref.get("name"), ref.get("subject"), ref.get("version")
                if not isinstance(name, str) or not isinstance(subject, str):
                    return "a reference has no name or subject"
                if name in seen:
                    continue
                if len(seen) >= MAX_REFERENCES or depth >= MAX_REFERENCES:
                    return f"more than {MAX_REFERENCES} references"
                seen.add(name)
                if not self._spend():
                    raise RegistryUnavailable(
                        "too many schema registry lookups; the schema registry is asked at "
                        f"most {LOOKUPS_PER_SECOND:g} times a second"
                    )
                got = await self._get(
                    f"/subjects/{quote(subject, safe='')}/versions/{quote(str(version), safe='')}"
                    "?format=serialized"
                )
                if not isinstance(got, dict) or not isinstance(got.get("schema"), str):
                    return f"reference {name!r} ({subject} version {version}) is not registered"
                why = await resolve(got, depth + 1)
                if why is not None:
                    return why
                refs.append(Reference(name, str(got.get("schemaType") or "AVRO"), got["schema"]))
            return None

        why = await resolve(schema, 0)
        if why is not None:
            return _unusable(schema_id, why)
        return decoder_for(schema_id, schema_type, schema["schema"], tuple(refs))

    async def _get(self, path: str) -> object:
        """The JSON body of a 200, None for the registry's "not found"; else raises."""
        import aiohttp

        if self._session is None:
            headers = {"Accept": ACCEPT}
            if self._login is not None:
                headers["Authorization"] = aiohttp.encode_basic_auth(*self._login, encoding="utf-8")
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT),
                headers=headers,
                connector=aiohttp.TCPConnector(ssl=self._tls if self._tls is not None else True),
            )
        why = "no schema registry URL"
        for url in self.urls:
            self.requests += 1
            try:
                async with self._session.get(url + path, allow_redirects=False) as resp:
                    data = await resp.content.read(MAX_BODY + 1)
                    status = resp.status
            except (aiohttp.ClientError, TimeoutError, OSError) as e:
                why = f"{url}: {type(e).__name__}: {e}"
                continue
            if len(data) > MAX_BODY:
                why = f"{url}: answer over {MAX_BODY} bytes"
                continue
            try:
                body = json.loads(data) if data else None
            except ValueError:
                body = None
            if status == 200 and body is not None:
                return body
            if status == 404 and isinstance(body, dict) and body.get("error_code") in _NOT_FOUND:
                return None
            why = f"{url}: HTTP {status}"
        raise RegistryUnavailable(f"the schema registry cannot be asked ({why})")


def _unusable(schema_id: int, why: str) -> PayloadDecoder:
    reason = f"cannot be decoded with schema id {schema_id}: its references do not resolve ({why})"
    return PayloadDecoder(schema_id, "?", lambda _payload: reason)
