"""group.coordinator.append.linger.ms: coordinator writes of one window land in one batch.

Kafka's coordinator runtime lets writes to a __consumer_offsets partition accumulate for the
linger (5 ms by default in Kafka 4.0) and appends them as one batch; each request is answered
when that batch is appended. Transactional writes are not held back, but never overtake
records already waiting.
"""

from __future__ import annotations

import pytest
from harness import PENDING, Harness

from gregor.coordinator import CoordinatorConfig
from gregor.coordinator.group.config import APPEND_MAX_BATCH_BYTES
from gregor.coordinator.group.records import OffsetCommitKey
from gregor.protocol.errors import ErrorCode as E
from gregor.protocol.messages.txn_offset_commit import TxnOffsetCommitRequest
from gregor.protocol.records.batch import decode_batch


def lingering_harness(linger: int = 5) -> Harness:
    return Harness(
        config=CoordinatorConfig(
            num_partitions=4,
            initial_rebalance_delay_ms=0,
            min_session_timeout_ms=1000,
            append_linger_ms=linger,
        )
    )


def groups_on_one_partition(h: Harness, n: int) -> list[str]:
    by_partition: dict[int, list[str]] = {}
    i = 0
    while True:
        gid = f"g{i}"
        i += 1
        same = by_partition.setdefault(h.partition_of(gid), [])
        same.append(gid)
        if len(same) == n:
            return same


def test_writes_within_the_linger_are_one_batch_answered_when_it_is_appended() -> None:
    h = lingering_harness()
    g1, g2 = groups_on_one_partition(h, 2)
    p = h.partition_of(g1)
    t1 = h.commit(g1, {("t", 0): 5, ("t", 1): 6})
    h.advance(2)
    t2 = h.commit(g2, {("t", 0): 7})
    # Nothing appended, nobody answered yet.
    assert h.log[p] == []
    assert (h.result(t1), h.result(t2)) == (PENDING, PENDING)
    h.advance(3)  # 5 ms after the first write
    assert len(h.log[p]) == 1
    batch = decode_batch(h.log[p][0])
    assert batch.header.base_offset == 0
    keys = [k for k, _ in h.records(p)]
    assert keys == [
        OffsetCommitKey(g1, "t", 0),
        OffsetCommitKey(g1, "t", 1),
        OffsetCommitKey(g2, "t", 0),
    ]
    assert h.commit_errors(t1) == {("t", 0): 0, ("t", 1): 0}
    assert h.commit_errors(t2) == {("t", 0): 0}
    # Each commit knows the offset of its own record in the shared batch.
    assert h.coord.groups[g1].offsets.get(("t", 1)).log_offset == 1
    assert h.coord.groups[g2].offsets.get(("t", 0)).log_offset == 2
    assert h.fetch(g2, {"t": [0]})[1] == {("t", 0): (7, -1, "m", 0)}


def test_a_failed_append_fails_every_write_of_the_batch() -> None:
    h = lingering_harness()
    g1, g2 = groups_on_one_partition(h, 2)
    h.fail_writes = E.NOT_LEADER_OR_FOLLOWER
    t1 = h.commit(g1, {("t", 0): 5})
    t2 = h.commit(g2, {("t", 0): 7})
    h.advance(5)
    assert h.commit_errors(t1) == {("t", 0): E.NOT_COORDINATOR}
    assert h.commit_errors(t2) == {("t", 0): E.NOT_COORDINATOR}


def test_a_transactional_commit_is_not_held_back_but_follows_what_lingers() -> None:
    h = lingering_harness()
    g1, g2 = groups_on_one_partition(h, 2)
    p = h.partition_of(g1)
    t1 = h.commit(g1, {("t", 0): 5})
    req = TxnOffsetCommitRequest(
        transactional_id="tx",
        group_id=g2,
        producer_id=9,
        producer_epoch=0,
        topics=[
            TxnOffsetCommitRequest.Topics(
                name="t",
                partitions=[
                    TxnOffsetCommitRequest.Topics.Partitions(
                        partition_index=0, committed_offset=3, committed_metadata=""
                    )
                ],
            )
        ],
    )
    resp = h.call("txn_offset_commit", req, 0)
    assert resp is not PENDING
    assert [pp.error_code for tp in resp.topics for pp in tp.partitions] == [0]
    # Both appended at once, the lingering plain commit first.
    assert [decode_batch(b).header.is_transactional for b in h.log[p]] == [False, True]
    assert h.commit_errors(t1) == {("t", 0): 0}


def test_a_full_batch_is_appended_without_waiting() -> None:
    h = lingering_harness()
    (g1,) = groups_on_one_partition(h, 1)
    p = h.partition_of(g1)
    h.topics.add("big", 1000)
    meta = "m" * 4000
    per_commit = 100
    # Enough commits to pass APPEND_MAX_BATCH_BYTES between them.
    n = APPEND_MAX_BATCH_BYTES // (per_commit * len(meta)) + 2
    tokens = [
        h.commit(g1, {("big", i * per_commit + j): j for j in range(per_commit)}, metadata=meta)
        for i in range(n)
    ]
    # The first commit was appended (and answered) before any time passed: the second would
    # not have fitted in its batch.
    assert len(h.log[p]) >= 1
    assert set(h.commit_errors(tokens[0]).values()) == {0}
    h.advance(5)
    for t in tokens[1:]:
        assert set(h.commit_errors(t).values()) == {0}
    assert sum(len(decode_batch(b).records) for b in h.log[p]) == n * per_commit


def test_linger_zero_appends_each_write_at_once() -> None:
    h = lingering_harness(linger=0)
    g1, g2 = groups_on_one_partition(h, 2)
    p = h.partition_of(g1)
    assert h.commit_errors(h.commit(g1, {("t", 0): 5})) == {("t", 0): 0}
    assert h.commit_errors(h.commit(g2, {("t", 0): 5})) == {("t", 0): 0}
    assert len(h.log[p]) == 2


@pytest.mark.parametrize(
    ("props", "expected"), [({}, 5), ({"group.coordinator.append.linger.ms": "0"}, 0)]
)
def test_the_broker_key_and_kafkas_default(props: dict[str, str], expected: int) -> None:
    cfg = CoordinatorConfig.from_props(lambda key, default: props.get(key, default))
    assert cfg.append_linger_ms == expected
