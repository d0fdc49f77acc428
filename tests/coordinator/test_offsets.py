"""OffsetCommit / OffsetFetch / OffsetDelete, durability through the log, retention, loading."""

from __future__ import annotations

from typing import Any

from harness import PENDING, T0, Harness
from test_classic import stable_pair

from gregor.coordinator import CoordinatorConfig
from gregor.coordinator.group.consumer_protocol import encode_subscription
from gregor.coordinator.group.records import (
    GroupMetadataKey,
    OffsetCommitKey,
    OffsetCommitValue,
    encode_key,
    encode_value,
)
from gregor.protocol.errors import ErrorCode as E
from gregor.protocol.messages.offset_delete import OffsetDeleteRequest
from gregor.protocol.messages.offset_fetch import OffsetFetchResponse
from gregor.protocol.records.batch import RecordBatchBuilder
from gregor.protocol.records.control import build_control_batch


def wire(resp: Any, version: int) -> Any:
    """The response as a client of ``version`` sees it (encode, then decode)."""
    return type(resp).decode(resp.encode(version), version)


def test_commit_then_fetch_in_every_response_format() -> None:
    h = Harness()
    t = h.commit("g", {("t", 0): 10, ("t", 1): 20}, metadata="hello", leader_epoch=3)
    assert h.commit_errors(t) == {("t", 0): 0, ("t", 1): 0}
    err, offs = h.fetch("g", {"t": [0, 1, 2]})
    assert err == 0
    assert offs == {
        ("t", 0): (10, 3, "hello", 0),
        ("t", 1): (20, 3, "hello", 0),
        ("t", 2): (-1, -1, "", 0),
    }
    err, offs = h.fetch("g", None)  # every committed partition
    assert offs == {("t", 0): (10, 3, "hello", 0), ("t", 1): (20, 3, "hello", 0)}
    # v1 has no leader epoch and no top-level error; v7 has both.
    for version, epoch in ((1, -1), (5, 3), (7, 3)):
        from gregor.protocol.messages.offset_fetch import OffsetFetchRequest

        req = OffsetFetchRequest(
            group_id="g", topics=[OffsetFetchRequest.Topics(name="t", partition_indexes=[1])]
        )
        resp = wire(h.call("offset_fetch", req, version), version)
        assert isinstance(resp, OffsetFetchResponse)
        p = resp.topics[0].partitions[0]
        assert (
            p.partition_index,
            p.committed_offset,
            p.committed_leader_epoch,
            p.metadata,
            p.error_code,
        ) == (1, 20, epoch, "hello", 0)
    recs = h.records(h.partition_of("g"))
    assert recs == [
        (OffsetCommitKey("g", "t", 0), OffsetCommitValue(10, "hello", T0, 3, -1)),
        (OffsetCommitKey("g", "t", 1), OffsetCommitValue(20, "hello", T0, 3, -1)),
    ]


def test_fetch_for_unknown_group_returns_no_offsets() -> None:
    h = Harness()
    assert h.fetch("nobody", {"t": [0]}) == (0, {("t", 0): (-1, -1, "", 0)})
    assert h.fetch("nobody", None) == (0, {})


def test_commit_is_acknowledged_and_visible_only_after_the_write() -> None:
    h = Harness(hold_writes=True)
    t = h.commit("g", {("t", 0): 5})
    assert h.result(t) is PENDING
    assert h.fetch("g", {"t": [0]})[1] == {("t", 0): (-1, -1, "", 0)}
    h.release_writes()
    assert h.commit_errors(t) == {("t", 0): 0}
    assert h.fetch("g", {"t": [0]})[1] == {("t", 0): (5, -1, "m", 0)}


def test_failed_write_is_reported_and_not_applied() -> None:
    h = Harness(fail_writes=E.MESSAGE_TOO_LARGE)
    assert h.commit_errors(h.commit("g", {("t", 0): 5})) == {("t", 0): E.INVALID_COMMIT_OFFSET_SIZE}
    h.fail_writes = E.NOT_LEADER_OR_FOLLOWER
    assert h.commit_errors(h.commit("g", {("t", 0): 6})) == {("t", 0): E.NOT_COORDINATOR}
    assert h.fetch("g", {"t": [0]})[1] == {("t", 0): (-1, -1, "", 0)}


