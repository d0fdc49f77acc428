"""Byte captures from real clients: decode with our codec, re-encode, compare byte for byte.

The fixtures in ``fixtures/captures/`` were recorded by ``tools/capture/record_clients.py``:
confluent-kafka (librdkafka), kafka-python and aiokafka talking through a recording proxy to
Tansu (an independent Kafka-compatible broker, so responses come from an encoder that is not
ours) and to Gregor. Each file is one frame exactly as it crossed the wire, size prefix
included; ``index.json`` says which request (api key and version) a response answers.

A capture may carry bytes after its body that a Kafka parser ignores; the index records them
(``trailing_hex``) and the round trip covers the frame up to the body's end.
"""

from __future__ import annotations

import json
import os
import struct
import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gregor.protocol.framing import (
    decode_request_header,
    decode_response_header,
    encode_request_header,
    encode_response_header,
)
from gregor.protocol.messages import (
    API_KEYS,
    FetchResponse,
    MetadataRequest,
    ProduceRequest,
    response_header_version,
)
from gregor.protocol.records import decode_batches, scan, validate_batches
from gregor.protocol.records.columns import ArrowColumns

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, os.fspath(ROOT / "tools" / "capture"))

from proxy import rewrite_response  # noqa: E402
from record_clients import (  # noqa: E402
    CODEC_NAMES,
    CODECS,
    RECORDS_PER_CODEC,
    default_tag_buffers,
    record_value,
)

CAPTURES = Path(__file__).parent / "fixtures" / "captures"
INDEX = json.loads((CAPTURES / "index.json").read_text())
FIXTURES: list[dict[str, Any]] = INDEX["fixtures"]
CLIENTS = ("confluent-kafka", "kafka-python", "aiokafka")

#: The APIs every client was driven through (issue 2), each captured in both directions.
REQUIRED_APIS = {
    "ApiVersions",
    "Metadata",
    "CreateTopics",
    "Produce",
    "Fetch",
    "ListOffsets",
    "FindCoordinator",
    "JoinGroup",
    "SyncGroup",
    "Heartbeat",
    "OffsetCommit",
    "OffsetFetch",
    "LeaveGroup",
}


def _frame(entry: dict[str, Any]) -> bytes:
    return (CAPTURES / entry["file"]).read_bytes()


def _decode(entry: dict[str, Any]) -> tuple[Any, bytes, int, int]:
    """(message, frame without size prefix, body start, body end) for one fixture."""
    data = _frame(entry)
    frame = data[4:]
    info = API_KEYS[entry["api_key"]]
    version = entry["api_version"]
    if entry["direction"] == "request":
        _, start = decode_request_header(frame)
        message, end = info.request.decode_from(frame, start, version)
    else:
        hv = response_header_version(entry["api_key"], version)
        _, _, start = decode_response_header(frame, hv)
        message, end = info.response.decode_from(frame, start, version)
    return message, frame, start, end


def _by_file(name: str) -> dict[str, Any]:
    (entry,) = [e for e in FIXTURES if e["file"] == name]
    return entry


def test_index_lists_every_capture_file() -> None:
    on_disk = {p.relative_to(CAPTURES).as_posix() for p in CAPTURES.rglob("*.bin")}
    assert on_disk == {e["file"] for e in FIXTURES}
    assert set(INDEX["clients"]) == set(CLIENTS)
    for name in CLIENTS:
        assert INDEX["clients"][name]["version"]


@pytest.mark.parametrize("client", CLIENTS)
def test_every_client_covers_the_required_apis(client: str) -> None:
    seen = defaultdict(set)
    for e in FIXTURES:
        if e["client"] == client:
            seen[e["direction"]].add(e["api_name"])
    assert REQUIRED_APIS <= seen["request"], REQUIRED_APIS - seen["request"]
    assert REQUIRED_APIS <= seen["response"], REQUIRED_APIS - seen["response"]


