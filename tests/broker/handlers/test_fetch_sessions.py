"""Fetch sessions (KIP-227) at the handler: full and incremental fetches, forgotten partitions,
session and leader epoch errors, closing and eviction, by name (v12) and by topic id (v13+)."""

from __future__ import annotations

import pytest
from handler_requests import (
    batch,
    create_topic,
    fetch,
    fetch_request,
    partitions_of,
    produce,
    values_of,
)
from handler_wire import Wire

from gregor.protocol.errors import ErrorCode

pytestmark = pytest.mark.timeout(60)


def open_session(wire: Wire, topics: dict, version: int = 12) -> tuple[int, dict]:
    resp = fetch(wire, topics, session_id=0, session_epoch=0, version=version)
    assert resp.error_code == 0
    assert resp.session_id > 0
    return resp.session_id, partitions_of(resp)


def test_full_fetch_opens_a_session_and_answers_every_partition(wire: Wire) -> None:
    create_topic(wire, "full", 3)
    assert produce(wire, "full", 1, batch(b"a", b"b")).base_offset == 0
    sid, parts = open_session(wire, {"full": {0: 0, 1: 0, 2: 0}})
    assert sorted(parts) == [("full", 0), ("full", 1), ("full", 2)]
    assert [
        (p.error_code, p.high_watermark, p.log_start_offset) for _, p in sorted(parts.items())
    ] == [(0, 0, 0), (0, 2, 0), (0, 0, 0)]
    assert values_of(parts[("full", 1)].records) == [(0, b"a"), (1, b"b")]
    assert values_of(parts[("full", 0)].records) == []


def test_incremental_fetch_answers_only_partitions_with_news(wire: Wire) -> None:
    create_topic(wire, "incr", 3)
    sid, _ = open_session(wire, {"incr": {0: 0, 1: 0, 2: 0}})
    # Nothing changed: an incremental fetch with no partitions listed answers none.
    resp = fetch(wire, {}, session_id=sid, session_epoch=1)
    assert (resp.error_code, resp.session_id, resp.responses) == (0, sid, [])
    # New records on partition 2 only: only partition 2 comes back, with its records.
    assert produce(wire, "incr", 2, batch(b"x")).base_offset == 0
    resp = fetch(wire, {}, session_id=sid, session_epoch=2)
    parts = partitions_of(resp)
    assert (resp.error_code, resp.session_id, sorted(parts)) == (0, sid, [("incr", 2)])
    assert parts[("incr", 2)].high_watermark == 1
    assert values_of(parts[("incr", 2)].records) == [(0, b"x")]
    # The session still reads partition 2 from offset 0 until the client moves it: the
    # client lists it with its new offset, and then only new records bring it back.
    resp = fetch(wire, {"incr": {2: 1}}, session_id=sid, session_epoch=3)
    assert resp.error_code == 0 and resp.responses == []
    assert produce(wire, "incr", 0, batch(b"y")).base_offset == 0
    resp = fetch(wire, {}, session_id=sid, session_epoch=4)
    parts = partitions_of(resp)
    assert sorted(parts) == [("incr", 0)]
    assert values_of(parts[("incr", 0)].records) == [(0, b"y")]


def test_incremental_fetch_adds_a_partition_to_the_session(wire: Wire) -> None:
    create_topic(wire, "grow", 2)
    assert produce(wire, "grow", 1, batch(b"p1")).base_offset == 0
    sid, parts = open_session(wire, {"grow": {0: 0}})
    assert sorted(parts) == [("grow", 0)]
    resp = fetch(wire, {"grow": {1: 0}}, session_id=sid, session_epoch=1)
    parts = partitions_of(resp)
    assert sorted(parts) == [("grow", 1)]
    assert values_of(parts[("grow", 1)].records) == [(0, b"p1")]
    # Both partitions are now in the session: news on either comes back unasked.
    produce(wire, "grow", 0, batch(b"p0"))
    produce(wire, "grow", 1, batch(b"p1b"))
    resp = fetch(wire, {"grow": {1: 1}}, session_id=sid, session_epoch=2)
    parts = partitions_of(resp)
    assert sorted(parts) == [("grow", 0), ("grow", 1)]
    assert values_of(parts[("grow", 0)].records) == [(0, b"p0")]
    assert values_of(parts[("grow", 1)].records) == [(1, b"p1b")]


