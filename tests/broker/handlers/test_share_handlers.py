"""Share group APIs at the handler, one node: share sessions and their epochs, acknowledgement
errors, unknown topics, ShareGroupDescribe and ListGroups, the share coordinator's state APIs
over the wire (fencing included), and everything refused while ``share.version`` is 0.
(A real share consumer: tests/client/test_share_groups.py.)"""

from __future__ import annotations

import uuid

import pytest
from handler_wire import Wire

from gregor.protocol.errors import ErrorCode
from gregor.protocol.messages.create_topics import CreateTopicsRequest
from gregor.protocol.messages.delete_share_group_state import DeleteShareGroupStateRequest
from gregor.protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from gregor.protocol.messages.initialize_share_group_state import InitializeShareGroupStateRequest
from gregor.protocol.messages.list_groups import ListGroupsRequest
from gregor.protocol.messages.metadata import MetadataRequest
from gregor.protocol.messages.produce import ProduceRequest
from gregor.protocol.messages.read_share_group_state import ReadShareGroupStateRequest
from gregor.protocol.messages.read_share_group_state_summary import (
    ReadShareGroupStateSummaryRequest,
)
from gregor.protocol.messages.share_acknowledge import ShareAcknowledgeRequest
from gregor.protocol.messages.share_fetch import ShareFetchRequest
from gregor.protocol.messages.share_group_describe import ShareGroupDescribeRequest
from gregor.protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest
from gregor.protocol.messages.update_features import UpdateFeaturesRequest
from gregor.protocol.messages.write_share_group_state import WriteShareGroupStateRequest
from gregor.protocol.records.batch import RecordBatchBuilder

pytestmark = pytest.mark.timeout(60)

GROUP_CONFIG = 32


def topic_with_records(wire: Wire, name: str, n: int) -> uuid.UUID:
    wire.request(
        CreateTopicsRequest(
            topics=[
                CreateTopicsRequest.Topics(
                    name=name, num_partitions=1, replication_factor=1, assignments=[], configs=[]
                )
            ],
            timeout_ms=10000,
        ),
        5,
    )
    if n:
        b = RecordBatchBuilder()
        for i in range(n):
            b.append(0, None, b"r%d" % i)
        resp = wire.request(
            ProduceRequest(
                acks=-1,
                timeout_ms=10000,
                topic_data=[
                    ProduceRequest.TopicData(
                        name=name,
                        partition_data=[
                            ProduceRequest.TopicData.PartitionData(index=0, records=b.build())
                        ],
                    )
                ],
            ),
            8,
        )
        assert resp.responses[0].partition_responses[0].error_code == 0
    md = wire.request(MetadataRequest(topics=[MetadataRequest.Topics(name=name)]), 12)
    return md.topics[0].topic_id


def earliest(wire: Wire, group: str) -> None:
    resp = wire.request(
        IncrementalAlterConfigsRequest(
            resources=[
                IncrementalAlterConfigsRequest.Resources(
                    resource_type=GROUP_CONFIG,
                    resource_name=group,
                    configs=[
                        IncrementalAlterConfigsRequest.Resources.Configs(
                            name="share.auto.offset.reset", config_operation=0, value="earliest"
                        )
                    ],
                )
            ]
        ),
        1,
    )
    assert resp.responses[0].error_code == 0


def share_fetch(
    wire: Wire,
    group: str,
    member: str,
    epoch: int,
    topic_id: uuid.UUID | None,
    acks: list[tuple[int, int, list[int]]] | None = None,
    max_records: int = 500,
) -> object:
    T = ShareFetchRequest.Topics
    topics = (
        []
        if topic_id is None
        else [
            T(
                topic_id=topic_id,
                partitions=[
                    T.Partitions(
                        partition_index=0,
                        acknowledgement_batches=[
                            T.Partitions.AcknowledgementBatches(
                                first_offset=a, last_offset=b, acknowledge_types=t
                            )
                            for a, b, t in acks or []
                        ],
                    )
                ],
            )
        ]
    )
    return wire.request(
        ShareFetchRequest(
            group_id=group,
            member_id=member,
            share_session_epoch=epoch,
            max_wait_ms=0,
            min_bytes=1,
            max_bytes=1 << 20,
            max_records=max_records,
            batch_size=500,
            topics=topics,
            forgotten_topics_data=[],
        ),
        1,
    )


def acquired(resp: object) -> list[tuple[int, int, int]]:
    return [
        (a.first_offset, a.last_offset, a.delivery_count)
        for r in resp.responses
        for p in r.partitions
        for a in p.acquired_records
    ]  # type: ignore[attr-defined]


