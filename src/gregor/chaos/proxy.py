"""A TCP proxy on 127.0.0.x that reads Kafka's framing, for the network nemesis.

``KafkaProxy(loop, host, port, target)`` listens on ``host:port`` (port 0: one the kernel picks,
then read back as ``port``; a proxy never rebinds, so its port needs no care for restarts) and
forwards every connection
to ``target`` (a ``(host, port)`` or a callable returning one, read at connect time, so the
target may move). With ``kafka=True`` it reads the client-to-broker stream as Kafka frames
(4-byte size, then the request header: api key, version, correlation id, client id), which
lets it act on single requests; otherwise (etcd's gRPC) it forwards bytes as they come.

Faults, each set and cleared from any thread (the proxies of a run share one ``ProxyLoop``):

- ``cut()``: close every connection and refuse new ones (accepted, then closed at once);
- ``blackhole()``: accept and keep connections but forward nothing either way;
- ``delay(seconds)``: hold every frame (or chunk) that long before forwarding it, in order;
- ``block_client_ids(suffixes)``: close connections whose requests carry a client id ending in
  one of ``suffixes`` (brokers name themselves ``gregor-replica-fetcher-<id>`` and
  ``gregor-broker-<id>``, so one target's proxy can cut one source broker off);
- ``hold(api_keys, count)``: keep the next ``count`` requests with one of ``api_keys`` (Produce
  is 0, EndTxn 26) back, and go silent on their connections (closed after ``close_after``
  seconds, so the client notices, reconnects and retries); ``release()`` later delivers each
  held request on a fresh connection to the target, late, and returns what the broker
  answered (decoded: the error codes of a Produce or EndTxn response);
- ``heal()``: clear every fault (held requests stay held until released).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import struct
import threading
import time
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from gregor.protocol.exceptions import ProtocolError
from gregor.protocol.framing import decode_request_header, decode_response_header
from gregor.protocol.messages import API_KEYS, response_header_version

__all__ = ["Held", "KafkaProxy", "ProxyLoop"]

T = TypeVar("T")
Target = tuple[str, int] | Callable[[], tuple[str, int]]
_SIZE = struct.Struct(">i")
_MAX_FRAME = 256 * 1024 * 1024


class ProxyLoop:
    """An asyncio loop in a daemon thread, shared by a run's proxies."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="chaos-proxies", daemon=True
        )
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = 30.0) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def call(self, fn: Callable[[], T]) -> T:
        done: concurrent.futures.Future[T] = concurrent.futures.Future()

        def run() -> None:
            try:
                done.set_result(fn())
            except BaseException as e:  # handed to the caller
                done.set_exception(e)

        self.loop.call_soon_threadsafe(run)
        return done.result(30)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)


@dataclass
class Held:
    frame: bytes
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    held_at: float
    released: dict[str, Any] | None = None


@dataclass(eq=False)
class _Conn:
    writer: asyncio.StreamWriter
    up_writer: asyncio.StreamWriter | None = None
    client_id: str | None = None
    silent: bool = False
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def close(self) -> None:
        for w in (self.writer, self.up_writer):
            if w is not None:
                w.close()


