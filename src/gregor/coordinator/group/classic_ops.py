"""Classic group protocol requests: JoinGroup, SyncGroup, Heartbeat, LeaveGroup.

The timers behind them (session expiry, join completion, the initial rebalance delay, pending
SyncGroup expiry), the rebalance itself and the response builders are in
``coordinator.group.classic_rebalance``, which ``ClassicGroups`` extends (one manager, its
requests here and its rebalance machinery there).

The rules follow Kafka's classic group coordinator; see ``coordinator.group.classic`` for the
state diagram. Responses are built for the request's version: MEMBER_ID_REQUIRED only from
JoinGroup v4, nullable protocol names from v7, ``skip_assignment`` (KIP-814) from v9,
batched LeaveGroup from v3.
"""

from __future__ import annotations

import uuid

from gregor.coordinator.common.append_errors import GROUP_APPEND_ERRORS
from gregor.coordinator.common.outbox import Token
from gregor.coordinator.group.classic import ClassicGroup, ClassicMember, ClassicState
from gregor.coordinator.group.classic_rebalance import ClassicRebalance
from gregor.coordinator.group.consumer_group import ConsumerGroup
from gregor.coordinator.group.records import (
    CONSUMER_GROUP_METADATA,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA,
    ConsumerGroupKey,
)
from gregor.protocol.errors import ErrorCode
from gregor.protocol.messages.heartbeat import HeartbeatRequest, HeartbeatResponse
from gregor.protocol.messages.join_group import JoinGroupRequest, JoinGroupResponse
from gregor.protocol.messages.leave_group import LeaveGroupRequest, LeaveGroupResponse
from gregor.protocol.messages.sync_group import SyncGroupRequest, SyncGroupResponse

S = ClassicState


def _new_member_id(prefix: str | None) -> str:
    return f"{prefix or ''}-{uuid.uuid4()}"