@pytest.mark.parametrize("entry", FIXTURES, ids=[e["file"] for e in FIXTURES])
def test_capture_round_trips(entry: dict[str, Any]) -> None:
    data = _frame(entry)
    assert len(data) == entry["size"]
    (size,) = struct.unpack_from(">i", data)
    assert size == len(data) - 4

    frame = data[4:]
    info = API_KEYS[entry["api_key"]]
    version = entry["api_version"]
    if entry["direction"] == "request":
        header, start = decode_request_header(frame)
        assert (header.api_key, header.api_version) == (entry["api_key"], version)
        assert header.correlation_id == entry["correlation_id"]
        message, end = info.request.decode_from(frame, start, version)
        head = encode_request_header(header)
    else:
        hv = response_header_version(entry["api_key"], version)
        correlation_id, tags, start = decode_response_header(frame, hv)
        assert correlation_id == entry["correlation_id"]
        message, end = info.response.decode_from(frame, start, version)
        head = encode_response_header(correlation_id, hv, tags)

    assert frame[end:].hex() == entry.get("trailing_hex", "")
    assert head == frame[:start]
    ours = message.encode(version)
    theirs = frame[start:end]
    cls = info.request if entry["direction"] == "request" else info.response
    assert cls.decode(ours, version) == message
    if "default_tags" not in entry:
        assert ours == theirs
    else:
        # The capture spells out tagged fields at their defaults; we leave them out. The
        # bytes differ by exactly those tag buffers, and decode to the same message.
        buffers = default_tag_buffers(ours, theirs)
        assert buffers is not None, (ours.hex(), theirs.hex())
        assert [{str(t): v.hex() for t, v in b.items()} for b in buffers] == entry["default_tags"]


def test_default_tag_buffers() -> None:
    # int8 5, a tag buffer, int8 7: ours leaves the buffer empty, theirs writes tag 0 = 01.
    assert default_tag_buffers(b"\x05\x00\x07", b"\x05\x01\x00\x01\x01\x07") == [{0: b"\x01"}]
    assert default_tag_buffers(b"\x05\x00\x07", b"\x05\x00\x07") == []
    assert default_tag_buffers(b"\x05\x00\x07", b"\x06\x00\x07") is None  # not a tag buffer
    assert default_tag_buffers(b"\x05\x00\x07", b"\x05\x01\x00\x01\x01\x08") is None
    assert default_tag_buffers(b"\x05\x00\x07", b"\x05\x01\x00\x05\x01\x07") is None  # truncated


def test_default_tags_come_only_from_tansu_responses() -> None:
    """Tansu writes tagged fields at their default values; the clients and Gregor do not."""
    with_defaults = sorted(e["file"] for e in FIXTURES if "default_tags" in e)
    assert with_defaults, "expected Tansu's default-valued tagged fields in some response"
    for e in FIXTURES:
        if "default_tags" in e:
            assert (e["broker"], e["direction"]) == ("tansu", "response"), e["file"]


def test_only_librdkafka_all_topics_metadata_has_trailing_bytes() -> None:
    with_trailing = [e["file"] for e in FIXTURES if e.get("trailing_hex")]
    assert with_trailing == ["confluent-kafka/Metadata-v12-all-topics-request.bin"]


def test_librdkafka_all_topics_metadata_trailing_bytes_explained() -> None:
    """librdkafka leaves its 4-byte array-count placeholder unshrunk for a null topics array.

    The body is 00 00 00 00 01 00 00: a varint 0 (null array), three placeholder zeros that a
    parser takes for allow_auto_topic_creation, include_topic_authorized_operations and the
    tag buffer, then the three bytes librdkafka meant as those fields. kio, generated from
    Kafka's own schemas, reads the same four bytes and stops at the same place.
    """
    entry = _by_file("confluent-kafka/Metadata-v12-all-topics-request.bin")
    message, frame, start, end = _decode(entry)
    assert bytes(frame[start:]) == bytes.fromhex("00000000010000")
    assert end - start == 4
    assert message == MetadataRequest(
        topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )
    # The three bytes after the placeholder, read as the fields they were meant to be:
    intended = MetadataRequest.decode(b"\x00" + frame[start + 4 :], 12)
    assert intended == MetadataRequest(
        topics=None, allow_auto_topic_creation=True, include_topic_authorized_operations=False
    )
    assert any("librdkafka reserves 4 bytes" in n for n in entry["notes"])

    kio_serial = pytest.importorskip("kio.serial")
    from kio.schema.metadata.v12 import MetadataRequest as KioMetadataRequest

    theirs, size = kio_serial.entity_reader(KioMetadataRequest)(bytes(frame[start:]), 0)
    assert size == 4
    assert theirs.topics is None
    assert theirs.allow_auto_topic_creation is False
    assert theirs.include_topic_authorized_operations is False


