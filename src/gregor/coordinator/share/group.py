"""Share groups' membership (KIP-932): who is in a share group and which partitions each
member fetches from.

Theory of operation. A share group lives on its group coordinator (the broker leading its
``__consumer_offsets`` partition) and only in memory there: members join with epoch 0,
heartbeat with the epoch they were given, and leave with epoch -1; a member whose heartbeats
stop for the session timeout is removed. Membership is not exclusive as in a consumer group:
records are handed out by the share-partition leaders one at a time under a lock, so a
member may fetch from a partition others fetch from too, and no revocation handshake is
needed. After a coordinator move, members are unknown to the new coordinator
(UNKNOWN_MEMBER_ID) and join again.

The target assignment is recomputed from the members' subscriptions and the topics' partition
counts on every heartbeat; when it changes, the group epoch goes up, and each member gets its
new partitions with the new epoch in its next heartbeat answer (an answer carries an
assignment only when that member's assignment or epoch changed). The assignor is Kafka's
``simple`` one in spirit: with at least as many partitions as members, each partition goes to
one member (round robin over the sorted members); with more members than partitions, the
members share them (member i gets partition i mod P).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from gregor.protocol.errors import ErrorCode

Assignment = dict[uuid.UUID, list[int]]  # topic id -> partitions


#: The metadata the assignor needs: a topic name to (topic id, partition count), None if absent.
TopicsView = Callable[[str], tuple[uuid.UUID, int] | None]


@dataclass(slots=True)
class ShareMember:
    member_id: str
    member_epoch: int
    client_id: str
    client_host: str
    rack_id: str | None
    subscribed: list[str]
    deadline_ms: int
    assignment: Assignment = field(default_factory=dict)


@dataclass(slots=True)
class ShareGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)

    @property
    def state(self) -> str:
        return "Stable" if self.members else "Empty"


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    error: int
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = -1
    assignment: Assignment | None = None


def assign(
    members: list[str], subscriptions: dict[str, list[str]], topics: TopicsView
) -> dict[str, Assignment]:
    """Each member's partitions (see the module comment)."""
    out: dict[str, Assignment] = {m: {} for m in members}
    names = sorted({t for m in members for t in subscriptions.get(m, [])})
    for name in names:
        found = topics(name)
        if found is None:
            continue
        topic_id, count = found
        subscribers = [m for m in members if name in subscriptions.get(m, [])]
        if not subscribers or count <= 0:
            continue
        if len(subscribers) <= count:
            for p in range(count):
                out[subscribers[p % len(subscribers)]].setdefault(topic_id, []).append(p)
        else:
            for i, m in enumerate(subscribers):
                out[m].setdefault(topic_id, []).append(i % count)
    return out


class ShareGroups:
    def __init__(
        self,
        topics: TopicsView,
        session_timeout_ms: int,
        heartbeat_interval_ms: int,
        max_size: int,
        clock: Callable[[], int],
    ) -> None:
        self.topics = topics
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.max_size = max_size
        self.clock = clock
        self.groups: dict[str, ShareGroup] = {}

    def heartbeat(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        rack_id: str | None,
        subscribed: list[str] | None,
        client_id: str,
        client_host: str,
        version: int,
    ) -> tuple[HeartbeatResult, list[tuple[str, str]]]:
        """One ShareGroupHeartbeat; the result and the (group, member) pairs whose sessions ran
        out (their records are to be released). A member that leaves with epoch -1 is not in
        that list: it closes its share sessions itself, and what it still holds comes back when
        the session closes (or its connection does, or the locks expire)."""
        now = self.clock()
        gone = self.expire(now)
        if not group_id:
            return HeartbeatResult(ErrorCode.INVALID_REQUEST, "group id must not be empty"), gone
        group = self.groups.get(group_id)
        if member_epoch == -1:  # leave
            if group is None or member_id not in group.members:
                return HeartbeatResult(ErrorCode.UNKNOWN_MEMBER_ID, None, member_id, -1), gone
            del group.members[member_id]
            self._reassign(group)
            return HeartbeatResult(0, None, member_id, -1), gone
        if member_epoch == 0:  # join
            if version >= 1 and not member_id:
                return HeartbeatResult(
                    ErrorCode.INVALID_REQUEST, "member id must be set (ShareGroupHeartbeat v1)"
                ), gone
            if not subscribed:
                return HeartbeatResult(
                    ErrorCode.INVALID_REQUEST, "a joining member must subscribe to topics"
                ), gone
            if group is None:
                group = self.groups[group_id] = ShareGroup(group_id)
            member_id = member_id or str(uuid.uuid4())
            if member_id not in group.members and len(group.members) >= self.max_size:
                return HeartbeatResult(
                    ErrorCode.GROUP_MAX_SIZE_REACHED, f"the share group has {self.max_size} members"
                ), gone
            group.members[member_id] = ShareMember(
                member_id,
                0,
                client_id,
                client_host,
                rack_id,
                list(subscribed),
                now + self.session_timeout_ms,
            )
        else:
            if group is None or member_id not in group.members:
                return HeartbeatResult(
                    ErrorCode.UNKNOWN_MEMBER_ID, "the member is not in the share group"
                ), gone
            m = group.members[member_id]
            if member_epoch != m.member_epoch:
                return HeartbeatResult(
                    ErrorCode.FENCED_MEMBER_EPOCH, "the member epoch is not the current one"
                ), gone
            if subscribed is not None:
                m.subscribed = list(subscribed)
            if rack_id is not None:
                m.rack_id = rack_id
        member = group.members[member_id]
        member.deadline_ms = now + self.session_timeout_ms
        self._reassign(group)
        changed = member.member_epoch != group.assignment_epoch or member_epoch == 0
        member.member_epoch = group.assignment_epoch
        if changed:
            member.assignment = group.target.get(member_id, {})
        return HeartbeatResult(
            0, None, member_id, member.member_epoch, member.assignment if changed else None
        ), gone

    def _reassign(self, group: ShareGroup) -> None:
        members = sorted(group.members)
        target = assign(members, {m: group.members[m].subscribed for m in members}, self.topics)
        if target != group.target or group.group_epoch == 0:
            group.group_epoch += 1
            group.assignment_epoch = group.group_epoch
            group.target = target

    def expire(self, now: int) -> list[tuple[str, str]]:
        gone: list[tuple[str, str]] = []
        for group in self.groups.values():
            late = [m for m, member in group.members.items() if member.deadline_ms <= now]
            for m in late:
                del group.members[m]
                gone.append((group.group_id, m))
            if late:
                self._reassign(group)
        return gone

    def listing(self) -> Iterable[ShareGroup]:
        return list(self.groups.values())
