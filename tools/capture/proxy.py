"""A recording Kafka proxy: sits between real clients and a real broker and keeps every frame.

Theory of operation
-------------------
One :class:`RecordingProxy` listens on 127.0.0.1 (a port the OS picks) in front of one broker.
Each accepted client connection gets its own upstream connection, and two pumps:

* client -> broker: a :class:`~gregor.protocol.framing.FrameDecoder` splits the stream into
  request frames; each frame's header is read (api key, version, correlation id) and the frame
  is remembered as *pending* under its correlation id, then forwarded unchanged.
* broker -> client: response frames are matched to the pending request by correlation id (a
  response header starts with it) and the pair is handed to the ``on_exchange`` callback as an
  :class:`Exchange` holding the exact bytes that crossed the wire (size prefix included).

The proxy keeps clients talking through itself: responses that advertise broker addresses
(Metadata, FindCoordinator, DescribeCluster, and the KIP-951 NodeEndpoints of Produce v10+ and
Fetch v16+) are decoded with Gregor's codec, every (host, port) found in ``address_map`` is
replaced, and the response is re-encoded. The *recorded* response is always the broker's
original bytes; only the copy forwarded to the client is rewritten. With several brokers, run a
proxy per broker and give each the same ``address_map``.

Requests that never get a response (Produce with acks=0) are reported with ``response=None``
when their connection closes.

Command line (records to a directory, one ``.bin`` per frame plus ``exchanges.jsonl``):

    .venv/bin/python tools/capture/proxy.py --upstream 127.0.0.1:9092 --listen-port 19092 out/
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gregor.protocol.exceptions import ProtocolError
from gregor.protocol.framing import (
    FrameDecoder,
    decode_request_header,
    decode_response_header,
    encode_response_header,
)
from gregor.protocol.messages import API_KEYS, Struct, response_header_version

#: API keys whose responses name broker addresses, with the first version that does.
ADDRESS_APIS: dict[int, int] = {
    0: 10,  # Produce: NodeEndpoints (KIP-951), tagged
    1: 16,  # Fetch: NodeEndpoints (KIP-951), tagged
    3: 0,  # Metadata: brokers
    10: 0,  # FindCoordinator: host/port, coordinators[]
    60: 0,  # DescribeCluster: brokers
}

Address = tuple[str, int]


@dataclass
class Exchange:
    """One request and its response as they crossed the wire (size prefixes included)."""

    connection: int
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    request: bytes
    response: bytes | None
    sent_at: float
    received_at: float | None = None
    rewritten: bool = False
    notes: list[str] = field(default_factory=list)


def rewrite_addresses(obj: Any, address_map: dict[Address, Address]) -> int:
    """Replace (host, port) pairs found in ``address_map`` anywhere in a decoded message.

    Walks nested structs and lists; any struct with ``host`` and ``port`` attributes is a
    candidate. Returns how many pairs were replaced.
    """
    count = 0
    if isinstance(obj, list):
        for item in obj:
            count += rewrite_addresses(item, address_map)
        return count
    if not isinstance(obj, Struct):
        return 0
    host = getattr(obj, "host", None)
    port = getattr(obj, "port", None)
    if isinstance(host, str) and isinstance(port, int):
        new = address_map.get((host, port))
        if new is not None:
            obj.host, obj.port = new  # type: ignore[attr-defined]
            count += 1
    for name in obj._FIELDS:
        value = getattr(obj, name)
        if isinstance(value, (list, Struct)):
            count += rewrite_addresses(value, address_map)
    return count


def rewrite_response(
    api_key: int, api_version: int, frame: bytes, address_map: dict[Address, Address]
) -> bytes | None:
    """The response frame (no size prefix) with its broker addresses mapped, or None if unchanged."""
    first = ADDRESS_APIS.get(api_key)
    if first is None or api_version < first or not address_map:
        return None
    info = API_KEYS[api_key]
    hv = response_header_version(api_key, api_version)
    correlation_id, tags, body_offset = decode_response_header(frame, hv)
    message, _ = info.response.decode_from(memoryview(frame), body_offset, api_version)
    if not rewrite_addresses(message, address_map):
        return None
    return encode_response_header(correlation_id, hv, tags) + message.encode(api_version)


def _size_prefixed(frame: bytes | memoryview) -> bytes:
    return len(frame).to_bytes(4, "big") + bytes(frame)


class RecordingProxy:
    """An asyncio TCP proxy in front of one broker that reports every request/response pair."""

    def __init__(
        self,
        upstream: Address,
        on_exchange: Callable[[Exchange], None],
        address_map: dict[Address, Address] | None = None,
        listen_host: str = "127.0.0.1",
        listen_port: int = 0,
    ) -> None:
        self.upstream = upstream
        self.on_exchange = on_exchange
        self.address_map = {} if address_map is None else address_map
        self.listen_host = listen_host
        self.listen_port = listen_port
        self._server: asyncio.Server | None = None
        self._conn_ids = itertools.count(1)
        self._tasks: set[asyncio.Task[None]] = set()  # connection handlers
        self._pumps: set[asyncio.Future[None]] = set()  # their two pumps each
        self.errors: list[str] = []

    @property
    def address(self) -> Address:
        return (self.listen_host, self.listen_port)

    async def start(self) -> RecordingProxy:
        self._server = await asyncio.start_server(self._accept, self.listen_host, self.listen_port)
        self.listen_port = self._server.sockets[0].getsockname()[1]
        return self

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        # Stop the pumps; each connection handler then finishes on its own (cancelling a
        # handler task itself would make asyncio's stream machinery log the cancellation).
        for task in list(self._pumps):
            task.cancel()
        if self._tasks:
            await asyncio.wait(list(self._tasks))

    async def _accept(self, creader: asyncio.StreamReader, cwriter: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        conn = next(self._conn_ids)
        try:
            ureader, uwriter = await asyncio.open_connection(*self.upstream)
        except OSError as e:
            self.errors.append(f"connection {conn}: upstream {self.upstream}: {e}")
            cwriter.close()
            self._tasks.discard(task)
            return
        pending: dict[int, Exchange] = {}
        up = asyncio.ensure_future(self._requests(conn, creader, uwriter, pending))
        down = asyncio.ensure_future(self._responses(ureader, cwriter, pending))
        self._pumps |= {up, down}
        try:
            await asyncio.wait({up, down}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self._pumps -= {up, down}
            for t in (up, down):
                t.cancel()
            for t in (up, down):
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await t
            for w in (cwriter, uwriter):
                w.close()
            for exchange in pending.values():  # acks=0 produce, or cut off by a close
                self.on_exchange(exchange)
            pending.clear()
            self._tasks.discard(task)

    async def _requests(
        self,
        conn: int,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        pending: dict[int, Exchange],
    ) -> None:
        decoder = FrameDecoder()
        while data := await reader.read(65536):
            for frame in decoder.feed(data):
                try:
                    header, _ = decode_request_header(frame)
                except ProtocolError as e:
                    self.errors.append(f"connection {conn}: bad request header: {e}")
                else:
                    pending[header.correlation_id] = Exchange(
                        conn,
                        header.api_key,
                        header.api_version,
                        header.correlation_id,
                        header.client_id,
                        _size_prefixed(frame),
                        None,
                        time.time(),
                    )
            writer.write(data)
            await writer.drain()

    async def _responses(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        pending: dict[int, Exchange],
    ) -> None:
        decoder = FrameDecoder()
        while data := await reader.read(65536):
            for frame in decoder.feed(data):
                frame = bytes(frame)
                out = frame
                exchange = pending.pop(int.from_bytes(frame[:4], "big", signed=True), None)
                if exchange is None:
                    self.errors.append("response with an unknown correlation id")
                else:
                    exchange.response = _size_prefixed(frame)
                    exchange.received_at = time.time()
                    try:
                        new = rewrite_response(
                            exchange.api_key, exchange.api_version, frame, self.address_map
                        )
                    except ProtocolError as e:
                        exchange.notes.append(f"address rewrite failed: {e}")
                        self.errors.append(
                            f"{API_KEYS[exchange.api_key].name} v{exchange.api_version}: "
                            f"cannot rewrite addresses: {e}"
                        )
                    else:
                        if new is not None:
                            out = new
                            exchange.rewritten = True
                    self.on_exchange(exchange)
                writer.write(_size_prefixed(out))
            await writer.drain()


class DirectoryRecorder:
    """Writes each exchange as ``<n>-<api>-v<version>-{request,response}.bin`` plus an index line."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.out.mkdir(parents=True, exist_ok=True)
        self._n = itertools.count(1)
        self._index = open(out / "exchanges.jsonl", "a")

    def __call__(self, ex: Exchange) -> None:
        n = next(self._n)
        info = API_KEYS.get(ex.api_key)
        name = info.name if info else f"api{ex.api_key}"
        stem = f"{n:05d}-{name}-v{ex.api_version}"
        (self.out / f"{stem}-request.bin").write_bytes(ex.request)
        if ex.response is not None:
            (self.out / f"{stem}-response.bin").write_bytes(ex.response)
        line = {
            "n": n,
            "connection": ex.connection,
            "api_key": ex.api_key,
            "api_name": name,
            "api_version": ex.api_version,
            "correlation_id": ex.correlation_id,
            "client_id": ex.client_id,
            "has_response": ex.response is not None,
            "rewritten": ex.rewritten,
            "notes": ex.notes,
        }
        self._index.write(json.dumps(line) + "\n")
        self._index.flush()

    def close(self) -> None:
        self._index.close()


def _parse_address(s: str) -> Address:
    host, _, port = s.rpartition(":")
    return host, int(port)


async def _main(args: argparse.Namespace) -> None:
    upstream = _parse_address(args.upstream)
    recorder = DirectoryRecorder(Path(args.out))
    proxy = RecordingProxy(upstream, recorder, listen_port=args.listen_port)
    await proxy.start()
    proxy.address_map[upstream] = proxy.address
    print(
        f"proxy listening on {proxy.listen_host}:{proxy.listen_port} -> {args.upstream}", flush=True
    )
    try:
        await asyncio.Event().wait()
    finally:
        await proxy.close()
        recorder.close()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--upstream", required=True, help="broker host:port")
    p.add_argument("--listen-port", type=int, default=0)
    p.add_argument("out", help="directory for the recorded frames")
    args = p.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_main(args))


if __name__ == "__main__":
    sys.exit(main())