PRODUCE_REQUESTS = [
    e for e in FIXTURES if e["api_name"] == "Produce" and e["direction"] == "request"
]


@pytest.fixture(params=scan.available())
def record_walk(request: pytest.FixtureRequest) -> Iterator[str]:
    """The record tests below run on the compiled record walk and on the pure-Python one."""
    previous = scan.set_implementation(request.param)
    try:
        yield request.param
    finally:
        scan.set_implementation(previous)


class _Consumed(tuple):  # stands in for the client's ConsumerRecord
    __slots__ = ()


@pytest.mark.usefixtures("record_walk")
@pytest.mark.parametrize("entry", PRODUCE_REQUESTS, ids=[e["file"] for e in PRODUCE_REQUESTS])
def test_produce_capture_records(entry: dict[str, Any]) -> None:
    message, *_ = _decode(entry)
    assert isinstance(message, ProduceRequest)
    [topic] = message.topic_data
    [part] = topic.partition_data
    assert part.index == 0
    validate_batches(part.records)
    [batch] = decode_batches(part.records)
    assert CODEC_NAMES[batch.compression] == entry["variant"]
    assert [(r.key, r.value, r.headers) for r in batch.records] == [
        (
            f"k{i}".encode(),
            record_value(entry["client"], entry["variant"], i),
            [("h", f"{i}".encode())],
        )
        for i in range(RECORDS_PER_CODEC)
    ]


@pytest.mark.parametrize("client", CLIENTS)
def test_produce_captures_cover_every_codec(client: str) -> None:
    variants = {e["variant"] for e in PRODUCE_REQUESTS if e["client"] == client}
    assert variants == set(CODECS)


@pytest.mark.usefixtures("record_walk")
@pytest.mark.parametrize("client", CLIENTS)
def test_fetch_capture_carries_every_codec(client: str) -> None:
    [entry] = [
        e
        for e in FIXTURES
        if e["client"] == client and e["api_name"] == "Fetch" and e["direction"] == "response"
    ]
    message, *_ = _decode(entry)
    assert isinstance(message, FetchResponse)
    [topic] = message.responses
    [part] = topic.partitions
    assert part.error_code == 0
    batches = decode_batches(part.records)
    assert [CODEC_NAMES[b.compression] for b in batches] == list(CODECS)
    values = [r.value for b in batches for r in b.records]
    assert values == [
        record_value(client, codec, i) for codec in CODECS for i in range(RECORDS_PER_CODEC)
    ]
    assert [r.offset for b in batches for r in b.records] == list(range(len(values)))
    # the client's sinks over the same bytes: consumer records and Arrow columns
    consumed, next_offset = scan.consumer_records_from(
        part.records, start=0, topic="t", partition=0, record_type=_Consumed
    )
    assert [(r[2], r[6]) for r in consumed] == list(enumerate(values)) and next_offset == len(
        values
    )
    columns = ArrowColumns()
    assert scan.arrow_columns_from(part.records, columns, include_headers=True) == len(values)
    assert list(columns.offsets) == list(range(len(values)))
    value_ends = list(columns.value_offsets)
    assert [
        bytes(columns.value_data[a:b]) for a, b in zip(value_ends, value_ends[1:], strict=False)
    ] == values


ADDRESS_RESPONSES = [
    e
    for e in FIXTURES
    if e["direction"] == "response" and e["api_name"] in ("Metadata", "FindCoordinator")
]


