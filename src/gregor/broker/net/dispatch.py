"""From a request frame to its handler, and the protocol-level error paths.

Every request passes through ``Dispatcher.handle_frame``: the header is decoded, the API key
and version are looked up in the handler table (which is also what ApiVersions advertises),
the body is decoded with the generated codec and the handler is called with a typed
``RequestContext``. A frame whose header or body cannot be parsed, an unknown API key or a
version we do not serve closes that connection only (as Kafka does), except ApiVersions at an
unknown version, which is answered with UNSUPPORTED_VERSION in the v0 layout so the client
can retry lower. A handler that raises is logged and closes that connection. This is the one
choke point for authentication and for quota throttling (a response with a throttle time
holds the connection, KIP-219): a connection on a SASL listener that has not logged in yet
has its frames handled by its ``SaslSession`` (only ApiVersions is passed on to a handler);
authorization will sit here too.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine, Generator, Mapping
from typing import Generic, Protocol, TypeVar

from gregor.broker.common.events import log_event
from gregor.broker.common.file_send import SendableRegion
from gregor.broker.handlers.api_versions import unsupported_version_response
from gregor.broker.handlers.registry import HandlerEntry
from gregor.broker.net.authenticator import SaslSession
from gregor.broker.state import BrokerState, ConnectionInfo, RequestContext
from gregor.protocol.exceptions import ProtocolError
from gregor.protocol.framing import coalesce, decode_request_header, encode_response_parts
from gregor.protocol.messages import API_KEYS, Message
from gregor.protocol.messages.api_versions import ApiVersionsRequest
from gregor.security.quotas import REQUEST_PERCENTAGE

log = logging.getLogger("gregor.broker")

#: API key -> the first version whose client honours throttle_time_ms itself (KIP-219: Kafka
#: 2.0 raised the version of every API it had then); the broker answers those at once and then
#: holds the connection, older ones it answers late. APIs newer than 2.0 honour it from v0.
KIP_219_FROM = {
    0: 6,
    1: 8,
    2: 3,
    3: 6,
    8: 4,
    9: 4,
    10: 2,
    11: 3,
    12: 2,
    13: 2,
    14: 2,
    15: 2,
    16: 2,
    18: 2,
    19: 3,
    20: 2,
    21: 1,
    22: 1,
    23: 2,
    24: 1,
    25: 1,
    26: 1,
    28: 1,
    29: 1,
    30: 1,
    31: 1,
    32: 1,
    33: 1,
    34: 1,
    35: 1,
    37: 1,
    38: 1,
    39: 1,
    40: 1,
    41: 1,
    42: 1,
}


_T = TypeVar("_T")


class _Timed(Generic[_T]):
    """Awaits a coroutine and adds up the time spent in its own steps (``ns``), not in what it
    waits for: the event loop's time a request used, Kafka's request-handler time."""

    __slots__ = ("_coro", "ns")

    def __init__(self, coro: Coroutine[object, object, _T]) -> None:
        self._coro = coro
        self.ns = 0

    def __await__(self) -> Generator[object, object, _T]:
        coro = self._coro
        value: object = None
        error: BaseException | None = None
        while True:
            start = time.perf_counter_ns()
            try:
                signal = coro.send(value) if error is None else coro.throw(error)
            except StopIteration as stop:
                self.ns += time.perf_counter_ns() - start
                result: _T = stop.value
                return result
            self.ns += time.perf_counter_ns() - start
            try:
                value, error = (yield signal), None
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as e:  # noqa: BLE001 - handed to the coroutine, as await does
                value, error = None, e


class ResponseSink(Protocol):
    """Where a connection's responses go (``server.Connection``)."""

    @property
    def info(self) -> ConnectionInfo: ...

    @property
    def sasl(self) -> SaslSession | None: ...

    def send(self, data: bytes | bytearray | memoryview | SendableRegion) -> None:
        """Write ``data`` after what was sent before (a region of a segment file is sent
        from the file, ``file_send``)."""
        ...

    @property
    def frame_arrival(self) -> float:
        """When the request being handled arrived (time.perf_counter)."""
        ...


