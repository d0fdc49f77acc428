"""Size-prefixed frames, request headers v0-v2 and response headers v0-v1."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from gregor.protocol.exceptions import ProtocolError
from gregor.protocol.framing import (
    BufferedFrameReader,
    FrameDecoder,
    FrameTooLarge,
    RequestHeader,
    decode_request_header,
    decode_response_header,
    encode_request,
    encode_response,
    encode_response_header,
)
from gregor.protocol.messages import (
    ApiVersionsResponse,
    ControlledShutdownRequest,
    MetadataRequest,
    MetadataResponse,
)


def test_request_header_v0_controlled_shutdown() -> None:
    h = RequestHeader(7, 0, 5, client_id="ignored")
    assert h.header_version == 0
    frame = encode_request(h, ControlledShutdownRequest(broker_id=1))
    assert frame.hex() == "0000000c000700000000000500000001"
    got, pos = decode_request_header(frame[4:])
    assert (got.api_key, got.api_version, got.correlation_id, got.client_id, pos) == (
        7,
        0,
        5,
        None,
        8,
    )


def test_request_header_v1() -> None:
    h = RequestHeader(3, 1, 9, client_id="cl")
    frame = encode_request(h, MetadataRequest(topics=None))
    assert frame.hex() == "0000001000030001000000090002636cffffffff"
    got, pos = decode_request_header(frame[4:])
    assert got == h and pos == 12
    assert MetadataRequest.decode(frame[4 + pos :], 1).topics is None


def test_request_header_v2_with_tags() -> None:
    h = RequestHeader(3, 12, 1, client_id=None, unknown_tags={3: b"x"})
    frame = encode_request(h, MetadataRequest(topics=None))
    assert frame[4:].hex().startswith("0003000c00000001ffff01030178")
    got, pos = decode_request_header(frame[4:])
    assert got == h
    assert MetadataRequest.decode(frame[4 + pos :], 12) == MetadataRequest(topics=None)


def test_header_of_unknown_api_key_or_version() -> None:
    got, pos = decode_request_header(bytes.fromhex("03e700050000002a"))
    assert (got.api_key, got.api_version, got.correlation_id, pos) == (999, 5, 42, 8)
    assert not got.known
    got, _ = decode_request_header(bytes.fromhex("03e700050000002a00026869ff"))
    assert got.client_id == "hi"
    # Produce v99: known key, unknown version, read with the flexible header (v2).
    got, pos = decode_request_header(bytes.fromhex("000000630000000100016100"))
    assert (got.client_id, pos, got.known) == ("a", 12, False)


def test_short_header_is_protocol_error() -> None:
    with pytest.raises(ProtocolError):
        decode_request_header(b"\x00\x03\x00\x01\x00\x00\x00")
    with pytest.raises(ProtocolError):
        decode_request_header(bytes.fromhex("0003000100000001000561"))


def test_encode_request_checks_the_api_key() -> None:
    with pytest.raises(ProtocolError):
        encode_request(RequestHeader(18, 0, 1), MetadataRequest())


def test_response_headers() -> None:
    # ApiVersions responses always use header v0, even for flexible versions.
    frame = encode_response(18, 3, 7, ApiVersionsResponse())
    assert frame.hex() == "0000000c000000070000010000000000"
    # Flexible Metadata response: header v1 (correlation id + empty tag buffer).
    frame = encode_response(3, 9, 7, MetadataResponse())
    assert frame[4:9].hex() == "0000000700"
    assert decode_response_header(frame[4:], 1) == (7, {}, 5)
    frame = encode_response(3, 8, 7, MetadataResponse())
    assert decode_response_header(frame[4:], 0) == (7, {}, 4)
    assert encode_response_header(1, 1, {2: b"ab"}).hex() == "000000010102026162"


def _frames(*bodies: bytes) -> bytes:
    return b"".join(len(b).to_bytes(4, "big") + b for b in bodies)


def test_frame_decoder_whole_and_split() -> None:
    stream = _frames(b"abc", b"", b"defgh")
    assert [bytes(f) for f in FrameDecoder().feed(stream)] == [b"abc", b"", b"defgh"]
    for cut in range(len(stream) + 1):
        d = FrameDecoder()
        got = [bytes(f) for f in d.feed(stream[:cut])] + [bytes(f) for f in d.feed(stream[cut:])]
        assert got == [b"abc", b"", b"defgh"], cut
        assert d.buffered == 0
    d = FrameDecoder()
    got = []
    for i in range(len(stream)):
        got += [bytes(f) for f in d.feed(stream[i : i + 1])]
    assert got == [b"abc", b"", b"defgh"]


def test_frame_decoder_views_and_copies() -> None:
    data = _frames(b"abc")
    (f,) = FrameDecoder().feed(data)
    assert isinstance(f, memoryview) and f.obj is data  # bytes input: a view, no copy
    mutable = bytearray(data)
    (g,) = FrameDecoder().feed(mutable)
    mutable[4] = ord("X")
    assert bytes(g) == b"abc"  # bytearray input: copied


def test_frame_decoder_partial_state() -> None:
    d = FrameDecoder()
    assert d.feed(b"\x00\x00") == []
    assert d.buffered == 2
    assert d.feed(b"\x00\x02a") == []
    assert [bytes(f) for f in d.feed(b"b\x00")] == [b"ab"]
    assert d.buffered == 1


def test_oversize_and_negative_frames() -> None:
    with pytest.raises(FrameTooLarge) as e:
        FrameDecoder(max_frame_size=10).feed(_frames(b"x" * 11))
    assert (e.value.size, e.value.max_size) == (11, 10)
    assert isinstance(e.value, ProtocolError)
    with pytest.raises(FrameTooLarge):
        FrameDecoder().feed(b"\xff\xff\xff\xff")
    d = FrameDecoder(max_frame_size=10)
    d.feed(b"\x00\x00")
    with pytest.raises(FrameTooLarge):
        d.feed(b"\x01\x00")  # prefix completed across chunks: 256
    assert [bytes(f) for f in FrameDecoder(max_frame_size=10).feed(_frames(b"x" * 10))] == [
        b"x" * 10
    ]


def test_coalesce_keeps_large_immutable_parts_and_joins_the_rest() -> None:
    from gregor.protocol.framing import LARGE_PART, coalesce

    records = bytes(range(256)) * (LARGE_PART // 256)  # exactly LARGE_PART bytes
    mutable = bytearray(LARGE_PART + 1)
    parts = [b"\x00\x00\x00\x10", b"hdr", records, b"a", b"b", mutable, b"tail"]
    out = coalesce(parts)
    assert b"".join(out) == b"".join(parts)
    assert len(out) == 3
    assert out[0] == b"\x00\x00\x00\x10hdr"
    assert out[1] is records  # written as it is, no copy
    assert out[2] == b"ab" + bytes(mutable) + b"tail" and type(out[2]) is bytes  # copied
    assert coalesce([]) == []
    assert coalesce([b"x", b"y"]) == [b"xy"]


# --- BufferedFrameReader (the client's BufferedProtocol receive) ---


def _stream(frames: list[bytes]) -> bytes:
    return b"".join(len(f).to_bytes(4, "big") + f for f in frames)


def _read(reader: Any, stream: bytes, reads: list[int], keep: list[tuple[int, Any]]) -> list[bytes]:
    """Feed ``stream`` through ``reader`` in reads of the given sizes (cycled), holding on to
    every other frame (and a slice of every third) the way a consumer keeps records."""
    out: list[bytes] = []
    pos = i = 0
    while pos < len(stream):
        buf = reader.get_buffer()
        step = reads[i % len(reads)]
        if len(buf) > 5000:  # tiny reads into a large free space only cost time
            step = max(step, 4096)
        n = min(len(buf), step, len(stream) - pos)
        i += 1
        buf[:n] = stream[pos : pos + n]
        pos += n
        for frame in reader.buffer_updated(n):
            index = len(out)
            out.append(bytes(frame))
            if index % 2:
                keep.append((index, frame))
            if index % 3 == 0 and len(frame) > 1:
                keep.append((index, memoryview(frame)[1:]))
    return out


@settings(max_examples=examples(80), deadline=None)
@given(
    sizes=st.lists(
        st.one_of(st.integers(0, 200), st.integers(60_000, 70_000), st.integers(100_000, 300_000)),
        min_size=1,
        max_size=10,
    ),
    reads=st.lists(
        st.sampled_from([1, 3, 4, 5, 100, 4096, 65536, 1 << 20]), min_size=1, max_size=5
    ),
    chunk=st.sampled_from([16, 64, 1024, 65536]),
)
def test_buffered_reader_frames_whatever_the_reads(
    sizes: list[int], reads: list[int], chunk: int
) -> None:
    """Every frame comes out whole and in order however the socket splits the stream, and a
    frame (or a slice of it) the caller holds is never overwritten by later reads, even when
    the reader reuses the buffers of frames let go."""
    rnd = random.Random(sum(sizes))
    frames = [rnd.randbytes(n) for n in sizes]
    reader = BufferedFrameReader(chunk_size=chunk)
    keep: list[tuple[int, Any]] = []
    assert _read(reader, _stream(frames) * 2, reads, keep) == frames * 2
    for index, held in keep:
        assert bytes(held) in (frames[index % len(frames)], frames[index % len(frames)][1:])
    assert reader.buffered == 0


def test_buffered_reader_reuses_a_large_frames_buffer_once_let_go() -> None:
    frames = [bytes([i]) * 200_000 for i in range(3)]
    reader = BufferedFrameReader()
    first = _read(reader, _stream(frames[:1]), [1 << 20], [])
    assert first == frames[:1]
    assert len(reader._spare) == 1
    spare = id(reader._spare[0])  # (holding the buffer itself would keep it from reuse)
    # the first frame is gone (only bytes copies were kept): its buffer takes the next one
    assert _read(reader, _stream(frames[1:2]), [1 << 20], []) == frames[1:2]
    assert [id(b) for b in reader._spare] == [spare]
    held: list[tuple[int, Any]] = []
    _read(reader, _stream(frames[2:3]), [1 << 20], held)
    _read(reader, _stream(frames[:1]), [1 << 20], held)
    assert len(reader._spare) == 2  # the held frame kept its buffer; the next got a new one


def test_buffered_reader_refuses_bad_sizes() -> None:
    reader = BufferedFrameReader(max_frame_size=1000)
    buf = reader.get_buffer()
    buf[:4] = (1001).to_bytes(4, "big")
    with pytest.raises(FrameTooLarge):
        reader.buffer_updated(4)
    reader = BufferedFrameReader()
    buf = reader.get_buffer()
    buf[:4] = (-1).to_bytes(4, "big", signed=True)
    with pytest.raises(FrameTooLarge):
        reader.buffer_updated(4)


@pytest.mark.parametrize("impl", ["python", "cython"])
def test_new_buffer_is_a_writable_bytearray_of_the_size(impl: str) -> None:
    from gregor.protocol.records import walk

    if impl not in walk.available():
        pytest.skip("the compiled record walk is not built here")
    previous = walk.set_implementation(impl)
    try:
        buf = walk.new_buffer(100_000)
    finally:
        walk.set_implementation(previous)
    assert type(buf) is bytearray and len(buf) == 100_000
    buf[-1] = 7
    assert buf[-1] == 7


@settings(max_examples=examples(150), deadline=None)
@given(
    sizes=st.lists(
        st.one_of(st.integers(0, 50), st.integers(1000, 300_000)), min_size=1, max_size=8
    ),
    cuts=st.lists(st.integers(1, 400_000), min_size=1, max_size=6),
    kind=st.sampled_from([bytes, bytearray, memoryview]),
)
def test_frame_decoder_frames_whatever_the_chunks(
    sizes: list[int], cuts: list[int], kind: Any
) -> None:
    """Every frame comes out whole and in order however the stream is cut, whatever buffer
    type the chunks are, and frames handed out stay as they were while more is fed."""
    rnd = random.Random(sum(sizes) + len(cuts))
    frames = [rnd.randbytes(n) for n in sizes]
    stream = _stream(frames)
    decoder = FrameDecoder()
    out: list[Any] = []
    pos = i = 0
    while pos < len(stream):
        n = cuts[i % len(cuts)]
        i += 1
        chunk = bytearray(stream[pos : pos + n])
        out.extend(decoder.feed(chunk if kind is bytearray else kind(chunk)))
        chunk[:] = bytes(len(chunk))  # the caller reuses its buffer: frames must not change
        pos += n
    assert [bytes(f) for f in out] == frames
    assert decoder.buffered == 0
