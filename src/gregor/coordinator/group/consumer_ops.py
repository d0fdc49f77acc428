"""KIP-848 requests: ConsumerGroupHeartbeat, with session and
revocation timers.

One heartbeat does, in order: validate the request; find or create the member (epoch 0
joins, -1 leaves, -2 is a static member stepping out for a restart); fence a member whose
epoch is neither current nor the previous one with a subset of its partitions (its last
response may have been lost); apply subscription changes; bump the group epoch when the
assignment's inputs changed (members, subscriptions, the partition counts of subscribed
topics); recompute the target assignment when the group epoch is ahead; reconcile this
member toward its target; persist what changed; answer with the member's epoch and, when
it changed or the request was a full one, its assignment.

A member that stops heartbeating for ``group.consumer.session.timeout.ms``, or does not
revoke partitions within its rebalance timeout, is removed and the group epoch bumped. A
static member leaving with epoch -2 keeps its assignment until its session expires; when it
rejoins with the same instance id it gets that assignment back with no epoch bump.
"""

from __future__ import annotations

import base64
import logging
import uuid

from gregor.coordinator.common.append_errors import GROUP_APPEND_ERRORS
from gregor.coordinator.common.events import log_event
from gregor.coordinator.common.outbox import Token
from gregor.coordinator.group.classic import ClassicGroup
from gregor.coordinator.group.consumer_group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    copy_assignment,
)
from gregor.coordinator.group.consumer_records import (
    Records,
    compute_target,
    current_assignment_record,
    epoch_record,
    member_metadata_record,
    member_tombstones,
)
from gregor.coordinator.group.core import GroupCore, subscription_regex_error
from gregor.coordinator.group.records import (
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
    ConsumerMemberKey,
    GroupMetadataKey,
    TargetAssignmentMemberValue,
)
from gregor.protocol.errors import ErrorCode
from gregor.protocol.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)

log = logging.getLogger("gregor.coordinator")


# Bits of the group operations a describe reports when authorization is not configured:
# READ (3), DELETE (6), DESCRIBE (8).
GROUP_AUTHORIZED_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)