def test_commit_validation_against_the_group() -> None:
    h = Harness()
    a, b, gen = stable_pair(h)
    assert h.commit_errors(h.commit("g", {("t", 0): 1}, gen, a)) == {("t", 0): 0}
    assert h.commit_errors(h.commit("g", {("t", 0): 1}, gen - 1, a)) == {
        ("t", 0): E.ILLEGAL_GENERATION
    }
    assert h.commit_errors(h.commit("g", {("t", 0): 1}, gen, "ghost")) == {
        ("t", 0): E.UNKNOWN_MEMBER_ID
    }
    # A "simple" commit (no member, generation -1) is refused while the group has members.
    assert h.commit_errors(h.commit("g", {("t", 0): 1})) == {("t", 0): E.UNKNOWN_MEMBER_ID}
    assert h.commit_errors(h.commit("nogroup", {("t", 0): 1}, 3, "m")) == {
        ("t", 0): E.ILLEGAL_GENERATION
    }
    # While the new generation's assignment is not yet known: REBALANCE_IN_PROGRESS.
    tc = h.join("g", version=3, client_id="c")
    ta, tb = h.join("g", a, version=3), h.join("g", b, version=3)
    assert {h.result(t).generation_id for t in (ta, tb, tc)} == {gen + 1}
    assert h.commit_errors(h.commit("g", {("t", 0): 1}, gen + 1, a)) == {
        ("t", 0): E.REBALANCE_IN_PROGRESS
    }


def test_fenced_static_member_cannot_commit() -> None:
    h = Harness()
    ta = h.join("g", version=5, instance="i")
    h.advance(0)
    a = h.result(ta).member_id
    h.result(h.sync("g", a, 1, {a: b"x"}, instance="i"))
    a2 = h.result(h.join("g", version=5, instance="i")).member_id
    from gregor.protocol.messages.offset_commit import OffsetCommitRequest

    def commit_as(member: str) -> int:
        req = OffsetCommitRequest(
            group_id="g",
            generation_id_or_member_epoch=1,
            member_id=member,
            group_instance_id="i",
            topics=[
                OffsetCommitRequest.Topics(
                    name="t",
                    partitions=[
                        OffsetCommitRequest.Topics.Partitions(partition_index=0, committed_offset=3)
                    ],
                )
            ],
        )
        return h.call("offset_commit", req, 7).topics[0].partitions[0].error_code

    assert commit_as(a) == E.FENCED_INSTANCE_ID
    assert commit_as(a2) == 0


def test_per_partition_errors_leave_the_rest_committed() -> None:
    h = Harness(config=CoordinatorConfig(num_partitions=4, offset_metadata_max_bytes=8))
    t = h.commit("g", {("t", 0): 1, ("t", 6): 2, ("nope", 0): 3}, metadata="12345678")
    assert h.commit_errors(t) == {
        ("t", 0): 0,
        ("t", 6): E.UNKNOWN_TOPIC_OR_PARTITION,
        ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION,
    }
    t = h.commit("g", {("t", 1): 1}, metadata="123456789")
    assert h.commit_errors(t) == {("t", 1): E.OFFSET_METADATA_TOO_LARGE}
    assert h.fetch("g", None)[1] == {("t", 0): (1, -1, "12345678", 0)}


def test_commit_timestamp_v1_and_retention_time_v2() -> None:
    h = Harness()
    from gregor.protocol.messages.offset_commit import OffsetCommitRequest

    P = OffsetCommitRequest.Topics.Partitions
    v1 = OffsetCommitRequest(
        group_id="g",
        generation_id_or_member_epoch=-1,
        topics=[
            OffsetCommitRequest.Topics(
                name="t",
                partitions=[P(partition_index=0, committed_offset=1, commit_timestamp=123)],
            )
        ],
    )
    assert h.call("offset_commit", v1, 1).topics[0].partitions[0].error_code == 0
    t2 = h.commit("g", {("t", 1): 2}, version=2, retention=5000)
    assert h.commit_errors(t2) == {("t", 1): 0}
    assert [v for _, v in h.records()] == [
        OffsetCommitValue(1, "", 123, -1, -1),
        OffsetCommitValue(2, "m", T0, -1, T0 + 5000),
    ]


def _txn_batch(group: str, topic: str, partition: int, offset: int, producer_id: int) -> bytes:
    b = RecordBatchBuilder(
        producer_id=producer_id, producer_epoch=0, base_sequence=0, is_transactional=True
    )
    b.append(
        T0,
        encode_key(OffsetCommitKey(group, topic, partition)),
        encode_value(OffsetCommitValue(offset, "txn", T0)),
    )
    return b.build()


def _append_raw(h: Harness, group: str, batch: bytes) -> None:
    from gregor.protocol.records.header import read_header, set_base_offset

    p = h.partition_of(group)
    buf = bytearray(batch)
    set_base_offset(buf, 0, h.next_offset[p])
    h.next_offset[p] += read_header(buf, 0).last_offset_delta + 1
    h.log[p].append(bytes(buf))


