"""Committed offsets with real clients: resumed after a consumer restart and after a broker
restart (SIGKILL), with no record delivered twice beyond the last commit and none skipped."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from interop_clients import ck_produce
from interop_helpers import BASE_TS, Rec, create_topic, topic_name
from test_groups_support import BROKER_CONFIG, KINDS, consume_and_commit

from gregor.testing import BrokerProcess

PARTITIONS = 6


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    with BrokerProcess(config=BROKER_CONFIG) as b:
        yield b
        assert "event=request.failed" not in b.read_log(), b.read_log()[-4000:]


def _produce(bs: str, topic: str, start: int, count: int) -> set[bytes]:
    recs = [
        Rec(i % PARTITIONS, None, f"v{i}".encode(), (), BASE_TS + i)
        for i in range(start, start + count)
    ]
    ck_produce(bs, topic, recs)
    return {r.value for r in recs}


@pytest.mark.parametrize("kind", KINDS)
def test_commits_survive_consumer_and_broker_restarts(broker: BrokerProcess, kind: str) -> None:
    bs = broker.bootstrap_servers
    topic = topic_name(f"offsets-{kind}")
    create_topic(bs, topic, PARTITIONS)
    group = f"offsets-{kind}-{uuid.uuid4().hex[:8]}"
    first_batch = _produce(bs, topic, 0, 60)

    first = consume_and_commit(kind, bs, group, topic, 25)
    second = consume_and_commit(kind, bs, group, topic, 35)  # a new consumer resumes
    values_1 = [v for _, _, v in first]
    values_2 = [v for _, _, v in second]
    assert len(set(values_1)) == 25 and len(set(values_2)) == 35
    assert set(values_1) | set(values_2) == first_batch
    # Each partition continues exactly where the first consumer's commit left it.
    for p in range(PARTITIONS):
        offs_1 = [o for q, o, _ in first if q == p]
        offs_2 = [o for q, o, _ in second if q == p]
        assert offs_1 + offs_2 == list(range(10))

    broker.restart(hard=True)  # SIGKILL: the commits must come back from __consumer_offsets
    new_batch = _produce(bs, topic, 60, 12)
    third = consume_and_commit(kind, bs, group, topic, 12)
    assert sorted(v for _, _, v in third) == sorted(new_batch)
    assert sorted((p, o) for p, o, _ in third) == sorted(
        (p, o) for p in range(PARTITIONS) for o in (10, 11)
    )


def test_offsets_topic_partition_count_is_taken_from_the_topic() -> None:
    """Changing offsets.topic.num.partitions after the topic exists must not lose groups:
    they hash over the partitions the topic really has."""
    from interop_helpers import RawClient

    from gregor.protocol.errors import ErrorCode
    from gregor.protocol.messages.find_coordinator import FindCoordinatorRequest
    from gregor.protocol.messages.metadata import MetadataRequest
    from gregor.protocol.messages.offset_commit import OffsetCommitRequest
    from gregor.protocol.messages.offset_fetch import OffsetFetchRequest

    with BrokerProcess(config={**BROKER_CONFIG, "offsets.topic.num.partitions": 5}) as b:
        topic = topic_name("hashing")
        create_topic(b.bootstrap_servers, topic, 1)
        groups = [f"g{i}" for i in range(20)]
        retry = (
            ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
            ErrorCode.NOT_COORDINATOR,
            ErrorCode.COORDINATOR_NOT_AVAILABLE,
        )
        with RawClient(b.bootstrap_servers) as c:
            for i, g in enumerate(groups):
                commit = OffsetCommitRequest(
                    group_id=g,
                    generation_id_or_member_epoch=-1,
                    topics=[
                        OffsetCommitRequest.Topics(
                            name=topic,
                            partitions=[
                                OffsetCommitRequest.Topics.Partitions(
                                    partition_index=0, committed_offset=i
                                )
                            ],
                        )
                    ],
                )
                # As clients do: find the coordinator first (Kafka makes __consumer_offsets only
                # then, and answers these errors until it has), and ask again.
                while (code := c.request(commit, 8).topics[0].partitions[0].error_code) in retry:
                    c.request(FindCoordinatorRequest(key=g, key_type=0), 1)
                    time.sleep(0.05)
                assert code == 0
        b.config["offsets.topic.num.partitions"] = "7"
        b.restart()
        with RawClient(b.bootstrap_servers) as c:
            md = c.request(
                MetadataRequest(topics=[MetadataRequest.Topics(name="__consumer_offsets")]), 9
            )
            assert len(md.topics[0].partitions) == 5
            got = []
            for g in groups:
                req = OffsetFetchRequest(
                    groups=[
                        OffsetFetchRequest.Groups(
                            group_id=g,
                            topics=[
                                OffsetFetchRequest.Groups.Topics(name=topic, partition_indexes=[0])
                            ],
                        )
                    ]
                )
                f = c.request(req, 8)
                while f.groups[0].error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                    f = c.request(req, 8)  # as clients do: ask again until the load is done
                got.append(f.groups[0].topics[0].partitions[0].committed_offset)
        assert got == list(range(20))
