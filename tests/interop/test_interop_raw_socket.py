"""Bad input on raw sockets: only the offending connection is closed (or answered), while a
connection opened before it and a real client keep working.

Well-formed requests are encoded with Gregor's own sans-IO codec; the bad ones are written
byte by byte here."""

from __future__ import annotations

import socket
import struct
import threading
import time
import uuid

import pytest
from confluent_kafka import TopicPartition
from conftest import INTEROP_BROKER, gregor_only
from interop_clients import ck_consumer, ck_drain, ck_produce
from interop_helpers import BASE_TS, RawClient, Rec, create_topic, topic_name

from gregor.protocol.errors import ErrorCode
from gregor.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from gregor.protocol.messages.fetch import FetchRequest
from gregor.protocol.messages.metadata import MetadataRequest
from gregor.protocol.messages.produce import ProduceRequest
from gregor.protocol.records.batch import build_batch, decode_batches

P = 3


@pytest.fixture(scope="module")
def topic(broker) -> str:  # noqa: ANN001
    name = topic_name("raw")
    create_topic(broker.bootstrap_servers, name, P)
    return name


@pytest.fixture(scope="module")
def bystander(broker):  # noqa: ANN001, ANN201
    """A connection open through all the bad input; it must keep working."""
    with RawClient(broker.bootstrap_servers) as c:
        yield c


def _still_serving(broker, bystander: RawClient, topic: str) -> None:  # noqa: ANN001
    md = bystander.request(MetadataRequest(topics=[MetadataRequest.Topics(name=topic)]), 9)
    assert [(t.name, t.error_code, len(t.partitions)) for t in md.topics] == [(topic, 0, P)]
    value = uuid.uuid4().hex.encode()
    [msg] = ck_produce(broker.bootstrap_servers, topic, [Rec(0, b"alive", value, (), BASE_TS)])
    c = ck_consumer(broker.bootstrap_servers)
    try:
        c.assign([TopicPartition(topic, 0, msg.offset())])
        assert [(o, r.value) for o, r in ck_drain(c, 1)] == [(msg.offset(), value)]
    finally:
        c.close()


def _closed_without_answer(sock: socket.socket) -> bool:
    sock.settimeout(10)
    try:
        return sock.recv(4096) == b""
    except ConnectionResetError:
        return True


def _open(broker) -> socket.socket:  # noqa: ANN001
    return socket.create_connection(("127.0.0.1", broker.port), timeout=10)


def _frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def _header(
    api_key: int, version: int, correlation_id: int = 7, client_id: bytes = b"raw"
) -> bytes:
    return struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", id="http-garbage"),
        pytest.param(struct.pack(">i", 0x7FFFFFFF) + b"\x00" * 16, id="absurd-size"),
        pytest.param(struct.pack(">i", -5) + b"\x00" * 16, id="negative-size"),
        pytest.param(_frame(b"\x00\x03\x00"), id="frame-shorter-than-header"),
        pytest.param(_frame(_header(3, 9) + b"\xff\xff\xff"), id="malformed-body"),
        pytest.param(
            _frame(_header(3, 9)[:8] + struct.pack(">h", 200) + b"abc"), id="bad-client-id-length"
        ),
        pytest.param(_frame(_header(9999, 0)), id="unknown-api-key"),
        pytest.param(_frame(_header(3, 99)), id="unknown-version"),
        pytest.param(_frame(_header(-1, 0)), id="negative-api-key"),
    ],
)
def test_bad_input_closes_only_that_connection(broker, topic, bystander, data: bytes) -> None:  # noqa: ANN001
    with _open(broker) as s:
        s.sendall(data)
        assert _closed_without_answer(s)
    _still_serving(broker, bystander, topic)


def test_truncated_frame_then_eof(broker, topic, bystander) -> None:  # noqa: ANN001
    """A frame that promises 100 bytes and delivers 10 before the client hangs up."""
    with _open(broker) as s:
        s.sendall(struct.pack(">i", 100) + _header(18, 0))
        s.shutdown(socket.SHUT_WR)
        assert _closed_without_answer(s)
    _still_serving(broker, bystander, topic)


def test_garbage_in_slow_drips(broker, topic, bystander) -> None:  # noqa: ANN001
    """A size prefix delivered one byte at a time is still judged once it is complete."""
    with _open(broker) as s:
        for b in struct.pack(">i", 0x7FFFFFFF):
            s.sendall(bytes([b]))
            time.sleep(0.01)
        assert _closed_without_answer(s)
    _still_serving(broker, bystander, topic)


