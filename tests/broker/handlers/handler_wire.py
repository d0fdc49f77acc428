"""A Kafka connection to an in-process broker on the test's own event loop.

``Wire`` frames requests with the protocol's sans-IO ``ClientConnection`` and moves the bytes
over asyncio streams. The broker (``InProcessBroker``, async form) and the connection share
one ``asyncio.Runner``: ``wire.request(...)`` runs the loop until the answer is in, so a test
reads like blocking code while the broker gets the loop for exactly as long as it needs. For
requests in flight together (a long poll and the produce that wakes it), ``wire.run(coro)``
runs any coroutine on that loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from gregor.protocol.connection import ClientConnection
from gregor.protocol.messages import Message
from gregor.testing import InProcessBroker

T = TypeVar("T")


class Wire:
    def __init__(
        self, runner: asyncio.Runner, broker: InProcessBroker, client_id: str = "handler-test"
    ) -> None:
        self.runner = runner
        self.broker = broker
        self.conn = ClientConnection(client_id=client_id)
        self._streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.runner.run(coro)

    async def _open(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self._streams is None:
            self._streams = await asyncio.open_connection(self.broker.host, self.broker.port)
        return self._streams

    async def send(self, message: Message, version: int) -> None:
        """Write one request without waiting for its answer (acks=0, or pipelining)."""
        _, writer = await self._open()
        _, data = self.conn.send_request(message, version)
        writer.write(data)
        await writer.drain()

    async def receive(self) -> Any:
        """The next response on this connection."""
        reader, _ = await self._open()
        while True:
            chunk = await reader.read(65536)
            if not chunk:
                raise AssertionError("broker closed the connection")
            responses = self.conn.receive_data(chunk)
            if responses:
                assert len(responses) == 1, "one response at a time"
                return responses[0].response

    async def roundtrip(self, message: Message, version: int) -> Any:
        await self.send(message, version)
        return await self.receive()

    def request(self, message: Message, version: int) -> Any:
        """Send ``message`` at ``version`` and return the decoded response."""
        return self.run(self.roundtrip(message, version))

    async def aclose(self) -> None:
        if self._streams is not None:
            _, writer = self._streams
            self._streams = None
            writer.close()
            try:
                await writer.wait_closed()
            except ConnectionError:
                pass

    def close(self) -> None:
        self.run(self.aclose())
