"""Versions generated from tools/codegen/supplement.txt: exact bytes, and kio agrees.

ConsumerGroupHeartbeat v1 (which librdkafka's group.protocol=consumer requires) adds
subscribed_topic_regex after subscribed_topic_names; its response is v0's layout.
ConsumerGroupDescribe v1 adds member_type (INT8) at the end of each member.
"""

from __future__ import annotations

import uuid

import pytest

from gregor.protocol.messages import API_BY_NAME
from gregor.protocol.messages.consumer_group_describe import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
)
from gregor.protocol.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)

TID = uuid.UUID(int=7)


def _heartbeat(regex: str | None) -> ConsumerGroupHeartbeatRequest:
    return ConsumerGroupHeartbeatRequest(
        group_id="g",
        member_id="m",
        member_epoch=3,
        instance_id=None,
        rack_id="r",
        rebalance_timeout_ms=500,
        subscribed_topic_names=["a"],
        subscribed_topic_regex=regex,
        server_assignor=None,
        topic_partitions=[
            ConsumerGroupHeartbeatRequest.TopicPartitions(topic_id=TID, partitions=[1])
        ],
    )


def _heartbeat_bytes(regex: bytes) -> bytes:
    return (
        b"\x02g"
        b"\x02m"
        + (3).to_bytes(4, "big")  # group_id, member_id, member_epoch
        + b"\x00"
        b"\x02r"
        + (500).to_bytes(4, "big")  # instance_id null, rack_id, rebalance
        + b"\x02\x02a"  # subscribed_topic_names ["a"]
        + regex  # v1: subscribed_topic_regex
        + b"\x00"  # server_assignor null
        + b"\x02"
        + TID.bytes
        + b"\x02"
        + (1).to_bytes(4, "big")
        + b"\x00"  # topic_partitions
        + b"\x00"  # tagged fields
    )


def test_versions() -> None:
    info = API_BY_NAME["ConsumerGroupHeartbeat"]
    assert (info.min_version, info.max_version, info.flexible_min_version) == (0, 1, 0)
    assert sorted(ConsumerGroupHeartbeatRequest._DECODERS) == [0, 1]
    assert sorted(ConsumerGroupHeartbeatResponse._ENCODERS) == [0, 1]
    assert (
        ConsumerGroupDescribeRequest.MAX_VERSION,
        ConsumerGroupDescribeResponse.MAX_VERSION,
    ) == (1, 1)


def test_heartbeat_v1_request_bytes() -> None:
    req = _heartbeat("b.*")
    expected = _heartbeat_bytes(b"\x04b.*")
    assert req.encode(1) == expected
    decoded = ConsumerGroupHeartbeatRequest.decode(expected, 1)
    assert decoded == req and decoded.subscribed_topic_regex == "b.*"
    # v0 has no regex on the wire (and decodes it as None).
    v0 = _heartbeat_bytes(b"")
    assert req.encode(0) == v0
    assert ConsumerGroupHeartbeatRequest.decode(v0, 0) == _heartbeat(None)
    # A null regex is one byte; null arrays (no change since the last heartbeat) stay null.
    assert _heartbeat(None).encode(1) == _heartbeat_bytes(b"\x00")
    empty = ConsumerGroupHeartbeatRequest(
        group_id="g",
        member_id="m",
        member_epoch=4,
        subscribed_topic_names=None,
        topic_partitions=None,
    )
    back = ConsumerGroupHeartbeatRequest.decode(empty.encode(1), 1)
    assert (back.subscribed_topic_names, back.topic_partitions, back.subscribed_topic_regex) == (
        None,
        None,
        None,
    )


def test_heartbeat_v1_response_is_the_v0_layout() -> None:
    resp = ConsumerGroupHeartbeatResponse(
        throttle_time_ms=0,
        error_code=0,
        error_message=None,
        member_id="m",
        member_epoch=5,
        heartbeat_interval_ms=5000,
        assignment=ConsumerGroupHeartbeatResponse.Assignment(
            topic_partitions=[
                ConsumerGroupHeartbeatResponse.Assignment.TopicPartitions(
                    topic_id=TID, partitions=[0, 2]
                )
            ]
        ),
    )
    expected = (
        (0).to_bytes(4, "big")
        + (0).to_bytes(2, "big")
        + b"\x00"
        + b"\x02m"
        + (5).to_bytes(4, "big")
        + (5000).to_bytes(4, "big")
        + b"\x01"  # assignment present (nullable struct)
        + b"\x02"
        + TID.bytes
        + b"\x03"
        + (0).to_bytes(4, "big")
        + (2).to_bytes(4, "big")
        + b"\x00"
        + b"\x00"  # assignment tags
        + b"\x00"  # tags
    )
    assert resp.encode(1) == resp.encode(0) == expected
    assert ConsumerGroupHeartbeatResponse.decode(expected, 1) == resp


def _describe(member_type: int) -> ConsumerGroupDescribeResponse:
    G = ConsumerGroupDescribeResponse.Groups
    M = G.Members
    return ConsumerGroupDescribeResponse(
        throttle_time_ms=0,
        groups=[
            G(
                error_code=0,
                error_message=None,
                group_id="g",
                group_state="Stable",
                group_epoch=1,
                assignment_epoch=1,
                assignor_name="uniform",
                members=[
                    M(
                        member_id="m",
                        instance_id=None,
                        rack_id=None,
                        member_epoch=1,
                        client_id="c",
                        client_host="/h",
                        subscribed_topic_names=[],
                        subscribed_topic_regex=None,
                        assignment=M.Assignment(topic_partitions=[]),
                        target_assignment=M.TargetAssignment(topic_partitions=[]),
                        member_type=member_type,
                    )
                ],
            )
        ],
    )