def new_member_id() -> str:
    """A random id in Kafka's ``Uuid.toString`` form (22 base64url characters)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def _regex(req: ConsumerGroupHeartbeatRequest) -> str | None:
    """The regex of a v1+ request (the v0 layout has no such field)."""
    return getattr(req, "subscribed_topic_regex", None)


def _to_wire(
    a: dict[uuid.UUID, set[int]],
) -> list[ConsumerGroupHeartbeatResponse.Assignment.TopicPartitions]:
    TP = ConsumerGroupHeartbeatResponse.Assignment.TopicPartitions
    return [
        TP(topic_id=t, partitions=sorted(ps))
        for t, ps in sorted(a.items(), key=lambda kv: str(kv[0]))
        if ps
    ]


class ConsumerGroups:
    """KIP-848 consumer groups: ConsumerGroupHeartbeat and ConsumerGroupDescribe."""

    def __init__(self, core: GroupCore) -> None:
        self.core = core

    # --- timers ---

    def restore(self, group: ConsumerGroup) -> None:
        """A loaded group starts serving: its regexes count as resolved, its members claim
        their partitions and their session (and pending revocation) timers start."""
        group.owners.clear()
        group.resolved_regexes = {
            m.subscribed_topic_regex for m in group.members.values() if m.subscribed_topic_regex
        }
        group.topic_fingerprint = self.core.topic_fingerprint(group)
        for cm in group.members.values():
            group.claim(cm)
            self.schedule_consumer_session(group, cm)
            if cm.state == MemberState.UNREVOKED_PARTITIONS:
                self.schedule_revocation(group, cm)

    def schedule_consumer_session(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        gid, mid = group.group_id, member.member_id
        self.core.timers.schedule(
            ("cg-session", gid, mid),
            self.core.clock() + self.core.config.consumer_session_timeout_ms,
            lambda: self._fence(gid, mid, "session timeout"),
        )

    def schedule_revocation(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        gid, mid = group.group_id, member.member_id
        key = ("cg-revoke", gid, mid)
        if self.core.timers.deadline(key) is None:
            timeout = (
                member.rebalance_timeout_ms
                if member.rebalance_timeout_ms > 0
                else self.core.config.consumer_session_timeout_ms
            )
            self.core.timers.schedule(
                key,
                self.core.clock() + timeout,
                lambda: self._fence(gid, mid, "revocation timeout"),
            )

    def _cancel_member_timers(self, gid: str, mid: str) -> None:
        self.core.timers.cancel(("cg-session", gid, mid))
        self.core.timers.cancel(("cg-revoke", gid, mid))

    def _fence(self, gid: str, mid: str, reason: str) -> None:
        """Session or revocation timeout: drop the member, bump the group epoch."""
        group = self.core.groups.get(gid)
        if not isinstance(group, ConsumerGroup) or mid not in group.members:
            return
        log_event(log, "group.member_removed", group=gid, member=mid, reason=reason)
        self.core.write(gid, self._remove_consumer_member(group, mid))

    def _remove_consumer_member(self, group: ConsumerGroup, mid: str) -> Records:
        self._cancel_member_timers(group.group_id, mid)
        group.remove_member(mid)
        self._forget_unused_regexes(group)
        group.group_epoch += 1
        group.state_timestamp = self.core.clock()
        log_event(
            log,
            "group.epoch",
            group=group.group_id,
            epoch=group.group_epoch,
            members=len(group.members),
        )
        return member_tombstones(group, mid) + [epoch_record(group)]

    # --- regex subscriptions ---

    @staticmethod
    def _forget_unused_regexes(group: ConsumerGroup) -> None:
        group.resolved_regexes &= {m.subscribed_topic_regex for m in group.members.values()}

    def _resolve_regex_later(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        """Kafka resolves a regex new to the group off the heartbeat path: the heartbeat that
        brings it assigns the literal topics only, a later one the regex's matches too (the
        topic fingerprint changes, so the group epoch is bumped then)."""
        regex = member.subscribed_topic_regex
        if not regex or regex in group.resolved_regexes:
            return
        gid = group.group_id
        key = ("cg-regex", gid, regex)
        if self.core.timers.deadline(key) is not None:
            return

        def resolved() -> None:
            current = self.core.groups.get(gid)
            if current is group and any(
                m.subscribed_topic_regex == regex for m in group.members.values()
            ):
                group.resolved_regexes.add(regex)

        self.core.timers.schedule(key, self.core.clock(), resolved)

    # --- assignment ---

    # --- ConsumerGroupHeartbeat ---

    @staticmethod
    def _cgh_error(code: int, message: str | None = None) -> ConsumerGroupHeartbeatResponse:
        return ConsumerGroupHeartbeatResponse(
            throttle_time_ms=0,
            error_code=code,
            error_message=message,
            member_id=None,
            member_epoch=0,
            heartbeat_interval_ms=0,
            assignment=None,
        )

    def _validate_cgh(self, req: ConsumerGroupHeartbeatRequest) -> tuple[int, str] | None:
        bad = ErrorCode.INVALID_REQUEST
        if not req.group_id:
            return bad, "GroupId can't be empty."
        if req.instance_id is not None and req.instance_id == "":
            return bad, "InstanceId can't be empty."
        if req.rack_id is not None and req.rack_id == "":
            return bad, "RackId can't be empty."
        epoch = req.member_epoch
        if epoch == 0:
            if req.rebalance_timeout_ms == -1:
                return bad, "RebalanceTimeoutMs must be provided in first request."
            if req.topic_partitions is None or req.topic_partitions:
                return bad, "TopicPartitions must be empty when (re-)joining."
            if req.subscribed_topic_names is None and _regex(req) is None:
                return (
                    bad,
                    "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.",
                )
        elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if not req.member_id:
                return bad, "MemberId can't be empty."
            if req.instance_id is None:
                return bad, "InstanceId can't be null."
        elif epoch > 0 or epoch == LEAVE_GROUP_MEMBER_EPOCH:
            if not req.member_id:
                return bad, "MemberId can't be empty."
        else:
            return bad, f"MemberEpoch is invalid: {epoch}."
        regex = _regex(req)
        if regex is not None and regex != "":
            problem = subscription_regex_error(regex)
            if problem is not None:
                return (
                    ErrorCode.INVALID_REGULAR_EXPRESSION,
                    f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {problem}.",
                )
        if (
            req.server_assignor is not None
            and req.server_assignor not in self.core.config.consumer_assignors
        ):
            return (
                ErrorCode.UNSUPPORTED_ASSIGNOR,
                f"ServerAssignor {req.server_assignor} is not supported. Supported assignors: {', '.join(self.core.config.consumer_assignors)}.",
            )
        return None

    def consumer_group_heartbeat(
        self,
        token: Token[ConsumerGroupHeartbeatResponse],
        req: ConsumerGroupHeartbeatRequest,
        version: int,
        client_id: str | None = "",
        client_host: str = "",
    ) -> None:
        problem = self._validate_cgh(req)
        if problem is not None:
            return self.core.reply(token, self._cgh_error(*problem))
        gid = req.group_id
        err = self.core.partition_error(gid)
        if err:
            return self.core.reply(token, self._cgh_error(err))
        if req.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            return self._cgh_leave(token, req)
        records: Records = []
        group = self.core.groups.get(gid)
        if group is None:
            if req.member_epoch != 0:
                return self.core.reply(
                    token, self._cgh_error(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} not found.")
                )
            group = ConsumerGroup(gid, state_timestamp=self.core.clock())
            self.core.groups[gid] = group
        elif isinstance(group, ClassicGroup):
            if not group.is_empty or group.pending_members:
                return self.core.reply(
                    token,
                    self._cgh_error(
                        ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} is not a consumer group."
                    ),
                )
            cg = ConsumerGroup(gid, state_timestamp=self.core.clock())
            cg.offsets = group.offsets
            self.core.remove_group(gid)
            self.core.groups[gid] = cg
            group = cg
            records.append((GroupMetadataKey(gid), None))
        bump = False
        full_reply = req.member_epoch == 0
        member: ConsumerMember | None
        if req.member_epoch == 0:
            member, joined, extra, error = self._cgh_join(group, req, client_id or "", client_host)
            if error is not None:
                return self.core.reply(token, self._cgh_error(*error))
            records += extra
            bump = joined
        else:
            member = group.members.get(req.member_id)
            if member is None:
                return self.core.reply(
                    token,
                    self._cgh_error(
                        ErrorCode.UNKNOWN_MEMBER_ID,
                        f"Member {req.member_id} is not a member of group {gid}.",
                    ),
                )
            fenced = self._check_epoch(member, req)
            if fenced is not None:
                return self.core.reply(
                    token, self._cgh_error(ErrorCode.FENCED_MEMBER_EPOCH, fenced)
                )
        assigned_before = copy_assignment(member.assigned)
        if req.member_epoch != 0 and self._apply_subscription(member, req):
            records.append(member_metadata_record(group, member))
            bump = True
        self._forget_unused_regexes(group)
        self._resolve_regex_later(group, member)
        fingerprint = self.core.topic_fingerprint(group)
        if fingerprint != group.topic_fingerprint:
            group.topic_fingerprint = fingerprint
            bump = True
        if bump:
            group.group_epoch += 1
            records.append(epoch_record(group))
            log_event(
                log, "group.epoch", group=gid, epoch=group.group_epoch, members=len(group.members)
            )
        if group.group_epoch > group.assignment_epoch:
            records += compute_target(self.core, group, fingerprint)
        owned = None
        if req.topic_partitions is not None:
            owned = {tp.topic_id: set(tp.partitions) for tp in req.topic_partitions}
        if group.reconcile(member, owned) or req.member_epoch == 0:
            records.append(current_assignment_record(group, member))
        if member.state == MemberState.UNREVOKED_PARTITIONS:
            self.schedule_revocation(group, member)
        else:
            self.core.timers.cancel(("cg-revoke", gid, member.member_id))
        self.schedule_consumer_session(group, member)
        is_full = (
            req.rebalance_timeout_ms != -1
            and req.subscribed_topic_names is not None
            and req.topic_partitions is not None
        )
        send_assignment = (
            full_reply or is_full or copy_assignment(member.assigned) != assigned_before
        )
        response = ConsumerGroupHeartbeatResponse(
            throttle_time_ms=0,
            error_code=0,
            error_message=None,
            member_id=member.member_id,
            member_epoch=member.member_epoch,
            heartbeat_interval_ms=self.core.config.consumer_heartbeat_interval_ms,
            assignment=ConsumerGroupHeartbeatResponse.Assignment(
                topic_partitions=_to_wire(member.assigned)
            )
            if send_assignment
            else None,
        )
        self._write_then_reply(gid, records, token, response)

    def _write_then_reply(
        self,
        gid: str,
        records: Records,
        token: Token[ConsumerGroupHeartbeatResponse],
        response: ConsumerGroupHeartbeatResponse,
    ) -> None:
        if not records:
            self.core.reply(token, response)
            return

        def done(code: int, _offset: int) -> None:
            if code:
                self.core.reply(token, self._cgh_error(GROUP_APPEND_ERRORS(code)))
            else:
                self.core.reply(token, response)

        self.core.write(gid, records, done)

    def _cgh_join(
        self,
        group: ConsumerGroup,
        req: ConsumerGroupHeartbeatRequest,
        client_id: str,
        client_host: str,
    ) -> tuple[ConsumerMember, bool, Records, tuple[int, str] | None]:
        """(member, is a new member, records, error) for a heartbeat with epoch 0."""
        records: Records = []
        member: ConsumerMember | None
        instance_id = req.instance_id
        if instance_id is not None:
            existing_id = group.static_members.get(instance_id)
            if existing_id is not None:
                existing = group.members[existing_id]
                if (
                    existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH
                    and existing_id != req.member_id
                ):
                    return (
                        existing,
                        False,
                        [],
                        (
                            ErrorCode.UNRELEASED_INSTANCE_ID,
                            f"Static member {existing_id} with instance id {instance_id} cannot be replaced because it has not left the group.",
                        ),
                    )
                new_id = req.member_id or new_member_id()
                if new_id != existing_id:
                    records += member_tombstones(group, existing_id)
                    self._cancel_member_timers(group.group_id, existing_id)
                    member = group.rename_member(existing_id, new_id)
                    if new_id in group.target:
                        t = group.target[new_id]
                        records.append(
                            (
                                ConsumerMemberKey(
                                    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, group.group_id, new_id
                                ),
                                TargetAssignmentMemberValue(
                                    {tid: sorted(ps) for tid, ps in t.items()}
                                ),
                            )
                        )
                else:
                    member = existing
                if member.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                    # Back with its old assignment; reconciliation restores the epoch.
                    member.member_epoch = max(member.previous_member_epoch, 0)
                member.client_id, member.client_host = client_id, client_host
                self._apply_subscription(member, req)
                records.append(member_metadata_record(group, member))
                return member, False, records, None
        member = group.members.get(req.member_id) if req.member_id else None
        if member is not None:
            changed = self._apply_subscription(member, req)
            if changed:
                records.append(member_metadata_record(group, member))
            return member, changed, records, None
        if len(group.members) >= self.core.config.consumer_max_group_size:
            return (
                ConsumerMember(""),
                False,
                [],
                (
                    ErrorCode.GROUP_MAX_SIZE_REACHED,
                    f"The consumer group has reached its maximum capacity of {self.core.config.consumer_max_group_size} members.",
                ),
            )
        member = ConsumerMember(
            member_id=req.member_id or new_member_id(),
            instance_id=instance_id,
            rack_id=req.rack_id,
            client_id=client_id,
            client_host=client_host,
            subscribed_topic_names=sorted(set(req.subscribed_topic_names or [])),
            subscribed_topic_regex=_regex(req) or None,
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            server_assignor=req.server_assignor,
        )
        group.add_member(member)
        records.append(member_metadata_record(group, member))
        return member, True, records, None

    @staticmethod
    def _apply_subscription(member: ConsumerMember, req: ConsumerGroupHeartbeatRequest) -> bool:
        """Apply the fields a heartbeat may change; True if the assignment inputs changed."""
        changed = False
        if req.subscribed_topic_names is not None:
            names = sorted(set(req.subscribed_topic_names))
            if names != member.subscribed_topic_names:
                member.subscribed_topic_names = names
                changed = True
        regex = _regex(req)
        if regex is not None:
            # An empty string clears the regex (Kafka's convention).
            value = regex or None
            if value != member.subscribed_topic_regex:
                member.subscribed_topic_regex = value
                changed = True
        if req.server_assignor is not None and req.server_assignor != member.server_assignor:
            member.server_assignor = req.server_assignor
            changed = True
        if req.rack_id is not None and req.rack_id != member.rack_id:
            member.rack_id = req.rack_id
            changed = True
        if req.rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = req.rebalance_timeout_ms
        return changed

    @staticmethod
    def _check_epoch(member: ConsumerMember, req: ConsumerGroupHeartbeatRequest) -> str | None:
        epoch = req.member_epoch
        if epoch > member.member_epoch:
            return f"The consumer group member has a greater member epoch ({epoch}) than the one known by the group coordinator ({member.member_epoch})."
        if epoch < member.member_epoch:
            if epoch != member.previous_member_epoch:
                return f"The consumer group member has a smaller member epoch ({epoch}) than the one known by the group coordinator ({member.member_epoch})."
            # The previous epoch is accepted only from a member that says what it owns and
            # owns no more than its assignment: the answer carrying the new epoch may have
            # been lost. A heartbeat that does not say (it was sent before that answer, and
            # may have crossed a revocation) cannot be told apart from a zombie's.
            if req.topic_partitions is None:
                return f"The consumer group member has a smaller member epoch ({epoch}) than the one known by the group coordinator ({member.member_epoch}) and did not send its owned partitions."
            for tp in req.topic_partitions:
                if not set(tp.partitions) <= member.assigned.get(tp.topic_id, set()):
                    return "The consumer group member has a smaller member epoch and owns partitions it was not assigned."
        return None

    def _cgh_leave(
        self, token: Token[ConsumerGroupHeartbeatResponse], req: ConsumerGroupHeartbeatRequest
    ) -> None:
        gid = req.group_id
        group = self.core.groups.get(gid)
        if not isinstance(group, ConsumerGroup):
            return self.core.reply(
                token, self._cgh_error(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} not found.")
            )
        member_id = req.member_id
        if req.instance_id is not None:
            static_id = group.static_members.get(req.instance_id)
            if static_id is None:
                return self.core.reply(
                    token,
                    self._cgh_error(
                        ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown."
                    ),
                )
            if static_id != member_id:
                return self.core.reply(
                    token,
                    self._cgh_error(
                        ErrorCode.FENCED_INSTANCE_ID,
                        f"Static member {member_id} was replaced by {static_id}.",
                    ),
                )
        member = group.members.get(member_id)
        if member is None:
            return self.core.reply(
                token,
                self._cgh_error(
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    f"Member {member_id} is not a member of group {gid}.",
                ),
            )
        if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            # Stepping out for a restart: keep the assignment until the session expires.
            # Partitions it was still revoking are released now (the member is gone until
            # it returns), so the others need not wait for its session to expire.
            if member.member_epoch > 0:
                member.previous_member_epoch = member.member_epoch
            member.member_epoch = LEAVE_GROUP_STATIC_MEMBER_EPOCH
            group.set_assignment(member, member.assigned, {})
            self.core.timers.cancel(("cg-revoke", gid, member_id))
            records: Records = [current_assignment_record(group, member)]
        else:
            records = self._remove_consumer_member(group, member_id)
        response = ConsumerGroupHeartbeatResponse(
            throttle_time_ms=0,
            error_code=0,
            error_message=None,
            member_id=member_id,
            member_epoch=req.member_epoch,
            heartbeat_interval_ms=0,
            assignment=None,
        )
        self._write_then_reply(gid, records, token, response)