def test_api_versions_unknown_version_answers_v0(broker, topic, bystander) -> None:  # noqa: ANN001
    """ApiVersions at a version we lack: UNSUPPORTED_VERSION in the v0 layout, then the same
    connection carries on at a version we have."""
    with RawClient(broker.bootstrap_servers) as c:
        # v127 would use request header v2 (client id + empty tag buffer).
        c.send_raw(_frame(_header(18, 127, correlation_id=4242) + b"\x00" + b"\x00\x00"))
        frame = c.recv_frame()
        assert frame is not None
        (cid,) = struct.unpack_from(">i", frame)
        assert cid == 4242
        body = ApiVersionsResponse.decode(memoryview(frame)[4:], 0)  # v0: no header tags
        assert body.error_code == ErrorCode.UNSUPPORTED_VERSION
        keys = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
        assert keys[18][1] >= 3
        ok = c.request(
            ApiVersionsRequest(client_software_name="raw", client_software_version="1"), 3
        )
        assert ok.error_code == 0
        table = {k.api_key: (k.min_version, k.max_version) for k in ok.api_keys}
        assert table[0][1] >= 9 and table[1][1] >= 12
        assert keys.items() <= table.items()
        if INTEROP_BROKER == "gregor":
            # Gregor lists its whole table there; Kafka only ApiVersions' own range, as KIP-511
            # asks (README, compatibility).
            assert keys == table
    _still_serving(broker, bystander, topic)


def _produce(c: RawClient, topic: str, partition: int, records: bytes, acks: int = 1):  # noqa: ANN202
    req = ProduceRequest(
        transactional_id=None,
        acks=acks,
        timeout_ms=5000,
        topic_data=[
            ProduceRequest.TopicData(
                name=topic,
                partition_data=[
                    ProduceRequest.TopicData.PartitionData(index=partition, records=records)
                ],
            )
        ],
    )
    resp = c.request(req, 9)
    [t] = resp.responses
    [p] = t.partition_responses
    return p


def test_produce_errors_answer_per_partition(broker, topic, bystander) -> None:  # noqa: ANN001
    """A corrupt CRC and an oversize batch are refused with their error codes; the connection
    stays usable and the log is unchanged by them."""
    with RawClient(broker.bootstrap_servers) as c:
        good = build_batch([(BASE_TS, b"k", b"v")])
        first = _produce(c, topic, 2, good)
        assert first.error_code == 0
        bad = bytearray(good)
        bad[-1] ^= 0xFF  # flips a record byte: the CRC no longer matches
        p = _produce(c, topic, 2, bytes(bad))
        assert p.error_code == ErrorCode.CORRUPT_MESSAGE
        huge = build_batch([(BASE_TS, b"k", b"x" * 1_100_000)])  # > message.max.bytes 1,048,588
        p = _produce(c, topic, 2, huge)
        assert p.error_code == ErrorCode.MESSAGE_TOO_LARGE
        p = _produce(c, topic, 99, good)
        assert p.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        again = _produce(c, topic, 2, good)
        assert (again.error_code, again.base_offset) == (0, first.base_offset + 1)
    _still_serving(broker, bystander, topic)


