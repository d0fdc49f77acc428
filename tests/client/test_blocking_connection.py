"""The bulk reader's blocking connection and :class:`RangeReader` on it, against real brokers.

A broker's answers (in order, whole, however large), and what a broken peer does to the
connection: a peer that closes, one that sends a malformed frame, one that never answers and
a port nobody listens on each end in a clear error and a closed connection. TLS and SASL are
in ``tests/security/test_security_clients.py``, a leader that dies mid-read in
``tests/cluster/test_bulk_reader_failover.py``.
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Callable, Iterator

import pytest
from client_helpers import BrokerInfo, create_topic

from gregor.client import Producer
from gregor.client.consumer.bulk import _IDLE, RangeReader, close_shared_clients, shared_client
from gregor.client.core.blocking import BlockingConnection
from gregor.client.core.errors import KafkaConnectionError, KafkaTimeoutError
from gregor.protocol.messages import ApiVersionsRequest, FetchRequest, MetadataRequest
from gregor.protocol.records.batch import decode_records
from gregor.protocol.records.scan import iter_fetched_batches


def host_port(bootstrap: str) -> tuple[str, int]:
    host, port = bootstrap.rsplit(":", 1)
    return host, int(port)


def produce(broker: BrokerInfo, topic: str, n: int, size: int) -> list[bytes]:
    values = [b"%08d" % i + bytes([i % 251]) * (size - 8) for i in range(n)]
    with Producer({"bootstrap.servers": broker.bootstrap_servers, "batch.size": 65536}) as p:
        for v in values:
            p.send(topic, v, partition=0)
        p.flush()
    return values


def fetch(topic: str, offset: int, max_bytes: int) -> FetchRequest:
    return FetchRequest(
        replica_id=-1,
        max_wait_ms=100,
        min_bytes=1,
        max_bytes=max_bytes,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            FetchRequest.Topics(
                topic=topic,
                partitions=[
                    FetchRequest.Topics.Partitions(
                        partition=0, fetch_offset=offset, partition_max_bytes=max_bytes
                    )
                ],
            )
        ],
    )


def test_responses_come_back_in_order(gregor_broker: BrokerInfo, topic_name: str) -> None:
    create_topic(gregor_broker, topic_name, 1)
    conn = BlockingConnection(*host_port(gregor_broker.bootstrap_servers)).connect()
    try:
        assert conn.connected and conn.api_versions[FetchRequest.API_KEY][1] >= 12
        conn.send(MetadataRequest(topics=[MetadataRequest.Topics(name=topic_name)]), 9)
        conn.send(ApiVersionsRequest(), 0)
        conn.send(MetadataRequest(topics=None), 9)
        assert conn.in_flight == 3
        first, second, third = conn.receive(), conn.receive(), conn.receive()
        assert [t.name for t in first.topics] == [topic_name]
        assert any(k.api_key == FetchRequest.API_KEY for k in second.api_keys)
        assert topic_name in [t.name for t in third.topics]
        assert conn.in_flight == 0
        with pytest.raises(KafkaConnectionError, match="no request is waiting"):
            conn.receive()
    finally:
        conn.close()
    assert not conn.connected
    with pytest.raises(KafkaConnectionError, match="is closed"):
        conn.send(ApiVersionsRequest(), 0)


def test_a_fetch_response_of_megabytes_arrives_whole(
    gregor_broker: BrokerInfo, topic_name: str
) -> None:
    create_topic(gregor_broker, topic_name, 1)
    values = produce(gregor_broker, topic_name, 3000, 1024)
    conn = BlockingConnection(*host_port(gregor_broker.bootstrap_servers)).connect()
    try:
        got: list[bytes] = []
        while len(got) < len(values):
            resp = conn.request(fetch(topic_name, len(got), 8 << 20), 12)
            part = resp.responses[0].partitions[0]
            assert part.error_code == 0 and part.high_watermark == len(values)
            for fb in iter_fetched_batches(part.records):
                assert fb.header is not None and fb.payload is not None
                recs = decode_records(fb.payload, fb.header.records_count, fb.header.base_offset)
                assert [r.offset for r in recs] == list(range(len(got), len(got) + len(recs)))
                got += [bytes(r.value or b"") for r in recs]
        assert got == values
    finally:
        conn.close()


class Peer:
    """A listening socket on 127.0.0.1 whose one connection ``behave`` handles in a thread."""

    def __init__(self, behave: Callable[[socket.socket], None]) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.done = threading.Event()

        def serve() -> None:
            conn, _ = self.sock.accept()
            try:
                behave(conn)
            finally:
                self.done.wait()
                conn.close()

        self.thread = threading.Thread(target=serve, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.done.set()
        self.thread.join()
        self.sock.close()


@pytest.fixture
def peer() -> Iterator[Callable[[Callable[[socket.socket], None]], Peer]]:
    made: list[Peer] = []

    def make(behave: Callable[[socket.socket], None]) -> Peer:
        made.append(Peer(behave))
        return made[-1]

    yield make
    for p in made:
        p.close()


def read_request(conn: socket.socket) -> None:
    head = b""
    while len(head) < 4:
        head += conn.recv(4 - len(head))
    left = struct.unpack(">i", head)[0]
    while left:
        left -= len(conn.recv(left))


def test_a_peer_that_closes(peer: Callable[[Callable[[socket.socket], None]], Peer]) -> None:
    p = peer(lambda c: (read_request(c), c.shutdown(socket.SHUT_RDWR)))
    conn = BlockingConnection("127.0.0.1", p.port)
    with pytest.raises(KafkaConnectionError, match="closed by peer"):
        conn.connect()
    assert not conn.connected


@pytest.mark.parametrize(
    "frame",
    [struct.pack(">i", -5), struct.pack(">ii", 4, 999_999)],
    ids=["negative size", "unknown correlation id"],
)
def test_a_malformed_response(
    peer: Callable[[Callable[[socket.socket], None]], Peer], frame: bytes
) -> None:
    p = peer(lambda c: (read_request(c), c.sendall(frame)))
    conn = BlockingConnection("127.0.0.1", p.port)
    with pytest.raises(KafkaConnectionError, match="bad response"):
        conn.connect()
    assert not conn.connected


def test_a_peer_that_never_answers(peer: Callable[[Callable[[socket.socket], None]], Peer]) -> None:
    p = peer(read_request)
    conn = BlockingConnection("127.0.0.1", p.port, request_timeout_ms=300)
    with pytest.raises(KafkaTimeoutError, match="timed out"):
        conn.connect()
    assert not conn.connected


def test_nobody_listening() -> None:
    s = socket.create_server(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with pytest.raises(KafkaConnectionError, match="cannot connect"):
        BlockingConnection("127.0.0.1", port).connect()


def pooled(client: object) -> list[BlockingConnection]:
    """The idle connections readers of ``client`` left (other clients of this process may
    have left theirs)."""
    return [c for key, conns in _IDLE.items() if key[0] is client for c in conns]


def test_range_reader_reads_exact_ranges_and_leaves_its_connection(
    broker: BrokerInfo, topic_name: str
) -> None:
    create_topic(broker, topic_name, 1)
    values = produce(broker, topic_name, 2000, 200)
    client = shared_client({"bootstrap.servers": broker.bootstrap_servers})
    try:
        batches = list(
            RangeReader(client, topic_name, 0, 10, 1990, chunk_records=300, max_bytes=20000)
        )
        assert all(b.num_rows <= 300 + 400 for b in batches) and len(batches) > 3
        offsets = [o for b in batches for o in b.column("offset").to_pylist()]
        assert offsets == list(range(10, 1990))
        assert [v for b in batches for v in b.column("value").to_pylist()] == values[10:1990]
        idle = pooled(client)
        assert len(idle) == 1 and idle[0].connected and idle[0].in_flight == 0
        # the next reader takes that connection, and an abandoned read closes it
        reader = iter(
            RangeReader(client, topic_name, 0, 0, None, chunk_records=100, max_bytes=4000)
        )
        assert next(reader).column("offset").to_pylist()[0] == 0
        assert pooled(client) == []
        reader.close()
        assert not idle[0].connected
        whole = list(RangeReader(client, topic_name, 0, 0, None))
        assert [v for b in whole for v in b.column("value").to_pylist()] == values
    finally:
        close_shared_clients()
    assert not any(_IDLE.values())
