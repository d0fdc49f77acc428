"""Replaying ``__consumer_offsets`` into the group coordinator's state at load.

Each record is applied as it was when written: an offset commit (transactional ones wait for
their producer's marker), a classic group's metadata, a KIP-848 group's epoch, member,
target assignment and current assignment records; tombstones remove. A group whose metadata
is deleted keeps its offsets (as a classic group) until those are tombstoned too. Records
that cannot be read are skipped with a warning.
"""

from __future__ import annotations

import logging

from gregor.coordinator.group.classic import ClassicGroup, ClassicMember, ClassicState
from gregor.coordinator.group.consumer_group import ConsumerGroup, ConsumerMember, MemberState
from gregor.coordinator.group.core import GroupCore
from gregor.coordinator.group.offsets import OffsetAndMetadata
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
    Key,
    OffsetCommitKey,
    OffsetCommitValue,
    TargetAssignmentMemberValue,
    TargetAssignmentMetadataValue,
    Value,
    decode_key,
    decode_value,
)
from gregor.protocol.exceptions import ProtocolError
from gregor.protocol.records.batch import decode_batch
from gregor.protocol.records.control import ControlRecordType, parse_control_key
from gregor.protocol.records.header import iter_batches

log = logging.getLogger("gregor.coordinator")


class GroupReplay:
    """Applies batches read back from a ``__consumer_offsets`` partition to ``core``."""

    def __init__(self, core: GroupCore) -> None:
        self.core = core

    def load_batches(self, partition: int, data: bytes | memoryview) -> None:
        """Replay whole v2 batches read from ``partition`` of ``__consumer_offsets``."""
        for pos, h in iter_batches(data):
            if h.is_control:
                batch = decode_batch(data, pos)
                for rec in batch.records:
                    try:
                        _, kind = parse_control_key(rec.key)
                    except ProtocolError:
                        continue
                    if kind in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
                        self.core.complete_txn(
                            partition, h.producer_id, kind == ControlRecordType.COMMIT
                        )
                continue
            batch = decode_batch(data, pos)
            txn_pid = h.producer_id if h.is_transactional else None
            for rec in batch.records:
                if rec.key is None:
                    continue
                try:
                    key = decode_key(rec.key)
                    if key is None:
                        continue
                    value = decode_value(key, rec.value)
                except ProtocolError as e:
                    log.warning(
                        "skipping unreadable __consumer_offsets record at %d: %s", rec.offset, e
                    )
                    continue
                self._replay(key, value, rec.offset, txn_pid)

    def _replay(self, key: Key, value: Value | None, offset: int, txn_pid: int | None) -> None:
        if isinstance(key, OffsetCommitKey):
            group = self.core.groups.get(key.group)
            if value is None:
                if group is not None:
                    group.offsets.delete((key.topic, key.partition))
                return
            if group is None:
                group = self.core.groups[key.group] = ClassicGroup(key.group)
            assert isinstance(value, OffsetCommitValue)  # records.decode_value: an offset key's
            oam = OffsetAndMetadata(
                value.offset,
                value.leader_epoch,
                value.metadata,
                value.commit_timestamp,
                value.expire_timestamp,
                offset,
            )
            tp = (key.topic, key.partition)
            if txn_pid is not None:
                group.offsets.prepare_txn(txn_pid, tp, oam)
            else:
                group.offsets.commit(tp, oam)
            return
        if isinstance(key, GroupMetadataKey):
            self._replay_group_metadata(key.group, value)
            return
        self._replay_consumer(key, value)

    def _replay_group_metadata(self, group_id: str, value: Value | None) -> None:
        assert value is None or isinstance(value, GroupMetadataValue)
        existing = self.core.groups.get(group_id)
        offsets = existing.offsets if existing is not None else None
        if value is None:
            if existing is not None:
                if len(existing.offsets):
                    g = ClassicGroup(group_id)
                    g.offsets = existing.offsets
                    self.core.groups[group_id] = g
                else:
                    del self.core.groups[group_id]
            return
        g = ClassicGroup(group_id)
        if offsets is not None:
            g.offsets = offsets
        g.protocol_type = value.protocol_type or None
        g.generation_id = value.generation
        g.protocol_name = value.protocol
        g.state_timestamp = value.current_state_timestamp
        for mm in value.members:
            member = ClassicMember(
                member_id=mm.member_id,
                group_instance_id=mm.group_instance_id,
                client_id=mm.client_id,
                client_host=mm.client_host,
                rebalance_timeout_ms=mm.rebalance_timeout,
                session_timeout_ms=mm.session_timeout,
                protocol_type=value.protocol_type,
                protocols=[(value.protocol or "", mm.subscription)],
                assignment=mm.assignment,
            )
            g.add(member)
        g.leader_id = value.leader if value.leader in g.members else g.leader_id
        g.protocol_type = value.protocol_type or None
        g.state = ClassicState.STABLE if g.members else ClassicState.EMPTY
        self.core.groups[group_id] = g

    def _consumer_group_for_replay(self, group_id: str) -> ConsumerGroup:
        g = self.core.groups.get(group_id)
        if isinstance(g, ConsumerGroup):
            return g
        cg = ConsumerGroup(group_id)
        if g is not None:
            cg.offsets = g.offsets
        self.core.groups[group_id] = cg
        return cg

    def _replay_consumer(self, key: Key, value: Value | None) -> None:
        assert isinstance(key, ConsumerGroupKey | ConsumerMemberKey)
        if value is None and key.group_id not in self.core.groups:
            return
        if value is None and not isinstance(self.core.groups.get(key.group_id), ConsumerGroup):
            return
        g = self._consumer_group_for_replay(key.group_id)
        if isinstance(key, ConsumerGroupKey):
            if key.type == CONSUMER_GROUP_METADATA:
                if value is None:
                    # The group was deleted; offsets (if any) are tombstoned separately.
                    if len(g.offsets):
                        cg = ClassicGroup(key.group_id)
                        cg.offsets = g.offsets
                        self.core.groups[key.group_id] = cg
                    else:
                        del self.core.groups[key.group_id]
                else:
                    assert isinstance(value, ConsumerGroupMetadataValue)
                    g.group_epoch = value.epoch
            elif key.type == CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA:
                assert value is None or isinstance(value, TargetAssignmentMetadataValue)
                g.assignment_epoch = 0 if value is None else value.assignment_epoch
            return
        mid = key.member_id
        if key.type == CONSUMER_GROUP_MEMBER_METADATA:
            if value is None:
                g.remove_member(mid)
                return
            m = g.members.get(mid)
            if m is None:
                m = ConsumerMember(mid)
                g.members[mid] = m
            assert isinstance(value, ConsumerGroupMemberMetadataValue)
            m.instance_id = value.instance_id
            m.rack_id = value.rack_id
            m.client_id = value.client_id
            m.client_host = value.client_host
            m.subscribed_topic_names = list(value.subscribed_topic_names)
            m.subscribed_topic_regex = value.subscribed_topic_regex
            m.rebalance_timeout_ms = value.rebalance_timeout_ms
            m.server_assignor = value.server_assignor
            if m.instance_id is not None:
                g.static_members[m.instance_id] = mid
        elif key.type == CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER:
            if value is None:
                g.target.pop(mid, None)
            else:
                assert isinstance(value, TargetAssignmentMemberValue)
                g.target[mid] = {t: set(ps) for t, ps in value.topic_partitions.items()}
        elif key.type == CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT:
            m = g.members.get(mid)
            if m is None:
                if value is None:
                    return
                m = ConsumerMember(mid)
                g.members[mid] = m
            if value is None:
                m.assigned, m.pending_revocation = {}, {}
                m.member_epoch, m.state = 0, MemberState.STABLE
                return
            assert isinstance(value, CurrentMemberAssignmentValue)
            m.member_epoch = value.member_epoch
            m.previous_member_epoch = value.previous_member_epoch
            try:
                m.state = MemberState(value.state)
            except ValueError:
                m.state = MemberState.UNKNOWN
            m.assigned = {t: set(ps) for t, ps in value.assigned_partitions.items()}
            m.pending_revocation = {
                t: set(ps) for t, ps in value.partitions_pending_revocation.items()
            }
