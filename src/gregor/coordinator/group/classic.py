"""A classic group (JoinGroup/SyncGroup protocol): members, generation, state.

Theory of operation. A group moves between five states, as in Kafka:

  Empty --join--> PreparingRebalance --all joined / timeout--> CompletingRebalance
  CompletingRebalance --leader's SyncGroup stored--> Stable
  Stable / CompletingRebalance --join, leave, expiry, metadata change--> PreparingRebalance
  any --group deleted or emptied of offsets--> Dead

In PreparingRebalance the coordinator holds every member's JoinGroup response (``join_token``)
until all known members rejoined or the rebalance timeout passed; members that did not rejoin
are dropped (static members stay). The new generation then starts: the leader receives every
member's metadata for the selected protocol and computes the assignment on the client side;
the others wait in SyncGroup (``sync_token``) until the leader's assignment has been written
to ``__consumer_offsets``. Protocol selection picks, among the protocols every member
supports, the one most members list first.

This module holds the data and the local rules (protocol selection, static-member
bookkeeping); the request handling and timers live in ``coordinator.group.classic_ops``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from enum import Enum

from gregor.coordinator.common.outbox import Token
from gregor.coordinator.group.consumer_protocol import CONSUMER_PROTOCOL_TYPE, subscribed_topics
from gregor.coordinator.group.offsets import OffsetStore
from gregor.protocol.exceptions import ProtocolError
from gregor.protocol.messages.join_group import JoinGroupResponse
from gregor.protocol.messages.sync_group import SyncGroupResponse


class ClassicState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass
class ClassicMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    join_token: Token[JoinGroupResponse] | None = None  # a pending JoinGroup response
    join_version: int = 0
    sync_token: Token[SyncGroupResponse] | None = None  # a pending SyncGroup response
    sync_version: int = 0
    is_new: bool = False
    heartbeat_deadline: int = 0

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def awaiting_join(self) -> bool:
        return self.join_token is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_token is not None

    def metadata(self, protocol: str | None) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return [(n, bytes(m)) for n, m in protocols] == [(n, bytes(m)) for n, m in self.protocols]


@dataclass
class ClassicGroup:
    group_id: str
    state: ClassicState = ClassicState.EMPTY
    state_timestamp: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    generation_id: int = 0
    leader_id: str | None = None
    members: dict[str, ClassicMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    pending_members: set[str] = field(default_factory=set)  # got MEMBER_ID_REQUIRED
    pending_sync: set[str] = field(default_factory=set)  # joined, SyncGroup not yet seen
    new_member_added: bool = False
    # initial-delay bookkeeping while an empty group fills (group.initial.rebalance.delay.ms)
    initial_delay_remaining_ms: int = -1
    offsets: OffsetStore = field(default_factory=OffsetStore)

    TYPE = "classic"

    # --- state ---

    def is_(self, state: ClassicState) -> bool:
        return self.state is state

    def transition(self, state: ClassicState, now: int) -> None:
        self.state = state
        self.state_timestamp = now

    @property
    def is_empty(self) -> bool:
        return not self.members

    # --- members ---

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def add(self, member: ClassicMember) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member_id: str) -> ClassicMember | None:
        member = self.members.pop(member_id, None)
        self.pending_sync.discard(member_id)
        if member is None:
            return None
        if member.group_instance_id is not None:
            if self.static_members.get(member.group_instance_id) == member_id:
                del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def static_member_id(self, instance_id: str | None) -> str | None:
        if instance_id is None:
            return None
        return self.static_members.get(instance_id)

    def is_static_member_fenced(self, member_id: str, instance_id: str | None) -> bool:
        """A request naming ``instance_id`` from a member id that no longer holds it."""
        if instance_id is None:
            return False
        current = self.static_members.get(instance_id)
        return current is not None and current != member_id

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> ClassicMember:
        member = self.members.pop(old_id)
        member.member_id = new_id
        self.members[new_id] = member
        self.static_members[instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        return member

    def awaiting_join_count(self) -> int:
        return sum(1 for m in self.members.values() if m.awaiting_join)

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.awaiting_join_count() and not self.pending_members

    def not_yet_rejoined(self) -> list[ClassicMember]:
        return [m for m in self.members.values() if not m.awaiting_join]

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else pick a member that did; False if none did."""
        if self.leader_id is not None:
            leader = self.members.get(self.leader_id)
            if leader is not None and leader.awaiting_join:
                return True
        for m in self.members.values():
            if m.awaiting_join:
                self.leader_id = m.member_id
                return True
        return False

    # --- protocols ---

    def candidate_protocols(self) -> list[str]:
        """Protocols every member supports, in the first member's order of preference."""
        members = list(self.members.values())
        if not members:
            return []
        common = set(n for n, _ in members[0].protocols)
        for m in members[1:]:
            common &= {n for n, _ in m.protocols}
        return [n for n, _ in members[0].protocols if n in common]

    def supports_protocols(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        """Could a member with these protocols join? (type matches, a protocol in common)"""
        if not self.members:
            return bool(protocol_type) and bool(protocols)
        if protocol_type != self.protocol_type:
            return False
        names = {n for n, _ in protocols}
        common = set(names)
        for m in self.members.values():
            common &= {n for n, _ in m.protocols}
        return bool(common)

    def select_protocol(self) -> str:
        candidates = self.candidate_protocols()
        if not candidates:
            raise ValueError("no protocol supported by every member")
        votes: Counter[str] = Counter()
        for m in self.members.values():
            for name, _ in m.protocols:
                if name in candidates:
                    votes[name] += 1
                    break
        best = max(votes.values())
        for name in candidates:  # ties go to the earlier preference
            if votes[name] == best:
                return name
        return candidates[0]  # pragma: no cover

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members of a "consumer" group subscribe to; None if unknown."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None:
            return None if self.members else set()
        topics: set[str] = set()
        for m in self.members.values():
            try:
                topics.update(subscribed_topics(m.metadata(self.protocol_name)))
            except ProtocolError:
                return None
        return topics

    def describe_state(self) -> str:
        return self.state.value
