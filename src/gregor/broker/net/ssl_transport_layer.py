"""TLS on a listener's connections: asyncio's TLS protocol, with Kafka's handshake failure.

Theory of operation. ``SslTransportLayer`` is asyncio's own ``SSLProtocol`` (an ``SSLObject``
over two ``MemoryBIO``s, below the connection's protocol; it runs on uvloop's TCP transports
as on asyncio's), with one change. When OpenSSL refuses a handshake (a client without a
certificate where ``ssl.client.auth=required``, a certificate from an untrusted CA, no common
protocol version or cipher) it has written a TLS alert into the outgoing buffer that says why.
asyncio's protocol, like uvloop's (a compiled copy of it), then force-closes the TCP
connection without writing those bytes, so the client sees a connection closed mid-handshake
and treats it as a network failure: the Java client retries until its timeout. Kafka's
``SslTransportLayer`` flushes the alert before it closes, so the client fails at once with
``SslAuthenticationException``. Here, on a refused handshake, the alert is written to the
transport and the transport is closed gracefully (``close()`` sends what it holds first)
instead of aborted. A handshake that does not finish in time, or a peer that went away, is
still aborted as before (there is no alert to send).
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from asyncio import sslproto
from typing import cast


class SslTransportLayer(sslproto.SSLProtocol):
    """asyncio's server-side TLS protocol that sends OpenSSL's alert for a refused handshake
    (see the module docstring)."""

    #: The error OpenSSL refused the handshake with, if it did.
    refused: ssl.SSLError | None = None
    #: The handshake succeeded and the connection's protocol got ``connection_made``.
    established = False

    def _on_handshake_complete(self, handshake_exc: BaseException | None) -> None:
        if isinstance(handshake_exc, ssl.SSLError):
            self.refused = handshake_exc
        self.established = handshake_exc is None
        super()._on_handshake_complete(handshake_exc)

    def _fatal_error(self, exc: BaseException, message: str = "Fatal error on transport") -> None:
        transport = self._transport
        if exc is not self.refused or transport is None:
            super()._fatal_error(exc, message)
            return
        # The refused handshake's alert: written, then the connection closes once it is sent.
        outgoing: ssl.MemoryBIO = self._outgoing  # type: ignore[attr-defined]
        alert = outgoing.read()
        if alert and not transport.is_closing():
            cast(asyncio.WriteTransport, transport).write(alert)
        transport.close()


async def accept_tls(
    loop: asyncio.AbstractEventLoop,
    protocol: asyncio.BaseProtocol,
    sock: socket.socket,
    context: ssl.SSLContext,
) -> None:
    """Serve the accepted socket ``sock`` with TLS below ``protocol``; returns once the
    handshake is done and ``protocol.connection_made`` has been called. A refused handshake
    raises its ``ssl.SSLError`` (its alert is sent and the connection closes by itself), a
    timed-out one ``ConnectionAbortedError``, a client gone mid-handshake ``ConnectionError``.
    The socket belongs to the transport from the start: the caller does not close it."""
    waiter: asyncio.Future[None] = loop.create_future()
    tls = SslTransportLayer(loop, protocol, context, waiter, server_side=True)
    transport, _ = await loop.connect_accepted_socket(lambda: tls, sock)
    try:
        await waiter
    except BaseException:
        if tls.refused is None and not transport.is_closing():
            transport.abort()
        raise
    if not tls.established:  # the connection was lost during the handshake
        raise ConnectionResetError("the client closed the connection during the TLS handshake")
