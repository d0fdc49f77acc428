"""The records that persist a KIP-848 consumer group, and its target assignment.

A group is stored as records keyed by group (its epoch, the epoch of its target assignment)
and by member (its metadata, its target and its current assignment); a member that leaves is
tombstoned under all three member keys. The target assignment is recomputed when the group
epoch is ahead of it: the server assignor most members ask for runs over the subscriptions,
and only the members whose target changed get a new record.
"""

from __future__ import annotations

import uuid
from collections import Counter

from gregor.coordinator.group.assignors import MemberSpec, assign
from gregor.coordinator.group.consumer_group import ConsumerGroup, ConsumerMember, copy_assignment
from gregor.coordinator.group.core import GroupCore
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
    Key,
    TargetAssignmentMemberValue,
    TargetAssignmentMetadataValue,
    Value,
)

Records = list[tuple[Key, Value | None]]


def member_metadata_record(group: ConsumerGroup, m: ConsumerMember) -> tuple[Key, Value]:
    return (
        ConsumerMemberKey(CONSUMER_GROUP_MEMBER_METADATA, group.group_id, m.member_id),
        ConsumerGroupMemberMetadataValue(
            instance_id=m.instance_id,
            rack_id=m.rack_id,
            client_id=m.client_id,
            client_host=m.client_host,
            subscribed_topic_names=list(m.subscribed_topic_names),
            subscribed_topic_regex=m.subscribed_topic_regex,
            rebalance_timeout_ms=m.rebalance_timeout_ms,
            server_assignor=m.server_assignor,
        ),
    )


def current_assignment_record(group: ConsumerGroup, m: ConsumerMember) -> tuple[Key, Value]:
    return (
        ConsumerMemberKey(CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, group.group_id, m.member_id),
        CurrentMemberAssignmentValue(
            member_epoch=m.member_epoch,
            previous_member_epoch=m.previous_member_epoch,
            state=int(m.state),
            assigned_partitions={t: sorted(ps) for t, ps in m.assigned.items() if ps},
            partitions_pending_revocation={
                t: sorted(ps) for t, ps in m.pending_revocation.items() if ps
            },
        ),
    )


def epoch_record(group: ConsumerGroup) -> tuple[Key, Value]:
    return (
        ConsumerGroupKey(CONSUMER_GROUP_METADATA, group.group_id),
        ConsumerGroupMetadataValue(group.group_epoch),
    )


def member_tombstones(group: ConsumerGroup, member_id: str) -> Records:
    gid = group.group_id
    return [
        (ConsumerMemberKey(CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, gid, member_id), None),
        (ConsumerMemberKey(CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, gid, member_id), None),
        (ConsumerMemberKey(CONSUMER_GROUP_MEMBER_METADATA, gid, member_id), None),
    ]


def choose_assignor(group: ConsumerGroup, configured: tuple[str, ...]) -> str:
    """The server assignor most members ask for (ties by name), else the first configured."""
    votes = Counter(m.server_assignor for m in group.members.values() if m.server_assignor)
    if votes:
        best = max(votes.values())
        return sorted(n for n, c in votes.items() if c == best)[0]
    return configured[0] if configured else "uniform"


def compute_target(
    core: GroupCore, group: ConsumerGroup, fingerprint: dict[str, tuple[uuid.UUID, int]]
) -> Records:
    """Run the group's assignor over its members' subscriptions: the new target assignment
    (kept in ``group``) and the records that persist what changed."""
    partitions = {tid: count for tid, count in fingerprint.values()}
    specs = {
        mid: MemberSpec(
            mid,
            {fingerprint[n][0] for n in core.member_topics(m, group) if n in fingerprint},
            copy_assignment(group.target.get(mid, {})),
        )
        for mid, m in group.members.items()
    }
    group.assignor_name = choose_assignor(group, core.config.consumer_assignors)
    new = assign(group.assignor_name, specs, partitions)
    records: Records = []
    gid = group.group_id
    for mid in sorted(group.members):
        target = copy_assignment(new.get(mid, {}))
        if target != copy_assignment(group.target.get(mid, {})) or mid not in group.target:
            records.append(
                (
                    ConsumerMemberKey(CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, gid, mid),
                    TargetAssignmentMemberValue({t: sorted(ps) for t, ps in target.items()}),
                )
            )
        group.target[mid] = target
    group.assignment_epoch = group.group_epoch
    records.append(
        (
            ConsumerGroupKey(CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, gid),
            TargetAssignmentMetadataValue(group.assignment_epoch),
        )
    )
    return records
