"""The metrics endpoint: ``GET /metrics`` on ``metrics.listener``, without stalling the broker.

Theory of operation. A small asyncio HTTP/1.1 responder on the broker's event loop (one
request per connection, ``Connection: close``). What it costs the loop is bounded:

- rendering: the loop only takes a ``Snapshot`` (``metrics.take_snapshot``: copies of numbers,
  a few hundred partitions per turn of the loop); the metric families and the text are built
  on a worker thread of the endpoint's own (``metrics.render``). Scrapes that arrive while a
  render is under way share it, and a rendered text is served again for ``metrics.cache.ms``
  (default one second), so scrapers in a tight loop cost one render per period, not one each;
- connections: at most ``metrics.max.connections`` at a time; one more is answered 503 and
  closed at once. The request head must arrive within ten seconds and fit in 64 KiB, and the
  answer must be taken within ten seconds, so a slow client holds a slot for no longer;
- TLS and basic auth as Prometheus exporters do them (``metrics.web.config.file``, see
  ``metrics_web``): HTTPS with the file's certificate, 401 with ``WWW-Authenticate: Basic``
  without valid credentials (bcrypt checks on a worker thread, results remembered).
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor

from gregor.broker.config.metrics_web import BasicAuth, WebConfig
from gregor.broker.metrics.broker_collector import render
from gregor.broker.metrics.broker_metrics import Broker, take_snapshot

log = logging.getLogger("gregor.broker")

#: Seconds a client has to send its request head, and to take the answer.
IO_TIMEOUT_S = 10.0
#: The largest request head read.
HEAD_LIMIT = 64 * 1024
#: How long a refused (over the cap) connection is read from after its 503.
REFUSED_LINGER_S = 1.0
TEXT_FORMAT = "text/plain; version=0.0.4; charset=utf-8"


class ScrapeCache:
    """One render at a time, shared by the scrapes that wait for it, and kept ``ttl_s``."""

    def __init__(self, broker: Broker, ttl_s: float) -> None:
        self.broker = broker
        self.ttl_s = ttl_s
        self.renders = 0
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gregor-metrics")
        self._task: asyncio.Task[bytes] | None = None
        self._text: bytes | None = None
        self._rendered_at = 0.0

    async def text(self) -> bytes:
        loop = asyncio.get_running_loop()
        if self._text is not None and loop.time() - self._rendered_at < self.ttl_s:
            return self._text
        if self._task is None:
            self._task = loop.create_task(self._render())
        return await asyncio.shield(self._task)

    async def _render(self) -> bytes:
        loop = asyncio.get_running_loop()
        try:
            snapshot = await take_snapshot(self.broker)
            text = await loop.run_in_executor(self._executor, render, snapshot)
            self.renders += 1
            self._text, self._rendered_at = text, loop.time()
            return text
        finally:
            self._task = None

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


class MetricsEndpoint:
    """The bound endpoint: ``start_serving()``, ``close()``, ``port``."""

    def __init__(
        self, broker: Broker, web: WebConfig | None, max_connections: int, cache_ms: int
    ) -> None:
        self.cache = ScrapeCache(broker, cache_ms / 1000)
        self.web = web or WebConfig()
        self.auth = BasicAuth(self.web.users)
        self.max_connections = max_connections
        self.open = 0
        self.server: asyncio.base_events.Server | None = None

    @property
    def port(self) -> int:
        assert self.server is not None
        port: int = self.server.sockets[0].getsockname()[1]
        return port

    async def bind(self, host: str, port: int) -> None:
        tls = (
            {"ssl": self.web.ssl_context, "ssl_handshake_timeout": IO_TIMEOUT_S}
            if self.web.ssl_context
            else {}
        )
        self.server = await asyncio.start_server(
            self._handle,
            host,
            port,
            limit=HEAD_LIMIT,
            start_serving=False,
            **tls,  # type: ignore[arg-type]
        )

    async def start_serving(self) -> None:
        assert self.server is not None
        await self.server.start_serving()

    def close(self) -> None:
        if self.server is not None:
            self.server.close()
        self.cache.close()

    def _extra_headers(self) -> str:
        return "".join(f"{k}: {v}\r\n" for k, v in self.web.headers.items())

    async def _answer(
        self,
        writer: asyncio.StreamWriter,
        status: str,
        body: bytes,
        ctype: str = "text/plain; charset=utf-8",
        extra: str = "",
        head_only: bool = False,
    ) -> None:
        head = (
            f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
            f"{extra}{self._extra_headers()}Connection: close\r\n\r\n".encode()
        )
        writer.writelines([head] if head_only else [head, body])  # the body is not copied
        await asyncio.wait_for(writer.drain(), IO_TIMEOUT_S)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.open >= self.max_connections:
            # As promhttp's MaxRequestsInFlight: refused at once, without reading the request.
            body = f"Limit of concurrent requests reached ({self.max_connections}), try again later.\n".encode()
            try:
                await self._answer(writer, "503 Service Unavailable", body)
                # Ends the answer, then reads what the client sends for a moment: closing with
                # its request unread would reset the connection before it read the 503.
                writer.write_eof()
                await asyncio.wait_for(reader.read(HEAD_LIMIT), REFUSED_LINGER_S)
            except (TimeoutError, ConnectionError, OSError):
                pass
            finally:
                writer.close()
            return
        self.open += 1
        try:
            await self._serve(reader, writer)
        except (
            TimeoutError,
            asyncio.IncompleteReadError,
            asyncio.LimitOverrunError,
            ConnectionError,
            ValueError,
        ):
            pass
        finally:
            self.open -= 1
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), IO_TIMEOUT_S)
        lines = head.decode("latin-1").split("\r\n")
        method, path, *_ = lines[0].split(" ")
        headers = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if sep:
                headers[name.strip().lower()] = value.strip()
        if self.auth.enabled and not await self.auth.check(headers.get("authorization")):
            await self._answer(
                writer, "401 Unauthorized", b"Unauthorized\n", extra="WWW-Authenticate: Basic\r\n"
            )
            return
        if method not in ("GET", "HEAD"):
            await self._answer(writer, "405 Method Not Allowed", b"GET only\n")
        elif path.split("?")[0] in ("/metrics", "/"):
            body = await self.cache.text()
            await self._answer(writer, "200 OK", body, TEXT_FORMAT, head_only=method == "HEAD")
        else:
            await self._answer(writer, "404 Not Found", b"try /metrics\n")


async def serve_metrics(
    broker: Broker,
    host: str,
    port: int,
    web: WebConfig | None = None,
    max_connections: int = 16,
    cache_ms: int = 1000,
) -> MetricsEndpoint:
    """Bind the endpoint (port 0: a free one); ``start_serving()`` starts answering."""
    endpoint = MetricsEndpoint(broker, web, max_connections, cache_ms)
    await endpoint.bind(host, port)
    return endpoint
