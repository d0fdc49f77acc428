"""The asyncio server: accept, read frames, answer in order, write responses.

Theory of operation. Each connection feeds the bytes it receives into a ``FrameDecoder`` and
one task at a time handles the whole frames strictly one after another (``Connection``), so
responses leave in request order and a connection's requests never race each other (an
idempotent producer pipelines up to five produce requests and relies on that). A frame larger
than ``socket.request.max.bytes`` closes that connection only; everything about a frame's
content is the ``Dispatcher``'s business. Connections come from the listener's ``Acceptor``
(``acceptor``), which applies the connection limits (``connection_quotas``); a connection
gives its slot back when it closes. On an SSL or SASL_SSL listener asyncio runs TLS
below the connection (the handshake is done before ``connection_made``; the acceptor logs a
failed one); on an SSL listener the principal comes from the client certificate, and on a SASL
listener the connection carries a ``SaslSession`` the dispatcher consults until the login
succeeds. Until then a size prefix over ``sasl.server.max.receive.size`` (512 KiB) closes the
connection before a byte of that frame is buffered (Kafka's fix for CVE-2022-34917): a
stranger costs the broker a login's worth of memory, not ``socket.request.max.bytes``. The
frame decoder's limit is simply lower until the login completes, so the check costs nothing
more per frame. A client that hangs up while its request waits (a
long-poll fetch) is released at once. A connection with no
request in hand and nothing received or sent for ``connections.max.idle.ms`` is closed by
``connection_expiry.close_idle``, which the broker calls periodically.

Shutdown (SIGTERM/SIGINT): stop accepting, let each connection finish the request it is
handling, close the logs (flush, clean-shutdown marker), exit 0.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Protocol

from gregor.broker.common.events import log_event
from gregor.broker.common.file_send import SendableRegion, TruncatedRegionError, socket_fd
from gregor.broker.config.broker_config import Listener
from gregor.broker.config.listener_security import ListenerSecurity
from gregor.broker.net.acceptor import AcceptedConnection, Acceptor, bind_listener
from gregor.broker.net.authenticator import SaslSession, ScramLookup, TokenLookup
from gregor.broker.net.connection_quotas import ConnectionQuotas
from gregor.broker.state import ConnectionInfo
from gregor.protocol.exceptions import ProtocolError
from gregor.protocol.framing import FrameDecoder, FrameTooLarge
from gregor.security.principal import PrincipalMappingError, dn_from_peercert
from gregor.security.scram import ScramCredential

log = logging.getLogger("gregor.broker")

#: Frames queued on a connection before it stops reading from the socket for a while.
MAX_QUEUED_FRAMES = 64
#: Gathered responses are written at once when they reach this size.
FLUSH_BYTES = 64 * 1024


class ServerHost(Protocol):
    """What a connection needs of the broker."""

    @property
    def stopping(self) -> bool: ...

    @property
    def connections(self) -> set[Connection]: ...

    @property
    def max_request_bytes(self) -> int: ...

    @property
    def connection_quotas(self) -> ConnectionQuotas: ...

    def handle_frame(self, conn: Connection, frame: memoryview | bytes) -> Awaitable[bool]: ...

    def scram_credential(self, user: str, mechanism: str) -> ScramCredential | None: ...

    def connection_throttle_ms(self, ip: str) -> int:
        """0 to take a new connection from ``ip``, or how long to hold it before closing it
        (its IP is over its ``connection_creation_rate`` quota)."""
        ...

    def token_login(
        self, token_id: str, mechanism: str
    ) -> tuple[ScramCredential, str, int] | None: ...

    def network_totals(self, listener: str) -> list[int]:
        """The listener's [bytes read, bytes written, connections accepted, closed] counters."""
        ...