@pytest.mark.parametrize("version", [12, 13, 17])
def test_forgotten_partitions_leave_the_session(wire: Wire, version: int) -> None:
    topic_id = create_topic(wire, "forget", 2)
    key = topic_id if version >= 13 else "forget"
    sid, parts = open_session(wire, {key: {0: 0, 1: 0}}, version=version)
    assert sorted(parts) == [(key, 0), (key, 1)]
    resp = fetch(wire, {}, session_id=sid, session_epoch=1, forgotten={key: [0]}, version=version)
    assert resp.error_code == 0 and resp.responses == []
    produce(wire, "forget", 0, batch(b"gone"))
    produce(wire, "forget", 1, batch(b"kept"))
    resp = fetch(wire, {}, session_id=sid, session_epoch=2, version=version)
    parts = partitions_of(resp)
    assert sorted(parts) == [(key, 1)]
    assert values_of(parts[(key, 1)].records) == [(0, b"kept")]
    if version >= 13:
        (t,) = resp.responses
        assert (t.topic, t.topic_id) == ("", topic_id)


def test_wrong_session_epoch_is_an_error_and_leaves_the_session_as_it_was(wire: Wire) -> None:
    create_topic(wire, "epochs", 1)
    sid, _ = open_session(wire, {"epochs": {0: 0}})
    for wrong in (2, 5, 0x7FFFFFFF):
        resp = fetch(wire, {}, session_id=sid, session_epoch=wrong)
        assert (resp.error_code, resp.session_id, resp.responses) == (
            ErrorCode.INVALID_FETCH_SESSION_EPOCH,
            0,
            [],
        )
    # The expected epoch still works, and then the next one.
    produce(wire, "epochs", 0, batch(b"v"))
    resp = fetch(wire, {}, session_id=sid, session_epoch=1)
    assert (resp.error_code, resp.session_id) == (0, sid)
    assert values_of(partitions_of(resp)[("epochs", 0)].records) == [(0, b"v")]
    resp = fetch(wire, {}, session_id=sid, session_epoch=1)
    assert resp.error_code == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    resp = fetch(wire, {}, session_id=sid, session_epoch=2)
    assert (resp.error_code, resp.session_id) == (0, sid)


def test_unknown_session_id_is_an_error(wire: Wire) -> None:
    create_topic(wire, "nosession", 1)
    sid, _ = open_session(wire, {"nosession": {0: 0}})
    resp = fetch(wire, {"nosession": {0: 0}}, session_id=sid + 1, session_epoch=1)
    assert (resp.error_code, resp.session_id, resp.responses) == (
        ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
        0,
        [],
    )
    # An incremental epoch without a session id names no session either.
    resp = fetch(wire, {"nosession": {0: 0}}, session_id=0, session_epoch=1)
    assert resp.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def test_final_epoch_closes_the_session_and_fetches_sessionless(wire: Wire) -> None:
    create_topic(wire, "final", 1)
    produce(wire, "final", 0, batch(b"a"))
    sid, _ = open_session(wire, {"final": {0: 0}})
    resp = fetch(wire, {"final": {0: 0}}, session_id=sid, session_epoch=-1)
    assert (resp.error_code, resp.session_id) == (0, 0)
    assert values_of(partitions_of(resp)[("final", 0)].records) == [(0, b"a")]
    resp = fetch(wire, {}, session_id=sid, session_epoch=1)
    assert resp.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def test_sessionless_fetch_opens_no_session(wire: Wire) -> None:
    create_topic(wire, "plain", 1)
    resp = fetch(wire, {"plain": {0: 0}}, session_id=0, session_epoch=-1)
    assert (resp.error_code, resp.session_id) == (0, 0)
    assert sorted(partitions_of(resp)) == [("plain", 0)]


def test_full_fetch_naming_a_session_replaces_it(wire: Wire) -> None:
    create_topic(wire, "reset", 1)
    old, _ = open_session(wire, {"reset": {0: 0}})
    resp = fetch(wire, {"reset": {0: 0}}, session_id=old, session_epoch=0)
    assert resp.error_code == 0 and resp.session_id not in (0, old)
    assert (
        fetch(wire, {}, session_id=old, session_epoch=1).error_code
        == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    )
    new = fetch(wire, {}, session_id=resp.session_id, session_epoch=1)
    assert (new.error_code, new.session_id) == (0, resp.session_id)


