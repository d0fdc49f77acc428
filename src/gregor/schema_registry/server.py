"""Running a registry: the store read to its end, then the REST API on its listener, then
its membership of the writer election.

``SchemaRegistryServer`` owns the pieces (state, store, registry, election, forwarder,
aiohttp runner); ``start`` reads the ``_schemas`` topic before it listens (and, with the ACL
authorizer, its ACL topic), so the first answer already reflects every schema and ACL, then
joins the election group with its URL: ``advertised_url``, else the listener's host (the
machine's host name for a wildcard address) and bound port. Writes wait (bounded) until the
election settles. ``stop`` leaves the group first (another registry takes over at once), then
closes the listener, then the stores. ``run_forever`` is what ``gregor schema-registry`` runs.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web

from gregor.schema_registry.acls import ACL_TOPIC_SUFFIX, AclState, AclStore, RegistryAuthorizer
from gregor.schema_registry.auth import AuthConfigError, SaslBasicAuth, auth_middleware
from gregor.schema_registry.authorization import acl_middleware
from gregor.schema_registry.election import DEFAULT_GROUP_ID, Identity, WriterElection
from gregor.schema_registry.forwarding import Forwarder
from gregor.schema_registry.http import WRITES, make_app
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
        group_id: str = DEFAULT_GROUP_ID,
        leader_eligibility: bool = True,
        advertised_url: str | None = None,
        forward_ssl: ssl.SSLContext | None = None,
        session_timeout_ms: int = 10000,
        heartbeat_interval_ms: int = 3000,
    ) -> None:
        if authorizer not in AUTHORIZERS:
            raise AuthConfigError(f"unknown authorizer {authorizer!r} (known: {AUTHORIZERS})")
        if authorizer == "acl" and auth is None:
            raise AuthConfigError(
                "the ACL authorizer needs to know who is asking: turn on basic auth (--auth sasl)"
            )
        self.host, self.port = parse_listener(listener, tls=tls is not None)
        self.advertised: tuple[str, str, int] | None = None
        if advertised_url is not None:
            advertised_url = advertised_url.strip()
            tls_url = advertised_url.startswith("https://")
            self.advertised = (
                "https" if tls_url else "http",
                *parse_listener(advertised_url, tls=tls_url),
            )
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
        self.client_config = dict(client_config)
        self.group_id = group_id
        self.leader_eligibility = leader_eligibility
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.forward_ssl = forward_ssl
        self.timeout_s = timeout_s
        self.election: WriterElection | None = None
        self.forwarder: Forwarder | None = None
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

    def identity(self) -> Identity:
        """Where the other registries reach this one (once bound), for the election."""
        if self.advertised is not None:
            scheme, host, port = self.advertised
        else:
            scheme = "https" if self.tls else "http"
            host, port = self.host, self.bound_port
            if host in ("", "0.0.0.0", "::"):
                host = socket.gethostname()
        return Identity(scheme, host, port, self.store.topic, self.leader_eligibility)

    async def start(self) -> SchemaRegistryServer:
        try:
            await self.store.start()
            if self.acl_store is not None:
                await self.acl_store.start()  # every ACL read before the first answer
            middlewares = [auth_middleware(self.auth)] if self.auth is not None else []
            if self.authorizer is not None:
                middlewares.append(acl_middleware(self.authorizer))
            self.election = WriterElection(
                self.client_config,
                Identity("http", "127.0.0.1", 1, self.store.topic),  # set once bound
                self.store.sync,
                group_id=self.group_id,
                session_timeout_ms=self.session_timeout_ms,
                heartbeat_interval_ms=self.heartbeat_interval_ms,
            )
            self.registry.may_write = self.election.may_write
            self.forwarder = Forwarder(
                self.election, self.store, timeout_s=self.timeout_s, ssl_context=self.forward_ssl
            )
            middlewares.append(self.forwarder.middleware(WRITES))
            self._runner = web.AppRunner(make_app(self.registry, middlewares), access_log=None)
            await self._runner.setup()
            site = web.TCPSite(self._runner, self.host, self.port, ssl_context=self.tls)
            await site.start()
            addresses = self._runner.addresses
            self.bound_port = int(addresses[0][1]) if addresses else self.port
            self.election.identity = self.identity()
            await self.election.start()
        except BaseException:
            await self.stop()
            raise
        return self

    async def stop(self) -> None:
        if self.election is not None:
            await self.election.close()
            self.election = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self.forwarder is not None:
            await self.forwarder.close()
            self.forwarder = None
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
    group_id: str = DEFAULT_GROUP_ID,
    leader_eligibility: bool = True,
    advertised_url: str | None = None,
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
        group_id=group_id,
        leader_eligibility=leader_eligibility,
        advertised_url=advertised_url,
    ) as server:
        ready(server.url)
        await asyncio.Event().wait()
