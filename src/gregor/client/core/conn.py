"""One TCP connection to one broker: asyncio transport around the sans-IO ClientConnection.

Theory of operation. :class:`BrokerConnection` owns an asyncio transport and a
:class:`gregor.protocol.connection.ClientConnection`. ``send`` encodes a request, writes it,
and returns a future; responses come back in order on the same connection, so the protocol's
``data_received`` feeds bytes to the sans-IO connection and resolves the oldest futures as
frames complete. Requests are pipelined (any number may be outstanding); callers that need a
bound (the producer's ``max.in.flight.requests.per.connection``) keep it themselves.

Right after connecting, the connection asks for ApiVersions (v3, or the highest the broker
names when it answers UNSUPPORTED_VERSION with a v0 body) and keeps the broker's ranges;
:meth:`version` then picks the highest version both sides know for each API.

Failure is final for a connection: a socket error, a malformed response or a request timeout
closes it and fails every outstanding future with :class:`KafkaConnectionError` (or
:class:`KafkaTimeoutError`). The owner (:class:`gregor.client.core.client.KafkaClient`) opens a new
one after a backoff.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import time
from collections import deque
from collections.abc import Callable, Generator
from typing import Any, TypedDict, TypeVar, Unpack

from gregor import __version__
from gregor.client.core.errors import (
    KafkaConnectionError,
    KafkaTimeoutError,
    UnsupportedForBrokerError,
)
from gregor.client.core.sasl import SaslClient
from gregor.protocol.connection import ClientConnection
from gregor.protocol.errors import ErrorCode, SaslAuthenticationFailedError
from gregor.protocol.exceptions import ProtocolError
from gregor.protocol.framing import BufferedFrameReader, coalesce
from gregor.protocol.messages import API_KEYS, ApiVersionsRequest, ApiVersionsResponse, Message
from gregor.protocol.messages.sasl_authenticate import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
)
from gregor.protocol.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse

log = logging.getLogger("gregor.client")

CLIENT_SOFTWARE_NAME = "gregor-python"
#: The package's own version (not ``importlib.metadata``'s: that scans every entry of
#: ``sys.path``, Spark's jars among them in a Spark Python worker).
CLIENT_SOFTWARE_VERSION = __version__


class _Protocol(asyncio.BufferedProtocol):
    """The transport reads into the buffers of a ``BufferedFrameReader``: a large response
    (a fetch) goes from the socket into a buffer of its own, with no chunk copied and
    gathered on the way."""

    def __init__(self, conn: BrokerConnection) -> None:
        self.conn = conn
        self.frames = BufferedFrameReader()

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.frames.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        try:
            frames = self.frames.buffer_updated(nbytes)
        except ProtocolError as e:
            self.conn._fail(KafkaConnectionError(f"bad response from {self.conn}: {e}"))
            return
        if frames:
            self.conn._frames_received(frames)

    def connection_lost(self, exc: Exception | None) -> None:
        self.conn._fail(
            KafkaConnectionError(f"connection to {self.conn} lost: {exc or 'closed by peer'}")
        )

    def pause_writing(self) -> None:
        self.conn._writable.clear()

    def resume_writing(self) -> None:
        self.conn._writable.set()


#: A conversation with a broker as a generator: it yields (request, version) and is sent each
#: response, so the asyncio and the blocking connection run the same steps.
Exchange = Generator[tuple[Message, int], Message, None]

R = TypeVar("R", bound=Message)


def expect(response: object, kind: type[R]) -> R:
    """``response``, checked to be ``kind``: the class the request's API answers with (the
    connection decodes a response by its request's API key, so anything else is a bug)."""
    if not isinstance(response, kind):
        raise ProtocolError(f"expected a {kind.__name__}, got {type(response).__name__}")
    return response


class ConnectionOptions(TypedDict, total=False):
    """How to reach a broker, beyond host and port; unset ones take the defaults shown."""

    node_id: int  # -1 (a bootstrap server)
    client_id: str | None  # "gregor"
    request_timeout_ms: int  # 30000
    connect_timeout_ms: int  # 10000
    ssl_context: ssl.SSLContext | None  # None: no TLS
    sasl: Callable[[], SaslClient] | None  # None: no SASL login


