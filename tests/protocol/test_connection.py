"""Sans-IO client and server connections: pipelining, correlation, errors, frame limits."""

from __future__ import annotations

import pytest

from gregor.protocol.connection import ClientConnection, ServerConnection
from gregor.protocol.errors import ErrorCode
from gregor.protocol.exceptions import ProtocolError
from gregor.protocol.framing import FrameTooLarge, RequestHeader, encode_request, encode_response
from gregor.protocol.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
    ProduceResponse,
)


def _answer(server: ServerConnection, events) -> bytes:
    out = b""
    for ev in events:
        if ev.header.api_key == 3:
            resp = MetadataResponse(cluster_id=f"c{ev.header.correlation_id}")
        elif ev.header.api_key == 10:
            resp = FindCoordinatorResponse(node_id=ev.header.correlation_id)
        else:
            resp = ApiVersionsResponse(
                api_keys=[ApiVersionsResponse.ApiKeys(api_key=3, max_version=12)]
            )
        out += server.send_response(ev.header, resp)
    return out


def test_pipelined_requests_matched_in_order() -> None:
    client = ClientConnection(client_id="me")
    server = ServerConnection()
    wire = b""
    sent = []
    for msg, v in [
        (MetadataRequest(topics=None), 12),
        (FindCoordinatorRequest(key="g"), 3),
        (ApiVersionsRequest(), 3),
        (MetadataRequest(topics=[]), 2),
    ]:
        cid, data = client.send_request(msg, v)
        sent.append((cid, msg))
        wire += data
    assert [cid for cid, _ in sent] == [0, 1, 2, 3]
    assert client.in_flight == 4
    events = server.receive_data(wire)
    assert [e.header.correlation_id for e in events] == [0, 1, 2, 3]
    assert [e.header.client_id for e in events] == ["me"] * 4
    assert [e.message for e in events] == [m for _, m in sent]
    assert all(e.error is None for e in events)
    replies = _answer(server, events)
    # Deliver the responses in two uneven chunks.
    got = client.receive_data(replies[:7]) + client.receive_data(replies[7:])
    assert [(r.correlation_id, r.request) for r in got] == sent
    assert got[0].response.cluster_id == "c0"
    assert got[1].response.node_id == 1
    assert got[2].response.api_keys[0].max_version == 12
    assert got[3].response.cluster_id == "c3"
    assert client.in_flight == 0


def test_byte_by_byte_both_ways() -> None:
    client, server = ClientConnection(), ServerConnection()
    _, wire = client.send_request(MetadataRequest(topics=None), 9)
    events = []
    for i in range(len(wire)):
        events += server.receive_data(wire[i : i + 1])
    assert len(events) == 1
    replies = _answer(server, events)
    got = []
    for i in range(len(replies)):
        got += client.receive_data(replies[i : i + 1])
    assert len(got) == 1 and got[0].response.cluster_id == "c0"


def test_wrong_correlation_id() -> None:
    client = ClientConnection()
    client.send_request(MetadataRequest(), 1)
    client.send_request(MetadataRequest(), 1)
    with pytest.raises(ProtocolError, match="correlation id 1"):
        client.receive_data(encode_response(3, 1, 1, MetadataResponse()))


def test_response_with_nothing_outstanding() -> None:
    with pytest.raises(ProtocolError):
        ClientConnection().receive_data(encode_response(3, 1, 0, MetadataResponse()))


def test_produce_acks_0_expects_no_response() -> None:
    client = ClientConnection()
    cid0, _ = client.send_request(ProduceRequest(acks=0), 3)
    assert client.in_flight == 0
    cid1, _ = client.send_request(ProduceRequest(acks=1), 3)
    assert client.in_flight == 1 and (cid0, cid1) == (0, 1)
    got = client.receive_data(encode_response(0, 3, 1, ProduceResponse()))
    assert got[0].correlation_id == 1


def test_correlation_ids_wrap() -> None:
    client = ClientConnection(first_correlation_id=2**31 - 1)
    assert client.send_request(MetadataRequest(), 1)[0] == 2**31 - 1
    assert client.send_request(MetadataRequest(), 1)[0] == 0


def test_server_marks_unknown_versions_and_keys() -> None:
    server = ServerConnection()
    # A newer client's ApiVersions v99 request (flexible, so request header v2).
    unknown_version = encode_request(RequestHeader(18, 3, 5, "c"), ApiVersionsRequest())
    unknown_version = unknown_version[:6] + b"\x00\x63" + unknown_version[8:]
    unknown_key = bytes.fromhex("0000000a2710000000000006ffff")  # key 10000
    ev1, ev2 = server.receive_data(unknown_version + unknown_key)
    assert (ev1.header.api_key, ev1.header.api_version, ev1.header.correlation_id) == (18, 99, 5)
    assert ev1.message is None and ev1.error == ErrorCode.UNSUPPORTED_VERSION
    assert (ev2.header.api_key, ev2.header.correlation_id) == (10000, 6)
    assert ev2.message is None and ev2.error == ErrorCode.INVALID_REQUEST
    # Kafka answers an unsupported ApiVersions request with a v0 body and header.
    reply = server.send_response(
        ev1.header,
        ApiVersionsResponse(
            error_code=ErrorCode.UNSUPPORTED_VERSION,
            api_keys=[ApiVersionsResponse.ApiKeys(api_key=18, max_version=4)],
        ),
        version=0,
    )
    assert reply.hex() == "0000001000000005002300000001001200000004"


def test_client_reads_v0_apiversions_error_answer() -> None:
    client = ClientConnection()
    cid, _ = client.send_request(ApiVersionsRequest(client_software_name="x"), 4)
    body = ApiVersionsResponse(
        error_code=35, api_keys=[ApiVersionsResponse.ApiKeys(api_key=18, max_version=3)]
    )
    (got,) = client.receive_data(encode_response(18, 0, cid, body))
    assert got.response.error_code == 35 and got.response.api_keys[0].max_version == 3


def test_malformed_body_raises_with_prior_events() -> None:
    client, server = ClientConnection(), ServerConnection()
    _, good = client.send_request(MetadataRequest(topics=[]), 1)
    bad = bytes.fromhex("0000000c0003000100000001ffff0000")  # 2-byte array count
    with pytest.raises(ProtocolError) as e:
        server.receive_data(good + bad)
    assert [ev.header.correlation_id for ev in e.value.events] == [0]


def test_frame_size_limits() -> None:
    client = ClientConnection(max_frame_size=16)
    client.send_request(MetadataRequest(), 2)
    with pytest.raises(FrameTooLarge):
        client.receive_data(encode_response(3, 2, 0, MetadataResponse(cluster_id="x" * 40)))
    server = ServerConnection(max_frame_size=16)
    _, wire = ClientConnection().send_request(
        MetadataRequest(topics=[MetadataRequest.Topics(name="t" * 20)]), 1
    )
    with pytest.raises(FrameTooLarge):
        server.receive_data(wire[:4])  # the size prefix alone is enough to refuse


def test_parts_keep_records_uncopied() -> None:
    payload = b"R" * 64
    msg = ProduceRequest(
        acks=1,
        topic_data=[
            ProduceRequest.TopicData(
                name="t", partition_data=[ProduceRequest.TopicData.PartitionData(records=payload)]
            )
        ],
    )
    cid, parts = ClientConnection().send_request_parts(msg, 9)
    assert any(p is payload for p in parts)
    (ev,) = ServerConnection().receive_data(b"".join(parts))
    assert bytes(ev.message.topic_data[0].partition_data[0].records) == payload
