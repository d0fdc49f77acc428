"""A blocking connection to one broker, for a reader that owns its thread (the bulk path).

Theory of operation. :class:`BlockingConnection` runs the same sans-IO
:class:`~gregor.protocol.connection.ClientConnection` and
:class:`~gregor.protocol.framing.BufferedFrameReader` as the asyncio
:class:`~gregor.client.core.conn.BrokerConnection`, over a blocking socket in the caller's thread:
:meth:`send` writes a request (several may be outstanding), :meth:`receive` reads until the
oldest outstanding response is whole and returns it. The ApiVersions negotiation and the SASL
login are the asyncio connection's own steps (:class:`~gregor.client.core.conn.ConnectionBase`),
driven here by blocking calls; TLS wraps the socket with the client's context.

Why it exists. A bulk reader (:class:`gregor.client.consumer.bulk.RangeReader`, one per Spark task)
takes megabytes per fetch and has nothing else to do while it waits. Read through the event
loop, every arriving TCP segment wakes the loop thread, which returns to Python for each, and
hands the frame to the reading thread across the GIL. Here the rest of a large frame is read
by one ``recv_into`` with ``MSG_WAITALL`` into the frame's own buffer: the kernel fills it and
returns once, in the thread that decodes it. On loopback this cut the reader's CPU by about a
fifth and the sending broker's by about a third (issue 15's note has the figures). TLS sockets
take no receive flags, so over TLS each read returns what has arrived, as before.

Failure is final: a socket error, a timeout (``request_timeout`` without a byte arriving, or
``connect_timeout`` to connect) or a malformed frame closes the connection and raises
:class:`~gregor.client.core.errors.KafkaConnectionError` (or
:class:`~gregor.client.core.errors.KafkaTimeoutError`); the owner opens a new one.
"""

from __future__ import annotations

import socket
import ssl
import struct
from typing import Unpack

from gregor.client.core.conn import ConnectionBase, ConnectionOptions, Exchange
from gregor.client.core.errors import KafkaConnectionError, KafkaTimeoutError
from gregor.protocol.exceptions import ProtocolError
from gregor.protocol.framing import BufferedFrameReader, coalesce
from gregor.protocol.messages import Message


def _timeval(seconds: float) -> bytes:
    whole = int(seconds)
    return struct.pack("ll", whole, int((seconds - whole) * 1_000_000))


class BlockingConnection(ConnectionBase):
    """A connection to the broker at ``host:port``, used from one thread at a time."""

    def __init__(self, host: str, port: int, **options: Unpack[ConnectionOptions]) -> None:
        super().__init__(host, port, **options)
        self._frames = BufferedFrameReader()
        self._sock: socket.socket | None = None
        self._waitall = 0
        self._ready: list[Message] = []  # responses read past the one asked for

    @property
    def connected(self) -> bool:
        return self._sock is not None

    @property
    def in_flight(self) -> int:
        """Requests sent whose responses :meth:`receive` has not returned yet."""
        return self._sans_io.in_flight + len(self._ready)

    def connect(self) -> BlockingConnection:
        try:
            sock = socket.create_connection((self.host, self.port), timeout=self.connect_timeout)
        except OSError as e:
            raise KafkaConnectionError(f"cannot connect to {self.host}:{self.port}: {e}") from None
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            # Blocking for real (MSG_WAITALL needs it); the kernel keeps the time limits.
            sock.settimeout(None)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, _timeval(self.request_timeout))
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, _timeval(self.request_timeout))
            if self.ssl_context is not None:
                sock = self.ssl_context.wrap_socket(sock, server_hostname=self.host)
            else:
                self._waitall = socket.MSG_WAITALL
        except OSError as e:  # ssl.SSLError (a refused handshake) is an OSError
            sock.close()
            raise KafkaConnectionError(f"cannot connect to {self.host}:{self.port}: {e}") from None
        self._sock = sock
        try:
            self._converse(self._negotiation())
            if self.sasl is not None:
                self._converse(self._login(self.sasl()))
        except BaseException:
            self.close()
            raise
        return self

    def _converse(self, exchange: Exchange) -> None:
        try:
            step = next(exchange)
            while True:
                self.send(*step)
                step = exchange.send(self.receive())
        except StopIteration:
            pass

    def send(self, message: Message, version: int | None = None) -> None:
        """Write a request; its response is what a later :meth:`receive` returns, in order."""
        sock = self._open()
        if version is None:
            version = self.version(message.API_KEY)
        _, parts = self._sans_io.send_request_parts(message, version)
        try:
            if len(parts) == 1:
                sock.sendall(parts[0])
            else:
                sock.sendall(b"".join(coalesce(parts)))
        except OSError as e:
            raise self._failure("write", e) from None

    def receive(self) -> Message:
        """The response to the oldest request still waiting for one (blocks until it is whole);
        of the request's API's response class (:func:`~gregor.client.core.conn.expect` checks it)."""
        if self._ready:
            return self._ready.pop(0)
        sock = self._open()
        if not self._sans_io.in_flight:
            raise KafkaConnectionError(f"{self}: no request is waiting for a response")
        frames = self._frames
        while True:
            buf = frames.get_buffer()
            flags = self._waitall if frames.frame_remaining else 0
            try:
                n = sock.recv_into(buf, len(buf), flags)
            except OSError as e:
                raise self._failure("read", e) from None
            if not n:
                self.close()
                raise KafkaConnectionError(f"connection to {self} lost: closed by peer")
            try:
                done = frames.buffer_updated(n)
                if done:
                    responses = self._sans_io.receive_frames(done)
            except ProtocolError as e:
                self.close()
                raise KafkaConnectionError(f"bad response from {self}: {e}") from None
            if done:
                self._ready.extend(r.response for r in responses)
                return self._ready.pop(0)

    def request(self, message: Message, version: int | None = None) -> Message:
        if self.in_flight:
            raise KafkaConnectionError(
                f"{self}: {self.in_flight} responses are waiting to be read first"
            )
        self.send(message, version)
        return self.receive()

    def _open(self) -> socket.socket:
        if self._sock is None:
            raise KafkaConnectionError(f"{self} is closed")
        return self._sock

    def _failure(self, what: str, e: OSError) -> Exception:
        self.close()
        if isinstance(
            e, (TimeoutError, BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError)
        ):
            # SO_RCVTIMEO / SO_SNDTIMEO ran out
            return KafkaTimeoutError(f"request to {self} timed out")
        return KafkaConnectionError(f"cannot {what} {self}: {e}")

    def close(self) -> None:
        sock, self._sock = self._sock, None
        self._ready.clear()
        if sock is not None:
            sock.close()


__all__ = ["BlockingConnection"]