def test_share_sessions_acquire_and_acknowledge(wire: Wire) -> None:
    tid = topic_with_records(wire, "q", 6)
    earliest(wire, "g")
    assert share_fetch(wire, "g", "m1", 5, tid).error_code == ErrorCode.SHARE_SESSION_NOT_FOUND
    first = share_fetch(wire, "g", "m1", 0, tid, max_records=4)
    assert (first.error_code, acquired(first)) == (0, [(0, 3, 1)])
    assert first.acquisition_lock_timeout_ms == 30000
    assert bytes(first.responses[0].partitions[0].records)  # the batch holding them
    assert share_fetch(wire, "g", "m1", 3, None).error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    # Another member in its own session gets the rest.
    other = share_fetch(wire, "g", "m2", 0, tid)
    assert acquired(other) == [(4, 5, 1)]
    # m1 accepts 0-1 and releases 2-3 on its next fetch (epoch 1, no partitions named: the session's).
    again = share_fetch(wire, "g", "m1", 1, tid, acks=[(0, 1, [1]), (2, 3, [2])])
    assert again.responses[0].partitions[0].acknowledge_error_code == 0
    assert acquired(again) == [(2, 3, 2)]
    # Acknowledging what m2 holds, or what nobody holds, is refused.
    ack = wire.request(
        ShareAcknowledgeRequest(
            group_id="g",
            member_id="m1",
            share_session_epoch=2,
            topics=[
                ShareAcknowledgeRequest.Topics(
                    topic_id=tid,
                    partitions=[
                        ShareAcknowledgeRequest.Topics.Partitions(
                            partition_index=0,
                            acknowledgement_batches=[
                                ShareAcknowledgeRequest.Topics.Partitions.AcknowledgementBatches(
                                    first_offset=4, last_offset=4, acknowledge_types=[1]
                                )
                            ],
                        )
                    ],
                )
            ],
        ),
        1,
    )
    assert ack.responses[0].partitions[0].error_code == ErrorCode.INVALID_RECORD_STATE
    assert (
        wire.request(
            ShareAcknowledgeRequest(group_id="g", member_id="m1", share_session_epoch=0, topics=[]),
            1,
        ).error_code
        == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    )
    # Closing m2's session releases what it holds; m1 then gets it, a second delivery.
    closed = share_fetch(wire, "g", "m2", -1, None)
    assert closed.error_code == 0 and acquired(closed) == []
    assert acquired(share_fetch(wire, "g", "m1", 3, None)) == [(4, 5, 2)]


def test_unknown_topics_and_bad_requests(wire: Wire) -> None:
    assert share_fetch(wire, "", "m", 0, None).error_code == ErrorCode.INVALID_REQUEST
    assert share_fetch(wire, "g", "", 0, None).error_code == ErrorCode.INVALID_REQUEST
    resp = share_fetch(wire, "g", "m", 0, uuid.uuid4())
    assert [(p.partition_index, p.error_code) for r in resp.responses for p in r.partitions] == [
        (0, ErrorCode.UNKNOWN_TOPIC_ID)
    ]
    tid = topic_with_records(wire, "q2", 1)
    assert (
        share_fetch(wire, "g", "m", 0, tid, acks=[(0, 0, [1])]).error_code
        == ErrorCode.INVALID_REQUEST
    )


def heartbeat(
    wire: Wire, member: str, epoch: int, topics: list[str] | None, version: int = 1
) -> object:
    return wire.request(
        ShareGroupHeartbeatRequest(
            group_id="sg",
            member_id=member,
            member_epoch=epoch,
            rack_id=None,
            subscribed_topic_names=topics,
        ),
        version,
    )


def test_heartbeat_describe_and_list(wire: Wire) -> None:
    tid = topic_with_records(wire, "q3", 0)
    assert (
        heartbeat(wire, "", 0, ["q3"]).error_code == ErrorCode.INVALID_REQUEST
    )  # v1: the client names itself
    joined = heartbeat(wire, "member-a", 0, ["q3"])
    assert (
        joined.error_code,
        joined.member_id,
        joined.member_epoch,
        joined.heartbeat_interval_ms,
    ) == (0, "member-a", 1, 5000)
    assert [(t.topic_id, t.partitions) for t in joined.assignment.topic_partitions] == [(tid, [0])]
    v0 = heartbeat(wire, "", 0, ["q3"], version=0)  # v0: the coordinator names it
    assert v0.error_code == 0 and uuid.UUID(v0.member_id)
    assert heartbeat(wire, "member-a", 7, None).error_code == ErrorCode.FENCED_MEMBER_EPOCH
    assert heartbeat(wire, "nobody", 1, None).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    desc = wire.request(
        ShareGroupDescribeRequest(group_ids=["sg", "missing"], include_authorized_operations=False),
        1,
    )
    sg, missing = desc.groups
    assert (sg.error_code, sg.group_state, sg.assignor_name, len(sg.members)) == (
        0,
        "Stable",
        "simple",
        2,
    )
    assert {m.member_id for m in sg.members} == {"member-a", v0.member_id}
    assert missing.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    listed = wire.request(ListGroupsRequest(states_filter=[], types_filter=["share"]), 5)
    assert [(g.group_id, g.group_type, g.group_state) for g in listed.groups] == [
        ("sg", "share", "Stable")
    ]
    assert heartbeat(wire, "member-a", -1, None).member_epoch == -1
    assert heartbeat(wire, "member-a", 2, None).error_code == ErrorCode.UNKNOWN_MEMBER_ID  # it left


