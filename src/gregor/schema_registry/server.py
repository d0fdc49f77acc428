"""Running a registry: the store read to its end, then the REST API on its listener.

``SchemaRegistryServer`` owns the pieces (state, store, registry, aiohttp runner); ``start``
reads the ``_schemas`` topic before it listens, so the first answer already reflects every
schema, and ``stop`` closes the listener before the store. ``run_forever`` is what
``gregor schema-registry`` runs.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web

from gregor.schema_registry.auth import SaslBasicAuth, auth_middleware
from gregor.schema_registry.http import make_app
from gregor.schema_registry.registry import SchemaRegistry
from gregor.schema_registry.state import RegistryState
from gregor.schema_registry.store import KafkaStore


class ListenerError(ValueError):
    """The listener is not ``http://HOST:PORT``."""


def parse_listener(url: str, *, tls: bool = False) -> tuple[str, int]:
    """(host, port) of ``http://HOST:PORT``, or of ``https://HOST:PORT`` when ``tls``."""
    scheme = "https" if tls else "http"
    try:
        split = urlsplit(url.strip())
        port = split.port
    except ValueError as e:
        raise ListenerError(f"{url!r} is not {scheme}://HOST:PORT ({e})") from None
    if split.scheme != scheme:
        raise ListenerError(
            f"{url!r}: an https:// listener needs a certificate (--tls-cert)"
            if split.scheme == "https"
            else f"{url!r}: with a certificate the listener is https://HOST:PORT"
            if tls
            else f"{url!r} is not http://HOST:PORT"
        )
    if not split.hostname or port is None or split.path not in ("", "/"):
        raise ListenerError(f"{url!r} is not {scheme}://HOST:PORT")
    return split.hostname, port


class SchemaRegistryServer:
    def __init__(
        self,
        client_config: dict[str, Any],
        listener: str,
        *,
        topic: str = "_schemas",
        replication_factor: int = -1,
        timeout_s: float = 30.0,
        auth: SaslBasicAuth | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.host, self.port = parse_listener(listener, tls=tls is not None)
        self.auth = auth
        self.tls = tls
        self.state = RegistryState()
        self.store = KafkaStore(
            client_config,
            self.state,
            topic=topic,
            replication_factor=replication_factor,
            timeout_s=timeout_s,
        )
        self.registry = SchemaRegistry(self.state, self.store)
        self._runner: web.AppRunner | None = None
        self.bound_port = 0

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'https' if self.tls else 'http'}://{host}:{self.bound_port}"

    async def start(self) -> SchemaRegistryServer:
        try:
            await self.store.start()
            middlewares = [auth_middleware(self.auth)] if self.auth is not None else []
            self._runner = web.AppRunner(make_app(self.registry, middlewares), access_log=None)
            await self._runner.setup()
            site = web.TCPSite(self._runner, self.host, self.port, ssl_context=self.tls)
            await site.start()
        except BaseException:
            await self.stop()
            raise
        addresses = self._runner.addresses
        self.bound_port = int(addresses[0][1]) if addresses else self.port
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        await self.store.close()

    async def __aenter__(self) -> SchemaRegistryServer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


async def run_forever(
    client_config: dict[str, Any],
    listener: str,
    ready: Callable[[str], None],
    *,
    topic: str = "_schemas",
    replication_factor: int = -1,
    auth: SaslBasicAuth | None = None,
    tls: ssl.SSLContext | None = None,
) -> None:
    async with SchemaRegistryServer(
        client_config,
        listener,
        topic=topic,
        replication_factor=replication_factor,
        auth=auth,
        tls=tls,
    ) as server:
        ready(server.url)
        await asyncio.Event().wait()
