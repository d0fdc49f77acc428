"""Fuzz invariant: any bytes either decode or raise ProtocolError, nothing else.

Fed whole (random bytes, and mutations of valid encodings of every message) and byte by byte
through FrameDecoder and ServerConnection. A body that does decode must also encode again.
"""

from __future__ import annotations

import struct

import pytest
from codec_strategies import all_messages, message_def, message_strategy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from gregor.protocol.connection import ClientConnection, ServerConnection
from gregor.protocol.exceptions import ProtocolError
from gregor.protocol.framing import FrameDecoder
from gregor.protocol.messages import API_BY_NAME, API_KEYS

FAST = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

CLASSES = [
    (info.request if kind == "request" else info.response, v)
    for info in API_KEYS.values()
    for kind in ("request", "response")
    for v in range(info.min_version, info.max_version + 1)
]


def decode_or_protocol_error(cls, data, version) -> None:
    try:
        obj = cls.decode(data, version)
    except ProtocolError:
        return
    obj.encode(version)  # whatever decodes must encode again


@settings(max_examples=examples(600), **FAST)
@given(st.sampled_from(CLASSES), st.binary(max_size=64))
def test_random_bytes(cls_version, data: bytes) -> None:
    cls, v = cls_version
    decode_or_protocol_error(cls, data, v)


def _mutate(data: bytes, draw) -> bytes:
    b = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "set", "insert", "delete", "truncate"]))
        i = draw(st.integers(0, max(len(b) - 1, 0)))
        if op == "flip" and b:
            b[i] ^= 1 << draw(st.integers(0, 7))
        elif op == "set" and b:
            b[i] = draw(st.sampled_from([0x00, 0x7F, 0x80, 0xFF]))
        elif op == "insert":
            b[i:i] = draw(st.binary(min_size=1, max_size=4))
        elif op == "delete" and b:
            del b[i]
        elif op == "truncate":
            del b[i:]
    return bytes(b)


@pytest.mark.parametrize("api,kind", all_messages())
@settings(max_examples=examples(8), **FAST)
@given(data=st.data())
def test_mutated_valid_encodings(api: str, kind: str, data: st.DataObject) -> None:
    m = message_def(api, kind)
    info = API_BY_NAME[api]
    cls = info.request if kind == "request" else info.response
    v = data.draw(st.sampled_from(list(m.versions)), label="version")
    valid = data.draw(message_strategy(m, v)).encode(v)
    decode_or_protocol_error(cls, _mutate(valid, data.draw), v)
    # Every strict prefix of a valid body is malformed.
    cut = data.draw(st.integers(0, max(len(valid) - 1, 0)))
    if cut < len(valid):
        with pytest.raises(ProtocolError):
            cls.decode(valid[:cut], v)


def _frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


@settings(max_examples=examples(150), **FAST)
@given(st.lists(st.binary(max_size=40), max_size=4), st.binary(max_size=8))
def test_server_connection_byte_by_byte(bodies: list[bytes], tail: bytes) -> None:
    stream = b"".join(_frame(b) for b in bodies) + tail
    conn = ServerConnection(max_frame_size=1000)
    try:
        for i in range(len(stream)):
            conn.receive_data(stream[i : i + 1])
    except ProtocolError:
        pass


@settings(max_examples=examples(60), **FAST)
@given(data=st.data())
def test_server_connection_mutated_requests_byte_by_byte(data: st.DataObject) -> None:
    api, kind = data.draw(st.sampled_from([a for a in all_messages() if a[1] == "request"]))
    m = message_def(api, kind)
    v = data.draw(st.sampled_from(list(m.versions)))
    msg = data.draw(message_strategy(m, v))
    _, wire = ClientConnection().send_request(msg, v)
    wire = _mutate(wire, data.draw)
    conn = ServerConnection(max_frame_size=1 << 16)
    try:
        for i in range(len(wire)):
            conn.receive_data(wire[i : i + 1])
    except ProtocolError:
        pass


@settings(max_examples=examples(150), **FAST)
@given(st.binary(max_size=64), st.integers(1, 7))
def test_frame_decoder_any_chunking(stream: bytes, step: int) -> None:
    whole = FrameDecoder(max_frame_size=100)
    try:
        expected = [bytes(f) for f in whole.feed(stream)]
    except ProtocolError:
        expected = None
    chunked = FrameDecoder(max_frame_size=100)
    got: list[bytes] = []
    try:
        for i in range(0, len(stream), step):
            got += [bytes(f) for f in chunked.feed(stream[i : i + step])]
    except ProtocolError:
        assert expected is None
        return
    assert expected == got