def _describe_bytes(member_type: bytes) -> bytes:
    return (
        (0).to_bytes(4, "big")
        + b"\x02"  # throttle_time_ms, one group
        + (0).to_bytes(2, "big")
        + b"\x00"
        + b"\x02g"
        + b"\x07Stable"
        + (1).to_bytes(4, "big")
        + (1).to_bytes(4, "big")
        + b"\x08uniform"
        + b"\x02"  # one member
        + b"\x02m"
        + b"\x00\x00"
        + (1).to_bytes(4, "big")
        + b"\x02c"
        + b"\x03/h"
        + b"\x01"
        + b"\x00"  # no topic names, null regex
        + b"\x01\x00"
        + b"\x01\x00"  # assignment, target_assignment: empty, no tags
        + member_type  # v1
        + b"\x00"  # member tags
        + b"\x80\x00\x00\x00"  # authorized_operations: not requested
        + b"\x00"
        + b"\x00"  # group tags, top tags
    )


def test_describe_v1_member_type_bytes() -> None:
    assert ConsumerGroupDescribeResponse.Groups.Members().member_type == -1  # "unknown"
    consumer = _describe(1)
    assert consumer.encode(1) == _describe_bytes(b"\x01")
    assert ConsumerGroupDescribeResponse.decode(_describe_bytes(b"\x01"), 1) == consumer
    assert consumer.encode(0) == _describe_bytes(b"")
    assert ConsumerGroupDescribeResponse.decode(_describe_bytes(b""), 0) == _describe(-1)
    req = ConsumerGroupDescribeRequest(group_ids=["g"], include_authorized_operations=True)
    assert req.encode(1) == req.encode(0) == b"\x02\x02g\x01\x00"


def test_kio_reads_the_supplement_versions() -> None:
    pytest.importorskip("kio")
    from kio.schema.consumer_group_describe.v1.response import (
        ConsumerGroupDescribeResponse as KioDescribe,
    )
    from kio.schema.consumer_group_heartbeat.v1.request import (
        ConsumerGroupHeartbeatRequest as KioHeartbeat,
    )
    from kio.serial import entity_reader

    data = _heartbeat_bytes(b"\x04b.*")
    hb, size = entity_reader(KioHeartbeat)(data, 0)
    assert size == len(data)
    assert (hb.subscribed_topic_names, hb.subscribed_topic_regex, hb.server_assignor) == (
        ("a",),
        "b.*",
        None,
    )
    data = _describe_bytes(b"\x01")
    d, size = entity_reader(KioDescribe)(data, 0)
    assert size == len(data)
    (member,) = d.groups[0].members
    assert (member.member_id, member.client_host, member.member_type) == ("m", "/h", 1)


# --- KIP-890 part 2: Produce v12, EndTxn v5, TxnOffsetCommit v5 ---------------------------


def test_transaction_version_2_versions_bytes() -> None:
    from gregor.protocol.messages.end_txn import EndTxnRequest, EndTxnResponse
    from gregor.protocol.messages.produce import ProduceRequest
    from gregor.protocol.messages.txn_offset_commit import TxnOffsetCommitRequest

    assert (
        ProduceRequest.MAX_VERSION,
        EndTxnRequest.MAX_VERSION,
        TxnOffsetCommitRequest.MAX_VERSION,
    ) == (12, 5, 5)
    # EndTxn v5's answer: throttle, error, then producer id and epoch (not tagged).
    resp = EndTxnResponse(throttle_time_ms=0, error_code=0, producer_id=7, producer_epoch=3)
    expected = b"\x00\x00\x00\x00\x00\x00" + (7).to_bytes(8, "big") + b"\x00\x03" + b"\x00"
    assert resp.encode(5) == expected
    assert EndTxnResponse.decode(expected, 5) == resp
    assert resp.encode(4) == b"\x00\x00\x00\x00\x00\x00\x00"  # v4 has neither field
    assert (EndTxnResponse().producer_id, EndTxnResponse().producer_epoch) == (-1, -1)
    # The requests of the three are their previous version's bytes.
    end = EndTxnRequest(transactional_id="t", producer_id=7, producer_epoch=3, committed=True)
    assert end.encode(5) == end.encode(4) == b"\x02t" + (7).to_bytes(8, "big") + b"\x00\x03\x01\x00"
    produce = ProduceRequest(
        transactional_id="t",
        acks=-1,
        timeout_ms=5,
        topic_data=[
            ProduceRequest.TopicData(
                name="a",
                partition_data=[ProduceRequest.TopicData.PartitionData(index=0, records=b"r")],
            )
        ],
    )
    assert produce.encode(12) == produce.encode(11)
    P = TxnOffsetCommitRequest.Topics.Partitions
    commit = TxnOffsetCommitRequest(
        transactional_id="t",
        group_id="g",
        producer_id=7,
        producer_epoch=3,
        topics=[
            TxnOffsetCommitRequest.Topics(
                name="a", partitions=[P(partition_index=0, committed_offset=9)]
            )
        ],
    )
    assert commit.encode(5) == commit.encode(4)


def test_kio_reads_the_transaction_version_2_answer() -> None:
    pytest.importorskip("kio")
    from kio.schema.end_txn.v5.response import EndTxnResponse as KioEndTxn
    from kio.serial import entity_reader

    from gregor.protocol.messages.end_txn import EndTxnResponse

    data = EndTxnResponse(throttle_time_ms=0, error_code=0, producer_id=7, producer_epoch=3).encode(
        5
    )
    r, size = entity_reader(KioEndTxn)(data, 0)
    assert size == len(data)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (0, 7, 3)