class Connection(AcceptedConnection):
    """One client connection, and the per-connection state handlers may use (fetch sessions,
    SASL state, peer address).

    Bytes arrive in ``data_received`` straight from the transport and go into the
    ``FrameDecoder`` (not a ``BufferedFrameReader`` as in the client: requests are mostly
    smaller than uvloop's reads, which then carry several whole frames per system call, and
    measured, the buffered receive made 1 KiB produce about 5% slower here); whole frames wait
    in a queue that one task at a time works through in
    order (started when frames arrive and the connection is idle). When many frames are
    queued, reading pauses until the task has caught up.

    Responses are gathered and written once per turn of the event loop: a client that
    pipelines requests (librdkafka keeps many produce requests in flight) gets all the
    responses ready in one pass in one write instead of a write system call each. The gathered
    responses go out when the connection's task yields, whether because it has handled every
    queued frame or because a handler waits (long poll); big ones (fetches) go at once. When
    the transport's write buffer is full the task waits for it to drain before handling more.

    Fetched records go out of their segment file with ``sendfile`` (``file_send``) when the
    transport holds nothing unsent. What the socket does not take at once stays a region: a
    duplicate of the socket's descriptor is watched for writability and ``sendfile`` goes on
    from where it stopped, while every later response waits behind the region in ``_held``
    and the task, as for a full write buffer, handles no more requests until it is out.
    """

    def __init__(
        self,
        host: ServerHost,
        listener: str,
        security_protocol: str,
        security: ListenerSecurity | None = None,
        scram_lookup: ScramLookup | None = None,
        token_lookup: TokenLookup | None = None,
    ) -> None:
        self.host = host
        self._loop = loop = asyncio.get_running_loop()
        self.info = ConnectionInfo("?", listener, security_protocol, loop.create_future())
        self._net = host.network_totals(listener)  # shared with the listener's other connections
        self.security = security
        #: The SASL login in progress on a SASL listener; None elsewhere.
        self.sasl: SaslSession | None = None
        self._decoder = FrameDecoder(host.max_request_bytes)
        if security is not None and security.sasl:
            self.sasl = SaslSession(
                security, scram_lookup or (lambda user, mechanism: None), token_lookup
            )
            # Until the login has succeeded, a size prefix over the login limit closes the
            # connection before anything of that frame is buffered.
            self._decoder.max_frame_size = min(security.max_receive_size, host.max_request_bytes)
            self.sasl.on_login = self._logged_in
        #: Gives the connection's slot back to the connection limits (set by the acceptor).
        self.release: Callable[[], None] | None = None
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.busy = False
        self.last_active = loop.time()
        self._frames: deque[memoryview | bytes] = deque()
        #: When each queued frame's last bytes arrived (perf_counter), beside ``_frames``.
        self._arrivals: deque[float] = deque()
        #: When the frame being handled arrived: the dispatcher's request queue time.
        self.frame_arrival = 0.0
        self._task: asyncio.Task[None] | None = None
        self._reading_paused = False
        self._writing_paused = False
        self._drained: asyncio.Future[None] | None = None
        self._out: list[bytes | bytearray | memoryview] = []
        #: The socket, for fetched records sent with sendfile (plain TCP only).
        self._sock_fd: int | None = None
        #: A region the socket took only part of (``_region_sent`` bytes), and the output
        #: behind it; ``_watch_fd`` is the socket's duplicate watched while it waits.
        self._region: SendableRegion | None = None
        self._region_sent = 0
        self._held: deque[bytes | bytearray | memoryview | SendableRegion] = deque()
        self._watch_fd: int | None = None
        self._out_bytes = 0
        self._flush_scheduled = False
        self._close_after_current = False  # bad bytes arrived while a request was in hand
        self._eof = False  # the client has shut down its sending side

    # --- asyncio.Protocol ---

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transport is not an asyncio.Transport subclass, but has its methods.
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        self.info.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.host.connections.add(self)
        self._net[2] += 1
        self._sock_fd = socket_fd(transport)
        self.info.sendfile = self._sock_fd is not None
        mapper = self.security.principal_mapper if self.security is not None else None
        if mapper is not None:
            # An SSL listener: the TLS handshake is done; the principal comes from the
            # client's (verified) certificate, ANONYMOUS without one.
            ssl_object = transport.get_extra_info("ssl_object")
            cert = ssl_object.getpeercert() if ssl_object is not None else None
            if cert and cert.get("subject"):
                dn = dn_from_peercert(cert["subject"])
                try:
                    self.info.principal = "User:" + mapper.principal_name(dn)
                    log_event(
                        log,
                        "ssl.authenticated",
                        logging.DEBUG,
                        peer=self.info.peer,
                        listener=self.info.listener,
                        principal=self.info.principal,
                    )
                except PrincipalMappingError as e:
                    log_event(
                        log,
                        "connection.closed",
                        logging.WARNING,
                        peer=self.info.peer,
                        reason=str(e),
                    )
                    self.close()

    @property
    def peer(self) -> str:
        return self.info.peer

    def _logged_in(self) -> None:
        """The SASL login succeeded: frames up to socket.request.max.bytes from now on."""
        self._decoder.max_frame_size = self.host.max_request_bytes

    def _release_slot(self) -> None:
        release, self.release = self.release, None
        if release is not None:
            release()

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        self._net[0] += len(data)
        self.last_active = asyncio.get_running_loop().time()
        try:
            frames = self._decoder.feed(data)
        except ProtocolError as e:
            if (
                isinstance(e, FrameTooLarge)
                and self.sasl is not None
                and not self.sasl.authenticated
            ):
                # Kafka: "Failing SASL authentication due to invalid receive size".
                log_event(
                    log,
                    "sasl.authentication_failed",
                    logging.INFO,
                    peer=self.info.peer,
                    listener=self.info.listener,
                    reason=f"invalid receive (size = {e.size} larger than {e.max_size}) before authentication",
                )
            else:
                log_event(
                    log, "connection.closed", logging.WARNING, peer=self.info.peer, reason=str(e)
                )
            self._frames.clear()
            self._arrivals.clear()
            if self._task is None:
                self.close()
            else:
                self._close_after_current = True
            return
        if not frames:
            return
        self._frames.extend(frames)
        self._arrivals.extend([time.perf_counter()] * len(frames))
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._work())
        if len(self._frames) >= MAX_QUEUED_FRAMES and not self._reading_paused:
            self._reading_paused = True
            self.transport.pause_reading()  # type: ignore[union-attr]

    def eof_received(self) -> bool | None:
        # The client will send no more: answer what is queued (a waiting long poll at once,
        # with what it has), then close.
        self._eof = True
        if not self.info.hung_up.done():
            self.info.hung_up.set_result(None)
        if self._task is None:
            self.close()
        return True

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._release_slot()
        self._frames.clear()
        self._arrivals.clear()
        self._drop_regions()
        if self in self.host.connections:
            self.host.connections.discard(self)
            self._net[3] += 1
        self._wake_writer()
        if not self.info.hung_up.done():
            # A request that waits (a long-poll fetch) is released now rather than when its
            # wait would have ended.
            self.info.hung_up.set_result(None)

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
                    if self._region is not None:  # as Kafka: no request until the fetch is out
                        await self._wait_drained()
                        continue
                    frame = frames.popleft()
                    self.frame_arrival = self._arrivals.popleft()
                    self.busy = True
                    try:
                        ok = await self.host.handle_frame(self, frame)
                    finally:
                        self.busy = False
                    if not ok or self.host.stopping or self._close_after_current:
                        self.flush(final=True)
                        self.close()
                        return
                    if (
                        self._reading_paused
                        and len(frames) <= MAX_QUEUED_FRAMES // 2
                        and not self.closed
                    ):
                        self._reading_paused = False
                        self.transport.resume_reading()  # type: ignore[union-attr]
                self.flush()
                if self._must_wait() and not self.closed:
                    while self._must_wait() and not self.closed:
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

    def send(self, data: bytes | bytearray | memoryview | SendableRegion) -> None:
        if self.closed:
            if isinstance(data, SendableRegion):
                data.close()
            return
        self._net[1] += len(data)
        if self._region is not None:  # behind a region still being sent
            self._held.append(data)
        elif isinstance(data, SendableRegion):
            self.last_active = asyncio.get_running_loop().time()
            self._send_region(data)
        else:
            self._queue(data)

    def _queue(self, data: bytes | bytearray | memoryview) -> None:
        """Gather ``data`` for the next flush (at once when the gathered bytes are many)."""
        self.last_active = asyncio.get_running_loop().time()
        if self._region is not None:
            self._held.append(data)
            return
        self._out.append(data)
        self._out_bytes += len(data)
        if self._out_bytes >= FLUSH_BYTES:
            self.flush()  # big responses (fetches) go out at once, as the socket takes them
        elif not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self.flush)

    def _send_region(self, region: SendableRegion) -> None:
        """Send fetched records from their file (see ``file_send``): what was gathered goes
        first, then sendfile while the transport holds nothing unsent; what the socket does
        not take now waits for it (``_region_writable``). Where sendfile cannot go (TLS, bytes
        still queued in the transport) the region is read with pread and written."""
        rest = b""
        try:
            sent = 0
            if self._sock_fd is not None and self.transport is not None:
                self.flush()
                if not self.transport.get_write_buffer_size() and not self.transport.is_closing():
                    sent = region.send_to(self._sock_fd)
                    if sent < len(region) and self._watch_writable():
                        self._region, self._region_sent = region, sent
                        return
            if sent < len(region):
                rest = region.read_from(sent)
        except (TruncatedRegionError, OSError) as e:
            self._region_failed(e)
        region.close()
        if rest:
            self._queue(rest)

    def _region_failed(self, e: Exception) -> None:
        # The response's length promised bytes that are gone (or the socket failed): the
        # client must not get a short frame.
        log_event(log, "connection.closed", logging.WARNING, peer=self.info.peer, reason=str(e))
        self.close()

    def _watch_writable(self) -> bool:
        """Have ``_region_writable`` called when the socket takes bytes again (through a
        duplicate of its descriptor: the transport's own is the event loop's)."""
        assert self._sock_fd is not None
        try:
            if self._watch_fd is None:
                self._watch_fd = os.dup(self._sock_fd)
            self._loop.add_writer(self._watch_fd, self._region_writable)
        except (OSError, RuntimeError, ValueError):
            return False
        return True

    def _region_writable(self) -> None:
        region = self._region
        if region is None or self.closed or self._sock_fd is None:
            self._drop_regions()
            return
        try:
            self._region_sent += region.send_to(self._sock_fd, self._region_sent)
        except (TruncatedRegionError, OSError) as e:
            self._region_failed(e)
            return
        self.last_active = asyncio.get_running_loop().time()
        if self._region_sent < len(region):
            return
        self._unwatch()
        self._region = None
        region.close()
        held, self._held = self._held, deque()
        while held and self._region is None and not self.closed:
            item = held.popleft()
            if isinstance(item, SendableRegion):
                self._send_region(item)
            else:
                self._queue(item)
        if held:  # behind another region the socket took only part of
            self._held.extendleft(reversed(held))
        if not self._must_wait():
            self._wake_writer()

    def _unwatch(self) -> None:
        if self._watch_fd is not None:
            try:
                self._loop.remove_writer(self._watch_fd)
            except (RuntimeError, OSError, ValueError):  # the loop is closed: nothing to remove
                pass

    def _must_wait(self) -> bool:
        """The task handles no more requests until the output ahead of them is out."""
        return self._writing_paused or self._region is not None

    def _drop_regions(self) -> None:
        """The connection is gone: give up what waits to be sent, and the descriptors."""
        self._unwatch()
        if self._watch_fd is not None:
            os.close(self._watch_fd)
            self._watch_fd = None
        if self._region is not None:
            self._region.close()
            self._region = None
        for item in self._held:
            if isinstance(item, SendableRegion):
                item.close()
        self._held.clear()

    def _write_regions(self) -> None:
        """Before a close: what waits behind a region goes into the transport (read with
        pread), which writes it out before it closes."""
        region, sent = self._region, self._region_sent
        if region is None:
            return
        self._unwatch()
        self._region = None
        parts: list[bytes | bytearray | memoryview] = []
        try:
            parts.append(region.read_from(sent))
            for item in self._held:
                parts.append(item.read_from(0) if isinstance(item, SendableRegion) else item)
        except (TruncatedRegionError, OSError) as e:
            self._held.appendleft(region)
            self._region_failed(e)
            return
        region.close()
        self._drop_regions()
        self._out[:0] = parts

    def flush(self, final: bool = False) -> None:
        """Write the gathered responses (also called from the loop after a send); ``final``
        (the connection is closing) also what waits behind a region."""
        self._flush_scheduled = False
        if final and not self.closed:
            self._write_regions()
        elif self._region is not None:
            return  # the gathered bytes came before the region: already written
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
        while self._must_wait() and not self.closed:
            await self._wait_drained()

    @property
    def has_queued_frames(self) -> bool:
        return bool(self._frames)

    def close(self) -> None:
        self.closed = True
        self._frames.clear()
        self._arrivals.clear()
        self._drop_regions()
        self._release_slot()  # counted as closed now, so limits see the slot free at once
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()


async def start_listener(
    host: ServerHost,
    listener: Listener,
    security_protocol: str,
    security: ListenerSecurity | None = None,
) -> tuple[Acceptor, int]:
    """Bind ``listener`` (port 0: any free port); the caller calls ``start_serving()``. With
    ``security`` the listener speaks TLS (its ``ssl_context``) and/or requires SASL. The
    host's ``connection_quotas`` limit what it accepts."""
    factory: Callable[[], Connection] = lambda: Connection(  # noqa: E731
        host, listener.name, security_protocol, security, host.scram_credential, host.token_login
    )
    ssl_context = security.ssl_context if security is not None else None
    acceptor = await bind_listener(
        listener.name,
        listener.host,
        listener.port,
        factory,
        host.connection_quotas,
        host,
        ssl_context,
    )
    return acceptor, acceptor.port
