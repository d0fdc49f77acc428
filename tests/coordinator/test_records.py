"""__consumer_offsets keys and values: exact bytes in Kafka's layouts, every readable version."""

from __future__ import annotations

import struct
import uuid

import pytest

from gregor.coordinator.group.records import (
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
    CONSUMER_GROUP_MEMBER_METADATA,
    CONSUMER_GROUP_METADATA,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA,
    ConsumerGroupKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataValue,
    ConsumerMemberKey,
    CurrentMemberAssignmentValue,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    TargetAssignmentMemberValue,
    TargetAssignmentMetadataValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from gregor.protocol.exceptions import ProtocolError

TID = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")


def s16(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def test_offset_commit_key_bytes() -> None:
    key = OffsetCommitKey("g", "t", 3)
    data = encode_key(key)
    assert data == b"\x00\x01" + s16("g") + s16("t") + b"\x00\x00\x00\x03"
    assert decode_key(data) == key
    # The older key version 0 has the same layout.
    assert decode_key(b"\x00\x00" + data[2:]) == key


def test_offset_commit_value_v3_bytes() -> None:
    value = OffsetCommitValue(offset=42, metadata="md", commit_timestamp=1000, leader_epoch=7)
    data = encode_value(value)
    assert data == (
        b"\x00\x03"
        + struct.pack(">q", 42)
        + struct.pack(">i", 7)
        + s16("md")
        + struct.pack(">q", 1000)
    )
    assert decode_value(OffsetCommitKey("g", "t", 0), data) == value


def test_offset_commit_value_with_expiry_is_v1() -> None:
    value = OffsetCommitValue(offset=5, metadata="", commit_timestamp=10, expire_timestamp=99)
    data = encode_value(value)
    assert data == b"\x00\x01" + struct.pack(">q", 5) + s16("") + struct.pack(">qq", 10, 99)
    assert decode_value(OffsetCommitKey("g", "t", 0), data) == value


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (
            b"\x00\x00" + struct.pack(">q", 9) + s16("a") + struct.pack(">q", 3),
            OffsetCommitValue(9, "a", 3, -1, -1),
        ),
        (
            b"\x00\x02" + struct.pack(">q", 9) + s16("a") + struct.pack(">q", 3),
            OffsetCommitValue(9, "a", 3, -1, -1),
        ),
        # v4 is flexible: compact string, trailing tag buffer.
        (
            b"\x00\x04" + struct.pack(">qi", 9, 2) + b"\x02a" + struct.pack(">q", 3) + b"\x00",
            OffsetCommitValue(9, "a", 3, 2, -1),
        ),
    ],
)
def test_offset_commit_value_older_and_newer_versions(
    data: bytes, expected: OffsetCommitValue
) -> None:
    assert decode_value(OffsetCommitKey("g", "t", 0), data) == expected


def test_tombstone_decodes_to_none() -> None:
    assert decode_value(OffsetCommitKey("g", "t", 0), None) is None


def test_group_metadata_bytes() -> None:
    key = GroupMetadataKey("grp")
    assert encode_key(key) == b"\x00\x02" + s16("grp")
    value = GroupMetadataValue(
        protocol_type="consumer",
        generation=3,
        protocol="range",
        leader="m1",
        current_state_timestamp=1234,
        members=[MemberMetadata("m1", "cid", "/1.2.3.4", 300, 100, b"SUB", b"ASG", "inst")],
    )
    data = encode_value(value)
    assert data == (
        b"\x00\x03"
        + s16("consumer")
        + struct.pack(">i", 3)
        + s16("range")
        + s16("m1")
        + struct.pack(">q", 1234)
        + struct.pack(">i", 1)
        + s16("m1")
        + s16("inst")
        + s16("cid")
        + s16("/1.2.3.4")
        + struct.pack(">ii", 300, 100)
        + struct.pack(">i", 3)
        + b"SUB"
        + struct.pack(">i", 3)
        + b"ASG"
    )
    assert decode_value(key, data) == value


def test_group_metadata_v0_without_rebalance_timeout() -> None:
    data = (
        b"\x00\x00"
        + s16("consumer")
        + struct.pack(">i", 1)
        + s16("range")
        + s16("m")
        + struct.pack(">i", 1)
        + s16("m")
        + s16("c")
        + s16("h")
        + struct.pack(">i", 5000)
        + struct.pack(">i", 0)
        + struct.pack(">i", 0)
    )
    value = decode_value(GroupMetadataKey("g"), data)
    assert value == GroupMetadataValue(
        "consumer", 1, "range", "m", -1, [MemberMetadata("m", "c", "h", 5000, 5000, b"", b"", None)]
    )


def test_consumer_group_records_bytes() -> None:
    key = ConsumerGroupKey(CONSUMER_GROUP_METADATA, "g")
    assert encode_key(key) == b"\x00\x03" + s16("g")
    assert (
        encode_value(ConsumerGroupMetadataValue(5)) == b"\x00\x00" + struct.pack(">i", 5) + b"\x00"
    )
    tkey = ConsumerGroupKey(CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, "g")
    assert encode_key(tkey) == b"\x00\x06" + s16("g")
    mkey = ConsumerMemberKey(CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, "g", "m")
    assert encode_key(mkey) == b"\x00\x07" + s16("g") + s16("m")
    value = TargetAssignmentMemberValue({TID: [2, 0]})
    # compact array of 1 struct: uuid, compact int32 array (sorted), struct tags; value tags
    assert encode_value(value) == (
        b"\x00\x00" + b"\x02" + TID.bytes + b"\x03" + struct.pack(">ii", 0, 2) + b"\x00" + b"\x00"
    )
    assert decode_value(mkey, encode_value(value)) == TargetAssignmentMemberValue({TID: [0, 2]})


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (ConsumerGroupKey(CONSUMER_GROUP_METADATA, "g"), ConsumerGroupMetadataValue(11)),
        (
            ConsumerGroupKey(CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, "g"),
            TargetAssignmentMetadataValue(4),
        ),
        (
            ConsumerMemberKey(CONSUMER_GROUP_MEMBER_METADATA, "g", "m"),
            ConsumerGroupMemberMetadataValue(
                "inst", None, "client", "/h", ["a", "b"], "t.*", 30000, "range"
            ),
        ),
        (
            ConsumerMemberKey(CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, "g", "m"),
            CurrentMemberAssignmentValue(7, 6, 1, {TID: [1, 3]}, {TID: [5]}),
        ),
    ],
)
def test_consumer_group_records_round_trip(key: object, value: object) -> None:
    assert decode_key(encode_key(key)) == key  # type: ignore[arg-type]
    assert decode_value(key, encode_value(value)) == value  # type: ignore[arg-type]


def test_unknown_record_types_are_skipped() -> None:
    # Type 9+ are share/streams groups and regexes: not kept here.
    assert decode_key(b"\x00\x0a" + s16("g")) is None
    assert decode_key(b"\x00\x10" + s16("g")) is None


@pytest.mark.parametrize("data", [b"", b"\x00", b"\xff\xff", b"\x00\x01\x00\x05ab"])
def test_malformed_keys_raise_protocol_error(data: bytes) -> None:
    with pytest.raises(ProtocolError):
        decode_key(data)


def test_unknown_value_version_raises() -> None:
    with pytest.raises(ProtocolError):
        decode_value(OffsetCommitKey("g", "t", 0), b"\x00\x09" + bytes(20))
    with pytest.raises(ProtocolError):
        decode_value(
            ConsumerGroupKey(CONSUMER_GROUP_METADATA, "g"), b"\x00\x01\x00\x00\x00\x01\x00"
        )
