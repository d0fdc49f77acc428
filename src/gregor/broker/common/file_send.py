"""Fetched records sent straight from the segment file with ``sendfile(2)`` (Kafka's
``FileRecords.writeTo`` through ``transferTo``).

Theory of operation. A fetch on a plain-TCP connection reads no records into memory: each
partition's read is a :class:`SendableRegion` (a range of a segment file, its length known),
which travels through the response's encoding as one part (``encode_parts`` only takes its
``len``) to the connection. The connection writes what it gathered before the region, then,
when the transport holds nothing unsent, hands the region to the kernel with ``sendfile``,
which copies from the page cache to the socket without passing through Python. What the
socket does not take at once (its buffer is full) is sent on from where it stopped when the
socket takes more (the connection waits for that, see ``server.Connection``); a region that
meets a transport with bytes still queued, or a TLS connection, is read with ``pread`` and
written the ordinary way, so the bytes always leave in order.

A region owns a duplicate of the segment's file descriptor: retention may close and unlink the
segment while the response waits (a throttled old client), and the duplicate keeps the file's
data readable and its descriptor number from being reused. It is closed once sent or dropped
(``close``, or when the region is collected). If the file was cut shorter in between (a
truncation after an unclean leader change), the bytes promised in the response's length can no
longer be sent: :meth:`SendableRegion.send_to` and :meth:`SendableRegion.read_from` say so and
the connection is closed, as Kafka closes it.
"""

from __future__ import annotations

import asyncio
import os


class TruncatedRegionError(Exception):
    """The segment file ends before the region does (it was truncated after the read)."""


class SendableRegion:
    """``length`` bytes at ``position`` of a segment file, with a descriptor of its own."""

    __slots__ = ("fd", "position", "length")

    def __init__(self, fd: int, position: int, length: int) -> None:
        self.fd = os.dup(fd)
        self.position = position
        self.length = length

    def __len__(self) -> int:
        return self.length

    def __repr__(self) -> str:
        return f"SendableRegion(position={self.position}, length={self.length})"

    def pread(self, offset: int, n: int) -> bytes:
        """``n`` bytes at ``offset`` into the region (fewer at the end of the file)."""
        return os.pread(self.fd, n, self.position + offset)

    def head(self, length: int) -> SendableRegion:
        """The first ``length`` bytes, as a region of its own."""
        return SendableRegion(self.fd, self.position, length)

    def send_to(self, sock_fd: int, offset: int = 0) -> int:
        """Send the region from ``offset`` on, as much as the (non-blocking) socket takes now;
        returns how many bytes."""
        sent = offset
        while sent < self.length:
            try:
                n = os.sendfile(sock_fd, self.fd, self.position + sent, self.length - sent)
            except (BlockingIOError, InterruptedError):
                break
            if n == 0:
                raise TruncatedRegionError(f"{self!r}: the file ends {sent} bytes in")
            sent += n
        return sent - offset

    def read_from(self, offset: int = 0) -> bytes:
        """The region's bytes from ``offset`` on (one pread)."""
        want = self.length - offset
        data = self.pread(offset, want)
        while len(data) < want:
            more = self.pread(offset + len(data), want - len(data))
            if not more:
                raise TruncatedRegionError(f"{self!r}: the file ends {offset + len(data)} bytes in")
            data += more
        return data

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __del__(self) -> None:
        self.close()


def socket_fd(transport: asyncio.BaseTransport) -> int | None:
    """The socket of a plain-TCP transport, for ``sendfile``; None over TLS (the bytes must
    go through the TLS layer) or when the transport has no socket."""
    if (
        transport.get_extra_info("sslcontext") is not None
        or transport.get_extra_info("ssl_object") is not None
    ):
        return None
    sock = transport.get_extra_info("socket")
    if sock is None:
        return None
    try:
        fd: int = sock.fileno()
    except (OSError, ValueError):
        return None
    return fd if fd >= 0 else None