class ClassicGroups(ClassicRebalance):
    # --- JoinGroup ---

    def join_group(
        self,
        token: Token[JoinGroupResponse],
        req: JoinGroupRequest,
        version: int,
        client_id: str | None = "",
        client_host: str = "",
    ) -> None:
        gid = req.group_id
        member_id = req.member_id or ""

        def fail(code: int, mid: str = member_id) -> None:
            self.core.reply(token, self.join_response(version, error=code, member_id=mid))

        if not gid:
            return fail(ErrorCode.INVALID_GROUP_ID)
        err = self.core.partition_error(gid)
        if err:
            return fail(err)
        cfg = self.core.config
        session = req.session_timeout_ms
        if not cfg.min_session_timeout_ms <= session <= cfg.max_session_timeout_ms:
            return fail(ErrorCode.INVALID_SESSION_TIMEOUT)
        rebalance = (
            req.rebalance_timeout_ms if version >= 1 and req.rebalance_timeout_ms >= 0 else session
        )
        instance_id = req.group_instance_id if version >= 5 else None
        protocols = [(p.name, bytes(p.metadata)) for p in req.protocols]
        group = self.core.groups.get(gid)
        unknown = member_id == ""
        if group is None:
            if not unknown:
                return fail(ErrorCode.UNKNOWN_MEMBER_ID)
            group = ClassicGroup(gid, state_timestamp=self.core.clock())
            self.core.groups[gid] = group
        elif isinstance(group, ConsumerGroup):
            if not group.is_empty:
                return fail(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
            group = self._convert_to_classic(group)
        if unknown and len(group.members) >= cfg.max_group_size:
            return fail(ErrorCode.GROUP_MAX_SIZE_REACHED)
        if not group.supports_protocols(req.protocol_type, protocols):
            return fail(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        args = (client_id or "", client_host, rebalance, session, req.protocol_type, protocols)
        if unknown:
            self._join_unknown(group, token, version, instance_id, *args)
        else:
            self._join_known(group, token, version, member_id, instance_id, *args)

    def _convert_to_classic(self, cg: ConsumerGroup) -> ClassicGroup:
        """An empty KIP-848 group becomes a classic group (its offsets stay)."""
        group = ClassicGroup(cg.group_id, state_timestamp=self.core.clock())
        group.offsets = cg.offsets
        self.core.groups[cg.group_id] = group
        self.core.write(
            cg.group_id,
            [
                (ConsumerGroupKey(CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, cg.group_id), None),
                (ConsumerGroupKey(CONSUMER_GROUP_METADATA, cg.group_id), None),
            ],
        )
        return group

    def _join_unknown(
        self,
        group: ClassicGroup,
        token: Token[JoinGroupResponse],
        version: int,
        instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance: int,
        session: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
    ) -> None:
        new_id = _new_member_id(instance_id if instance_id is not None else client_id)
        if instance_id is not None:
            old_id = group.static_member_id(instance_id)
            if old_id is not None:
                self._replace_static_member(
                    group,
                    token,
                    version,
                    instance_id,
                    old_id,
                    new_id,
                    rebalance,
                    session,
                    protocols,
                )
                return
            self._add_member_and_rebalance(
                group,
                token,
                version,
                new_id,
                instance_id,
                client_id,
                client_host,
                rebalance,
                session,
                protocol_type,
                protocols,
            )
        elif version >= 4:
            # KIP-394: hand out the id first; the member joins for real with it.
            group.pending_members.add(new_id)
            self.core.timers.schedule(
                ("hb", group.group_id, new_id),
                self.core.clock() + session,
                lambda: self._expire_pending_member(group.group_id, new_id),
            )
            self.core.reply(
                token, self.join_response(version, ErrorCode.MEMBER_ID_REQUIRED, member_id=new_id)
            )
        else:
            self._add_member_and_rebalance(
                group,
                token,
                version,
                new_id,
                None,
                client_id,
                client_host,
                rebalance,
                session,
                protocol_type,
                protocols,
            )

    def _join_known(
        self,
        group: ClassicGroup,
        token: Token[JoinGroupResponse],
        version: int,
        member_id: str,
        instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance: int,
        session: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
    ) -> None:
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self.core.timers.cancel(("hb", group.group_id, member_id))
            self._add_member_and_rebalance(
                group,
                token,
                version,
                member_id,
                instance_id,
                client_id,
                client_host,
                rebalance,
                session,
                protocol_type,
                protocols,
            )
            return
        if group.is_static_member_fenced(member_id, instance_id):
            self.core.reply(
                token,
                self.join_response(version, ErrorCode.FENCED_INSTANCE_ID, member_id=member_id),
            )
            return
        member = group.members.get(member_id)
        if member is None or group.is_(S.EMPTY) or group.is_(S.DEAD):
            self.core.reply(
                token, self.join_response(version, ErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id)
            )
            return
        if group.is_(S.PREPARING_REBALANCE):
            self._update_member_and_rebalance(
                group, member, token, version, rebalance, session, protocols
            )
        elif group.is_(S.COMPLETING_REBALANCE):
            if member.matches(protocols):
                # It did not get the join response: send the current generation again.
                self.core.reply(
                    token,
                    self._current_join_response(
                        group, member, version, member_id == group.leader_id
                    ),
                )
            else:
                self._update_member_and_rebalance(
                    group, member, token, version, rebalance, session, protocols
                )
        else:  # Stable
            if member_id == group.leader_id or not member.matches(protocols):
                self._update_member_and_rebalance(
                    group, member, token, version, rebalance, session, protocols
                )
            else:
                self.core.reply(token, self._current_join_response(group, member, version, False))

    def _add_member_and_rebalance(
        self,
        group: ClassicGroup,
        token: Token[JoinGroupResponse],
        version: int,
        member_id: str,
        instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance: int,
        session: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
    ) -> None:
        member = ClassicMember(
            member_id=member_id,
            group_instance_id=instance_id,
            client_id=client_id,
            client_host=client_host,
            rebalance_timeout_ms=rebalance,
            session_timeout_ms=session,
            protocol_type=protocol_type,
            protocols=protocols,
            join_token=token,
            join_version=version,
            is_new=True,
        )
        group.add(member)
        if group.is_(S.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        # A new member cannot heartbeat until its join completes; if the join never does,
        # drop it after the new-member timeout (it retries if still alive).
        self.schedule_heartbeat_expiry(
            group, member, self.core.clock() + self.core.config.new_member_join_timeout_ms
        )
        self._maybe_prepare_rebalance(group)

    def _update_member_and_rebalance(
        self,
        group: ClassicGroup,
        member: ClassicMember,
        token: Token[JoinGroupResponse],
        version: int,
        rebalance: int,
        session: int,
        protocols: list[tuple[str, bytes]],
    ) -> None:
        if member.join_token is not None and member.join_token is not token:
            self.core.reply(
                member.join_token,
                self.join_response(
                    member.join_version, ErrorCode.REBALANCE_IN_PROGRESS, member_id=member.member_id
                ),
            )
        member.protocols = protocols
        member.rebalance_timeout_ms = rebalance
        member.session_timeout_ms = session
        member.join_token = token
        member.join_version = version
        self._maybe_prepare_rebalance(group)

    def _replace_static_member(
        self,
        group: ClassicGroup,
        token: Token[JoinGroupResponse],
        version: int,
        instance_id: str,
        old_id: str,
        new_id: str,
        rebalance: int,
        session: int,
        protocols: list[tuple[str, bytes]],
    ) -> None:
        old = group.members[old_id]
        # A live old instance learns it was replaced.
        if old.join_token is not None:
            self.core.reply(
                old.join_token,
                self.join_response(
                    old.join_version, ErrorCode.FENCED_INSTANCE_ID, member_id=old_id
                ),
            )
            old.join_token = None
        if old.sync_token is not None:
            self.core.reply(old.sync_token, self.sync_response(ErrorCode.FENCED_INSTANCE_ID))
            old.sync_token = None
        self.core.timers.cancel(("hb", group.group_id, old_id))
        leader_before = group.leader_id
        member = group.replace_static_member(instance_id, old_id, new_id)
        old_protocols = member.protocols
        old_timeouts = (member.rebalance_timeout_ms, member.session_timeout_ms)
        member.protocols = protocols
        member.rebalance_timeout_ms = rebalance
        member.session_timeout_ms = session
        self.schedule_heartbeat_expiry(group, member, self.core.clock() + session)
        if group.is_(S.STABLE):
            if group.protocol_name == group.select_protocol():
                # Same protocol: persist the new member id, hand back the old assignment.
                generation = group.generation_id

                def done(code: int, _offset: int) -> None:
                    if code:
                        member.protocols = old_protocols
                        member.rebalance_timeout_ms, member.session_timeout_ms = old_timeouts
                        if group.members.get(new_id) is member:
                            group.replace_static_member(instance_id, new_id, old_id)
                            self.core.timers.cancel(("hb", group.group_id, new_id))
                            self.schedule_heartbeat_expiry(
                                group, member, self.core.clock() + member.session_timeout_ms
                            )
                        self.core.reply(
                            token,
                            self.join_response(
                                version, GROUP_APPEND_ERRORS(code), member_id=new_id
                            ),
                        )
                        return
                    skip = version >= 9 and group.leader_id == new_id
                    self.core.reply(
                        token,
                        self.join_response(
                            version,
                            member_id=new_id,
                            generation_id=generation,
                            protocol_type=group.protocol_type,
                            protocol_name=group.protocol_name,
                            leader=(group.leader_id if version >= 9 else leader_before) or "",
                            members=self._member_list(group) if skip else [],
                            skip_assignment=skip,
                        ),
                    )

                self.store_group(group, done)
            else:
                member.join_token, member.join_version = token, version
                self._maybe_prepare_rebalance(group)
        elif group.is_(S.COMPLETING_REBALANCE):
            member.join_token, member.join_version = token, version
            self._maybe_prepare_rebalance(group)
        else:  # PreparingRebalance: the member is now part of this rebalance
            member.join_token, member.join_version = token, version
            self._try_complete_join(group)

    # --- SyncGroup ---

    def sync_group(
        self, token: Token[SyncGroupResponse], req: SyncGroupRequest, version: int
    ) -> None:
        gid = req.group_id

        def fail(code: int) -> None:
            self.core.reply(token, self.sync_response(code))

        if not gid:
            return fail(ErrorCode.INVALID_GROUP_ID)
        err = self.core.partition_error(gid)
        if err:
            return fail(err)
        group = self.core.groups.get(gid)
        if not isinstance(group, ClassicGroup):
            return fail(ErrorCode.UNKNOWN_MEMBER_ID)
        member_id = req.member_id
        instance_id = req.group_instance_id if version >= 3 else None
        if group.is_(S.DEAD):
            return fail(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if group.is_static_member_fenced(member_id, instance_id):
            return fail(ErrorCode.FENCED_INSTANCE_ID)
        member = group.members.get(member_id)
        if member is None:
            return fail(ErrorCode.UNKNOWN_MEMBER_ID)
        if req.generation_id != group.generation_id:
            return fail(ErrorCode.ILLEGAL_GENERATION)
        if version >= 5:
            if req.protocol_type is not None and req.protocol_type != group.protocol_type:
                return fail(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
            if req.protocol_name is not None and req.protocol_name != group.protocol_name:
                return fail(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if group.is_(S.EMPTY):
            return fail(ErrorCode.UNKNOWN_MEMBER_ID)
        if group.is_(S.PREPARING_REBALANCE):
            return fail(ErrorCode.REBALANCE_IN_PROGRESS)
        pt, pn = (group.protocol_type, group.protocol_name) if version >= 5 else (None, None)
        if group.is_(S.STABLE):
            group.pending_sync.discard(member_id)
            self.core.reply(token, self.sync_response(0, member.assignment, pt, pn))
            self.schedule_heartbeat_expiry(
                group, member, self.core.clock() + member.session_timeout_ms
            )
            return
        # CompletingRebalance
        if member.sync_token is not None and member.sync_token is not token:
            self.core.reply(member.sync_token, self.sync_response(ErrorCode.REBALANCE_IN_PROGRESS))
        member.sync_token = token
        member.sync_version = version
        group.pending_sync.discard(member_id)
        if member_id != group.leader_id:
            return
        assignment = {a.member_id: bytes(a.assignment) for a in req.assignments}
        assignment = {mid: assignment.get(mid, b"") for mid in group.members}
        generation = group.generation_id

        def done(code: int, _offset: int) -> None:
            if self.core.groups.get(gid) is not group:
                return
            if not group.is_(S.COMPLETING_REBALANCE) or generation != group.generation_id:
                return
            if code:
                self._reset_and_propagate_assignment_error(group, GROUP_APPEND_ERRORS(code))
                self._maybe_prepare_rebalance(group)
                return
            group.transition(S.STABLE, self.core.clock())
            self._set_and_propagate_assignment(group, assignment)

        self.store_group(group, done, assignment)

    # --- Heartbeat ---

    def heartbeat(
        self, token: Token[HeartbeatResponse], req: HeartbeatRequest, version: int
    ) -> None:
        gid = req.group_id

        def answer(code: int) -> None:
            self.core.reply(token, HeartbeatResponse(throttle_time_ms=0, error_code=code))

        if not gid:
            return answer(ErrorCode.INVALID_GROUP_ID)
        err = self.core.partition_error(gid)
        if err:
            return answer(err)
        group = self.core.groups.get(gid)
        if not isinstance(group, ClassicGroup):
            return answer(ErrorCode.UNKNOWN_MEMBER_ID)
        instance_id = req.group_instance_id if version >= 3 else None
        if group.is_(S.DEAD):
            return answer(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if group.is_static_member_fenced(req.member_id, instance_id):
            return answer(ErrorCode.FENCED_INSTANCE_ID)
        member = group.members.get(req.member_id)
        if member is None:
            return answer(ErrorCode.UNKNOWN_MEMBER_ID)
        if req.generation_id != group.generation_id:
            return answer(ErrorCode.ILLEGAL_GENERATION)
        if group.is_(S.EMPTY):
            return answer(ErrorCode.UNKNOWN_MEMBER_ID)
        self.schedule_heartbeat_expiry(group, member, self.core.clock() + member.session_timeout_ms)
        if group.is_(S.PREPARING_REBALANCE):
            return answer(ErrorCode.REBALANCE_IN_PROGRESS)
        answer(0)

    # --- LeaveGroup ---

    def leave_group(
        self, token: Token[LeaveGroupResponse], req: LeaveGroupRequest, version: int
    ) -> None:
        gid = req.group_id
        if version >= 3:
            leaving = [(m.member_id or "", m.group_instance_id) for m in req.members]
        else:
            leaving = [(req.member_id or "", None)]

        def answer(top: int, errors: list[int]) -> None:
            if version < 3:
                code = top or (errors[0] if errors else 0)
                self.core.reply(token, LeaveGroupResponse(throttle_time_ms=0, error_code=code))
                return
            self.core.reply(
                token,
                LeaveGroupResponse(
                    throttle_time_ms=0,
                    error_code=top,
                    members=[]
                    if top
                    else [
                        LeaveGroupResponse.Members(
                            member_id=mid, group_instance_id=iid, error_code=e
                        )
                        for (mid, iid), e in zip(leaving, errors, strict=True)
                    ],
                ),
            )

        if not gid:
            return answer(ErrorCode.INVALID_GROUP_ID, [])
        err = self.core.partition_error(gid)
        if err:
            return answer(err, [])
        group = self.core.groups.get(gid)
        if not isinstance(group, ClassicGroup):
            return answer(0, [ErrorCode.UNKNOWN_MEMBER_ID] * len(leaving))
        if group.is_(S.DEAD):
            return answer(ErrorCode.COORDINATOR_NOT_AVAILABLE, [])
        errors: list[int] = []
        for member_id, instance_id in leaving:
            if member_id == "":
                current = group.static_member_id(instance_id)
                if current is None:
                    errors.append(ErrorCode.UNKNOWN_MEMBER_ID)
                else:
                    self._remove_member_and_update_group(group, current, "left")
                    errors.append(0)
            elif member_id in group.pending_members:
                group.pending_members.discard(member_id)
                self.core.timers.cancel(("hb", gid, member_id))
                self._try_complete_join(group)
                errors.append(0)
            elif group.is_static_member_fenced(member_id, instance_id):
                errors.append(ErrorCode.FENCED_INSTANCE_ID)
            elif group.has(member_id):
                self._remove_member_and_update_group(group, member_id, "left")
                errors.append(0)
            else:
                errors.append(ErrorCode.UNKNOWN_MEMBER_ID)
        answer(0, errors)

    def release_waiting(self) -> None:
        """Answer every held JoinGroup and SyncGroup with NOT_COORDINATOR (the broker is
        going away; members find the coordinator again and rejoin)."""
        for group in self.core.groups.values():
            if not isinstance(group, ClassicGroup):
                continue
            for m in group.members.values():
                if m.join_token is not None:
                    self.core.reply(
                        m.join_token,
                        self.join_response(
                            m.join_version, ErrorCode.NOT_COORDINATOR, member_id=m.member_id
                        ),
                    )
                    m.join_token = None
                if m.sync_token is not None:
                    self.core.reply(m.sync_token, self.sync_response(ErrorCode.NOT_COORDINATOR))
                    m.sync_token = None