def _fetch(c: RawClient, topic: str, partition: int, offset: int, max_wait_ms: int) -> list:
    req = FetchRequest(
        replica_id=-1,
        max_wait_ms=max_wait_ms,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            FetchRequest.Topics(
                topic=topic,
                partitions=[
                    FetchRequest.Topics.Partitions(
                        partition=partition, fetch_offset=offset, partition_max_bytes=1 << 20
                    )
                ],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
    )
    resp = c.request(req, 12)
    [t] = resp.responses
    [p] = t.partitions
    assert p.error_code == 0
    return [(r.offset, r.value) for b in decode_batches(bytes(p.records or b"")) for r in b]


def test_long_poll_is_answered_by_an_append(broker, topic, bystander) -> None:  # noqa: ANN001
    """A fetch that may wait 10 minutes is answered once a record is appended a second later;
    meanwhile another connection is served (the wait blocks only its own connection)."""
    fresh = topic_name("raw-lp")
    create_topic(broker.bootstrap_servers, fresh, P)
    result: list = []
    with RawClient(broker.bootstrap_servers, timeout=120) as waiter:
        t = threading.Thread(target=lambda: result.append(_fetch(waiter, fresh, 0, 0, 600_000)))
        t.start()
        time.sleep(1.0)
        assert t.is_alive()  # parked: there is nothing to return yet
        _still_serving(broker, bystander, topic)
        with RawClient(broker.bootstrap_servers) as producer:
            assert (
                _produce(producer, fresh, 0, build_batch([(BASE_TS, None, b"wake")])).error_code
                == 0
            )
        t.join()
        assert not t.is_alive()
    assert result == [[(0, b"wake")]]


def test_fetch_session_epochs(broker, topic, bystander) -> None:  # noqa: ANN001
    """KIP-227 on the wire: epoch 0 opens a session, the next fetch in it carries epoch 1 and
    each later one the next number; a wrong epoch or an unknown id is refused, and a full fetch
    naming the session replaces it."""
    fresh = topic_name("raw-fs")
    create_topic(broker.bootstrap_servers, fresh, P)

    def fetch(c: RawClient, sid: int, epoch: int, parts: list[tuple[int, int]]):  # noqa: ANN202
        req = FetchRequest(
            replica_id=-1,
            max_wait_ms=0,
            min_bytes=0,
            max_bytes=1 << 20,
            isolation_level=0,
            session_id=sid,
            session_epoch=epoch,
            topics=[
                FetchRequest.Topics(
                    topic=fresh,
                    partitions=[
                        FetchRequest.Topics.Partitions(
                            partition=p, fetch_offset=o, partition_max_bytes=1 << 20
                        )
                        for p, o in parts
                    ],
                )
            ]
            if parts
            else [],
            forgotten_topics_data=[],
            rack_id="",
        )
        return c.request(req, 12)

    def listed(resp) -> list[tuple[int, int, int]]:  # noqa: ANN001
        return [
            (p.partition_index, p.error_code, p.high_watermark)
            for t in resp.responses
            for p in t.partitions
        ]

    with RawClient(broker.bootstrap_servers) as c:
        opened = fetch(c, 0, 0, [(0, 0), (1, 0)])
        sid = opened.session_id
        assert (opened.error_code, sid != 0) == (0, True)
        assert sorted(listed(opened)) == [(0, 0, 0), (1, 0, 0)]
        # Nothing changed: an incremental fetch lists no partitions.
        assert (fetch(c, sid, 1, []).error_code, listed(fetch(c, sid, 2, []))) == (0, [])
        # A produce moves partition 1's high watermark: only it is listed, with the record.
        assert _produce(c, fresh, 1, build_batch([(BASE_TS, None, b"x")])).error_code == 0
        news = fetch(c, sid, 3, [])
        assert listed(news) == [(1, 0, 1)]
        assert fetch(c, sid, 3, []).error_code == ErrorCode.INVALID_FETCH_SESSION_EPOCH
        assert fetch(c, sid, 4, []).error_code == 0  # a refused fetch does not advance the epoch
        assert fetch(c, sid + 1, 1, []).error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        # A full fetch naming the session closes it and opens another.
        again = fetch(c, sid, 0, [(2, 0)])
        assert again.error_code == 0 and again.session_id not in (0, sid)
        assert fetch(c, sid, 5, []).error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        assert listed(fetch(c, again.session_id, 1, [])) == []
        # Epoch -1 fetches without a session.
        assert fetch(c, 0, -1, [(0, 0)]).session_id == 0
    _still_serving(broker, bystander, topic)


@gregor_only(
    "Kafka fills partition_max_bytes with the start of the next batch too (clients drop it)"
)
def test_fetch_returns_whole_batches(broker, topic, bystander) -> None:  # noqa: ANN001
    """A read cut off by the byte limit ends at the last whole batch; a first batch larger
    than the limit still comes whole (KIP-74)."""
    fresh = topic_name("raw-whole")
    create_topic(broker.bootstrap_servers, fresh, P)
    batches = [build_batch([(BASE_TS + i, None, bytes([i]) * 10_000)]) for i in range(3)]
    sizes = [len(b) for b in batches]
    with RawClient(broker.bootstrap_servers) as c:
        for b in batches:
            assert _produce(c, fresh, 0, b).error_code == 0

        def fetch_bytes(limit: int) -> bytes:
            req = FetchRequest(
                replica_id=-1,
                max_wait_ms=0,
                min_bytes=0,
                max_bytes=1 << 20,
                isolation_level=0,
                session_id=0,
                session_epoch=-1,
                topics=[
                    FetchRequest.Topics(
                        topic=fresh,
                        partitions=[
                            FetchRequest.Topics.Partitions(
                                partition=0, fetch_offset=0, partition_max_bytes=limit
                            )
                        ],
                    )
                ],
                forgotten_topics_data=[],
                rack_id="",
            )
            [t] = c.request(req, 12).responses
            return bytes(t.partitions[0].records or b"")

        assert len(fetch_bytes(sizes[0] + sizes[1] + 100)) == sizes[0] + sizes[1]
        assert len(fetch_bytes(sum(sizes))) == sum(sizes)
        first = fetch_bytes(1000)
        assert len(first) == sizes[0]
        assert [(r.offset, r.value) for b in decode_batches(first) for r in b] == [
            (0, bytes([0]) * 10_000)
        ]
    _still_serving(broker, bystander, topic)
