"""Records of the ``__consumer_offsets`` topic: keys and values in Kafka's byte layouts.

Every record's key starts with an int16 that names the record type (Kafka calls it the key
version); the value starts with an int16 schema version and is null (a tombstone) when the
keyed thing is deleted. Compaction keeps the newest record per key, so the topic converges to
the current state of every group.

=====  ==============================================  ==========================
type   key fields                                      value (version written)
=====  ==============================================  ==========================
0, 1   group, topic, partition (offset commit)         OffsetCommitValue (3, or 1
                                                       when an expire timestamp
                                                       is set)
2      group (classic group metadata)                  GroupMetadataValue (3)
3      group_id (consumer group epoch)                 ConsumerGroupMetadataValue
5      group_id, member_id (member subscription)       ConsumerGroupMemberMetadataValue
6      group_id (target assignment epoch)              ...TargetAssignmentMetadataValue
7      group_id, member_id (member target assignment)  ...TargetAssignmentMemberValue
8      group_id, member_id (member current assignment) ...CurrentMemberAssignmentValue
=====  ==============================================  ==========================

Keys are non-flexible (int16-length strings). Offset and classic group values are
non-flexible up to version 3 and flexible from 4; the KIP-848 values (types 3-8) are flexible
version 0 (compact strings and arrays, tag buffers). Readers accept every version Kafka has
written; record types this coordinator does not use (share and streams groups, regular
expressions) decode to None and are skipped on load.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from gregor.protocol.exceptions import ProtocolError
from gregor.protocol.primitives import Reader, Writer

LEGACY_OFFSET_COMMIT = 0
OFFSET_COMMIT = 1
GROUP_METADATA = 2
CONSUMER_GROUP_METADATA = 3
CONSUMER_GROUP_PARTITION_METADATA = 4
CONSUMER_GROUP_MEMBER_METADATA = 5
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA = 6
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER = 7
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT = 8

TopicPartitions = dict[uuid.UUID, list[int]]

# --- keys ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True)
class ConsumerGroupKey:
    """Keys of the per-group KIP-848 records (types 3 and 6): just the group id."""

    type: int
    group_id: str


@dataclass(frozen=True)
class ConsumerMemberKey:
    """Keys of the per-member KIP-848 records (types 5, 7 and 8)."""

    type: int
    group_id: str
    member_id: str


Key = OffsetCommitKey | GroupMetadataKey | ConsumerGroupKey | ConsumerMemberKey

# --- values -------------------------------------------------------------------------------


@dataclass
class OffsetCommitValue:
    offset: int
    metadata: str = ""
    commit_timestamp: int = -1
    leader_epoch: int = -1
    expire_timestamp: int = -1


@dataclass
class MemberMetadata:
    member_id: str
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes
    group_instance_id: str | None = None


@dataclass
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: list[MemberMetadata] = field(default_factory=list)


@dataclass
class ConsumerGroupMetadataValue:
    epoch: int


@dataclass
class ConsumerGroupMemberMetadataValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: list[str]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None


@dataclass
class TargetAssignmentMetadataValue:
    assignment_epoch: int


@dataclass
class TargetAssignmentMemberValue:
    topic_partitions: TopicPartitions


@dataclass
class CurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned_partitions: TopicPartitions
    partitions_pending_revocation: TopicPartitions


Value = (
    OffsetCommitValue
    | GroupMetadataValue
    | ConsumerGroupMetadataValue
    | ConsumerGroupMemberMetadataValue
    | TargetAssignmentMetadataValue
    | TargetAssignmentMemberValue
    | CurrentMemberAssignmentValue
)

# --- key codec ----------------------------------------------------------------------------


def encode_key(key: Key) -> bytes:
    w = Writer()
    if isinstance(key, OffsetCommitKey):
        w.int16(OFFSET_COMMIT)
        w.string(key.group)
        w.string(key.topic)
        w.int32(key.partition)
    elif isinstance(key, GroupMetadataKey):
        w.int16(GROUP_METADATA)
        w.string(key.group)
    elif isinstance(key, ConsumerGroupKey):
        w.int16(key.type)
        w.string(key.group_id)
    elif isinstance(key, ConsumerMemberKey):
        w.int16(key.type)
        w.string(key.group_id)
        w.string(key.member_id)
    else:  # pragma: no cover - the union is closed
        raise TypeError(f"not a __consumer_offsets key: {key!r}")
    return w.getvalue()


def decode_key(data: bytes | memoryview) -> Key | None:
    """The key, or None for a record type this coordinator does not keep."""
    r = Reader(data)
    kind = r.int16()
    if kind in (LEGACY_OFFSET_COMMIT, OFFSET_COMMIT):
        return OffsetCommitKey(r.string(), r.string(), r.int32())
    if kind == GROUP_METADATA:
        return GroupMetadataKey(r.string())
    if kind in (CONSUMER_GROUP_METADATA, CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA):
        return ConsumerGroupKey(kind, r.string())
    if kind in (
        CONSUMER_GROUP_MEMBER_METADATA,
        CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
        CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
    ):
        return ConsumerMemberKey(kind, r.string(), r.string())
    if kind < 0:
        raise ProtocolError(f"negative __consumer_offsets record type {kind}")
    return None


# --- value codec --------------------------------------------------------------------------


def _write_topic_partitions(w: Writer, tps: TopicPartitions) -> None:
    def one(item: tuple[uuid.UUID, list[int]]) -> None:
        w.uuid(item[0])
        w.compact_array(sorted(item[1]), w.int32)
        w.tagged_fields(None)

    w.compact_array(sorted(tps.items(), key=lambda kv: kv[0].bytes), one)


def _read_topic_partitions(r: Reader) -> TopicPartitions:
    out: TopicPartitions = {}

    def one() -> None:
        topic_id = r.uuid()
        parts = r.compact_array(r.int32) or []
        r.tagged_fields()
        out[topic_id] = parts

    r.compact_array(one)
    return out


def encode_value(value: Value) -> bytes:
    w = Writer()
    if isinstance(value, OffsetCommitValue):
        if value.expire_timestamp >= 0:
            w.int16(1)
            w.int64(value.offset)
            w.string(value.metadata)
            w.int64(value.commit_timestamp)
            w.int64(value.expire_timestamp)
        else:
            w.int16(3)
            w.int64(value.offset)
            w.int32(value.leader_epoch)
            w.string(value.metadata)
            w.int64(value.commit_timestamp)
    elif isinstance(value, GroupMetadataValue):
        w.int16(3)
        w.string(value.protocol_type)
        w.int32(value.generation)
        w.nullable_string(value.protocol)
        w.nullable_string(value.leader)
        w.int64(value.current_state_timestamp)

        def member(m: MemberMetadata) -> None:
            w.string(m.member_id)
            w.nullable_string(m.group_instance_id)
            w.string(m.client_id)
            w.string(m.client_host)
            w.int32(m.rebalance_timeout)
            w.int32(m.session_timeout)
            w.bytes(m.subscription)
            w.bytes(m.assignment)

        w.array(value.members, member)
    elif isinstance(value, ConsumerGroupMetadataValue):
        w.int16(0)
        w.int32(value.epoch)
        w.tagged_fields(None)
    elif isinstance(value, ConsumerGroupMemberMetadataValue):
        w.int16(0)
        w.compact_nullable_string(value.instance_id)
        w.compact_nullable_string(value.rack_id)
        w.compact_string(value.client_id)
        w.compact_string(value.client_host)
        w.compact_array(value.subscribed_topic_names, w.compact_string)
        w.compact_nullable_string(value.subscribed_topic_regex)
        w.int32(value.rebalance_timeout_ms)
        w.compact_nullable_string(value.server_assignor)
        w.tagged_fields(None)
    elif isinstance(value, TargetAssignmentMetadataValue):
        w.int16(0)
        w.int32(value.assignment_epoch)
        w.tagged_fields(None)
    elif isinstance(value, TargetAssignmentMemberValue):
        w.int16(0)
        _write_topic_partitions(w, value.topic_partitions)
        w.tagged_fields(None)
    elif isinstance(value, CurrentMemberAssignmentValue):
        w.int16(0)
        w.int32(value.member_epoch)
        w.int32(value.previous_member_epoch)
        w.int8(value.state)
        _write_topic_partitions(w, value.assigned_partitions)
        _write_topic_partitions(w, value.partitions_pending_revocation)
        w.tagged_fields(None)
    else:  # pragma: no cover - the union is closed
        raise TypeError(f"not a __consumer_offsets value: {value!r}")
    return w.getvalue()


def _decode_offset_value(r: Reader) -> OffsetCommitValue:
    version = r.int16()
    if version < 0 or version > 4:
        raise ProtocolError(f"unknown OffsetCommitValue version {version}")
    flexible = version >= 4
    offset = r.int64()
    leader_epoch = r.int32() if version >= 3 else -1
    metadata = r.compact_string() if flexible else r.string()
    commit_ts = r.int64()
    expire_ts = r.int64() if version == 1 else -1
    if flexible:
        r.tagged_fields()
    return OffsetCommitValue(offset, metadata, commit_ts, leader_epoch, expire_ts)


def _decode_group_value(r: Reader) -> GroupMetadataValue:
    version = r.int16()
    if version < 0 or version > 4:
        raise ProtocolError(f"unknown GroupMetadataValue version {version}")
    flex = version >= 4
    s = r.compact_string if flex else r.string
    ns = r.compact_nullable_string if flex else r.nullable_string
    protocol_type = s()
    generation = r.int32()
    protocol = ns()
    leader = ns()
    state_ts = r.int64() if version >= 2 else -1

    def member() -> MemberMetadata:
        member_id = s()
        instance_id = ns() if version >= 3 else None
        client_id = s()
        client_host = s()
        rebalance_timeout = r.int32() if version >= 1 else -1
        session_timeout = r.int32()
        subscription = r.compact_bytes() if flex else r.bytes()
        assignment = r.compact_bytes() if flex else r.bytes()
        if flex:
            r.tagged_fields()
        m = MemberMetadata(
            member_id,
            client_id,
            client_host,
            rebalance_timeout,
            session_timeout,
            bytes(subscription),
            bytes(assignment),
            instance_id,
        )
        if m.rebalance_timeout < 0:
            m.rebalance_timeout = m.session_timeout
        return m

    members = (r.compact_array(member) if flex else r.array(member)) or []
    if flex:
        r.tagged_fields()
    return GroupMetadataValue(protocol_type, generation, protocol, leader, state_ts, members)


def decode_value(key: Key, data: bytes | memoryview | None) -> Value | None:
    """The value for ``key``, or None for a tombstone."""
    if data is None:
        return None
    r = Reader(data)
    if isinstance(key, OffsetCommitKey):
        return _decode_offset_value(r)
    if isinstance(key, GroupMetadataKey):
        return _decode_group_value(r)
    version = r.int16()
    if version != 0:
        raise ProtocolError(f"unknown version {version} of record type {key.type}")
    out: Value
    if key.type == CONSUMER_GROUP_METADATA:
        out = ConsumerGroupMetadataValue(r.int32())
    elif key.type == CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA:
        out = TargetAssignmentMetadataValue(r.int32())
    elif key.type == CONSUMER_GROUP_MEMBER_METADATA:
        out = ConsumerGroupMemberMetadataValue(
            instance_id=r.compact_nullable_string(),
            rack_id=r.compact_nullable_string(),
            client_id=r.compact_string(),
            client_host=r.compact_string(),
            subscribed_topic_names=r.compact_array(r.compact_string) or [],
            subscribed_topic_regex=r.compact_nullable_string(),
            rebalance_timeout_ms=r.int32(),
            server_assignor=r.compact_nullable_string(),
        )
    elif key.type == CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER:
        out = TargetAssignmentMemberValue(_read_topic_partitions(r))
    elif key.type == CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT:
        out = CurrentMemberAssignmentValue(
            member_epoch=r.int32(),
            previous_member_epoch=r.int32(),
            state=r.int8(),
            assigned_partitions=_read_topic_partitions(r),
            partitions_pending_revocation=_read_topic_partitions(r),
        )
    else:  # pragma: no cover - decode_key only yields the types above
        raise ProtocolError(f"unexpected record type {key.type}")
    r.tagged_fields()
    return out
