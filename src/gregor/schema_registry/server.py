"""Running a registry: the store read to its end, then the REST API on its listener.

``SchemaRegistryServer`` owns the pieces (state, store, registry, aiohttp runner); ``start``
reads the ``_schemas`` topic before it listens, so the first answer already reflects every
schema, and ``stop`` closes the listener before the store. ``run_forever`` is what
``gregor schema-registry`` runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web

from gregor.schema_registry.http import make_app
from gregor.schema_registry.registry import SchemaRegistry
from gregor.schema_registry.state import RegistryState
from gregor.schema_registry.store import KafkaStore


class ListenerError(ValueError):
    """The listener is not ``http://HOST:PORT``."""


def parse_listener(url: str) -> tuple[str, int]:
    try:
        split = urlsplit(url.strip())
        port = split.port
    except ValueError as e:
        raise ListenerError(f"{url!r} is not http://HOST:PORT ({e})") from None
    if split.scheme != "http":
        raise ListenerError(
            f"{url!r}: only http:// listeners are served so far (https comes with the broker's "
            "listener, a later part)"
        )
    if not split.hostname or port is None or split.path not in ("", "/"):
        raise ListenerError(f"{url!r} is not http://HOST:PORT")
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
    ) -> None:
        self.host, self.port = parse_listener(listener)
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
        return f"http://{host}:{self.bound_port}"

    async def start(self) -> SchemaRegistryServer:
        try:
            await self.store.start()
            self._runner = web.AppRunner(make_app(self.registry), access_log=None)
            await self._runner.setup()
            site = web.TCPSite(self._runner, self.host, self.port)
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
) -> None:
    async with SchemaRegistryServer(
        client_config, listener, topic=topic, replication_factor=replication_factor
    ) as server:
        ready(server.url)
        await asyncio.Event().wait()
