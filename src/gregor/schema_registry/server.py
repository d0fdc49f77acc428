"""Running a registry: the store read to its end, then the REST API on its listener.

``SchemaRegistryServer`` owns the pieces (state, store, registry, aiohttp runner); ``start``
reads the ``_schemas`` topic before it listens (and, with the ACL authorizer, its ACL topic),
so the first answer already reflects every schema and ACL, and ``stop`` closes the listener
before the stores. ``run_forever`` is what
``gregor schema-registry`` runs.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web

from gregor.schema_registry.acls import ACL_TOPIC_SUFFIX, AclState, AclStore, RegistryAuthorizer
from gregor.schema_registry.auth import AuthConfigError, SaslBasicAuth, auth_middleware
from gregor.schema_registry.authorization import acl_middleware
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


#: The authorizers ``--authorizer`` names (Confluent's ``confluent.schema.registry.authorizer.class``).
AUTHORIZERS = ("none", "acl")


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
        authorizer: str = "none",
        acl_topic: str | None = None,
        super_users: tuple[str, ...] = (),
    ) -> None:
        if authorizer not in AUTHORIZERS:
            raise AuthConfigError(f"unknown authorizer {authorizer!r} (known: {AUTHORIZERS})")
        if authorizer == "acl" and auth is None:
            raise AuthConfigError(
                "the ACL authorizer needs to know who is asking: turn on basic auth (--auth sasl)"
            )
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
        self.acls: AclState | None = None
        self.acl_store: AclStore | None = None
        self.authorizer: RegistryAuthorizer | None = None
        if authorizer == "acl":
            self.acls = AclState()
            self.acl_store = AclStore(
                client_config,
                self.acls,
                topic=acl_topic or topic + ACL_TOPIC_SUFFIX,
                replication_factor=replication_factor,
                timeout_s=timeout_s,
            )
            self.authorizer = RegistryAuthorizer(self.acls, super_users)
        self._runner: web.AppRunner | None = None
        self.bound_port = 0

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'https' if self.tls else 'http'}://{host}:{self.bound_port}"

    async def start(self) -> SchemaRegistryServer:
        try:
            await self.store.start()
            if self.acl_store is not None:
                await self.acl_store.start()  # every ACL read before the first answer
            middlewares = [auth_middleware(self.auth)] if self.auth is not None else []
            if self.authorizer is not None:
                middlewares.append(acl_middleware(self.authorizer))
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
        if self.acl_store is not None:
            await self.acl_store.close()
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
    authorizer: str = "none",
    acl_topic: str | None = None,
    super_users: tuple[str, ...] = (),
) -> None:
    async with SchemaRegistryServer(
        client_config,
        listener,
        topic=topic,
        replication_factor=replication_factor,
        auth=auth,
        tls=tls,
        authorizer=authorizer,
        acl_topic=acl_topic,
        super_users=super_users,
    ) as server:
        ready(server.url)
        await asyncio.Event().wait()