class KafkaProxy:
    def __init__(
        self,
        loop: ProxyLoop,
        host: str,
        port: int,
        target: Target,
        *,
        kafka: bool = True,
        name: str = "",
    ) -> None:
        self.loop = loop
        self.host, self.port = host, port
        self.target = target
        self.kafka = kafka
        self.name = name or f"{host}:{port}"
        self.cut_off = False
        self.blackholed = False
        self.delay_s = 0.0
        self.blocked: tuple[str, ...] = ()
        self.hold_keys: frozenset[int] = frozenset()
        self.hold_count = 0
        self.hold_close_after = 0.0
        self.held: list[Held] = []
        self.forwarded = 0
        self._conns: set[_Conn] = set()
        self._server: asyncio.Server | None = None
        loop.run(self._start())

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._handle, self.host, self.port)
        if not self.port:  # the kernel's pick: no other test worker can hold it
            self.port = int(self._server.sockets[0].getsockname()[1])

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def _target(self) -> tuple[str, int]:
        return self.target() if callable(self.target) else self.target

    # --- faults (thread-safe: run on the loop) ---

    def cut(self) -> None:
        def do() -> None:
            self.cut_off = True
            self._close_all()

        self.loop.call(do)

    def blackhole(self) -> None:
        def do() -> None:
            self.blackholed = True

        self.loop.call(do)

    def delay(self, seconds: float) -> None:
        def do() -> None:
            self.delay_s = seconds

        self.loop.call(do)

    def block_client_ids(self, suffixes: Iterable[str]) -> None:
        blocked = tuple(suffixes)

        def do() -> None:
            self.blocked = blocked
            for c in list(self._conns):
                if c.client_id is not None and c.client_id.endswith(blocked):
                    self._drop(c)

        self.loop.call(do)

    def hold(self, api_keys: Iterable[int], count: int = 1, close_after: float = 0.0) -> None:
        keys = frozenset(api_keys)

        def do() -> None:
            self.hold_keys, self.hold_count, self.hold_close_after = keys, count, close_after

        self.loop.call(do)

    def heal(self) -> None:
        def do() -> None:
            self.cut_off = self.blackholed = False
            self.delay_s = 0.0
            self.blocked = ()
            self.hold_keys, self.hold_count = frozenset(), 0

        self.loop.call(do)

    def release(self, timeout: float = 10.0) -> list[Held]:
        """Deliver every held request now, each on a new connection; returns them with the
        broker's answer in ``released``."""
        held = self.loop.call(self._take_held)
        for h in held:
            h.released = self.loop.run(self._deliver(h, timeout), timeout + 5)
        return held

    def close(self) -> None:
        async def stop() -> None:
            self._close_all()
            if self._server is not None:
                self._server.close()

        self.loop.run(stop())

    # --- the loop's side ---

    def _take_held(self) -> list[Held]:
        held, self.held = self.held, []
        return held

    def _close_all(self) -> None:
        for c in list(self._conns):
            self._drop(c)

    def _drop(self, c: _Conn) -> None:
        c.close()
        self._conns.discard(c)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = _Conn(writer)
        if self.cut_off:
            writer.close()
            return
        self._conns.add(conn)
        if self.blackholed:
            await self._swallow(reader)
            self._drop(conn)
            return
        try:
            host, port = self._target()
            up_reader, up_writer = await asyncio.open_connection(host, port)
        except OSError:
            self._drop(conn)
            return
        conn.up_writer = up_writer
        if self.cut_off:
            self._drop(conn)
            return
        try:
            await asyncio.gather(
                self._upstream(conn, reader, up_writer), self._downstream(conn, up_reader, writer)
            )
        finally:
            self._drop(conn)

    async def _swallow(self, reader: asyncio.StreamReader) -> None:
        try:
            while await reader.read(65536):
                if not self.blackholed:
                    return
        except OSError:
            pass

    async def _upstream(
        self, conn: _Conn, reader: asyncio.StreamReader, dst: asyncio.StreamWriter
    ) -> None:
        try:
            while True:
                if self.kafka:
                    head = await reader.readexactly(4)
                    (size,) = _SIZE.unpack(head)
                    if size < 0 or size > _MAX_FRAME:
                        return
                    body = await reader.readexactly(size)
                    data = head + body
                    if not self._on_request(conn, body, data):
                        continue
                else:
                    data = await reader.read(65536)
                    if not data:
                        return
                if conn.silent or self.blackholed:
                    continue
                if self.delay_s:
                    await asyncio.sleep(self.delay_s)
                if self.cut_off:
                    return
                dst.write(data)
                await dst.drain()
                self.forwarded += 1
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            dst.close()

    def _on_request(self, conn: _Conn, body: bytes, frame: bytes) -> bool:
        """False when the request is taken (held, or its connection dropped)."""
        try:
            header, _ = decode_request_header(body)
        except ProtocolError:
            return True
        if conn.client_id is None:
            conn.client_id = header.client_id
        if (
            self.blocked
            and header.client_id is not None
            and header.client_id.endswith(self.blocked)
        ):
            self._drop(conn)
            return False
        if self.hold_count > 0 and header.api_key in self.hold_keys and not conn.silent:
            self.hold_count -= 1
            self.held.append(
                Held(
                    frame,
                    header.api_key,
                    header.api_version,
                    header.correlation_id,
                    header.client_id,
                    time.monotonic(),
                )
            )
            conn.silent = True
            asyncio.get_running_loop().call_later(self.hold_close_after, self._drop, conn)
            return False
        return True

    async def _downstream(
        self, conn: _Conn, reader: asyncio.StreamReader, dst: asyncio.StreamWriter
    ) -> None:
        try:
            while data := await reader.read(65536):
                if conn.silent or self.blackholed:
                    continue
                if self.delay_s:
                    await asyncio.sleep(self.delay_s)
                if self.cut_off:
                    return
                dst.write(data)
                await dst.drain()
        except OSError:
            pass
        finally:
            dst.close()

    async def _deliver(self, h: Held, timeout: float) -> dict[str, Any]:
        host, port = self._target()
        answer: dict[str, Any] = {
            "api_key": h.api_key,
            "api_version": h.api_version,
            "correlation_id": h.correlation_id,
            "client_id": h.client_id,
            "held_s": round(time.monotonic() - h.held_at, 3),
        }
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
        except (OSError, TimeoutError) as e:
            answer["error"] = f"connect: {e!r}"
            return answer
        try:
            writer.write(h.frame)
            await writer.drain()
            (size,) = _SIZE.unpack(await asyncio.wait_for(reader.readexactly(4), timeout))
            body = await asyncio.wait_for(reader.readexactly(size), timeout)
            answer.update(_decode_answer(h, body))
        except (OSError, TimeoutError, asyncio.IncompleteReadError) as e:
            answer["error"] = f"no answer: {e!r}"
        finally:
            writer.close()
        return answer


def _decode_answer(h: Held, body: bytes) -> dict[str, Any]:
    try:
        _cid, _tags, pos = decode_response_header(
            body, response_header_version(h.api_key, h.api_version)
        )
        resp: Any = API_KEYS[h.api_key].response.decode(memoryview(body)[pos:], h.api_version)
    except (ProtocolError, KeyError) as e:
        return {"error": f"undecodable answer: {e}"}
    if h.api_key == 26:  # EndTxn
        return {"error_code": int(resp.error_code)}
    if h.api_key == 0:  # Produce
        return {
            "partitions": [
                {
                    "topic": t.name,
                    "partition": p.index,
                    "error_code": int(p.error_code),
                    "base_offset": int(p.base_offset),
                }
                for t in resp.responses
                for p in t.partition_responses
            ]
        }
    return {}
