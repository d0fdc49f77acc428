"""Sans-IO Kafka connections (h11's pattern): bytes in, events out; no sockets here.

:class:`ClientConnection` numbers requests, encodes them, and matches response frames to the
requests in order (Kafka answers requests on one connection in the order they were sent).
A response whose correlation id is not the oldest outstanding one is a :class:`ProtocolError`.
Produce requests with ``acks=0`` get no response, so they are not waited for.

:class:`ServerConnection` turns request frames into :class:`Request` events. A request whose
API key or version this codec does not know becomes an event with ``message=None`` and
``error`` set (UNSUPPORTED_VERSION for a known key, INVALID_REQUEST for an unknown key): the
broker answers or closes as it sees fit. A malformed body raises :class:`ProtocolError`; the
events decoded before it in the same ``receive_data`` call are on the exception's ``events``
attribute.

Both sides enforce a maximum frame size (:class:`gregor.protocol.framing.FrameTooLarge`).
"""

from __future__ import annotations

from collections import deque
from typing import Any, NamedTuple

from gregor.protocol.errors import ErrorCode
from gregor.protocol.exceptions import ProtocolError
from gregor.protocol.framing import (
    DEFAULT_MAX_FRAME_SIZE,
    FrameDecoder,
    RequestHeader,
    decode_request_header,
    decode_response_header,
    encode_request_parts,
    encode_response_parts,
    peek_correlation_id,
)
from gregor.protocol.messages import (
    API_KEYS,
    ApiVersionsResponse,
    Message,
    ProduceRequest,
    response_header_version,
)

__all__ = ["ClientConnection", "ServerConnection", "Request", "Response"]

_MAX_CORRELATION_ID = (1 << 31) - 1


class Response(NamedTuple):
    correlation_id: int
    request: Message
    response: Message


class Request(NamedTuple):
    """One request frame received by a server.

    ``message`` is the decoded body, or None when ``error`` is set (an ErrorCode:
    UNSUPPORTED_VERSION for a version this codec does not know, INVALID_REQUEST for an unknown
    API key). ``size`` is the frame's size in bytes (without the size prefix).
    """

    header: RequestHeader
    message: Message | None
    error: ErrorCode | None
    size: int


class _Pending(NamedTuple):
    correlation_id: int
    request: Message
    version: int


class ClientConnection:
    """The client side of one Kafka connection."""

    def __init__(
        self,
        client_id: str | None = "gregor",
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        first_correlation_id: int = 0,
    ) -> None:
        self.client_id = client_id
        self._decoder = FrameDecoder(max_frame_size)
        self._next_id = first_correlation_id
        self._pending: deque[_Pending] = deque()

    @property
    def in_flight(self) -> int:
        """Requests sent and still waiting for a response."""
        return len(self._pending)

    def _correlation_id(self) -> int:
        cid = self._next_id
        self._next_id = 0 if cid >= _MAX_CORRELATION_ID else cid + 1
        return cid

    @staticmethod
    def expects_response(message: Message) -> bool:
        """False only for Produce with acks=0, which the broker never answers."""
        return not (isinstance(message, ProduceRequest) and message.acks == 0)

    def send_request_parts(self, message: Message, version: int) -> tuple[int, list[Any]]:
        """Like :meth:`send_request` but returns the frame as parts (RECORDS not copied)."""
        cid = self._correlation_id()
        header = RequestHeader(message.API_KEY, version, cid, self.client_id)
        parts = encode_request_parts(header, message)
        if self.expects_response(message):
            self._pending.append(_Pending(cid, message, version))
        return cid, parts

    def send_request(self, message: Message, version: int) -> tuple[int, bytes]:
        """Encode ``message`` as a request frame; returns (correlation_id, bytes to send)."""
        cid, parts = self.send_request_parts(message, version)
        return cid, b"".join(parts)

    def receive_data(self, data: bytes | bytearray | memoryview) -> list[Response]:
        """Feed bytes read from the socket; returns the responses they complete, in order."""
        return self.receive_frames(self._decoder.feed(data))

    def receive_frames(self, frames: list[memoryview | bytes]) -> list[Response]:
        """Whole response frames (size prefix removed) split off the stream by the caller
        (``framing.BufferedFrameReader``); returns their responses, in order."""
        out: list[Response] = []
        for frame in frames:
            cid = peek_correlation_id(frame)
            if not self._pending:
                raise ProtocolError(f"response with correlation id {cid} but none outstanding")
            pending = self._pending[0]
            if cid != pending.correlation_id:
                raise ProtocolError(
                    f"response correlation id {cid} does not match the oldest outstanding "
                    f"request ({pending.correlation_id})"
                )
            self._pending.popleft()
            out.append(Response(cid, pending.request, self._decode(frame, pending)))
        return out

    @staticmethod
    def _decode(frame: Any, pending: _Pending) -> Message:
        api_key = pending.request.API_KEY
        version = pending.version
        hv = response_header_version(api_key, version)
        _, _, pos = decode_response_header(frame, hv)
        body = memoryview(frame)[pos:]
        cls = API_KEYS[api_key].response
        if api_key == ApiVersionsResponse.API_KEY and version > 0 and len(body) >= 2:
            # A broker that does not support this ApiVersions version answers with a v0 body
            # carrying UNSUPPORTED_VERSION and its supported ranges.
            if int.from_bytes(body[:2], "big", signed=True) == ErrorCode.UNSUPPORTED_VERSION:
                try:
                    return cls.decode(body, 0)
                except ProtocolError:
                    pass
        return cls.decode(body, version)


class ServerConnection:
    """The broker side of one Kafka connection."""

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self._decoder = FrameDecoder(max_frame_size)

    def receive_data(self, data: bytes | bytearray | memoryview) -> list[Request]:
        """Feed bytes read from the socket; returns the requests they complete, in order."""
        out: list[Request] = []
        try:
            for frame in self._decoder.feed(data):
                out.append(self._decode(frame))
        except ProtocolError as e:
            e.events = out  # type: ignore[attr-defined]
            raise
        return out

    @staticmethod
    def _decode(frame: Any) -> Request:
        header, pos = decode_request_header(frame)
        info = API_KEYS.get(header.api_key)
        if info is None:
            return Request(header, None, ErrorCode.INVALID_REQUEST, len(frame))
        if not info.min_version <= header.api_version <= info.max_version:
            return Request(header, None, ErrorCode.UNSUPPORTED_VERSION, len(frame))
        body = memoryview(frame)[pos:]
        message = info.request.decode(body, header.api_version)
        return Request(header, message, None, len(frame))

    @staticmethod
    def send_response_parts(
        header: RequestHeader, message: Message, version: int | None = None
    ) -> list[Any]:
        """Like :meth:`send_response` but returns parts (RECORDS values not copied)."""
        v = header.api_version if version is None else version
        return encode_response_parts(header.api_key, v, header.correlation_id, message)

    @staticmethod
    def send_response(header: RequestHeader, message: Message, version: int | None = None) -> bytes:
        """Encode a response frame to the request with ``header``.

        ``version`` defaults to the request's version; pass 0 to answer an unsupported
        ApiVersions request with a v0 body, as Kafka does.
        """
        return b"".join(ServerConnection.send_response_parts(header, message, version))