class ConnectionBase:
    """What both connection kinds share: where and how to connect, the sans-IO protocol state,
    the broker's API version ranges, the ApiVersions negotiation and the SASL login (as
    :data:`Exchange` generators), and version choice."""

    def __init__(self, host: str, port: int, **options: Unpack[ConnectionOptions]) -> None:
        self.host = host
        self.port = port
        #: TLS (SSL / SASL_SSL): the server's name is checked as the context says.
        self.ssl_context = options.get("ssl_context")
        #: SASL (SASL_PLAINTEXT / SASL_SSL): a fresh login exchange per connection.
        self.sasl = options.get("sasl")
        self.node_id = options.get("node_id", -1)
        self.request_timeout = options.get("request_timeout_ms", 30000) / 1000
        self.connect_timeout = options.get("connect_timeout_ms", 10000) / 1000
        self._sans_io = ClientConnection(options.get("client_id", "gregor"))
        self.api_versions: dict[int, tuple[int, int]] = {}

    def __repr__(self) -> str:
        return f"<{type(self).__name__} node={self.node_id} {self.host}:{self.port}>"

    def __str__(self) -> str:
        """How the connection reads in an error message: its address (and broker id)."""
        where = f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"
        return where if self.node_id < 0 else f"broker {self.node_id} at {where}"

    def close(self) -> None:
        raise NotImplementedError

    def _negotiation(self) -> Exchange:
        req = ApiVersionsRequest(
            client_software_name=CLIENT_SOFTWARE_NAME,
            client_software_version=CLIENT_SOFTWARE_VERSION,
        )
        resp = expect((yield req, 3), ApiVersionsResponse)
        if resp.error_code == ErrorCode.UNSUPPORTED_VERSION:
            # The broker listed its ranges in a v0 body: retry with the highest it knows.
            theirs = {k.api_key: k.max_version for k in resp.api_keys}
            resp = expect(
                (yield req, min(theirs.get(ApiVersionsRequest.API_KEY, 0), 3)), ApiVersionsResponse
            )
        if resp.error_code:
            self.close()
            raise KafkaConnectionError(f"ApiVersions failed on {self}: error {resp.error_code}")
        self.api_versions = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}

    def _login(self, login: SaslClient) -> Exchange:
        """SaslHandshake, then SaslAuthenticate until the mechanism is done (KIP-152)."""
        hello = expect(
            (yield SaslHandshakeRequest(mechanism=login.mechanism), self.version(17, 1)),
            SaslHandshakeResponse,
        )
        if hello.error_code:
            raise SaslAuthenticationFailedError(
                f"{self} does not enable SASL mechanism {login.mechanism} (it offers {hello.mechanisms})"
            )
        version = self.version(36, 2)
        token: bytes | None = login.first()
        while token is not None:
            resp = expect(
                (yield SaslAuthenticateRequest(auth_bytes=token), version), SaslAuthenticateResponse
            )
            if resp.error_code:
                raise SaslAuthenticationFailedError(
                    resp.error_message or f"{login.mechanism} login refused"
                )
            token = login.respond(bytes(resp.auth_bytes))

    def supports(self, api_key: int, min_version: int = 0) -> bool:
        rng = self.api_versions.get(api_key)
        info = API_KEYS.get(api_key)
        if rng is None or info is None:
            return False
        return min(rng[1], info.max_version) >= max(rng[0], info.min_version, min_version)

    def version(self, api_key: int, max_version: int | None = None, min_version: int = 0) -> int:
        """The highest version of ``api_key`` both this codec and the broker speak."""
        info = API_KEYS[api_key]
        rng = self.api_versions.get(api_key)
        if rng is None:
            raise UnsupportedForBrokerError(f"{self} does not support {info.name}")
        hi = min(rng[1], info.max_version)
        if max_version is not None:
            hi = min(hi, max_version)
        lo = max(rng[0], info.min_version, min_version)
        if hi < lo:
            raise UnsupportedForBrokerError(
                f"{self} supports {info.name} v{rng[0]}-{rng[1]}, need v{lo}+"
            )
        return hi


