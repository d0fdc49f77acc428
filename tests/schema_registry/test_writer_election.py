"""The writer election: registries sharing a ``_schemas`` topic elect one writer in a Kafka
group; the others forward writes to it and answer reads themselves.

Each test runs its registries on the module's in-process broker with a group of its own (fast
heartbeats, so a rebalance settles quickly); ``settled`` waits on the election's own state."""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from gregor.broker.config.broker_config import BrokerConfig, ConfigError
from gregor.schema_registry.election import (
    DUPLICATE_URLS,
    Assignment,
    Identity,
    assign,
    decode_identity,
)
from gregor.schema_registry.forwarding import FORWARDED_HEADER
from gregor.testing import InProcessBroker
from gregor.testing.ports import free_port

from .conftest import Registry
from .conftest import avro_record as _avro_record


def avro_record(name: str, *fields: tuple[str, str]) -> str:
    """The schema as the registry keeps it (canonical: no blanks), so answers compare as text."""
    return json.dumps(json.loads(_avro_record(name, *fields)), separators=(",", ":"))


_groups = itertools.count()
_topics = itertools.count()


def start_registries(
    broker: InProcessBroker, n: int, eligible: tuple[bool, ...] | None = None, **extra: object
) -> list[Registry]:
    group = f"sr-election-{next(_groups)}"
    topic = f"_schemas_election_{next(_topics)}"
    out = []
    for i in range(n):
        settings = {
            "group_id": group,
            "heartbeat_interval_ms": 200,
            "leader_eligibility": True if eligible is None else eligible[i],
            **extra,
        }
        out.append(Registry(broker, topic, extra=settings).start())
    return out


@pytest.fixture
def three(broker: InProcessBroker) -> Iterator[list[Registry]]:
    regs = start_registries(broker, 3)
    try:
        yield regs
    finally:
        for r in regs:
            r.stop()


def settled(regs: list[Registry], advertised: dict[str, str] | None = None) -> Registry | None:
    """Until every registry has an assignment in force and all name the same writer, one of
    ``regs`` (or none); that writer's registry (None: no writer). ``advertised``: the URL a
    registry advertises, by its listener's URL, where they differ."""
    advertised = advertised or {}
    deadline = time.monotonic() + 120  # a bound on the wait, not a timing assertion
    while True:
        elections = [r.server.election for r in regs if r.server is not None]
        if all(e is not None and e.settled.is_set() for e in elections):
            urls = {e.writer.url if e.writer else None for e in elections if e is not None}
            writers = [r for r in regs if r.server and r.server.election.is_writer]  # type: ignore[union-attr]
            known = {advertised.get(r.url, r.url) for r in regs if r.server} | {None}
            if len(urls) == 1 and urls <= known and len(writers) <= 1:
                (url,) = urls
                assert (url is None) == (not writers), (url, writers)
                assert url is None or advertised.get(writers[0].url, writers[0].url) == url
                return writers[0] if writers else None
        assert time.monotonic() < deadline, "the election never settled"
        time.sleep(0.02)


def converged(regs: list[Registry], path: str, expected: object) -> None:
    deadline = time.monotonic() + 120
    for r in regs:
        while (reply := r.get(path)).body != expected:
            assert time.monotonic() < deadline, (r.url, path, reply.text)
            time.sleep(0.02)