def test_the_state_apis_over_the_wire(wire: Wire) -> None:
    tid = uuid.uuid4()

    def read(leader_epoch: int) -> object:
        return (
            wire.request(
                ReadShareGroupStateRequest(
                    group_id="g",
                    topics=[
                        ReadShareGroupStateRequest.Topics(
                            topic_id=tid,
                            partitions=[
                                ReadShareGroupStateRequest.Topics.Partitions(
                                    partition=0, leader_epoch=leader_epoch
                                )
                            ],
                        )
                    ],
                ),
                0,
            )
            .results[0]
            .partitions[0]
        )

    def write(state_epoch: int, leader_epoch: int, start: int) -> int:
        P = WriteShareGroupStateRequest.Topics.Partitions
        return int(
            wire.request(
                WriteShareGroupStateRequest(
                    group_id="g",
                    topics=[
                        WriteShareGroupStateRequest.Topics(
                            topic_id=tid,
                            partitions=[
                                P(
                                    partition=0,
                                    state_epoch=state_epoch,
                                    leader_epoch=leader_epoch,
                                    start_offset=start,
                                    state_batches=[
                                        P.StateBatches(
                                            first_offset=start,
                                            last_offset=start + 1,
                                            delivery_state=2,
                                            delivery_count=1,
                                        )
                                    ],
                                )
                            ],
                        )
                    ],
                ),
                0,
            )
            .results[0]
            .partitions[0]
            .error_code
        )

    fresh = read(0)
    assert (fresh.error_code, fresh.state_epoch, fresh.start_offset) == (0, 0, -1)
    init = wire.request(
        InitializeShareGroupStateRequest(
            group_id="g",
            topics=[
                InitializeShareGroupStateRequest.Topics(
                    topic_id=tid,
                    partitions=[
                        InitializeShareGroupStateRequest.Topics.Partitions(
                            partition=0, state_epoch=1, start_offset=10
                        )
                    ],
                )
            ],
        ),
        0,
    )
    assert init.results[0].partitions[0].error_code == 0
    assert write(1, 3, 12) == 0
    state = read(3)
    assert (
        state.state_epoch,
        state.start_offset,
        [
            (b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
            for b in state.state_batches
        ],
    ) == (1, 12, [(12, 13, 2, 1)])
    assert write(1, 2, 20) == ErrorCode.FENCED_LEADER_EPOCH
    assert write(0, 3, 20) == ErrorCode.FENCED_STATE_EPOCH
    assert read(2).error_code == ErrorCode.FENCED_LEADER_EPOCH
    summary = wire.request(
        ReadShareGroupStateSummaryRequest(
            group_id="g",
            topics=[
                ReadShareGroupStateSummaryRequest.Topics(
                    topic_id=tid,
                    partitions=[
                        ReadShareGroupStateSummaryRequest.Topics.Partitions(
                            partition=0, leader_epoch=3
                        )
                    ],
                )
            ],
        ),
        0,
    )
    assert (
        summary.results[0].partitions[0].start_offset,
        summary.results[0].partitions[0].state_epoch,
    ) == (12, 1)
    deleted = wire.request(
        DeleteShareGroupStateRequest(
            group_id="g",
            topics=[
                DeleteShareGroupStateRequest.Topics(
                    topic_id=tid,
                    partitions=[DeleteShareGroupStateRequest.Topics.Partitions(partition=0)],
                )
            ],
        ),
        0,
    )
    assert deleted.results[0].partitions[0].error_code == 0
    assert read(3).start_offset == -1


def test_everything_is_refused_while_share_version_is_0(wire: Wire) -> None:
    off = wire.request(
        UpdateFeaturesRequest(
            timeout_ms=10000,
            feature_updates=[
                UpdateFeaturesRequest.FeatureUpdates(
                    feature="share.version", max_version_level=0, upgrade_type=2
                )
            ],
        ),
        1,
    )
    assert off.error_code == 0
    tid = topic_with_records(wire, "q4", 1)
    assert heartbeat(wire, "m", 0, ["q4"]).error_code == ErrorCode.UNSUPPORTED_VERSION
    assert share_fetch(wire, "g", "m", 0, tid).error_code == ErrorCode.UNSUPPORTED_VERSION
    assert (
        wire.request(
            ShareAcknowledgeRequest(group_id="g", member_id="m", share_session_epoch=1, topics=[]),
            1,
        ).error_code
        == ErrorCode.UNSUPPORTED_VERSION
    )
    desc = wire.request(
        ShareGroupDescribeRequest(group_ids=["g"], include_authorized_operations=False), 1
    )
    assert desc.groups[0].error_code == ErrorCode.UNSUPPORTED_VERSION
    read = wire.request(
        ReadShareGroupStateRequest(
            group_id="g",
            topics=[
                ReadShareGroupStateRequest.Topics(
                    topic_id=tid,
                    partitions=[
                        ReadShareGroupStateRequest.Topics.Partitions(partition=0, leader_epoch=0)
                    ],
                )
            ],
        ),
        0,
    )
    assert read.results[0].partitions[0].error_code == ErrorCode.UNSUPPORTED_VERSION


def test_share_group_offsets_describe_alter_delete(wire: Wire) -> None:
    from gregor.protocol.messages.alter_share_group_offsets import AlterShareGroupOffsetsRequest
    from gregor.protocol.messages.delete_share_group_offsets import DeleteShareGroupOffsetsRequest
    from gregor.protocol.messages.describe_share_group_offsets import (
        DescribeShareGroupOffsetsRequest,
    )

    tid = topic_with_records(wire, "qo", 10)
    earliest(wire, "og")

    def describe(
        topics: list[tuple[str, list[int]]] | None,
    ) -> list[tuple[str, int, int, int, int]]:
        Q = DescribeShareGroupOffsetsRequest.Groups
        resp = wire.request(
            DescribeShareGroupOffsetsRequest(
                groups=[
                    Q(
                        group_id="og",
                        topics=None
                        if topics is None
                        else [Q.Topics(topic_name=n, partitions=ps) for n, ps in topics],
                    )
                ]
            ),
            1,
        )
        g = resp.groups[0]
        assert g.error_code == 0
        return [
            (t.topic_name, p.partition_index, p.start_offset, p.lag, p.error_code)
            for t in g.topics
            for p in t.partitions
        ]

    assert describe(None) == []  # the group has no state yet
    assert describe([("qo", [0]), ("nope", [0])]) == [
        ("qo", 0, -1, -1, 0),
        ("nope", 0, -1, -1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    got = share_fetch(wire, "og", "m", 0, tid, max_records=4)
    assert acquired(got) == [(0, 3, 1)]
    K = ShareAcknowledgeRequest.Topics
    ack = wire.request(
        ShareAcknowledgeRequest(
            group_id="og",
            member_id="m",
            share_session_epoch=1,
            topics=[
                K(
                    topic_id=tid,
                    partitions=[
                        K.Partitions(
                            partition_index=0,
                            acknowledgement_batches=[
                                K.Partitions.AcknowledgementBatches(
                                    first_offset=0, last_offset=3, acknowledge_types=[1]
                                )
                            ],
                        )
                    ],
                )
            ],
        ),
        1,
    )
    assert ack.responses[0].partitions[0].error_code == 0
    assert describe(None) == [("qo", 0, 4, 6, 0)]  # 4 accepted: start 4, 6 to go
    # A member is in its share session but the group has no heartbeating members: allowed.
    A = AlterShareGroupOffsetsRequest.Topics
    altered = wire.request(
        AlterShareGroupOffsetsRequest(
            group_id="og",
            topics=[
                A(topic_name="qo", partitions=[A.Partitions(partition_index=0, start_offset=8)])
            ],
        ),
        0,
    )
    assert (altered.error_code, altered.responses[0].partitions[0].error_code) == (0, 0)
    assert describe([("qo", [0])]) == [("qo", 0, 8, 2, 0)]
    # A new session sees the reset: records from 8.
    assert acquired(share_fetch(wire, "og", "m2", 0, tid)) == [(8, 9, 1)]
    deleted = wire.request(
        DeleteShareGroupOffsetsRequest(
            group_id="og", topics=[DeleteShareGroupOffsetsRequest.Topics(topic_name="qo")]
        ),
        0,
    )
    assert (deleted.error_code, deleted.responses[0].error_code) == (0, 0)
    assert describe(None) == []
    # Not while the group has members.
    assert heartbeat(wire, "busy", 0, ["qo"]).error_code == 0
    busy = wire.request(
        AlterShareGroupOffsetsRequest(
            group_id="sg",
            topics=[
                A(topic_name="qo", partitions=[A.Partitions(partition_index=0, start_offset=0)])
            ],
        ),
        0,
    )
    assert busy.error_code == ErrorCode.NON_EMPTY_GROUP
