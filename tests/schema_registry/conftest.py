"""Fixtures for the schema registry's tests: a real in-process Gregor broker (one per module)
and a registry served on the broker's event loop, each test with its own ``_schemas`` topic;
``Registry.call`` speaks raw HTTP to it (``http.client``: exactly the bytes a test gives)."""

from __future__ import annotations

import asyncio
import http.client
import itertools
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import pytest

from gregor.schema_registry.server import SchemaRegistryServer
from gregor.testing import InProcessBroker

CT = "application/vnd.schemaregistry.v1+json"
_topics = itertools.count()


@dataclass
class Reply:
    status: int
    body: Any
    text: str
    headers: Any


@dataclass
class Registry:
    broker: InProcessBroker
    topic: str
    server: SchemaRegistryServer | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def url(self) -> str:
        assert self.server is not None
        return self.server.url

    def start(self) -> Registry:
        server = SchemaRegistryServer(
            {"bootstrap.servers": self.broker.bootstrap_servers},
            "http://127.0.0.1:0",
            topic=self.topic,
            **self.extra,
        )

        async def go() -> SchemaRegistryServer:
            return await server.start()

        self.server = self.broker.call(go)
        return self

    def stop(self) -> None:
        server, self.server = self.server, None
        if server is not None:
            self.broker.call(server.stop)

    def restart(self) -> Registry:
        self.stop()
        return self.start()

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        raw: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> Reply:
        split = urlsplit(self.url)
        conn = http.client.HTTPConnection(split.hostname or "", split.port, timeout=120)
        h = {"Content-Type": CT, "Accept": CT}
        h.update(headers or {})
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        try:
            conn.request(method, path, body=data, headers=h)
            resp = conn.getresponse()
            text = resp.read().decode("utf-8", "replace")
        finally:
            conn.close()
        try:
            parsed = json.loads(text) if text else None
        except ValueError:
            parsed = None
        return Reply(resp.status, parsed, text, resp.headers)

    def get(self, path: str) -> Reply:
        return self.call("GET", path)

    def post(self, path: str, body: Any) -> Reply:
        return self.call("POST", path, body)

    def put(self, path: str, body: Any) -> Reply:
        return self.call("PUT", path, body)

    def delete(self, path: str) -> Reply:
        return self.call("DELETE", path)


class RegistryThread(Registry):
    """A registry on its own event loop thread (``Registry`` uses the in-process broker's loop),
    for tests whose broker restarts or runs in another process."""

    def __init__(self, bootstrap_servers: str, topic: str) -> None:
        super().__init__(None, topic)  # type: ignore[arg-type]
        self.bootstrap_servers = bootstrap_servers
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(
            target=self.loop.run_forever, name="registry-loop", daemon=True
        )
        self.thread.start()

    def start(self) -> Registry:
        server = SchemaRegistryServer(
            {"bootstrap.servers": self.bootstrap_servers}, "http://127.0.0.1:0", topic=self.topic
        )
        self.server = asyncio.run_coroutine_threadsafe(server.start(), self.loop).result(120)
        return self

    def stop(self) -> None:
        server, self.server = self.server, None
        if server is not None:
            asyncio.run_coroutine_threadsafe(server.stop(), self.loop).result(120)

    def close(self) -> None:
        self.stop()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(60)
        self.loop.close()


@pytest.fixture(scope="module")
def broker() -> Iterator[InProcessBroker]:
    with InProcessBroker() as b:
        yield b


@pytest.fixture
def registry(broker: InProcessBroker) -> Iterator[Registry]:
    reg = Registry(broker, f"_schemas_test_{next(_topics)}").start()
    try:
        yield reg
    finally:
        reg.stop()


def avro_record(name: str, *fields: tuple[str, Any] | tuple[str, Any, Any]) -> str:
    """An Avro record schema's text: fields as (name, type) or (name, type, default)."""
    out = []
    for f in fields:
        d: dict[str, Any] = {"name": f[0], "type": f[1]}
        if len(f) == 3:
            d["default"] = f[2]
        out.append(d)
    return json.dumps({"type": "record", "name": name, "fields": out})