class Dispatcher:
    def __init__(self, broker: BrokerState, handlers: Mapping[int, HandlerEntry]) -> None:
        self.broker = broker
        self.handlers = handlers

    async def handle_frame(self, conn: ResponseSink, frame: memoryview | bytes) -> bool:
        """Handle one request; False means close the connection."""
        peer = conn.info.peer
        sasl = conn.sasl
        if sasl is not None and (not sasl.authenticated or sasl.wants(frame)):
            outcome = sasl.receive(frame, conn.info)
            if outcome.reply is not None:
                conn.send(outcome.reply)
            if not outcome.dispatch:
                return outcome.keep_open
        try:
            header, body_offset = decode_request_header(frame)
        except ProtocolError as e:
            log_event(log, "request.malformed", logging.WARNING, peer=peer, reason=str(e))
            return False
        api_key, version = header.api_key, header.api_version
        entry = self.handlers.get(api_key)
        inter_broker = self.broker.serves_inter_broker_apis(conn.info.listener)
        if entry is not None and entry.inter_broker_only and not inter_broker:
            entry = None
        if entry is None or not entry.min_version <= version <= entry.max_version:
            if api_key == ApiVersionsRequest.API_KEY:  # answer in v0 so the client can pick
                conn.send(unsupported_version_response(header.correlation_id, inter_broker))
                return True
            name = API_KEYS[api_key].name if api_key in API_KEYS else "unknown"
            log_event(
                log,
                "request.unsupported",
                logging.WARNING,
                peer=peer,
                api_key=api_key,
                api=name,
                version=version,
            )
            return False
        info = API_KEYS[api_key]
        started = time.perf_counter()
        try:
            # Bytes after the body are ignored, as Kafka does: librdkafka 2.x sends Metadata
            # v12 for "all topics" with three stray bytes after the tag buffer.
            request, _ = info.request.decode_from(memoryview(frame), body_offset, version)
        except ProtocolError as e:
            log_event(
                log,
                "request.malformed",
                logging.WARNING,
                peer=peer,
                api=info.name,
                version=version,
                reason=str(e),
            )
            return False
        quotas, metrics = self.broker.quotas, self.broker.metrics
        # request_percentage (Kafka's request quota) times the handling unless exempt; served
        # metrics time it too, to split local (the handler's own steps) from remote (waiting).
        request_quota = not inter_broker and quotas.has(REQUEST_PERCENTAGE)
        timed: _Timed[Message | bytes | None] | None = None
        ctx = RequestContext(self.broker, conn.info, header)
        try:
            if not (request_quota or metrics.timing):
                response = await entry.handler(ctx, request)
            else:
                timed = _Timed(entry.handler(ctx, request))  # type: ignore[arg-type]  # handlers are coroutines
                response = await timed
        except Exception as e:  # noqa: BLE001 - a handler bug must not take the broker down
            log.exception("handler failed")
            log_event(
                log, "request.failed", logging.ERROR, api=info.name, version=version, error=repr(e)
            )
            return False
        handled = time.perf_counter()
        throttle_ms = getattr(response, "throttle_time_ms", 0) if response is not None else 0
        if request_quota and timed is not None:
            request_throttle = quotas.throttle_ms(
                REQUEST_PERCENTAGE,
                conn.info.principal,
                header.client_id,
                timed.ns * 1e-7,  # % x s
            )
            if request_throttle > throttle_ms:
                throttle_ms = request_throttle
                if hasattr(response, "throttle_time_ms"):
                    response.throttle_time_ms = throttle_ms  # type: ignore[union-attr]
        throttle_s = throttle_ms / 1000
        kip219 = version >= KIP_219_FROM.get(api_key, 0)
        if throttle_s > 0 and not kip219:
            await _hold(conn, throttle_s)  # an old client is throttled by a late answer
        if response is not None:
            encoding = time.perf_counter_ns() if request_quota else 0
            if isinstance(response, (bytes, bytearray, memoryview)):
                conn.send(response)
            else:
                for part in coalesce(
                    encode_response_parts(api_key, version, header.correlation_id, response)
                ):
                    conn.send(part)
            if request_quota:  # the answer's encoding counts too (Kafka's network time)
                quotas.throttle_ms(
                    REQUEST_PERCENTAGE,
                    conn.info.principal,
                    header.client_id,
                    (time.perf_counter_ns() - encoding) * 1e-7,
                )
        local_ms = timed.ns / 1e6 if timed is not None else None
        metrics.request(
            api_key,
            (time.perf_counter() - started) * 1000,
            (started - conn.frame_arrival) * 1000,
            throttle_ms,
            getattr(response, "error_code", 0) if response is not None else 0,
            local_ms,
            None if local_ms is None else max(0.0, (handled - started) * 1000 - local_ms),
        )
        if throttle_s > 0 and kip219:
            # KIP-219: the answer goes out at once with its throttle time, and the connection
            # takes no further request until that time has passed.
            await _hold(conn, throttle_s)
        return True


async def _hold(conn: ResponseSink, seconds: float) -> None:
    """Wait ``seconds``, or less if the client hangs up (or the broker closes the connection)."""
    await asyncio.wait([conn.info.hung_up], timeout=seconds)