def test_one_writer_allocates_every_id_and_the_others_forward(three: list[Registry]) -> None:
    writer = settled(three)
    assert writer is not None
    others = [r for r in three if r is not writer]
    assert len(others) == 2
    ids: dict[int, str] = {}
    for i in range(9):
        reg = three[i % 3]
        schema = avro_record(f"E{i}", ("a", "int"))
        reply = reg.post(f"/subjects/e{i}/versions", {"schema": schema})
        assert reply.status == 200, reply.text
        assert reply.body == {"id": reply.body["id"], "version": 1}
        ids[reply.body["id"]] = schema
        # read-your-writes on the registry that took the request, forwarded or not
        assert reg.get(f"/schemas/ids/{reply.body['id']}").body == {"schema": schema}
        assert reg.get(f"/subjects/e{i}/versions").body == [1]
    assert sorted(ids) == list(range(1, 10))  # unique, no gaps
    for sid, schema in ids.items():
        converged(three, f"/schemas/ids/{sid}", {"schema": schema})
    # a forwarded register answers exactly what the writer answers
    again = {"schema": avro_record("E4", ("a", "int"))}
    through = others[0].post("/subjects/e4/versions", again)
    direct = writer.post("/subjects/e4/versions", again)
    assert (through.status, through.text) == (direct.status, direct.text)
    assert through.body == {"id": 5, "version": 1}
    # an error from the writer is forwarded unchanged too
    bad = others[1].post("/subjects/x/versions", {"schema": "{not avro"})
    assert (bad.status, bad.body["error_code"]) == (422, 42201)
    assert bad.text == writer.post("/subjects/x/versions", {"schema": "{not avro"}).text
    # config and mode writes through a non-writer, seen there at once
    assert others[0].put("/config/e1", {"compatibility": "FULL"}).body == {"compatibility": "FULL"}
    assert others[0].get("/config/e1").body == {"compatibilityLevel": "FULL"}
    assert others[1].put("/mode/e2", {"mode": "READONLY"}).body == {"mode": "READONLY"}
    assert others[1].get("/mode/e2").body == {"mode": "READONLY"}
    assert others[1].delete("/mode/e2").body == {"mode": "READONLY"}
    assert others[0].delete("/subjects/e8").body == [1]
    assert others[0].get("/subjects/e8/versions").body["error_code"] == 40401


def test_confluent_client_through_a_registry_that_is_not_the_writer(
    three: list[Registry],
) -> None:
    writer = settled(three)
    other = next(r for r in three if r is not writer)
    client = SchemaRegistryClient({"url": other.url})
    schema = Schema(avro_record("Ck", ("a", "long")), "AVRO")
    sid = client.register_schema("ck-value", schema)
    assert sid == 1
    assert client.get_latest_version("ck-value").schema_id == sid
    assert client.set_compatibility("ck-value", "NONE") == {"compatibility": "NONE"}
    assert SchemaRegistryClient({"url": writer.url}).get_schema(sid).schema_str == (
        schema.schema_str
    )


def test_the_writer_leaving_hands_over_above_the_old_maximum(broker: InProcessBroker) -> None:
    regs = start_registries(broker, 3)
    try:
        writer = settled(regs)
        assert writer is not None
        for i in range(4):
            reply = regs[i % 3].post(
                f"/subjects/h{i}/versions", {"schema": avro_record(f"H{i}", ("a", "int"))}
            )
            assert reply.body == {"id": i + 1, "version": 1}, reply.text
        writer.stop()  # LeaveGroup: the others rebalance at once
        survivors = [r for r in regs if r is not writer]
        successor = settled(survivors)
        assert successor is not None
        other = next(r for r in survivors if r is not successor)
        reply = other.post("/subjects/h9/versions", {"schema": avro_record("H9", ("a", "int"))})
        assert reply.body == {"id": 5, "version": 1}, reply.text
        for r in survivors:
            for i in range(4):
                assert r.get(f"/subjects/h{i}/versions/1").body["id"] == i + 1
        # the old writer, back, rebuilds everything from the topic and does not take over
        writer.start()
        assert settled(regs) is successor
        converged([writer], "/schemas/ids/5", {"schema": avro_record("H9", ("a", "int"))})
        assert writer.post(
            "/subjects/h10/versions", {"schema": avro_record("H10", ("a", "int"))}
        ).body == {"id": 6, "version": 1}
    finally:
        for r in regs:
            r.stop()


def test_no_eligible_registry_answers_50004_and_still_reads(broker: InProcessBroker) -> None:
    regs = start_registries(broker, 2, eligible=(False, False))
    try:
        assert settled(regs) is None
        for r in regs:
            reply = r.post("/subjects/n/versions", {"schema": avro_record("N", ("a", "int"))})
            assert (reply.status, reply.body["error_code"]) == (500, 50004), reply.text
            assert r.put("/config", {"compatibility": "NONE"}).body["error_code"] == 50004
            assert r.delete("/subjects/n").body["error_code"] == 50004
            assert r.get("/subjects").body == []  # reads are local
            # a lookup and a compatibility check are reads, not forwarded
            assert (
                r.post("/subjects/n", {"schema": avro_record("N", ("a", "int"))}).body["error_code"]
                == 40401
            )
    finally:
        for r in regs:
            r.stop()


def test_a_forwarded_request_is_not_forwarded_again(three: list[Registry]) -> None:
    writer = settled(three)
    other = next(r for r in three if r is not writer)
    reply = other.call(
        "POST",
        "/subjects/loop/versions",
        {"schema": avro_record("L", ("a", "int"))},
        headers={FORWARDED_HEADER: "true"},
    )
    assert (reply.status, reply.body["error_code"]) == (500, 50004), reply.text
    assert writer.get("/subjects").body == []


