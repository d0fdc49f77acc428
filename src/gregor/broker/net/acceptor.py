"""One listener's accept loop: Kafka's Acceptor, with its connection limits.

Theory of operation. ``bind_listener`` binds the listener's sockets (as ``create_server``
would: every address of the host, port 0 for any free port) and returns an ``Acceptor``,
which takes connections once ``start_serving()`` is called. It watches the listening sockets
on the event loop; when one is readable it accepts connections while its listener has a free
slot (``ConnectionQuotas.slot_available``). With no free slot it stops watching: the clients
wait in the kernel's accept queue, as they wait behind Kafka's blocked acceptor thread, and
``ConnectionQuotas`` wakes it when a connection closes or a limit is raised. Each accepted
socket then goes through, in Kafka's order:

1. the ``connection_creation_rate`` quota of its IP (KIP-612): over it, the socket is held
   unread and closed once its throttle time has passed (Kafka's delayed close), uncounted;
2. ``max.connections.per.ip``: over it, the socket is closed at once (and logged, rate
   limited);
3. counted, it gets its transport (``loop.connect_accepted_socket``) and its ``Connection``,
   which gives the count back when it closes. On an SSL or SASL_SSL listener the TLS
   handshake runs first (``ssl_transport_layer``: a refused handshake's TLS alert reaches the
   client, as from Kafka); a refused handshake (no common protocol, an untrusted client
   certificate, plain text on a TLS port, a timeout) gives the count back and is logged with
   the peer and the reason, at most ``HANDSHAKE_LOG_LIMIT`` lines per ten seconds, with the
   number of lines left out.

Accepting fails when the process is out of descriptors (EMFILE): the acceptor then pauses for
a second, as asyncio's own does.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
import ssl
from collections.abc import Callable
from typing import Protocol

from gregor.broker.common.events import LogRateLimit, log_event
from gregor.broker.net.connection_quotas import ConnectionQuotas, normalize_ip
from gregor.broker.net.ssl_transport_layer import accept_tls

log = logging.getLogger("gregor.broker")

#: Connections accepted per wake-up before other work gets the loop again.
ACCEPT_BATCH = 64
#: Pause after the process ran out of descriptors or memory while accepting (seconds).
ACCEPT_RETRY_DELAY = 1.0
#: Refused TLS handshakes (and refused connections) logged per ten seconds.
HANDSHAKE_LOG_LIMIT = 10
_RESOURCE_ERRORS = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)


class AcceptedConnection(asyncio.Protocol):
    """What the acceptor needs of a new connection's protocol (``server.Connection``): an
    asyncio protocol that calls ``release`` once when it closes."""

    release: Callable[[], None] | None


class AcceptorHost(Protocol):
    def connection_throttle_ms(self, ip: str) -> int: ...


def _bind(host: str, port: int, backlog: int) -> list[socket.socket]:
    """Listening sockets on every address of ``host`` (all interfaces for ""), all on one port
    (with port 0: the one the first address got)."""
    infos = socket.getaddrinfo(
        host or None, port, socket.AF_UNSPEC, socket.SOCK_STREAM, 0, socket.AI_PASSIVE
    )
    sockets: list[socket.socket] = []
    seen: set[tuple[int, object]] = set()
    try:
        for family, kind, proto, _, address in infos:
            if (family, address) in seen:
                continue
            seen.add((family, address))
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6 and hasattr(socket, "IPPROTO_IPV6"):
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            if port == 0 and len(sockets) > 1:  # every address on the port the first one got
                address = (address[0], sockets[0].getsockname()[1], *address[2:])
            try:
                sock.bind(address)
            except OSError as e:  # worded as asyncio's create_server words it
                raise OSError(
                    e.errno,
                    f"error while attempting to bind on address {address!r}: {(e.strerror or '').lower()}",
                ) from None
            sock.listen(backlog)
            sock.setblocking(False)
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    if not sockets:
        raise OSError(f"no address to listen on for {host!r}")
    return sockets


class Acceptor:
    """One listener's accept loop (see the module docstring)."""

    def __init__(
        self,
        listener: str,
        sockets: list[socket.socket],
        factory: Callable[[], AcceptedConnection],
        quotas: ConnectionQuotas,
        host: AcceptorHost,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.listener = listener
        self.sockets = sockets
        self._factory = factory
        self._quotas = quotas
        self._host = host
        self._ssl = ssl_context
        self._loop = asyncio.get_running_loop()
        self.serving = False
        #: Not accepting: the listener has no free slot (``ConnectionQuotas``).
        self.waiting_for_slot = False
        self._watching = False
        self._closed = False
        self._pending: set[asyncio.Task[None]] = set()
        self._throttled: set[socket.socket] = set()
        self._handshake_log = LogRateLimit(HANDSHAKE_LOG_LIMIT)
        self._refusal_log = LogRateLimit(HANDSHAKE_LOG_LIMIT)
        self._limit_log = LogRateLimit(HANDSHAKE_LOG_LIMIT)
        quotas.on_slot_free.append(self._slot_freed)

    @property
    def port(self) -> int:
        port: int = self.sockets[0].getsockname()[1]
        return port

    async def start_serving(self) -> None:
        self.serving = True
        self._watch()

    def close(self) -> None:
        """Stop accepting and close the listening sockets (connections stay)."""
        self._closed = True
        self.serving = False
        self._unwatch()
        if self._slot_freed in self._quotas.on_slot_free:
            self._quotas.on_slot_free.remove(self._slot_freed)
        for sock in self.sockets:
            sock.close()
        for sock in self._throttled:
            sock.close()
        self._throttled.clear()

    # --- watching the listening sockets ---

    def _watch(self) -> None:
        if self._watching or self._closed or not self.serving:
            return
        self._watching = True
        for sock in self.sockets:
            self._loop.add_reader(sock.fileno(), self._accept, sock)

    def _unwatch(self) -> None:
        if not self._watching:
            return
        self._watching = False
        for sock in self.sockets:
            try:
                self._loop.remove_reader(sock.fileno())
            except (OSError, ValueError, RuntimeError):  # closed socket or loop
                pass

    def _slot_freed(self) -> None:
        if self.waiting_for_slot and self._quotas.slot_available(self.listener):
            self.waiting_for_slot = False
            self._watch()

    def _resume_after_error(self) -> None:
        if not self.waiting_for_slot:
            self._watch()

    # --- accepting ---

    def _accept(self, listening: socket.socket) -> None:
        for _ in range(ACCEPT_BATCH):
            if not self._quotas.slot_available(self.listener):
                self.waiting_for_slot = True
                self._unwatch()
                if self._limit_log.allow():
                    log_event(
                        log,
                        "connection.limit_reached",
                        logging.INFO,
                        listener=self.listener,
                        listener_connections=self._quotas.listener_counts.get(self.listener, 0),
                        total=self._quotas.total,
                        suppressed=self._limit_log.take_suppressed(),
                    )
                return
            try:
                sock, address = listening.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                if e.errno in _RESOURCE_ERRORS:
                    log_event(
                        log,
                        "connection.accept_failed",
                        logging.ERROR,
                        listener=self.listener,
                        reason=str(e),
                    )
                    self._unwatch()
                    self._loop.call_later(ACCEPT_RETRY_DELAY, self._resume_after_error)
                return  # ECONNABORTED and the like: that client is gone
            self._admit(sock, address)

    def _admit(self, sock: socket.socket, address: object) -> None:
        ip = normalize_ip(str(address[0])) if isinstance(address, tuple) else "?"
        peer = f"{address[0]}:{address[1]}" if isinstance(address, tuple) else "?"
        sock.setblocking(False)
        throttle_ms = self._host.connection_throttle_ms(ip)
        if throttle_ms > 0:
            # KIP-612: over its IP's connection rate, the connection takes no request and is
            # closed once the throttle time has passed (Kafka's delayed close).
            log_event(log, "connection.throttled", logging.INFO, peer=peer, throttle_ms=throttle_ms)
            self._throttled.add(sock)
            self._loop.call_later(throttle_ms / 1000, self._close_throttled, sock)
            return
        limit = self._quotas.inc(self.listener, ip)
        if limit is not None:
            sock.close()
            if self._refusal_log.allow():
                log_event(
                    log,
                    "connection.rejected",
                    logging.INFO,
                    peer=peer,
                    listener=self.listener,
                    reason=f"address already has the configured maximum of {limit} connections",
                    suppressed=self._refusal_log.take_suppressed(),
                )
            return
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                self._quotas.dec(self.listener, ip)

        conn = self._factory()
        conn.release = release
        task = self._loop.create_task(self._connect(conn, sock, peer, release))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _connect(
        self, conn: AcceptedConnection, sock: socket.socket, peer: str, release: Callable[[], None]
    ) -> None:
        try:
            if self._ssl is None:
                await self._loop.connect_accepted_socket(lambda: conn, sock)
            else:
                # The transport owns the socket from here on (it sends a refused handshake's
                # alert before it closes): nothing to close here.
                await accept_tls(self._loop, conn, sock, self._ssl)
        except (OSError, ssl.SSLError, TimeoutError, EOFError, ValueError) as e:
            release()
            if self._ssl is None:
                sock.close()
            if self._ssl is not None and self._handshake_log.allow():
                log_event(
                    log,
                    "ssl.handshake_failed",
                    logging.INFO,
                    peer=peer,
                    listener=self.listener,
                    reason=_handshake_reason(e),
                    suppressed=self._handshake_log.take_suppressed(),
                )

    def _close_throttled(self, sock: socket.socket) -> None:
        self._throttled.discard(sock)
        _drain_and_close(sock)


def _drain_and_close(sock: socket.socket) -> None:
    """Close a socket the broker never read from, after reading what the client already sent
    (a little): closing with unread bytes would reset the connection instead of ending it."""
    try:
        for _ in range(16):
            if not sock.recv(65536):
                break
    except OSError:  # nothing more to read (EAGAIN), or the client is gone
        pass
    sock.close()


def _handshake_reason(e: BaseException) -> str:
    if isinstance(e, ssl.SSLError):
        return e.reason or str(e)
    if isinstance(e, TimeoutError):
        return "handshake timed out"
    return str(e) or type(e).__name__


async def bind_listener(
    listener: str,
    host: str,
    port: int,
    factory: Callable[[], AcceptedConnection],
    quotas: ConnectionQuotas,
    server_host: AcceptorHost,
    ssl_context: ssl.SSLContext | None = None,
) -> Acceptor:
    """Bind ``host:port`` (port 0: a free one) for ``listener``; ``start_serving()`` starts
    taking connections."""
    sockets = _bind(host, port, backlog=1024)
    return Acceptor(listener, sockets, factory, quotas, server_host, ssl_context)
