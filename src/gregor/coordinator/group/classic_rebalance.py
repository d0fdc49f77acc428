"""The classic group protocol's rebalance machinery, under the request handlers of
``coordinator.group.classic_ops``: response builders, preparing and completing a rebalance (the
join timer, the initial rebalance delay, pending SyncGroup expiry), handing out and storing
assignments, member removal, and session (heartbeat) expiry.

The rules follow Kafka's classic group coordinator; see ``coordinator.group.classic`` for the state
diagram.
"""

from __future__ import annotations

import logging

from gregor.coordinator.common.events import log_event
from gregor.coordinator.common.outbox import WriteCallback
from gregor.coordinator.group.classic import ClassicGroup, ClassicMember, ClassicState
from gregor.coordinator.group.core import GroupCore
from gregor.coordinator.group.records import GroupMetadataKey, GroupMetadataValue, MemberMetadata
from gregor.protocol.errors import ErrorCode
from gregor.protocol.messages.join_group import JoinGroupResponse
from gregor.protocol.messages.sync_group import SyncGroupResponse

S = ClassicState
log = logging.getLogger("gregor.coordinator")


class ClassicRebalance:
    """The rebalance machinery of the classic groups (``ClassicGroups`` adds the requests)."""

    def __init__(self, core: GroupCore) -> None:
        self.core = core

    # --- response builders ---

    @staticmethod
    def join_response(
        version: int,
        error: int = 0,
        member_id: str = "",
        generation_id: int = -1,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
        leader: str = "",
        members: list[JoinGroupResponse.Members] | None = None,
        skip_assignment: bool = False,
    ) -> JoinGroupResponse:
        if version < 7 and protocol_name is None:
            protocol_name = ""
        return JoinGroupResponse(
            throttle_time_ms=0,
            error_code=error,
            generation_id=generation_id,
            protocol_type=protocol_type if version >= 7 else None,
            protocol_name=protocol_name,
            leader=leader,
            skip_assignment=skip_assignment if version >= 9 else False,
            member_id=member_id,
            members=members or [],
        )

    @staticmethod
    def sync_response(
        error: int = 0,
        assignment: bytes = b"",
        protocol_type: str | None = None,
        protocol_name: str | None = None,
    ) -> SyncGroupResponse:
        return SyncGroupResponse(
            throttle_time_ms=0,
            error_code=error,
            protocol_type=protocol_type,
            protocol_name=protocol_name,
            assignment=assignment,
        )

    def _member_list(self, group: ClassicGroup) -> list[JoinGroupResponse.Members]:
        return [
            JoinGroupResponse.Members(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                metadata=m.metadata(group.protocol_name),
            )
            for m in group.members.values()
        ]

    def _current_join_response(
        self, group: ClassicGroup, member: ClassicMember, version: int, leader_view: bool
    ) -> JoinGroupResponse:
        return self.join_response(
            version,
            member_id=member.member_id,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader=group.leader_id or "",
            members=self._member_list(group) if leader_view else [],
        )

    # --- rebalance ---

    def _maybe_prepare_rebalance(self, group: ClassicGroup) -> None:
        if group.state in (S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY):
            self._prepare_rebalance(group)
        elif group.is_(S.PREPARING_REBALANCE):
            self._try_complete_join(group)

    def _prepare_rebalance(self, group: ClassicGroup) -> None:
        if group.is_(S.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, ErrorCode.REBALANCE_IN_PROGRESS)
        self.core.timers.cancel(("sync", group.group_id))
        group.pending_sync.clear()
        now = self.core.clock()
        initial = group.is_(S.EMPTY)
        group.transition(S.PREPARING_REBALANCE, now)
        gid = group.group_id
        log_event(
            log,
            "group.rebalance",
            group=gid,
            generation=group.generation_id,
            members=len(group.members),
        )
        if initial:
            delay = self.core.config.initial_rebalance_delay_ms
            group.initial_delay_remaining_ms = max(group.rebalance_timeout_ms() - delay, 0)
            group.new_member_added = False
            self.core.timers.schedule(
                ("join", gid), now + delay, lambda: self._on_initial_delay(group, delay)
            )
        else:
            group.initial_delay_remaining_ms = -1
            self.core.timers.schedule(
                ("join", gid),
                now + group.rebalance_timeout_ms(),
                lambda: self._complete_join(group),
            )
            self._try_complete_join(group)

    def _on_initial_delay(self, group: ClassicGroup, last_delay: int) -> None:
        remaining = group.initial_delay_remaining_ms
        if group.new_member_added and remaining > 0:
            group.new_member_added = False
            delay = min(self.core.config.initial_rebalance_delay_ms, remaining)
            group.initial_delay_remaining_ms = max(remaining - delay, 0)
            self.core.timers.schedule(
                ("join", group.group_id),
                self.core.clock() + delay,
                lambda: self._on_initial_delay(group, delay),
            )
        else:
            self._complete_join(group)

    def _try_complete_join(self, group: ClassicGroup) -> None:
        if (
            group.is_(S.PREPARING_REBALANCE)
            and group.initial_delay_remaining_ms < 0
            and group.has_all_members_joined()
        ):
            self._complete_join(group)

    def _complete_join(self, group: ClassicGroup) -> None:
        gid = group.group_id
        if self.core.groups.get(gid) is not group or not group.is_(S.PREPARING_REBALANCE):
            return
        self.core.timers.cancel(("join", gid))
        group.initial_delay_remaining_ms = -1
        for m in group.not_yet_rejoined():
            if not m.is_static:
                self._remove_member(group, m.member_id, "not rejoined")
        now = self.core.clock()
        if group.members and not group.maybe_elect_new_joined_leader():
            # Nobody rejoined: wait another round for session expiry to clear them out.
            self.core.timers.schedule(
                ("join", gid),
                now + group.rebalance_timeout_ms(),
                lambda: self._complete_join(group),
            )
            return
        group.generation_id += 1
        if group.members:
            group.protocol_name = group.select_protocol()
            log_event(
                log,
                "group.generation",
                group=gid,
                generation=group.generation_id,
                protocol=group.protocol_name,
                members=len(group.members),
                leader=group.leader_id,
            )
            group.transition(S.COMPLETING_REBALANCE, now)
            group.pending_sync = set(group.members)
            generation = group.generation_id
            self.core.timers.schedule(
                ("sync", gid),
                now + group.rebalance_timeout_ms(),
                lambda: self._expire_pending_sync(group, generation),
            )
            for m in group.members.values():
                if m.join_token is not None:
                    self.core.reply(
                        m.join_token,
                        self._current_join_response(
                            group, m, m.join_version, m.member_id == group.leader_id
                        ),
                    )
                    m.join_token = None
                m.is_new = False
                self.schedule_heartbeat_expiry(group, m, now + m.session_timeout_ms)
        else:
            group.protocol_name = None
            group.transition(S.EMPTY, now)
            log_event(log, "group.generation", group=gid, generation=group.generation_id, members=0)
            self.store_group(group, None)

    def _expire_pending_sync(self, group: ClassicGroup, generation: int) -> None:
        if self.core.groups.get(group.group_id) is not group or generation != group.generation_id:
            return
        if group.state not in (S.COMPLETING_REBALANCE, S.STABLE) or not group.pending_sync:
            return
        for mid in list(group.pending_sync):
            self._remove_member(group, mid, "no SyncGroup")
        group.pending_sync.clear()
        self._maybe_prepare_rebalance(group)

    def _reset_and_propagate_assignment_error(self, group: ClassicGroup, error: int) -> None:
        for m in group.members.values():
            m.assignment = b""
            if m.sync_token is not None:
                self.core.reply(m.sync_token, self.sync_response(error))
                m.sync_token = None

    def _set_and_propagate_assignment(
        self, group: ClassicGroup, assignment: dict[str, bytes]
    ) -> None:
        now = self.core.clock()
        for m in group.members.values():
            m.assignment = assignment.get(m.member_id, b"")
            if m.sync_token is not None:
                self.core.reply(
                    m.sync_token,
                    self.sync_response(0, m.assignment, group.protocol_type, group.protocol_name),
                )
                m.sync_token = None
                self.schedule_heartbeat_expiry(group, m, now + m.session_timeout_ms)

    def group_metadata_value(
        self, group: ClassicGroup, assignment: dict[str, bytes] | None = None
    ) -> GroupMetadataValue:
        return GroupMetadataValue(
            protocol_type=group.protocol_type or "",
            generation=group.generation_id,
            protocol=group.protocol_name,
            leader=group.leader_id if group.members else None,
            current_state_timestamp=group.state_timestamp,
            members=[
                MemberMetadata(
                    member_id=m.member_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout=m.rebalance_timeout_ms,
                    session_timeout=m.session_timeout_ms,
                    subscription=m.metadata(group.protocol_name),
                    assignment=(assignment or {}).get(m.member_id, m.assignment),
                    group_instance_id=m.group_instance_id,
                )
                for m in group.members.values()
            ],
        )

    def store_group(
        self,
        group: ClassicGroup,
        on_done: WriteCallback | None,
        assignment: dict[str, bytes] | None = None,
    ) -> None:
        value = self.group_metadata_value(group, assignment)
        self.core.write(group.group_id, [(GroupMetadataKey(group.group_id), value)], on_done)

    # --- member removal and expiry ---

    def _remove_member(
        self, group: ClassicGroup, member_id: str, reason: str
    ) -> ClassicMember | None:
        member = group.remove(member_id)
        self.core.timers.cancel(("hb", group.group_id, member_id))
        if member is not None:
            log_event(
                log, "group.member_removed", group=group.group_id, member=member_id, reason=reason
            )
            if member.join_token is not None:
                self.core.reply(
                    member.join_token,
                    self.join_response(
                        member.join_version, ErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id
                    ),
                )
                member.join_token = None
            if member.sync_token is not None:
                self.core.reply(member.sync_token, self.sync_response(ErrorCode.UNKNOWN_MEMBER_ID))
                member.sync_token = None
        return member

    def _remove_member_and_update_group(
        self, group: ClassicGroup, member_id: str, reason: str
    ) -> None:
        self._remove_member(group, member_id, reason)
        if group.state in (S.STABLE, S.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group)
        elif group.is_(S.PREPARING_REBALANCE):
            self._try_complete_join(group)

    def _expire_pending_member(self, group_id: str, member_id: str) -> None:
        group = self.core.groups.get(group_id)
        if isinstance(group, ClassicGroup) and member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self._try_complete_join(group)

    def schedule_heartbeat_expiry(
        self, group: ClassicGroup, member: ClassicMember, deadline: int
    ) -> None:
        member.heartbeat_deadline = deadline
        gid, mid = group.group_id, member.member_id
        self.core.timers.schedule(
            ("hb", gid, mid), deadline, lambda: self._on_heartbeat_expired(gid, mid)
        )

    def _on_heartbeat_expired(self, group_id: str, member_id: str) -> None:
        group = self.core.groups.get(group_id)
        if not isinstance(group, ClassicGroup):
            return
        member = group.members.get(member_id)
        if member is None:
            return
        if not member.is_new and (member.awaiting_join or member.awaiting_sync):
            # Members waiting on a rebalance owe no heartbeats.
            self.schedule_heartbeat_expiry(
                group, member, self.core.clock() + member.session_timeout_ms
            )
            return
        self._remove_member_and_update_group(
            group, member_id, "new member join timeout" if member.is_new else "session timeout"
        )