@pytest.mark.parametrize("entry", ADDRESS_RESPONSES, ids=[e["file"] for e in ADDRESS_RESPONSES])
def test_proxy_rewrites_advertised_addresses(entry: dict[str, Any]) -> None:
    """The recording proxy maps broker addresses in captured responses and keeps the rest."""
    message, frame, start, _ = _decode(entry)
    if entry["api_name"] == "Metadata":
        [broker] = message.brokers
        old = (broker.host, broker.port)
    elif message.coordinators:  # FindCoordinator v4+
        [c] = message.coordinators
        old = (c.host, c.port)
    else:
        old = (message.host, message.port)

    version = entry["api_version"]
    key = entry["api_key"]
    assert rewrite_response(key, version, bytes(frame), {("elsewhere", 1): ("x", 2)}) is None

    new_frame = rewrite_response(key, version, bytes(frame), {old: ("proxy.test", 39092)})
    assert new_frame is not None
    assert new_frame[:start] == frame[:start]  # header (correlation id) unchanged
    rewritten = API_KEYS[key].response.decode(new_frame[start:], version)
    assert ("proxy.test", 39092) in _addresses(rewritten)
    assert old not in _addresses(rewritten)
    # Put the old address back: everything else is as captured.
    back = rewrite_response(key, version, new_frame, {("proxy.test", 39092): old})
    assert back == bytes(frame)


def _addresses(message: Any) -> set[tuple[str, int]]:
    found = set()
    for item in [message, *getattr(message, "brokers", []), *getattr(message, "coordinators", [])]:
        host, port = getattr(item, "host", None), getattr(item, "port", None)
        if host:
            found.add((host, port))
    return found


def test_proxy_records_and_rewrites_a_live_exchange() -> None:
    """Replay librdkafka's Metadata request through the proxy to a stand-in broker.

    The stand-in answers with Tansu's captured Metadata response (under the request's
    correlation id). The client must get the response with the proxy's address in it; the
    recorded exchange must hold both frames exactly as the broker side saw them.
    """
    import asyncio

    from proxy import RecordingProxy

    request = _frame(_by_file("confluent-kafka/Metadata-v12-request.bin"))
    response_entry = _by_file("confluent-kafka/Metadata-v12-response.bin")
    captured, *_ = _decode(response_entry)
    [broker] = captured.brokers
    response_tail = _frame(response_entry)[8:]  # after size prefix and correlation id

    async def run() -> tuple[bytes, list[Any], tuple[str, int]]:
        async def stand_in(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            size = int.from_bytes(await reader.readexactly(4), "big")
            frame = await reader.readexactly(size)
            body = frame[4:8] + response_tail  # the request's correlation id
            writer.write(len(body).to_bytes(4, "big") + body)
            await writer.drain()
            await reader.read()  # until the proxy hangs up
            writer.close()

        server = await asyncio.start_server(stand_in, "127.0.0.1", 0)
        upstream = server.sockets[0].getsockname()[:2]
        exchanges: list[Any] = []
        proxy = await RecordingProxy(upstream, exchanges.append).start()
        proxy.address_map[(broker.host, broker.port)] = proxy.address
        reader, writer = await asyncio.open_connection(*proxy.address)
        writer.write(request[:7])  # split mid-header: the proxy must reassemble frames
        await writer.drain()
        await asyncio.sleep(0.01)
        writer.write(request[7:])
        size = int.from_bytes(await reader.readexactly(4), "big")
        received = await reader.readexactly(size)
        writer.close()
        await proxy.close()
        server.close()
        await server.wait_closed()
        return received, exchanges, proxy.address

    received, exchanges, proxy_address = asyncio.run(asyncio.wait_for(run(), 30))

    [ex] = exchanges
    assert ex.request == request
    body = request[8:12] + response_tail  # the correlation id, then the captured response
    assert ex.response == len(body).to_bytes(4, "big") + body
    assert (ex.api_key, ex.api_version) == (3, 12)
    assert ex.correlation_id == int.from_bytes(request[8:12], "big")
    assert ex.rewritten
    hv = response_header_version(3, 12)
    correlation_id, _, start = decode_response_header(received, hv)
    assert correlation_id == ex.correlation_id
    seen = API_KEYS[3].response.decode(received[start:], 12)
    assert [(b.node_id, b.host, b.port) for b in seen.brokers] == [(broker.node_id, *proxy_address)]
    assert seen.topics == captured.topics
