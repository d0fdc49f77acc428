"""Fetch v0-v3 down-converts v2 batches to message format v0/v1 (issue 35).

A compressed batch may inflate to the decompression bound (64 MiB). Before, the whole batch was
decoded into Python objects and re-encoded on the event loop, whatever the fetch asked for:
every other client waited, and the work and memory grew with the batch. Now the conversion
runs in a worker thread and stops at the fetch's byte limit, from the fetch offset on, so an
old consumer walks a big batch fetch by fetch.
"""

from __future__ import annotations

import threading

import pytest
from handler_requests import BASE_TS, create_topic, fetch_request, partitions_of, produce
from handler_wire import Wire

from gregor.protocol.messages.api_versions import ApiVersionsRequest
from gregor.protocol.records.batch import build_batch
from gregor.protocol.records.legacy import iter_legacy_messages

pytestmark = pytest.mark.timeout(120)

RECORDS = 20_000
LIMIT = 32 * 1024


def big_batch(codec: int) -> bytes:
    return build_batch(
        [(BASE_TS + i, None, b"%010d" % i) for i in range(RECORDS)], compression=codec
    )


def legacy_fetch(
    wire: Wire, topic: str, offset: int, version: int = 3
) -> list[tuple[int, bytes | None]]:
    req = fetch_request({topic: {0: offset}}, version=version)
    req.topics[0].partitions[0].partition_max_bytes = LIMIT
    p = partitions_of(wire.request(req, version))[(topic, 0)]
    assert p.error_code == 0
    return [(m.offset, m.value) for m in iter_legacy_messages(bytes(p.records or b""))]


@pytest.mark.parametrize("codec", [0, 1, 3], ids=["none", "gzip", "lz4"])
@pytest.mark.parametrize("broker_config", [{"message.max.bytes": str(4 << 20)}])
def test_an_old_consumer_reads_a_big_batch_fetch_by_fetch(wire: Wire, codec: int) -> None:
    create_topic(wire, "big", 1)
    assert produce(wire, "big", 0, big_batch(codec)).error_code == 0
    first = legacy_fetch(wire, "big", 0)
    # About the fetch's limit of messages (34 bytes of overhead and a 10-byte value each), not
    # the 20,000 of the batch; consecutive from the fetch offset.
    assert 0 < len(first) <= LIMIT // 44 + 1
    assert first == [(i, b"%010d" % i) for i in range(len(first))]
    middle = legacy_fetch(wire, "big", 10_000, version=1)
    assert middle[0] == (10_000, b"0000010000") and len(middle) <= LIMIT // 26 + 1
    got, offset = [], 0
    while offset < RECORDS:  # fetch by fetch, as the client does, to the end
        chunk = legacy_fetch(wire, "big", offset)
        assert chunk and chunk[0][0] == offset
        got.extend(chunk)
        offset = chunk[-1][0] + 1
    assert got == [(i, b"%010d" % i) for i in range(RECORDS)]


@pytest.mark.parametrize("broker_config", [{"message.max.bytes": str(4 << 20)}])
def test_the_event_loop_serves_others_while_a_batch_is_converted(
    wire: Wire, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The conversion (the real one) is held until another client, on its own connection, has
    # had an answer: only a conversion off the event loop lets that answer be sent.
    from gregor.broker.handlers import fetch as fetch_handler

    real = fetch_handler.downconvert
    answered = threading.Event()
    threads: list[int] = []

    def held(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        threads.append(threading.get_ident())
        answered.wait()
        return real(*args, **kwargs)

    monkeypatch.setattr(fetch_handler, "downconvert", held)
    create_topic(wire, "held", 1)
    assert produce(wire, "held", 0, big_batch(1)).error_code == 0
    other = Wire(wire.runner, wire.broker, client_id="other")
    req = fetch_request({"held": {0: 0}}, version=3)

    async def scenario() -> tuple[object, object]:
        await wire.send(req, 3)
        versions = await other.roundtrip(ApiVersionsRequest(), 0)
        answered.set()
        return versions, await wire.receive()

    try:
        versions, fetched = wire.run(scenario())
    finally:
        answered.set()
        other.close()
    assert versions.error_code == 0  # type: ignore[attr-defined]
    assert threads and threads[0] != threading.get_ident()  # not the event loop's thread
    p = partitions_of(fetched)[("held", 0)]  # type: ignore[arg-type]
    assert [m.offset for m in iter_legacy_messages(bytes(p.records))][:3] == [0, 1, 2]
