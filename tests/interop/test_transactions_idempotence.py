"""Idempotent producers whose produce responses get lost: no duplicates, order kept.

A small TCP proxy sits between the client and the broker (the broker advertises the proxy's
address, so every connection goes through it). It forwards frames both ways, remembers the
API key of each request by correlation id, and for chosen Produce requests (counted across
connections) it swallows the response and cuts the connection - the broker has written the
batch but the client never hears so. The client retries the batch with the same producer id
and sequence; the broker must answer the retry with the original offsets instead of writing
it again, and later batches must not overtake earlier ones.
"""

from __future__ import annotations

import socket
import struct
import threading
import uuid
from collections.abc import Iterator

import pytest
from interop_helpers import RawClient, create_topic
from test_transactions_support import CLIENTS, producer

from gregor.protocol.messages.fetch import FetchRequest
from gregor.protocol.records.batch import decode_batch
from gregor.protocol.records.header import iter_batches
from gregor.testing import BrokerProcess

PRODUCE = 0
N = 300


class DroppingProxy:
    """Forward 127.0.0.1:port to the broker; cut the connection instead of delivering the
    response to the Produce requests whose ordinal (1-based, over all connections) is in
    ``drop``."""

    def __init__(self, drop: set[int]) -> None:
        self.drop = set(drop)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.upstream = 0
        self.lock = threading.Lock()
        self.produce_requests = 0
        self.dropped = 0
        self.doomed: set[tuple[int, int]] = set()  # (connection id, correlation id)
        self.closing = False
        self.sockets: list[socket.socket] = []

    def start(self, upstream_port: int) -> None:
        self.upstream = upstream_port
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self.closing = True
        self.listener.close()
        for s in self.sockets:
            try:
                s.close()
            except OSError:
                pass

    def _accept(self) -> None:
        conn_ids = iter(range(1, 1 << 30))
        while not self.closing:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.upstream))
            self.sockets += [client, server]
            cid = next(conn_ids)
            keys: dict[int, int] = {}
            threading.Thread(
                target=self._requests, args=(cid, client, server, keys), daemon=True
            ).start()
            threading.Thread(
                target=self._responses, args=(cid, server, client, keys), daemon=True
            ).start()

    @staticmethod
    def _frames(sock: socket.socket) -> Iterator[bytes]:
        buf = b""
        while True:
            try:
                chunk = sock.recv(1 << 16)
            except OSError:
                return
            if not chunk:
                return
            buf += chunk
            while len(buf) >= 4:
                (n,) = struct.unpack_from(">i", buf)
                if len(buf) < 4 + n:
                    break
                yield buf[: 4 + n]
                buf = buf[4 + n :]

    def _requests(
        self, cid: int, src: socket.socket, dst: socket.socket, keys: dict[int, int]
    ) -> None:
        for frame in self._frames(src):
            api_key, _version, corr = struct.unpack_from(">hhi", frame, 4)
            if api_key == PRODUCE:
                with self.lock:
                    self.produce_requests += 1
                    if self.produce_requests in self.drop:
                        self.doomed.add((cid, corr))
            keys[corr] = api_key
            try:
                dst.sendall(frame)
            except OSError:
                break
        self._cut(src, dst)

    def _responses(
        self, cid: int, src: socket.socket, dst: socket.socket, keys: dict[int, int]
    ) -> None:
        for frame in self._frames(src):
            (corr,) = struct.unpack_from(">i", frame, 4)
            with self.lock:
                doomed = (cid, corr) in self.doomed
                if doomed:
                    self.dropped += 1
            if doomed:
                break
            try:
                dst.sendall(frame)
            except OSError:
                break
        self._cut(src, dst)

    @staticmethod
    def _cut(a: socket.socket, b: socket.socket) -> None:
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()


def stored_values(bootstrap: str, topic: str) -> list[bytes | None]:
    """Every record of partition 0 as stored, read straight from the broker."""
    out: list[bytes | None] = []
    offset = 0
    with RawClient(bootstrap) as c:
        while True:
            req = FetchRequest(
                max_wait_ms=0,
                min_bytes=0,
                max_bytes=1 << 20,
                topics=[
                    FetchRequest.Topics(
                        topic=topic,
                        partitions=[
                            FetchRequest.Topics.Partitions(
                                partition=0, fetch_offset=offset, partition_max_bytes=1 << 20
                            )
                        ],
                    )
                ],
            )
            p = c.request(req, 11).responses[0].partitions[0]
            data = bytes(p.records or b"")
            if not data:
                return out
            for pos, _ in iter_batches(data):
                b = decode_batch(data, pos)
                out += [r.value for r in b.records]
                offset = b.last_offset + 1
            if offset >= p.high_watermark:
                return out


CONF = {
    "confluent": {
        "enable.idempotence": True,
        "linger.ms": 1,
        "batch.num.messages": 7,
        "max.in.flight.requests.per.connection": 5,
        "retry.backoff.ms": 20,
    },
    "kafka-python": {
        "enable_idempotence": True,
        "linger_ms": 1,
        "batch_size": 120,
        "max_in_flight_requests_per_connection": 5,
        "retry_backoff_ms": 20,
    },
    "aiokafka": {
        "enable_idempotence": True,
        "linger_ms": 1,
        "max_batch_size": 120,
        "retry_backoff_ms": 20,
    },
}


@pytest.fixture
def proxied() -> Iterator[tuple[BrokerProcess, DroppingProxy]]:
    proxy = DroppingProxy({3, 9, 10, 20})
    broker = BrokerProcess(config={"advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy.port}"})
    try:
        broker.start()
        proxy.start(broker.port)
        yield broker, proxy
    finally:
        proxy.close()
        broker.close()


@pytest.mark.parametrize("client", CLIENTS)
def test_lost_produce_responses_cause_no_duplicates(
    proxied: tuple[BrokerProcess, DroppingProxy], client: str
) -> None:
    broker, proxy = proxied
    via_proxy = f"127.0.0.1:{proxy.port}"
    topic = f"idem-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap_servers, topic, 1)
    p = producer(client, via_proxy, **CONF[client])
    try:
        for i in range(N):
            p.send(topic, 0, b"v-%04d" % i)
        p.flush()
    finally:
        p.close()
    assert proxy.dropped >= 1, "the proxy never dropped a response: the test proved nothing"
    assert stored_values(broker.bootstrap_servers, topic) == [b"v-%04d" % i for i in range(N)]
