"""Fetched records sent from the segment file (``broker.file_send``): a real connection on
127.0.0.1, a real file, the bytes that arrive compared with what was sent."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from gregor.broker.common.file_send import SendableRegion, TruncatedRegionError
from gregor.broker.net.server import Connection
from gregor.broker.replication.fetch_params import drop_partial_tail
from gregor.protocol.framing import LARGE_PART, coalesce
from gregor.protocol.records import build_batch


class _Host:
    """The broker as a connection sees it, answering every frame with ``reply(conn)``."""

    def __init__(self, reply: Any) -> None:
        self.reply = reply
        self.stopping = False
        self.connections: set[Connection] = set()
        self.max_request_bytes = 1 << 20
        self.totals = [0, 0, 0, 0]

    async def handle_frame(self, conn: Connection, frame: memoryview | bytes) -> bool:
        self.reply(conn)
        return True

    def scram_credential(self, user: str, mechanism: str) -> None:
        return None

    def connection_throttle_ms(self, ip: str) -> int:
        return 0

    def token_login(self, token_id: str, mechanism: str) -> None:
        return None

    def network_totals(self, listener: str) -> list[int]:
        return self.totals


async def _exchange(reply: Any, expect: int) -> bytes:
    """Start a server whose connection answers with ``reply``, send one frame, and read up to
    ``expect`` bytes (or until the server closes)."""
    host = _Host(reply)
    server = await asyncio.get_running_loop().create_server(
        lambda: Connection(host, "PLAINTEXT", "PLAINTEXT"), "127.0.0.1", 0
    )
    port = server.sockets[0].getsockname()[1]
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"\x00\x00\x00\x01x")
        got = await _read(reader, expect)
        writer.close()
        return got
    finally:
        server.close()


async def _read(reader: asyncio.StreamReader, expect: int) -> bytes:
    """Up to ``expect`` bytes (more if they came in the same read), or what came before EOF."""
    got = bytearray()
    while len(got) < expect:
        chunk = await reader.read(1 << 20)
        if not chunk:
            break
        got += chunk
    return bytes(got)


def _file(tmp_path: Path, size: int) -> tuple[int, bytes]:
    data = os.urandom(size)
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data)
    return os.open(path, os.O_RDONLY), data


def test_region_goes_out_between_the_bytes_around_it(tmp_path: Path) -> None:
    fd, data = _file(tmp_path, 3 << 20)
    region = SendableRegion(fd, 1000, len(data) - 2000)
    os.close(fd)  # the region has a descriptor of its own

    def reply(conn: Connection) -> None:
        for part in coalesce([b"head", region, b"tail"]):
            conn.send(part)

    got = asyncio.run(_exchange(reply, 8 + len(region)))
    assert got == b"head" + data[1000:-1000] + b"tail"
    assert region.fd == -1  # closed once sent


def test_region_behind_unsent_bytes_is_read_and_queued_in_order(tmp_path: Path) -> None:
    """A transport still holding bytes (more than the socket took at once) gets the region's
    bytes through pread, after what it holds."""
    fd, data = _file(tmp_path, 1 << 20)
    big = os.urandom(16 << 20)  # more than the socket takes in one write
    buffered: list[int] = []
    regions: list[SendableRegion] = []

    def reply(conn: Connection) -> None:
        conn.send(big)
        assert conn.transport is not None
        buffered.append(conn.transport.get_write_buffer_size())
        region = SendableRegion(fd, 0, len(data))
        regions.append(region)
        conn.send(region)
        conn.send(b"end")

    got = asyncio.run(_exchange(reply, len(big) + len(data) + 3))
    os.close(fd)
    assert buffered[0] > 0  # the case under test: the region met a transport with bytes in it
    assert got == big + data + b"end"
    assert regions[0].fd == -1


def test_region_of_an_unlinked_segment_still_sends(tmp_path: Path) -> None:
    """Retention may close and delete the segment while a response waits: the region's own
    descriptor keeps the data."""
    fd, data = _file(tmp_path, 200_000)
    region = SendableRegion(fd, 0, len(data))
    os.close(fd)
    (tmp_path / "00000000000000000000.log").unlink()
    got = asyncio.run(_exchange(lambda conn: conn.send(region), len(data)))
    assert got == data


def test_truncated_segment_closes_the_connection_instead_of_a_short_frame(tmp_path: Path) -> None:
    fd, data = _file(tmp_path, 300_000)
    region = SendableRegion(fd, 0, len(data))
    os.close(fd)
    os.truncate(tmp_path / "00000000000000000000.log", 50_000)
    got = asyncio.run(
        _exchange(lambda conn: (conn.send(b"size"), conn.send(region)), 4 + len(data))
    )
    assert len(got) < 4 + len(data)  # the connection closed: the client sees no whole frame
    assert got == (b"size" + data)[: len(got)]  # and nothing that was not in the file
    with pytest.raises(TruncatedRegionError):
        fd2 = os.open(tmp_path / "00000000000000000000.log", os.O_RDONLY)
        try:
            SendableRegion(fd2, 0, len(data)).read_from(0)
        finally:
            os.close(fd2)


def test_drop_partial_tail_cuts_regions_where_it_cuts_bytes(tmp_path: Path) -> None:
    batches = [build_batch([(1000 + i, b"k", os.urandom(40_000))]) for i in range(6)]
    whole = b"".join(batches)
    path = tmp_path / "segment.log"
    path.write_bytes(whole)
    fd = os.open(path, os.O_RDONLY)
    try:
        for cut in (len(whole), len(whole) - 100, len(batches[0]) + 10, 100):
            as_bytes = drop_partial_tail(whole[:cut])
            as_region = drop_partial_tail(SendableRegion(fd, 0, cut))
            assert isinstance(as_region, SendableRegion)
            assert len(as_region) == len(as_bytes)
            assert as_region.read_from(0) == bytes(as_bytes)
    finally:
        os.close(fd)


def test_coalesce_keeps_a_region_apart_whatever_its_size(tmp_path: Path) -> None:
    fd, _ = _file(tmp_path, 100)
    small = SendableRegion(fd, 0, 10)
    big = SendableRegion(fd, 0, 100)
    os.close(fd)
    out = coalesce([b"a", b"b", small, b"c", big, b"x" * LARGE_PART])
    assert out[0] == b"ab" and out[1] is small and out[2] == b"c" and out[3] is big
    assert len(out) == 5


async def _serve(host: _Host) -> tuple[asyncio.base_events.Server, int, list[Connection]]:
    conns: list[Connection] = []

    def factory() -> Connection:
        conns.append(Connection(host, "PLAINTEXT", "PLAINTEXT"))
        return conns[-1]

    server = await asyncio.get_running_loop().create_server(factory, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1], conns


def test_what_the_socket_did_not_take_goes_on_by_sendfile_and_later_output_waits(
    tmp_path: Path,
) -> None:
    """A region larger than the socket takes at once stays one: sendfile goes on as the client
    reads, and both the bytes sent after it and the next request's answer (a second region)
    come after it, in order; the next request is not handled before the region is out."""
    fd, data = _file(tmp_path, 12 << 20)
    pending: list[bool] = []
    handled: list[int] = []
    regions: list[SendableRegion] = []

    def reply(conn: Connection) -> None:
        handled.append(conn._region is None and not conn._held)  # nothing of the last waits
        region = SendableRegion(fd, 0, len(data))
        regions.append(region)
        conn.send(b"head%d" % len(handled))
        conn.send(region)
        pending.append(conn._region is region)  # the socket took part of it
        conn.send(b"tail%d" % len(handled))

    async def run() -> bytes:
        host = _Host(reply)
        server, port, conns = await _serve(host)
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"\x00\x00\x00\x01x" * 2)  # two requests, pipelined
            got = await _read(reader, 10 + 2 * len(data))
            writer.close()
            assert conns[0]._watch_fd is not None and conns[0]._region is None
            return got
        finally:
            server.close()

    got = asyncio.run(run())
    os.close(fd)
    assert pending[0]  # the case under test (the second may find room for all of its region)
    assert handled == [True, True]  # the second request was handled after the first region
    assert got == b"head1" + data + b"tail1" + b"head2" + data + b"tail2"
    assert [r.fd for r in regions] == [-1, -1]  # closed once sent


def test_a_region_cut_short_while_it_waits_closes_the_connection(tmp_path: Path) -> None:
    fd, data = _file(tmp_path, 12 << 20)
    os.close(fd)
    path = tmp_path / "00000000000000000000.log"
    waiting: list[bool] = []

    def reply(conn: Connection) -> None:
        fd2 = os.open(path, os.O_RDONLY)
        region = SendableRegion(fd2, 0, len(data))
        os.close(fd2)
        conn.send(region)
        waiting.append(conn._region is region)
        os.truncate(path, len(data) // 2)  # the segment is cut under the waiting region

    got = asyncio.run(_exchange(reply, len(data)))
    assert waiting == [True]
    assert len(got) < len(data)  # closed: the client sees no whole frame
    assert got == data[: len(got)]  # and nothing that was not in the file


def test_a_client_gone_while_a_region_waits_leaves_no_descriptor(tmp_path: Path) -> None:
    fd, data = _file(tmp_path, 12 << 20)
    regions: list[SendableRegion] = []

    def reply(conn: Connection) -> None:
        regions.append(SendableRegion(fd, 0, len(data)))
        conn.send(regions[-1])
        conn.send(b"behind")

    async def run() -> Connection:
        server, port, conns = await _serve(_Host(reply))
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"\x00\x00\x00\x01x")
            await reader.readexactly(1000)
            assert conns[0]._region is regions[0]
            writer.transport.abort()  # gone, with most of the answer unread
            while not conns[0].closed:
                await asyncio.sleep(0)  # yield to the server's side until it sees the close
            return conns[0]
        finally:
            server.close()

    conn = asyncio.run(run())
    os.close(fd)
    assert conn._region is None and not conn._held and conn._watch_fd is None
    assert regions[0].fd == -1


def test_a_closing_connection_writes_out_what_waits_behind_a_region(tmp_path: Path) -> None:
    """A connection closed after a request (the broker stopping) first hands the rest of a
    waiting region, and what is behind it, to the transport, which writes it before closing."""
    fd, data = _file(tmp_path, 12 << 20)

    def reply(conn: Connection) -> None:
        conn.send(SendableRegion(fd, 0, len(data)))
        conn.send(b"last")
        conn.host.stopping = True  # type: ignore[attr-defined]

    got = asyncio.run(_exchange(reply, len(data) + 4 + 1))
    os.close(fd)
    assert got == data + b"last"
