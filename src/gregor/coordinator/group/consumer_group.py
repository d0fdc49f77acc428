"""A KIP-848 consumer group: server-side assignment, member epochs, incremental reconciliation.

Theory of operation. Three epochs drive the group:

* the **group epoch** grows whenever the inputs of the assignment change: a member joins or
  leaves, a subscription changes, a subscribed topic gains partitions or appears;
* the **assignment epoch** is the group epoch the current target assignment was computed for;
  when the group epoch is ahead, the next heartbeat recomputes the target with the group's
  server assignor (``uniform`` or ``range``);
* each member's **member epoch** says which target it has converged to.

A member moves toward its target without ever sharing a partition with another member
(Kafka's current-assignment builder): partitions it owns but must give up are first
*revoked* - the member stays at its epoch in UNREVOKED_PARTITIONS and is sent its assignment
without them and without any new partition, and only when a heartbeat no longer lists them
as owned does it advance (and get its new partitions). New partitions are handed out only
once no other member owns them (UNRELEASED_PARTITIONS until then). ``owners`` maps every owned or revoking partition to its member so this check is one
lookup.

This module holds the data and the reconciliation rule; heartbeat handling, timers and
persistence live in ``coordinator.group.consumer_ops`` and ``consumer_records``.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from enum import IntEnum

from gregor.coordinator.group.assignors import Assignment
from gregor.coordinator.group.offsets import OffsetStore

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2

TopicPartition = tuple[uuid.UUID, int]


class MemberState(IntEnum):
    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


def copy_assignment(a: Assignment) -> Assignment:
    return {t: set(ps) for t, ps in a.items() if ps}


def same_assignment(a: Assignment, b: Assignment) -> bool:
    return copy_assignment(a) == copy_assignment(b)


def iter_partitions(a: Assignment) -> list[TopicPartition]:
    return [(t, p) for t, ps in a.items() for p in ps]


@dataclass
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: list[str] = field(default_factory=list)
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    # The member epoch at which each partition it holds (assigned or pending revocation) was
    # given to it (KIP-1251): an offset commit at an older member epoch is accepted only for
    # partitions it has held since that epoch. Not persisted: after a reload every partition
    # counts from the member's epoch, as Kafka does for records written without them.
    assignment_epochs: dict[TopicPartition, int] = field(default_factory=dict)


@dataclass
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)
    owners: dict[TopicPartition, str] = field(default_factory=dict)
    # What the last target was computed from: subscribed topic -> (topic id, partitions).
    topic_fingerprint: dict[str, tuple[uuid.UUID, int]] | None = None
    # Subscription regexes the group has resolved (Kafka resolves a regex new to the group
    # asynchronously: until then its matches are not part of the assignment).
    resolved_regexes: set[str] = field(default_factory=set)
    assignor_name: str = "uniform"
    offsets: OffsetStore = field(default_factory=OffsetStore)
    state_timestamp: int = -1

    TYPE = "consumer"

    @property
    def is_empty(self) -> bool:
        return not self.members

    def describe_state(self) -> str:
        if not self.members:
            return "Empty"
        if self.group_epoch != self.assignment_epoch:
            return "Assigning"
        for m in self.members.values():
            if m.member_epoch != self.assignment_epoch or m.state != MemberState.STABLE:
                return "Reconciling"
        return "Stable"

    # --- ownership ---

    def release(self, member: ConsumerMember) -> None:
        for tp in iter_partitions(member.assigned) + iter_partitions(member.pending_revocation):
            if self.owners.get(tp) == member.member_id:
                del self.owners[tp]

    def claim(self, member: ConsumerMember) -> None:
        held = iter_partitions(member.assigned) + iter_partitions(member.pending_revocation)
        for tp in held:
            self.owners[tp] = member.member_id
        # A partition new to the member is its own from the member's (new) epoch on.
        since = max(member.member_epoch, 0)
        member.assignment_epochs = {tp: member.assignment_epochs.get(tp, since) for tp in held}

    def set_assignment(
        self, member: ConsumerMember, assigned: Assignment, pending: Assignment
    ) -> None:
        self.release(member)
        member.assigned = copy_assignment(assigned)
        member.pending_revocation = copy_assignment(pending)
        self.claim(member)

    def is_free_for(self, tp: TopicPartition, member_id: str) -> bool:
        owner = self.owners.get(tp)
        return owner is None or owner == member_id

    def add_member(self, member: ConsumerMember) -> None:
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        self.claim(member)

    def remove_member(self, member_id: str) -> ConsumerMember | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        self.release(member)
        if (
            member.instance_id is not None
            and self.static_members.get(member.instance_id) == member_id
        ):
            del self.static_members[member.instance_id]
        self.target.pop(member_id, None)
        return member

    def rename_member(self, old_id: str, new_id: str) -> ConsumerMember:
        member = self.members.pop(old_id)
        self.release(member)
        member.member_id = new_id
        self.members[new_id] = member
        self.claim(member)
        if member.instance_id is not None:
            self.static_members[member.instance_id] = new_id
        if old_id in self.target:
            self.target[new_id] = self.target.pop(old_id)
        return member

    # --- reconciliation ---

    def reconcile(self, member: ConsumerMember, owned: Assignment | None) -> bool:
        """Advance ``member`` toward its target; True if its assignment or epochs changed.

        ``owned`` is what the member reported owning in this heartbeat (None: not sent).
        """
        before = (
            member.member_epoch,
            member.previous_member_epoch,
            member.state,
            copy_assignment(member.assigned),
            copy_assignment(member.pending_revocation),
        )
        if member.state == MemberState.STABLE:
            if member.member_epoch != self.assignment_epoch:
                self._next(member, owned)
        elif member.state == MemberState.UNREVOKED_PARTITIONS:
            if not self._owns_any(owned, member.pending_revocation):
                self._next(member, owned)
        elif member.state == MemberState.UNRELEASED_PARTITIONS:
            self._next(member, owned)
        after = (
            member.member_epoch,
            member.previous_member_epoch,
            member.state,
            copy_assignment(member.assigned),
            copy_assignment(member.pending_revocation),
        )
        return before != after

    @staticmethod
    def _owns_any(owned: Assignment | None, revoking: Assignment) -> bool:
        if owned is None:
            return True
        for t, ps in revoking.items():
            if owned.get(t, set()) & ps:
                return True
        return False

    def _set_epoch(self, member: ConsumerMember, epoch: int) -> None:
        # As Kafka's member builder does: the epoch the member had becomes its previous one
        # whenever reconciliation moves it, even to the same epoch.
        member.previous_member_epoch = member.member_epoch
        member.member_epoch = epoch

    def _next(self, member: ConsumerMember, owned: Assignment | None) -> None:
        """One reconciliation step toward the member's target (Kafka's
        CurrentAssignmentBuilder.computeNextAssignment).

        Partitions the member must give up come first: while it still owns any of them it
        stays at its epoch in UNREVOKED_PARTITIONS and is sent only what it keeps - no new
        partition rides along, since a client that unsubscribes or is fenced before
        confirming would otherwise take up partitions the group already counts as free.
        Once nothing is left to revoke the member moves to the assignment epoch and gets the
        new partitions no other member still owns (UNRELEASED_PARTITIONS for the rest).
        """
        target = self.target.get(member.member_id, {})
        kept: Assignment = {}
        revoking: Assignment = {}
        new: Assignment = {}
        unreleased = False
        for t in set(target) | set(member.assigned):
            want = target.get(t, set())
            have = member.assigned.get(t, set())
            if have & want:
                kept[t] = have & want
            if have - want:
                revoking[t] = have - want
            free = {p for p in want - have if self.is_free_for((t, p), member.member_id)}
            if len(free) < len(want - have):
                unreleased = True
            if free:
                new[t] = free
        if revoking and self._owns_any(owned, revoking):
            # Give up partitions first; keep the epoch until the member confirms.
            member.state = MemberState.UNREVOKED_PARTITIONS
            self._set_epoch(member, member.member_epoch)
            self.set_assignment(member, kept, revoking)
            return
        assigned = copy_assignment(kept)
        for t, ps in new.items():
            assigned[t] = assigned.get(t, set()) | ps
        self._set_epoch(member, self.assignment_epoch)
        member.state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
        self.set_assignment(member, assigned, {})