def test_an_unreachable_writer_answers_50003(broker: InProcessBroker) -> None:
    group, topic = f"sr-election-{next(_groups)}", f"_schemas_election_{next(_topics)}"
    fast = {"group_id": group, "heartbeat_interval_ms": 200}
    closed = free_port()  # nobody listens there
    writer = Registry(
        broker, topic, extra={**fast, "advertised_url": f"http://127.0.0.1:{closed}"}
    ).start()
    follower = Registry(broker, topic, extra={**fast, "leader_eligibility": False}).start()
    try:
        unreachable = {writer.url: f"http://127.0.0.1:{closed}"}
        assert settled([writer, follower], unreachable) is writer
        reply = follower.post("/subjects/u/versions", {"schema": avro_record("U", ("a", "int"))})
        assert (reply.status, reply.body["error_code"]) == (500, 50003), reply.text
        assert reply.body["message"].startswith("Error while forwarding the request to the leader")
        assert follower.get("/subjects").body == []
    finally:
        follower.stop()
        writer.stop()


# --- the assignment, as the group leader computes it ---


def ident(port: int, topic: str = "_schemas", eligible: bool = True, was: bool = False) -> Identity:
    return Identity("http", "127.0.0.1", port, topic, eligible, was)


def test_assign_prefers_the_previous_writer_then_the_lowest_member_id() -> None:
    members = {"m-b": ident(2), "m-a": ident(1), "m-c": ident(3, was=True)}
    chosen = assign(members)
    assert {a.writer for a in chosen.values()} == {"m-c"}
    members["m-c"] = ident(3, was=True, eligible=False)
    assert {a.writer for a in assign(members).values()} == {"m-a"}


def test_assign_elects_per_topic_and_refuses_duplicate_urls() -> None:
    chosen = assign(
        {
            "a": ident(1, "t1"),
            "b": ident(2, "t2"),
            "c": ident(3, "t2"),
            "d": ident(4, "t3"),
            "e": ident(4, "t3"),
            "f": None,  # metadata that did not decode: never the writer
        }
    )
    assert chosen["a"] == Assignment(0, "a", ident(1, "t1"))
    assert chosen["b"] == chosen["c"] == Assignment(0, "b", ident(2, "t2"))
    assert chosen["d"] == chosen["e"] == Assignment(DUPLICATE_URLS)
    assert chosen["f"] == Assignment()


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"not json",
        b"[]",
        b'{"scheme": "ftp", "host": "h", "port": 1, "topic": "t", "leader_eligibility": true}',
        b'{"scheme": "http", "host": "h/x", "port": 1, "topic": "t", "leader_eligibility": true}',
        b'{"scheme": "http", "host": "h", "port": 0, "topic": "t", "leader_eligibility": true}',
        b'{"scheme": "http", "host": "h", "port": true, "topic": "t", "leader_eligibility": true}',
        b'{"scheme": "http", "host": "h", "port": 1, "topic": 5, "leader_eligibility": true}',
        b'{"scheme": "http", "host": "h", "port": 1, "topic": "t", "leader_eligibility": "yes"}',
        b"[" * 100000,
        b'{"scheme": "http", "host": "' + b"h" * 5000 + b'"}',
    ],
)
def test_hostile_member_metadata_is_no_identity(raw: bytes) -> None:
    assert decode_identity(raw) is None


def test_identity_and_assignment_round_trip() -> None:
    me = Identity("https", "::1", 8081, "_schemas", False, True)
    assert me.url == "https://[::1]:8081"
    assert decode_identity(json.dumps(me.to_json()).encode()) == me
    a = Assignment(0, "member-1", me)
    assert Assignment.decode(a.encode()) == a
    assert Assignment.decode(b"\xff garbage") == Assignment()


def test_a_broker_on_etcd_may_serve_the_registry() -> None:
    base = [
        "schema.registry.listener=http://127.0.0.1:8081",
        "metadata.store=etcd://127.0.0.1:2379",
        "node.id=1",
    ]
    config = BrokerConfig.load(None, base)
    assert config.values["schema.registry.group.id"] == "schema-registry"
    assert config.values["schema.registry.leader.eligibility"] is True
    with pytest.raises(ConfigError, match="schema.registry.group.id"):
        BrokerConfig.load(None, [*base, "schema.registry.group.id= "])