@pytest.mark.parametrize("broker_config", [{"max.incremental.fetch.session.cache.slots": "2"}])
def test_a_full_cache_evicts_the_least_recently_used_session(wire: Wire) -> None:
    create_topic(wire, "lru", 1)
    first, _ = open_session(wire, {"lru": {0: 0}})
    second, _ = open_session(wire, {"lru": {0: 0}})
    assert (
        fetch(wire, {}, session_id=first, session_epoch=1).error_code == 0
    )  # first is now the newest
    third, _ = open_session(wire, {"lru": {0: 0}})
    assert len({first, second, third}) == 3
    assert (
        fetch(wire, {}, session_id=second, session_epoch=1).error_code
        == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    )
    assert fetch(wire, {}, session_id=first, session_epoch=2).error_code == 0
    assert fetch(wire, {}, session_id=third, session_epoch=1).error_code == 0


@pytest.mark.parametrize("broker_config", [{"max.incremental.fetch.session.cache.slots": "0"}])
def test_no_cache_slots_means_every_fetch_is_sessionless(wire: Wire) -> None:
    create_topic(wire, "noslots", 1)
    produce(wire, "noslots", 0, batch(b"a"))
    resp = fetch(wire, {"noslots": {0: 0}}, session_id=0, session_epoch=0)
    assert (resp.error_code, resp.session_id) == (0, 0)
    assert values_of(partitions_of(resp)[("noslots", 0)].records) == [(0, b"a")]


def test_unknown_topic_id_in_a_session(wire: Wire) -> None:
    import uuid

    known = create_topic(wire, "known", 1)
    ghost = uuid.uuid4()
    resp = fetch(wire, {known: {0: 0}, ghost: {0: 0}}, session_id=0, session_epoch=0, version=13)
    assert resp.error_code == 0 and resp.session_id > 0
    parts = partitions_of(resp)
    assert (parts[(known, 0)].error_code, parts[(ghost, 0)].error_code) == (
        0,
        ErrorCode.UNKNOWN_TOPIC_ID,
    )
    # The unknown id stays unknown on an incremental fetch that names it again.
    resp = fetch(wire, {ghost: {0: 0}}, session_id=resp.session_id, session_epoch=1, version=13)
    assert [(t.topic_id, p.error_code) for t in resp.responses for p in t.partitions] == [
        (ghost, ErrorCode.UNKNOWN_TOPIC_ID)
    ]


def test_current_leader_epoch_ahead_of_the_leader_is_unknown(wire: Wire) -> None:
    create_topic(wire, "leader", 1)
    produce(wire, "leader", 0, batch(b"a"))
    resp = fetch(wire, {"leader": {0: 0}}, leader_epoch=0)
    assert values_of(partitions_of(resp)[("leader", 0)].records) == [(0, b"a")]
    resp = fetch(wire, {"leader": {0: 0}}, leader_epoch=3)
    p = partitions_of(resp)[("leader", 0)]
    # An error partition carries an empty record set, never null (Kafka's; issue 12).
    assert (p.error_code, p.high_watermark, bytes(p.records)) == (
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        -1,
        b"",
    )


def test_long_poll_in_a_session_wakes_on_produce(wire: Wire) -> None:
    create_topic(wire, "poll", 1)
    sid, _ = open_session(wire, {"poll": {0: 0}})

    async def poll_then_produce() -> object:
        # The broker holds the fetch until data arrives; a produce on another connection wakes it.
        await wire.send(
            fetch_request({}, session_id=sid, session_epoch=1, max_wait_ms=60_000, min_bytes=1), 12
        )
        other = Wire(wire.runner, wire.broker)
        try:
            resp = await other.roundtrip(_produce_request("poll", batch(b"late")), 9)
            assert resp.responses[0].partition_responses[0].error_code == 0
        finally:
            await other.aclose()
        return await wire.receive()

    resp = wire.run(poll_then_produce())
    parts = partitions_of(resp)
    assert (resp.error_code, resp.session_id, sorted(parts)) == (0, sid, [("poll", 0)])
    assert values_of(parts[("poll", 0)].records) == [(0, b"late")]


def _produce_request(topic: str, records: bytes) -> object:
    from handler_requests import PP, PT

    from gregor.protocol.messages.produce import ProduceRequest

    return ProduceRequest(
        acks=-1,
        timeout_ms=5000,
        topic_data=[PT(name=topic, partition_data=[PP(index=0, records=records)])],
    )
