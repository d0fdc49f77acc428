"""The asyncio server: accept, read frames, dispatch in order, write responses.

Theory of operation. Each connection feeds the bytes it receives into a ``FrameDecoder`` and
one task at a time handles the whole frames strictly one after another (``Connection``), so
responses leave in request order and a connection's requests never race each other (an
idempotent producer pipelines up to five produce requests and relies on that). A frame larger than ``socket.request.max.bytes``, a
header that cannot be parsed, an unknown API key or a version we do not implement closes that
connection only (as Kafka does), except ApiVersions at an unknown version, which is answered
with UNSUPPORTED_VERSION in the v0 format so the client can retry lower. Handler exceptions are
logged and close that connection; they never reach the accept loop.

Shutdown (SIGTERM/SIGINT): stop accepting, let each connection finish the request it is
handling, close the logs (flush, clean-shutdown marker), exit 0.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections import deque
from typing import Any

from gregor.broker.config import BrokerConfig, Listener
from gregor.broker.logging import log_event
from gregor.protocol.exceptions import ProtocolError
from gregor.protocol.framing import FrameDecoder, decode_request_header, encode_response

log = logging.getLogger("gregor.broker")

#: Frames queued on a connection before it stops reading from the socket for a while.
MAX_QUEUED_FRAMES = 64
#: Gathered responses are written at once when they reach this size.
FLUSH_BYTES = 64 * 1024


class Connection(asyncio.Protocol):
    """One client connection, and the per-connection state handlers may use (fetch sessions,
    SASL state, peer address).

    Bytes arrive in ``data_received`` straight from the transport and go into the
    ``FrameDecoder``; whole frames wait in a queue that one task at a time works through in
    order (started when frames arrive and the connection is idle). When many frames are
    queued, reading pauses until the task has caught up.

    Responses are gathered and written once per turn of the event loop: a client that
    pipelines requests (librdkafka keeps many produce requests in flight) gets all the
    responses ready in one pass in one write instead of a write system call each. The gathered
    responses go out when the connection's task yields, whether because it has handled every
    queued frame or because a handler waits (long poll); big ones (fetches) go at once. When
    the transport's write buffer is full the task waits for it to drain before handling more.
    """

    def __init__(self, broker: Any) -> None:
        self.broker = broker
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.closed = False
        self.busy = False
        self._decoder = FrameDecoder(broker.config["socket.request.max.bytes"])
        self._frames: deque[memoryview | bytes] = deque()
        self._task: asyncio.Task[None] | None = None
        self._reading_paused = False
        self._writing_paused = False
        self._drained: asyncio.Future[None] | None = None
        self._out: list[bytes | bytearray | memoryview] = []
        self._out_bytes = 0
        self._flush_scheduled = False
        self._close_after_current = False  # bad bytes arrived while a request was in hand
        self._eof = False  # the client has shut down its sending side

    # --- asyncio.Protocol ---

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  (uvloop's is not a subclass)
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.broker.connections.add(self)

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        try:
            frames = self._decoder.feed(data)
        except ProtocolError as e:
            log_event(log, "connection.closed", logging.WARNING, peer=self.peer, reason=str(e))
            self._frames.clear()
            if self._task is None:
                self.close()
            else:
                self._close_after_current = True
            return
        if not frames:
            return
        self._frames.extend(frames)
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._work())
        if len(self._frames) >= MAX_QUEUED_FRAMES and not self._reading_paused:
            self._reading_paused = True
            self.transport.pause_reading()  # type: ignore[union-attr]

    def eof_received(self) -> bool | None:
        # The client will send no more; answer what is queued, then close.
        self._eof = True
        if self._task is None:
            self.close()
        return True

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._frames.clear()
        self.broker.connections.discard(self)
        self._wake_writer()

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._wake_writer()

    # --- the connection's task ---

    async def _work(self) -> None:
        try:
            while True:
                frames = self._frames
                while frames and not self.closed:
                    frame = frames.popleft()
                    self.busy = True
                    try:
                        ok = await self.broker.dispatcher.handle_frame(self, frame)
                    finally:
                        self.busy = False
                    if not ok or self.broker.stopping or self._close_after_current:
                        self.flush(final=True)
                        self.close()
                        return
                    if self._reading_paused and len(frames) <= MAX_QUEUED_FRAMES // 2 and not self.closed:
                        self._reading_paused = False
                        self.transport.resume_reading()  # type: ignore[union-attr]
                self.flush()
                if self._writing_paused and not self.closed:
                    await self._wait_drained()
                    continue
                if self._eof:
                    self.close()
                return
        except Exception:  # noqa: BLE001 - never let a connection's task die silently
            log.exception("connection task failed")
            self.close()
        finally:
            self._task = None
            if self._frames and not self.closed:  # arrived while we were finishing
                self._task = asyncio.get_running_loop().create_task(self._work())

    async def _wait_drained(self) -> None:
        if self._drained is None or self._drained.done():
            self._drained = asyncio.get_running_loop().create_future()
        await self._drained

    def _wake_writer(self) -> None:
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    # --- output ---

    def send(self, data: bytes | bytearray | memoryview) -> None:
        if self.closed:
            return
        self._out.append(data)
        self._out_bytes += len(data)
        if self._out_bytes >= FLUSH_BYTES:
            self.flush()  # big responses (fetches) go out at once, as the socket takes them
        elif not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self.flush)

    def flush(self, final: bool = False) -> None:
        """Write the gathered responses (also called from the loop after a send)."""
        self._flush_scheduled = False
        out = self._out
        if not out or (self.closed and not final) or self.transport is None:
            return
        self._out = []
        self._out_bytes = 0
        if self.transport.is_closing():
            return
        if len(out) == 1:
            self.transport.write(out[0])
        else:
            self.transport.writelines(out)  # one writev, no copy into a joined buffer

    async def drain(self) -> None:
        self.flush()
        if self._writing_paused and not self.closed:
            await self._wait_drained()

    def close(self) -> None:
        self.closed = True
        self._frames.clear()
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()


class Dispatcher:
    """Maps a frame to its handler; owns the protocol-level error paths."""

    def __init__(self, broker: Any, handlers: dict[int, Any]) -> None:
        self.broker = broker
        self.handlers = handlers

    async def handle_frame(self, conn: Connection, frame: memoryview | bytes) -> bool:
        from gregor.protocol.messages import API_KEYS

        try:
            header, body_offset = decode_request_header(frame)
        except ProtocolError as e:
            log_event(log, "request.malformed", logging.WARNING, peer=conn.peer, reason=str(e))
            return False
        api_key, version = header.api_key, header.api_version
        entry = self.handlers.get(api_key)
        if entry is None or not entry.min_version <= version <= entry.max_version:
            if api_key == 18:  # ApiVersions: answer in v0 so the client can pick a version
                from gregor.broker.handlers.api_versions import unsupported_version_response

                conn.send(unsupported_version_response(header.correlation_id))
                return True
            name = API_KEYS[api_key].name if api_key in API_KEYS else "unknown"
            log_event(
                log, "request.unsupported", logging.WARNING,
                peer=conn.peer, api_key=api_key, api=name, version=version,
            )
            return False
        info = API_KEYS[api_key]
        try:
            # Bytes after the body are ignored, as Kafka does: librdkafka 2.x sends Metadata
            # v12 for "all topics" with three stray bytes after the tag buffer.
            request, _ = info.request.decode_from(memoryview(frame), body_offset, version)
        except ProtocolError as e:
            log_event(
                log, "request.malformed", logging.WARNING,
                peer=conn.peer, api=info.name, version=version, reason=str(e),
            )
            return False
        try:
            response = await entry.handler(RequestContext(self.broker, conn, header), request)
        except Exception as e:  # noqa: BLE001 - a handler bug must not take the broker down
            log.exception("handler failed")
            log_event(log, "request.failed", logging.ERROR, api=info.name, version=version, error=repr(e))
            return False
        if response is not None:
            if isinstance(response, (bytes, bytearray, memoryview)):
                conn.send(response)
            else:
                conn.send(encode_response(api_key, version, header.correlation_id, response))
        return True


class RequestContext:
    __slots__ = ("broker", "conn", "header")

    def __init__(self, broker: Any, conn: Connection, header: Any) -> None:
        self.broker = broker
        self.conn = conn
        self.header = header

    @property
    def version(self) -> int:
        return self.header.api_version

    @property
    def client_id(self) -> str | None:
        return self.header.client_id


async def serve(config: BrokerConfig) -> int:
    from gregor.broker.broker import Broker

    broker = Broker(config)
    await broker.start()
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await broker.stop()
    return 0


PROFILE_ENV = "GREGOR_PROFILE"


def run(config: BrokerConfig) -> int:
    """Serve until SIGTERM/SIGINT. With ``GREGOR_PROFILE=path`` set, the whole run is profiled
    with cProfile and the stats are written to ``path`` at a clean stop (for bench/broker.py)."""
    import os

    profile_path = os.environ.get(PROFILE_ENV)
    if not profile_path:
        return _run_loop(config)
    import cProfile

    prof = cProfile.Profile()
    try:
        return prof.runcall(_run_loop, config)
    finally:
        prof.dump_stats(profile_path)


def _run_loop(config: BrokerConfig) -> int:
    try:
        import uvloop

        return uvloop.run(serve(config))
    except ImportError:  # pragma: no cover - uvloop is a pinned dependency
        return asyncio.run(serve(config))


async def start_listener(broker: Any, listener: Listener) -> tuple[asyncio.base_events.Server, int]:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: Connection(broker), listener.host, listener.port, backlog=1024
    )
    port = server.sockets[0].getsockname()[1]
    return server, port
