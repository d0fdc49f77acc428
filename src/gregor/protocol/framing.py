"""Size-prefixed frames and the request/response headers.

Every Kafka message on the wire is ``INT32 size`` followed by ``size`` bytes: a header, then
the body. Header versions (from the guide):

* request header v0: api_key INT16, api_version INT16, correlation_id INT32
* request header v1: v0 + client_id NULLABLE_STRING
* request header v2: v1 + TAG_BUFFER (client_id stays a non-compact NULLABLE_STRING)
* response header v0: correlation_id INT32
* response header v1: v0 + TAG_BUFFER

Which version applies is decided by the API key and version (see
:func:`gregor.protocol.messages.request_header_version` and ``response_header_version``).

:func:`decode_request_header` always manages the first 8 bytes, even for an API key or version
this codec does not know, so a broker can answer UNSUPPORTED_VERSION to the right correlation
id. :class:`FrameDecoder` turns a byte stream into whole frames, refusing size prefixes that
are negative or over its limit; :class:`BufferedFrameReader` does the same for a transport
that reads into buffers it is given (``asyncio.BufferedProtocol``).
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Iterable
from typing import Any

from gregor.protocol.exceptions import ProtocolError
from gregor.protocol.messages import (
    API_KEYS,
    Message,
    request_header_version,
    response_header_version,
)
from gregor.protocol.primitives import read_tag_buffer, write_tag_buffer
from gregor.protocol.records.walk import new_buffer

__all__ = [
    "DEFAULT_MAX_FRAME_SIZE",
    "FrameTooLarge",
    "FrameDecoder",
    "RequestHeader",
    "decode_request_header",
    "encode_request_header",
    "decode_response_header",
    "encode_response_header",
    "peek_correlation_id",
    "encode_request",
    "encode_request_parts",
    "encode_response",
    "encode_response_parts",
    "frame",
]

#: Kafka's default socket.request.max.bytes (100 MiB).
DEFAULT_MAX_FRAME_SIZE = 104857600

_SIZE = struct.Struct(">i")
_HEAD = struct.Struct(">hhi")
_I16 = struct.Struct(">h")


class FrameTooLarge(ProtocolError):
    """A size prefix is negative or larger than the configured maximum."""

    def __init__(self, size: int, max_size: int) -> None:
        super().__init__(f"frame size {size} is outside 0..{max_size}")
        self.size = size
        self.max_size = max_size


class RequestHeader:
    """A request header (v0, v1 or v2; which one is implied by api_key/api_version)."""

    __slots__ = ("api_key", "api_version", "correlation_id", "client_id", "unknown_tags")

    def __init__(
        self,
        api_key: int,
        api_version: int,
        correlation_id: int,
        client_id: str | None = None,
        unknown_tags: dict[int, bytes] | None = None,
    ) -> None:
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id
        self.unknown_tags = {} if unknown_tags is None else unknown_tags

    @property
    def header_version(self) -> int:
        """The request header version for this key/version (1 for unknown API keys)."""
        if self.api_key not in API_KEYS:
            return 1
        return request_header_version(self.api_key, self.api_version)

    @property
    def known(self) -> bool:
        """True when this codec can decode the body (known key, supported version)."""
        info = API_KEYS.get(self.api_key)
        return info is not None and info.min_version <= self.api_version <= info.max_version

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RequestHeader):
            return NotImplemented
        return (
            self.api_key == other.api_key
            and self.api_version == other.api_version
            and self.correlation_id == other.correlation_id
            and self.client_id == other.client_id
            and self.unknown_tags == other.unknown_tags
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        tags = f", unknown_tags={self.unknown_tags!r}" if self.unknown_tags else ""
        return (
            f"RequestHeader(api_key={self.api_key}, api_version={self.api_version}, "
            f"correlation_id={self.correlation_id}, client_id={self.client_id!r}{tags})"
        )


def _read_nullable_string(buf: Any, pos: int) -> tuple[str | None, int]:
    if pos + 2 > len(buf):
        raise ProtocolError("truncated request header (client_id)")
    (n,) = _I16.unpack_from(buf, pos)
    pos += 2
    if n == -1:
        return None, pos
    if n < 0 or pos + n > len(buf):
        raise ProtocolError(f"invalid client_id length {n}")
    try:
        return str(buf[pos : pos + n], "utf-8"), pos + n
    except UnicodeDecodeError:
        raise ProtocolError("client_id is not valid UTF-8") from None


def decode_request_header(
    frame: bytes | bytearray | memoryview, pos: int = 0
) -> tuple[RequestHeader, int]:
    """Decode the request header at the start of a frame (size prefix already removed).

    Returns (header, offset of the body). For an unknown API key the header is read as v1
    on a best-effort basis (client_id None if that fails); only the first 8 bytes are needed.
    """
    if len(frame) - pos < 8:
        raise ProtocolError(f"request header needs 8 bytes, got {len(frame) - pos}")
    api_key, api_version, correlation_id = _HEAD.unpack_from(frame, pos)
    header = RequestHeader(api_key, api_version, correlation_id)
    pos += 8
    if api_key not in API_KEYS:
        try:
            header.client_id, pos = _read_nullable_string(frame, pos)
        except ProtocolError:
            pass
        return header, pos
    hv = request_header_version(api_key, api_version)
    if hv >= 1:
        header.client_id, pos = _read_nullable_string(frame, pos)
    if hv >= 2:
        try:
            header.unknown_tags, pos = read_tag_buffer(frame, pos)
        except IndexError:
            raise ProtocolError("truncated request header tag buffer") from None
    return header, pos


def encode_request_header(header: RequestHeader) -> bytes:
    hv = header.header_version
    out = [_HEAD.pack(header.api_key, header.api_version, header.correlation_id)]
    if hv >= 1:
        if header.client_id is None:
            out.append(b"\xff\xff")
        else:
            cid = header.client_id.encode()
            out.append(_I16.pack(len(cid)))
            out.append(cid)
    if hv >= 2:
        _tags(out, header.unknown_tags)
    return b"".join(out)


def _tags(out: list[Any], tags: dict[int, bytes] | None) -> None:
    if tags:
        write_tag_buffer(out.append, tags.items())
    else:
        out.append(b"\x00")


def peek_correlation_id(frame: bytes | bytearray | memoryview) -> int:
    """The correlation id of a response frame (its first 4 bytes)."""
    if len(frame) < 4:
        raise ProtocolError("response frame shorter than a correlation id")
    cid: int = _SIZE.unpack_from(frame, 0)[0]
    return cid


def decode_response_header(
    frame: bytes | bytearray | memoryview, header_version: int
) -> tuple[int, dict[int, bytes], int]:
    """Decode a response header: (correlation_id, unknown_tags, offset of the body)."""
    correlation_id = peek_correlation_id(frame)
    if header_version == 0:
        return correlation_id, {}, 4
    if len(frame) < 5:
        raise ProtocolError("truncated response header tag buffer")
    tags, pos = read_tag_buffer(frame, 4)
    return correlation_id, tags, pos


def encode_response_header(
    correlation_id: int, header_version: int, unknown_tags: dict[int, bytes] | None = None
) -> bytes:
    out: list[Any] = [_SIZE.pack(correlation_id)]
    if header_version >= 1:
        _tags(out, unknown_tags)
    return b"".join(out)


def frame(parts: Iterable[Any]) -> list[Any]:
    """Prefix a list of parts with their total size (as INT32). Returns a new list."""
    parts = list(parts)
    size = sum(len(p) for p in parts)
    return [_SIZE.pack(size), *parts]


def encode_request_parts(header: RequestHeader, message: Message) -> list[Any]:
    """Size prefix, header and body as parts (RECORDS values kept as given)."""
    return frame([encode_request_header(header), *message.encode_parts(header.api_version)])


def encode_request(header: RequestHeader, message: Message) -> bytes:
    """A whole request frame: size prefix, header (version chosen from key/version), body."""
    if message.API_KEY != header.api_key:
        raise ProtocolError(
            f"header api_key {header.api_key} does not match {type(message).__name__}"
        )
    return b"".join(encode_request_parts(header, message))


def encode_response_parts(
    api_key: int,
    api_version: int,
    correlation_id: int,
    message: Message,
    unknown_tags: dict[int, bytes] | None = None,
) -> list[Any]:
    hv = response_header_version(api_key, api_version)
    head = encode_response_header(correlation_id, hv, unknown_tags)
    return frame([head, *message.encode_parts(api_version)])


#: A part at least this long goes out as it is instead of being copied into a joined frame.
LARGE_PART = 64 * 1024


def coalesce(parts: Iterable[Any]) -> list[Any]:
    """Join runs of small parts, keep large immutable ones (records read from a log) as they
    are, so a big response is written with one writev and no copy of its records. (A large
    mutable buffer is copied too: the transport may hold on to what it could not write yet.)
    A part that is not bytes-like (a broker's file region for sendfile, see ``write_records``)
    is always kept apart, whatever its size."""
    out: list[Any] = []
    small: list[Any] = []
    for part in parts:
        t = type(part)
        if (t is bytes and len(part) >= LARGE_PART) or (
            t is not bytes and t is not bytearray and t is not memoryview
        ):
            if small:
                out.append(b"".join(small))
                small = []
            out.append(part)
        else:
            small.append(part)
    if small:
        out.append(b"".join(small))
    return out


def encode_response(
    api_key: int,
    api_version: int,
    correlation_id: int,
    message: Message,
    unknown_tags: dict[int, bytes] | None = None,
) -> bytes:
    """A whole response frame: size prefix, header (v0 or v1 as the API requires), body."""
    return b"".join(
        encode_response_parts(api_key, api_version, correlation_id, message, unknown_tags)
    )


class FrameDecoder:
    """Splits a byte stream into frames (the bytes after each INT32 size prefix).

    ``feed(data)`` returns every frame completed by ``data``. Frames that arrive whole inside
    one immutable ``bytes`` chunk are returned as memoryview slices of it (no copy). A frame
    split across chunks gets a buffer of its declared size as soon as its size prefix is in
    (as Kafka's ``NetworkReceive`` does), each piece is copied into place, and the frame is
    returned as a (writable) memoryview of that buffer: one copy, and no regrowing of a buffer
    as the pieces of a large request arrive. A negative size or one over ``max_frame_size``
    raises :class:`FrameTooLarge` (after which the stream cannot be resynchronised: close the
    connection).
    """

    __slots__ = ("max_frame_size", "_prefix", "_frame", "_have")

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self.max_frame_size = max_frame_size
        self._prefix = bytearray()  # the size prefix of the next frame, while incomplete
        self._frame: bytearray | None = None  # the frame being gathered, of its full size
        self._have = 0  # bytes of it gathered

    @property
    def buffered(self) -> int:
        """Bytes held waiting for the rest of a frame."""
        return self._have if self._frame is not None else len(self._prefix)

    def _check(self, size: int) -> int:
        if size < 0 or size > self.max_frame_size:
            raise FrameTooLarge(size, self.max_frame_size)
        return size

    def _start(self, size: int, piece: memoryview) -> None:
        """Begin gathering a frame of ``size`` bytes whose first bytes are ``piece``."""
        frame = new_buffer(self._check(size))
        frame[: len(piece)] = piece
        self._frame, self._have = frame, len(piece)

    def feed(self, data: bytes | bytearray | memoryview) -> list[memoryview | bytes]:
        frames: list[memoryview | bytes] = []
        if not data:
            return frames
        pos = 0
        end = len(data)
        mv = memoryview(data)
        if self._prefix:
            prefix = self._prefix
            take = min(4 - len(prefix), end)
            prefix += mv[:take]
            pos = take
            if len(prefix) < 4:
                return frames
            size = _SIZE.unpack_from(prefix, 0)[0]
            prefix.clear()
            self._start(size, mv[pos:pos])
        frame = self._frame
        if frame is not None:
            take = min(len(frame) - self._have, end - pos)
            frame[self._have : self._have + take] = mv[pos : pos + take]
            self._have += take
            pos += take
            if self._have < len(frame):
                return frames
            frames.append(memoryview(frame))
            self._frame = None
            self._have = 0
        if type(data) is not bytes:  # frames must not be views of a buffer that may change
            data = bytes(mv[pos:])
            mv = memoryview(data)
            end = len(data)
            pos = 0
        while end - pos >= 4:
            size = self._check(_SIZE.unpack_from(data, pos)[0])
            if end - pos - 4 < size:
                self._start(size, mv[pos + 4 : end])
                return frames
            frames.append(mv[pos + 4 : pos + 4 + size])
            pos += 4 + size
        if pos < end:
            self._prefix += mv[pos:end]
        return frames


class BufferedFrameReader:
    """Splits a byte stream into frames, for ``asyncio.BufferedProtocol``: the transport reads
    straight into the buffers this hands out, so a large frame (a fetch response) is read from
    the socket into its own buffer once instead of into a chunk, then copied, then gathered.

    Theory of operation. Bytes land in a reusable chunk of ``chunk_size`` bytes. Every frame
    found whole in it is copied out as ``bytes`` (frames that small are cheap to copy, and the
    chunk stays free for the next read). A frame whose size prefix says it does not fit in
    what is left of the chunk gets a buffer of its own: what arrived of it is copied there (at
    most a chunk), and the transport then reads the rest straight into it; it is handed out as
    a memoryview of that buffer, which the caller may keep. Up to ``SPARE_BUFFERS`` such
    buffers (of at most ``SPARE_LIMIT`` bytes) are kept for reuse: one is taken again only
    when nothing refers to it any more (no frame, and no view or slice of one, is alive), so a
    reader that has done with a fetch response before the next arrives reads every response
    into the same memory. A negative size or one over ``max_frame_size`` raises
    :class:`FrameTooLarge` (close the connection).

        reader = BufferedFrameReader()
        buf = reader.get_buffer()          # what the transport fills
        frames = reader.buffer_updated(n)  # after it wrote n bytes there
    """

    SPARE_BUFFERS = 3
    SPARE_LIMIT = 16 * 1024 * 1024

    __slots__ = (
        "max_frame_size",
        "_chunk",
        "_chunk_view",
        "_start",
        "_end",
        "_frame",
        "_filled",
        "_spare",
    )

    def __init__(
        self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE, chunk_size: int = 64 * 1024
    ) -> None:
        self.max_frame_size = max_frame_size
        self._chunk = bytearray(chunk_size)
        self._chunk_view = memoryview(self._chunk)
        self._start = 0  # unparsed bytes of the chunk are [_start, _end)
        self._end = 0
        self._frame: memoryview | None = None  # a large frame being read into its own buffer
        self._filled = 0
        self._spare: list[bytearray] = []  # large frames' buffers, reused once unreferenced

    @property
    def buffered(self) -> int:
        """Bytes held waiting for the rest of a frame."""
        return self._filled if self._frame is not None else self._end - self._start

    @property
    def frame_remaining(self) -> int:
        """Bytes still to come of a large frame being read into its own buffer (0 if none):
        what :meth:`get_buffer` hands out then is exactly that, so a blocking reader may wait
        for all of it at once (``MSG_WAITALL``)."""
        return len(self._frame) - self._filled if self._frame is not None else 0

    def get_buffer(self) -> memoryview:
        """Where the next bytes from the socket go."""
        frame = self._frame
        if frame is not None:
            return frame[self._filled :]
        if self._end == len(self._chunk):  # a partial small frame at the chunk's end: move it
            rest = self._end - self._start
            self._chunk_view[:rest] = self._chunk_view[self._start : self._end]
            self._start, self._end = 0, rest
        return self._chunk_view[self._end :]

    def buffer_updated(self, nbytes: int) -> list[memoryview | bytes]:
        """``nbytes`` were written into the last buffer; returns the frames they complete."""
        frames: list[memoryview | bytes] = []
        frame = self._frame
        if frame is not None:
            self._filled += nbytes
            if self._filled < len(frame):
                return frames
            frames.append(frame)
            self._frame = None
            return frames
        chunk = self._chunk
        pos = self._start
        end = self._end + nbytes
        while end - pos >= 4:
            size = _SIZE.unpack_from(chunk, pos)[0]
            if size < 0 or size > self.max_frame_size:
                raise FrameTooLarge(size, self.max_frame_size)
            if end - pos - 4 >= size:
                frames.append(bytes(self._chunk_view[pos + 4 : pos + 4 + size]))
                pos += 4 + size
                continue
            if pos + 4 + size > len(chunk):  # does not fit: read it into a buffer of its own
                have = end - pos - 4
                frame = self._buffer(size)
                frame[:have] = self._chunk_view[pos + 4 : end]
                self._frame, self._filled = frame, have
                pos = end
            break
        if pos == end:
            pos = end = 0
        self._start, self._end = pos, end
        return frames

    def _buffer(self, size: int) -> memoryview:
        """A view of ``size`` bytes of a spare buffer no one refers to, or of a new one."""
        spare = self._spare
        for i in range(len(spare)):
            # 2: the list's reference and getrefcount's argument. Any frame, view or slice
            # of this buffer still alive holds one more.
            if len(spare[i]) >= size and sys.getrefcount(spare[i]) == 2:
                return memoryview(spare[i])[:size]
        buf = new_buffer(size + (size >> 3))  # room for a slightly larger next frame
        if len(buf) <= self.SPARE_LIMIT:
            if len(spare) >= self.SPARE_BUFFERS:
                spare.pop(0)
            spare.append(buf)
        return memoryview(buf)[:size]