def test_transactional_offsets_are_pending_until_their_marker() -> None:
    h = Harness()
    h.commit("g", {("t", 0): 1})
    _append_raw(h, "g", _txn_batch("g", "t", 0, 50, producer_id=7))
    _append_raw(h, "g", _txn_batch("g", "t", 1, 60, producer_id=8))
    h.restart()
    assert h.fetch("g", {"t": [0, 1]}, version=7)[1] == {
        ("t", 0): (1, -1, "m", 0),
        ("t", 1): (-1, -1, "", 0),
    }
    stable = h.fetch("g", {"t": [0, 1]}, version=7, require_stable=True)[1]
    assert stable == {
        ("t", 0): (-1, -1, "", E.UNSTABLE_OFFSET_COMMIT),
        ("t", 1): (-1, -1, "", E.UNSTABLE_OFFSET_COMMIT),
    }
    _append_raw(h, "g", build_control_batch(7, 0, True, 0))
    _append_raw(h, "g", build_control_batch(8, 0, False, 0))
    h.restart()
    assert h.fetch("g", {"t": [0, 1]}, version=7, require_stable=True)[1] == {
        ("t", 0): (50, -1, "txn", 0),
        ("t", 1): (-1, -1, "", 0),
    }


def test_offset_delete() -> None:
    h = Harness()
    h.commit("g", {("t", 0): 1, ("t", 1): 2, ("u", 0): 3})
    req = OffsetDeleteRequest(
        group_id="g",
        topics=[
            OffsetDeleteRequest.Topics(
                name="t", partitions=[OffsetDeleteRequest.Topics.Partitions(partition_index=0)]
            )
        ],
    )
    r = h.call("offset_delete", req, 0)
    assert (
        r.error_code,
        [(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in r.topics],
    ) == (0, [("t", [(0, 0)])])
    assert h.fetch("g", None)[1] == {("t", 1): (2, -1, "m", 0), ("u", 0): (3, -1, "m", 0)}
    assert h.records()[-1] == (OffsetCommitKey("g", "t", 0), None)
    missing = OffsetDeleteRequest(group_id="none", topics=req.topics)
    assert h.call("offset_delete", missing, 0).error_code == E.GROUP_ID_NOT_FOUND


def _consumer_member(h: Harness, group: str, topics: list[str]) -> str:
    t = h.join(group, version=3, protocols=[("range", encode_subscription(topics))])
    h.advance(0)
    mid = h.result(t).member_id
    h.result(h.sync(group, mid, 1, {mid: b""}))
    return mid


def test_offset_delete_refuses_subscribed_topics_of_active_group() -> None:
    h = Harness()
    mid = _consumer_member(h, "g", ["t"])
    h.commit("g", {("t", 0): 1, ("u", 0): 2}, 1, mid)
    req = OffsetDeleteRequest(
        group_id="g",
        topics=[
            OffsetDeleteRequest.Topics(
                name=n, partitions=[OffsetDeleteRequest.Topics.Partitions(partition_index=0)]
            )
            for n in ("t", "u")
        ],
    )
    r = h.call("offset_delete", req, 0)
    assert [(t.name, t.partitions[0].error_code) for t in r.topics] == [
        ("t", E.GROUP_SUBSCRIBED_TO_TOPIC),
        ("u", 0),
    ]
    assert h.fetch("g", None)[1] == {("t", 0): (1, -1, "m", 0)}
    # A non-empty group whose protocol is not "consumer": nothing can be deleted.
    t = h.join("other", version=3, protocol_type="connect")
    h.advance(0)
    h.result(t)
    assert (
        h.call(
            "offset_delete", OffsetDeleteRequest(group_id="other", topics=req.topics), 0
        ).error_code
        == E.NON_EMPTY_GROUP
    )


def test_retention_of_simple_group_offsets() -> None:
    cfg = CoordinatorConfig(
        num_partitions=4,
        initial_rebalance_delay_ms=0,
        min_session_timeout_ms=1000,
        offsets_retention_ms=60000,
        offsets_retention_check_interval_ms=10000,
    )
    h = Harness(config=cfg)
    h.commit("g", {("t", 0): 1})
    h.commit("g", {("t", 1): 2}, version=2, retention=5000)
    h.advance(10000)  # first check: the explicit expiry (commit + 5 s) has passed
    assert h.fetch("g", None)[1] == {("t", 0): (1, -1, "m", 0)}
    h.advance(40000)
    assert "g" in h.coord.groups
    h.advance(10000)  # 60 s after the commit
    assert "g" not in h.coord.groups
    assert h.records()[-3:] == [
        (OffsetCommitKey("g", "t", 1), None),
        (OffsetCommitKey("g", "t", 0), None),
        (GroupMetadataKey("g"), None),
    ]


def test_retention_keeps_subscribed_topics_of_active_group_and_counts_from_empty() -> None:
    cfg = CoordinatorConfig(
        num_partitions=4,
        initial_rebalance_delay_ms=0,
        min_session_timeout_ms=1000,
        offsets_retention_ms=60000,
        offsets_retention_check_interval_ms=10000,
    )
    h = Harness(config=cfg)
    mid = _consumer_member(h, "g", ["t"])
    h.commit("g", {("t", 0): 1, ("u", 0): 2}, 1, mid)
    for _ in range(12):
        h.advance(5000)
        assert h.heartbeat("g", mid, 1) == 0
    assert h.fetch("g", None)[1] == {("t", 0): (1, -1, "m", 0)}
    from gregor.protocol.messages.leave_group import LeaveGroupRequest

    h.call("leave_group", LeaveGroupRequest(group_id="g", member_id=mid), 0)  # empty from now on
    h.advance(50000)
    assert h.fetch("g", None)[1] == {("t", 0): (1, -1, "m", 0)}
    h.advance(10000)
    assert h.fetch("g", None)[1] == {}
    assert "g" not in h.coord.groups


def test_restart_rebuilds_offsets_and_groups_from_the_log() -> None:
    h = Harness()
    a, b, gen = stable_pair(h)
    h.commit("g", {("t", 0): 7}, gen, a, leader_epoch=2)
    h.commit("solo", {("u", 1): 9})
    h.restart()
    group = h.coord.groups["g"]
    assert (group.generation_id, group.leader_id, sorted(group.members)) == (gen, a, sorted([a, b]))
    assert {m.member_id: m.assignment for m in group.members.values()} == {a: b"A", b: b"B"}
    assert h.fetch("g", None)[1] == {("t", 0): (7, 2, "m", 0)}
    assert h.fetch("solo", None)[1] == {("u", 1): (9, -1, "m", 0)}
    # Members carry on with their generation; silent ones expire after their session.
    assert h.heartbeat("g", a, gen) == 0
    assert h.result(h.sync("g", b, gen)).assignment == b"B"
    h.advance(6000)
    assert h.heartbeat("g", a, gen) == 0
    h.advance(6000)
    assert h.heartbeat("g", a, gen) == E.REBALANCE_IN_PROGRESS


def test_requests_while_loading_get_load_in_progress() -> None:
    h = Harness()
    p = h.partition_of("g")
    h.coord.begin_load(p)
    assert h.result(h.join("g", version=3)).error_code == E.COORDINATOR_LOAD_IN_PROGRESS
    assert h.commit_errors(h.commit("g", {("t", 0): 1})) == {
        ("t", 0): E.COORDINATOR_LOAD_IN_PROGRESS
    }
    assert h.fetch("g", {"t": [0]}) == (E.COORDINATOR_LOAD_IN_PROGRESS, {})
    err, offs = h.fetch("g", {"t": [0]}, version=1)  # no group-level error in v1
    assert (err, offs) == (0, {("t", 0): (-1, -1, "", E.COORDINATOR_LOAD_IN_PROGRESS)})
    # v2-7: at the top, and on each partition for clients that read only those (aiokafka).
    for version in (2, 7):
        err, offs = h.fetch("g", {"t": [0, 1]}, version=version)
        assert (err, offs) == (
            E.COORDINATOR_LOAD_IN_PROGRESS,
            {
                ("t", 0): (-1, -1, "", E.COORDINATOR_LOAD_IN_PROGRESS),
                ("t", 1): (-1, -1, "", E.COORDINATOR_LOAD_IN_PROGRESS),
            },
        )
    assert h.fetch("g", None, version=7) == (E.COORDINATOR_LOAD_IN_PROGRESS, {})
    assert h.coord.partition_error("g") == E.COORDINATOR_LOAD_IN_PROGRESS
    h.coord.complete_load(p)
    assert h.coord.partition_error("g") == 0


def test_commit_to_unknown_group_follows_kafka() -> None:
    """Epoch/generation -1 creates an empty simple group whatever member id the commit names
    (a KIP-848 consumer using assign() sends its own); epoch >= 0 needs the group."""
    h = Harness()
    assert h.commit_errors(h.commit("m848", {("t", 0): 4}, -1, "client-made-id", version=9)) == {
        ("t", 0): 0
    }
    assert h.fetch("m848", {"t": [0]}, version=9) == (0, {("t", 0): (4, -1, "m", 0)})
    assert h.commit_errors(h.commit("m848", {("t", 0): 5}, -1, "client-made-id", version=9)) == {
        ("t", 0): 0
    }
    assert h.commit_errors(h.commit("nogroup9", {("t", 0): 1}, 3, "m", version=9)) == {
        ("t", 0): E.GROUP_ID_NOT_FOUND
    }
    assert h.commit_errors(h.commit("nogroup9", {("t", 0): 1}, 0, "", version=9)) == {
        ("t", 0): E.GROUP_ID_NOT_FOUND
    }
    assert h.commit_errors(h.commit("nogroup8", {("t", 0): 1}, 3, "m", version=8)) == {
        ("t", 0): E.ILLEGAL_GENERATION
    }
