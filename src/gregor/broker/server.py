"""The asyncio server: accept, read frames, dispatch in order, write responses.

Theory of operation. One task per connection reads bytes into a ``FrameDecoder`` and handles
the whole frames it yields strictly one after another, so responses leave in request order and a
connection's requests never race each other (an idempotent producer pipelines up to five
produce requests and relies on that). A frame larger than ``socket.request.max.bytes``, a
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
from typing import Any

from gregor.broker.config import BrokerConfig, Listener
from gregor.broker.logging import log_event
from gregor.protocol.exceptions import ProtocolError
from gregor.protocol.framing import FrameDecoder, decode_request_header, encode_response

log = logging.getLogger("gregor.broker")

READ_CHUNK = 256 * 1024


class Connection:
    """Per-connection state handlers may use (fetch sessions, SASL state, peer address)."""

    def __init__(self, broker: Any, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.broker = broker
        self.reader = reader
        self.writer = writer
        peer = writer.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.closed = False
        self.busy = False

    async def run(self) -> None:
        decoder = FrameDecoder(self.broker.config["socket.request.max.bytes"])
        try:
            while not self.closed:
                data = await self.reader.read(READ_CHUNK)
                if not data:
                    break
                try:
                    frames = decoder.feed(data)
                except ProtocolError as e:
                    log_event(log, "connection.closed", logging.WARNING, peer=self.peer, reason=str(e))
                    break
                for frame in frames:
                    self.busy = True
                    try:
                        ok = await self.broker.dispatcher.handle_frame(self, frame)
                    finally:
                        self.busy = False
                    if not ok:
                        self.closed = True
                        break
                    if self.broker.stopping:
                        self.closed = True
                        break
                if self.writer.transport.get_write_buffer_size() > 0:
                    await self.writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self.closed = True
            try:
                self.writer.close()
            except Exception:  # noqa: BLE001 - closing a broken transport
                pass

    def send(self, data: bytes | bytearray | memoryview) -> None:
        if not self.closed:
            self.writer.write(data)

    async def drain(self) -> None:
        await self.writer.drain()


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


def run(config: BrokerConfig) -> int:
    try:
        import uvloop

        return uvloop.run(serve(config))
    except ImportError:  # pragma: no cover - uvloop is a pinned dependency
        return asyncio.run(serve(config))


async def start_listener(broker: Any, listener: Listener) -> tuple[asyncio.base_events.Server, int]:
    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = Connection(broker, reader, writer)
        broker.connections.add(conn)
        try:
            await conn.run()
        finally:
            broker.connections.discard(conn)

    server = await asyncio.start_server(on_connect, listener.host, listener.port, limit=READ_CHUNK, backlog=1024)
    port = server.sockets[0].getsockname()[1]
    return server, port
