"""Forwarding: a registry that is not its topic's writer sends every write to the writer.

Theory of operation. ``Forwarder.middleware`` sits innermost, after basic auth and the ACL
authorizer, so a request is authenticated and authorized where it arrives (and again at the
writer, which sees the same Authorization header). Reads pass through. A write (a handler in
``http.WRITES``: anything that appends to the topic) waits until the election has settled
(bounded by the store timeout), then:

- on the writer, runs here;
- elsewhere, goes to the writer's URL with the same method, path and query (as sent, still
  encoded), body, ``Content-Type``, ``Accept`` and ``Authorization``; the writer's status,
  body and ``Content-Type`` are answered unchanged (Confluent forwards, it does not redirect).
  Before answering, this registry's reader catches up to the topic's end offset, so its own
  later reads see what the writer wrote (read-your-writes on every registry);
- with no writer (none eligible, duplicate URLs, or no settled election in time), answers
  Confluent's 50004 (leader not known); a writer that cannot be reached or answers nothing
  usable, 50003 (forwarding failed).

A forwarded request carries ``FORWARDED_HEADER``; a registry that receives one and is not the
writer (the writer changed on the way) answers 50004 instead of forwarding again, so two
registries with different views of the election cannot bounce a request between them.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Collection

import aiohttp
from aiohttp import web
from aiohttp.typedefs import Handler, Middleware
from yarl import URL

from gregor.schema_registry import errors
from gregor.schema_registry.election import WriterElection
from gregor.schema_registry.http import MAX_BODY_BYTES
from gregor.schema_registry.store import KafkaStore

log = logging.getLogger("gregor.schema_registry")

FORWARDED_HEADER = "X-Gregor-Schema-Registry-Forwarded"
PASSED_HEADERS = ("Content-Type", "Accept", "Authorization")


class Forwarder:
    def __init__(
        self,
        election: WriterElection,
        store: KafkaStore,
        *,
        timeout_s: float,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.election = election
        self.store = store
        self.timeout_s = timeout_s
        self.ssl_context = ssl_context
        self._session: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def middleware(self, writes: Collection[object]) -> Middleware:
        @web.middleware
        async def forward(request: web.Request, handler: Handler) -> web.StreamResponse:
            if request.match_info.route.handler not in writes:
                return await handler(request)
            if not await self.election.wait_settled(self.timeout_s):
                raise errors.unknown_leader("the writer election has not settled (a rebalance)")
            if self.election.is_writer:
                return await handler(request)
            writer = self.election.writer
            if writer is None:
                raise errors.unknown_leader()
            if request.headers.get(FORWARDED_HEADER):
                raise errors.unknown_leader(
                    "this registry is not the writer (the writer changed while the request "
                    "was forwarded)"
                )
            return await self._forward(request, writer.url)

        return forward

    async def _forward(self, request: web.Request, writer_url: str) -> web.Response:
        body = await request.read()
        headers = {h: request.headers[h] for h in PASSED_HEADERS if h in request.headers}
        headers[FORWARDED_HEADER] = "true"
        base = URL(writer_url)
        target = URL.build(
            scheme=base.scheme,
            host=base.raw_host or "",
            port=base.port,
            path=request.rel_url.raw_path,
            query_string=request.rel_url.raw_query_string,
            encoded=True,
        )
        if self._session is None:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=self.timeout_s + 10)
            )
        try:
            async with self._session.request(
                request.method,
                target,
                data=body,
                headers=headers,
                allow_redirects=False,
                ssl=self.ssl_context if self.ssl_context is not None else True,
            ) as resp:
                data = await resp.content.read(MAX_BODY_BYTES + 1)
                status = resp.status
                content_type = resp.headers.get("Content-Type")
        except (aiohttp.ClientError, TimeoutError, OSError) as e:
            log.warning("schema registry: forwarding to the writer %s failed: %s", base, e)
            raise errors.forwarding_failed(
                f"the writer {writer_url} did not answer ({type(e).__name__})"
            ) from None
        if len(data) > MAX_BODY_BYTES:
            raise errors.forwarding_failed(f"the writer's answer is over {MAX_BODY_BYTES} bytes")
        try:
            await self.store.catch_up()  # read-your-writes on this registry too
        except errors.RegistryError as e:
            # The write happened: answer it (a retry of it is harmless) rather than hide it.
            log.warning("schema registry: not caught up after a forwarded write: %s", e.message)
        return web.Response(
            body=data,
            status=status,
            headers={"Content-Type": content_type} if content_type else None,
        )