class BrokerConnection(ConnectionBase):
    """A connection to broker ``node_id`` at ``host:port`` (node_id -1.. for bootstrap)."""

    def __init__(self, host: str, port: int, **options: Unpack[ConnectionOptions]) -> None:
        super().__init__(host, port, **options)
        self._transport: asyncio.Transport | None = None
        self._futures: deque[tuple[asyncio.Future[Message | None], float]] = deque()
        self._writable = asyncio.Event()
        self._writable.set()
        self._closed = False
        self._error: Exception | None = None
        self._timer: asyncio.TimerHandle | None = None
        self.last_used = time.monotonic()

    @property
    def connected(self) -> bool:
        return self._transport is not None and not self._closed

    @property
    def in_flight(self) -> int:
        return len(self._futures)

    async def connect(self) -> BrokerConnection:
        loop = asyncio.get_running_loop()
        try:
            transport, _ = await asyncio.wait_for(
                loop.create_connection(
                    lambda: _Protocol(self),
                    self.host,
                    self.port,
                    ssl=self.ssl_context,
                    server_hostname=self.host if self.ssl_context is not None else None,
                ),
                self.connect_timeout,
            )
        except (TimeoutError, OSError) as e:  # ssl.SSLError (a refused handshake) is an OSError
            self._closed = True
            raise KafkaConnectionError(f"cannot connect to {self.host}:{self.port}: {e}") from None
        self._transport = transport
        try:
            # ApiVersions is part of setting the connection up: a peer that is not a Kafka
            # listener (silent, or answering something else) fails within the setup timeout
            await self._converse(self._negotiation(), timeout=self.connect_timeout)
        except (KafkaTimeoutError, KafkaConnectionError) as e:
            self.close()
            why = (
                f"no answer within {self.connect_timeout * 1000:.0f} ms"
                if isinstance(e, KafkaTimeoutError)
                else str(e).replace(f" from {self}", "").replace(f" to {self}", "")
            )
            raise KafkaConnectionError(
                f"{self} did not complete Kafka's handshake (ApiVersions: {why}): is it a Kafka listener, "
                "with the right security.protocol?"
            ) from None
        if self.sasl is not None:
            try:
                await self._authenticate(self.sasl())
            except BaseException:
                self.close()
                raise
        return self

    async def _converse(self, exchange: Exchange, timeout: float | None = None) -> None:
        """Run a request/response exchange (:meth:`ConnectionBase._negotiation`, ``_login``);
        ``timeout`` (seconds) for each answer instead of ``request.timeout.ms``."""
        try:
            step = next(exchange)
            while True:
                step = exchange.send(await self.send(*step, timeout=timeout))
        except StopIteration:
            pass

    async def _authenticate(self, login: SaslClient) -> None:
        await self._converse(self._login(login))

    def send(
        self, message: Message, version: int | None = None, *, timeout: float | None = None
    ) -> asyncio.Future[Any]:
        """Write a request; the future resolves to the response (None for acks=0 produce): the
        response class of the request's API, which the caller names where it takes it
        (``resp: FetchResponse = await conn.send(...)``)."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Message | None] = loop.create_future()
        if self._closed or self._transport is None:
            fut.set_exception(self._error or KafkaConnectionError(f"{self} is closed"))
            return fut
        if version is None:
            version = self.version(message.API_KEY)
        try:
            _, parts = self._sans_io.send_request_parts(message, version)
        except ProtocolError as e:
            fut.set_exception(e)
            return fut
        if len(parts) == 1:
            self._transport.write(parts[0])
        else:  # a produce's record batches (64 KiB and up) go out as they are: one writev, no join
            self._transport.writelines(coalesce(parts))
        self.last_used = time.monotonic()
        if not self._sans_io.expects_response(message):
            fut.set_result(None)
            return fut
        deadline = self.last_used + (self.request_timeout if timeout is None else timeout)
        self._futures.append((fut, deadline))
        if self._timer is None:
            self._arm_timer(loop)
        return fut

    async def request(
        self, message: Message, version: int | None = None, *, timeout: float | None = None
    ) -> Any:
        return await self.send(message, version, timeout=timeout)

    async def drain(self) -> None:
        """Wait while the transport's write buffer is above its high-water mark."""
        await self._writable.wait()

    def _arm_timer(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._futures:
            delay = max(0.0, self._futures[0][1] - time.monotonic())
            self._timer = loop.call_later(delay + 0.001, self._check_timeout)
        else:
            self._timer = None

    def _check_timeout(self) -> None:
        self._timer = None
        if not self._futures or self._closed:
            return
        if self._futures[0][1] <= time.monotonic():
            self._fail(KafkaTimeoutError(f"request to {self} timed out"))
            return
        self._arm_timer(asyncio.get_running_loop())

    def _frames_received(self, frames: list[memoryview | bytes]) -> None:
        try:
            responses = self._sans_io.receive_frames(frames)
        except ProtocolError as e:
            self._fail(KafkaConnectionError(f"bad response from {self}: {e}"))
            return
        futures = self._futures
        for r in responses:
            fut, _ = futures.popleft()
            if not fut.done():
                fut.set_result(r.response)

    def _fail(self, exc: Exception) -> None:
        if self._error is None:
            self._error = exc
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        transport, self._transport = self._transport, None
        if transport is not None:
            transport.abort()
        futures, self._futures = self._futures, deque()
        for fut, _ in futures:
            if not fut.done():
                fut.set_exception(exc)
        self._writable.set()

    def close(self) -> None:
        self._fail(KafkaConnectionError(f"{self} closed"))

    async def aclose(self) -> None:
        self.close()
        with contextlib.suppress(Exception):
            await asyncio.sleep(0)
