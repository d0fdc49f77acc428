"""Group administration: DescribeGroups, ListGroups, DeleteGroups.

DescribeGroups speaks the classic format. A classic group shows member metadata and
assignments only when Stable (as Kafka does). A KIP-848 group is shown in the same format
so that clients with only the classic admin API see its real members: protocol type
"consumer", the server assignor as the protocol, each member's subscription and current
assignment encoded in the consumer protocol's layouts.

ListGroups filters by state (case-insensitive, v4+) and by type ("classic" / "consumer",
v5+). DeleteGroups removes empty groups with all their offsets (tombstones first, then the
in-memory state, then the answer).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import TypeVar

from gregor.coordinator.common.append_errors import GROUP_APPEND_ERRORS
from gregor.coordinator.common.outbox import Token
from gregor.coordinator.common.timers import PartitionStatus
from gregor.coordinator.group.classic import ClassicGroup, ClassicState
from gregor.coordinator.group.consumer_group import ConsumerGroup
from gregor.coordinator.group.consumer_ops import GROUP_AUTHORIZED_OPERATIONS
from gregor.coordinator.group.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    encode_assignment,
    encode_subscription,
)
from gregor.coordinator.group.core import Group, GroupCore
from gregor.coordinator.group.offset_ops import Offsets
from gregor.coordinator.group.records import Key, OffsetCommitKey, Value
from gregor.protocol.errors import ErrorCode
from gregor.protocol.messages.consumer_group_describe import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
)
from gregor.protocol.messages.delete_groups import DeleteGroupsRequest, DeleteGroupsResponse
from gregor.protocol.messages.describe_groups import DescribeGroupsRequest, DescribeGroupsResponse
from gregor.protocol.messages.list_groups import ListGroupsRequest, ListGroupsResponse

T = TypeVar("T")


class GroupAdmin:
    """DescribeGroups, ListGroups and DeleteGroups (a deleted group's offsets are tombstoned
    with ``Offsets.group_tombstones``)."""

    def __init__(self, core: GroupCore, offsets: Offsets) -> None:
        self.core = core
        self.offsets = offsets

    def describe_groups(
        self, token: Token[DescribeGroupsResponse], req: DescribeGroupsRequest, version: int
    ) -> None:
        G = DescribeGroupsResponse.Groups
        M = G.Members
        ops = (
            GROUP_AUTHORIZED_OPERATIONS
            if version >= 3 and req.include_authorized_operations
            else -2147483648
        )
        out = []
        for gid in req.groups:
            err = self.core.partition_error(gid) if gid else ErrorCode.INVALID_GROUP_ID
            if err:
                out.append(
                    G(
                        error_code=err,
                        group_id=gid,
                        group_state="",
                        protocol_type="",
                        protocol_data="",
                        members=[],
                        authorized_operations=ops,
                    )
                )
                continue
            group = self.core.groups.get(gid)
            if group is None or (isinstance(group, ClassicGroup) and group.is_(ClassicState.DEAD)):
                out.append(
                    G(
                        error_code=0,
                        group_id=gid,
                        group_state="Dead",
                        protocol_type="",
                        protocol_data="",
                        members=[],
                        authorized_operations=ops,
                    )
                )
                continue
            if isinstance(group, ClassicGroup):
                stable = group.is_(ClassicState.STABLE)
                members = [
                    M(
                        member_id=m.member_id,
                        group_instance_id=m.group_instance_id,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        member_metadata=m.metadata(group.protocol_name) if stable else b"",
                        member_assignment=m.assignment if stable else b"",
                    )
                    for m in group.members.values()
                ]
                out.append(
                    G(
                        error_code=0,
                        group_id=gid,
                        group_state=group.describe_state(),
                        protocol_type=group.protocol_type or "",
                        protocol_data=(group.protocol_name or "") if stable else "",
                        members=members,
                        authorized_operations=ops,
                    )
                )
                continue
            members = []
            for m in group.members.values():
                assigned: dict[str, list[int]] = {}
                for tid, ps in m.assigned.items():
                    name = self.core.topics.topic_name(tid)
                    if name is not None and ps:
                        assigned[name] = sorted(ps)
                members.append(
                    M(
                        member_id=m.member_id,
                        group_instance_id=m.instance_id,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        member_metadata=encode_subscription(
                            sorted(self.core.member_topics(m, group))
                        ),
                        member_assignment=encode_assignment(assigned),
                    )
                )
            out.append(
                G(
                    error_code=0,
                    group_id=gid,
                    group_state=group.describe_state(),
                    protocol_type=CONSUMER_PROTOCOL_TYPE,
                    protocol_data=group.assignor_name if group.members else "",
                    members=members,
                    authorized_operations=ops,
                )
            )
        self.core.reply(token, DescribeGroupsResponse(throttle_time_ms=0, groups=out))

    def list_groups(
        self, token: Token[ListGroupsResponse], req: ListGroupsRequest, version: int
    ) -> None:
        states = {s.lower() for s in req.states_filter} if version >= 4 else set()
        types = {t.lower() for t in req.types_filter} if version >= 5 else set()
        if not self.core.session_confirmed():
            # The broker cannot confirm its metadata session: its groups may be led elsewhere
            # already. Retriable, as for a coordinator that is not available.
            code = ErrorCode.COORDINATOR_NOT_AVAILABLE
            self.core.reply(token, ListGroupsResponse(throttle_time_ms=0, error_code=code))
            return
        loading = any(s is PartitionStatus.LOADING for s in self.core.partitions.values())
        out = []
        for group in self.core.active_groups():
            if isinstance(group, ClassicGroup):
                if group.is_(ClassicState.DEAD):
                    continue
                protocol_type = group.protocol_type or ""
            else:
                protocol_type = CONSUMER_PROTOCOL_TYPE
            state = group.describe_state()
            if states and state.lower() not in states:
                continue
            if types and group.TYPE not in types:
                continue
            out.append(
                ListGroupsResponse.Groups(
                    group_id=group.group_id,
                    protocol_type=protocol_type,
                    group_state=state,
                    group_type=group.TYPE,
                )
            )
        self.core.reply(
            token,
            ListGroupsResponse(
                throttle_time_ms=0,
                error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if loading else 0,
                groups=out,
            ),
        )

    def delete_groups(
        self, token: Token[DeleteGroupsResponse], req: DeleteGroupsRequest, version: int
    ) -> None:
        names = list(req.groups_names)
        results: dict[int, int] = {}
        waiting = [0]

        def finish() -> None:
            self.core.reply(
                token,
                DeleteGroupsResponse(
                    throttle_time_ms=0,
                    results=[
                        DeleteGroupsResponse.Results(group_id=g, error_code=results[i])
                        for i, g in enumerate(names)
                    ],
                ),
            )

        for i, gid in enumerate(names):
            err = self.core.partition_error(gid) if gid else ErrorCode.INVALID_GROUP_ID
            if err:
                results[i] = err
                continue
            group = self.core.groups.get(gid)
            if group is None or (isinstance(group, ClassicGroup) and group.is_(ClassicState.DEAD)):
                results[i] = ErrorCode.GROUP_ID_NOT_FOUND
                continue
            if isinstance(group, ClassicGroup):
                busy = not group.is_(ClassicState.EMPTY)
            else:
                busy = not group.is_empty
            if busy:
                results[i] = ErrorCode.NON_EMPTY_GROUP
                continue
            records: list[tuple[Key, Value | None]] = [
                (OffsetCommitKey(gid, t, p), None) for t, p in sorted(group.offsets.committed)
            ]
            records += self.offsets.group_tombstones(group)
            waiting[0] += 1

            def done(
                code: int, _offset: int, i: int = i, gid: str = gid, group: Group = group
            ) -> None:
                if code:
                    results[i] = GROUP_APPEND_ERRORS(code)
                else:
                    if self.core.groups.get(gid) is group:
                        self.core.remove_group(gid)
                    results[i] = 0
                waiting[0] -= 1
                if waiting[0] == 0:
                    finish()

            self.core.write(gid, records, done)
        if waiting[0] == 0:
            finish()

    # --- ConsumerGroupDescribe ---

    def consumer_group_describe(
        self,
        token: Token[ConsumerGroupDescribeResponse],
        req: ConsumerGroupDescribeRequest,
        version: int,
    ) -> None:
        G = ConsumerGroupDescribeResponse.Groups
        M = G.Members
        A, TA = M.Assignment, M.TargetAssignment
        out = []
        ops = GROUP_AUTHORIZED_OPERATIONS if req.include_authorized_operations else -2147483648
        for gid in req.group_ids:
            err = self.core.partition_error(gid) if gid else ErrorCode.INVALID_GROUP_ID
            if err:
                out.append(G(error_code=err, error_message=None, group_id=gid))
                continue
            group = self.core.groups.get(gid)
            if group is None:
                out.append(
                    G(
                        error_code=ErrorCode.GROUP_ID_NOT_FOUND,
                        error_message=f"Group {gid} not found.",
                        group_id=gid,
                    )
                )
                continue
            if not isinstance(group, ConsumerGroup):
                out.append(
                    G(
                        error_code=ErrorCode.GROUP_ID_NOT_FOUND,
                        error_message=f"Group {gid} is not a consumer group.",
                        group_id=gid,
                    )
                )
                continue

            def tps(a: dict[uuid.UUID, set[int]], make: Callable[..., T]) -> list[T]:
                res = []
                for t, ps in sorted(a.items(), key=lambda kv: str(kv[0])):
                    if ps:
                        res.append(
                            make(
                                topic_id=t,
                                topic_name=self.core.topics.topic_name(t) or "",
                                partitions=sorted(ps),
                            )
                        )
                return res

            members = [
                M(
                    member_id=m.member_id,
                    instance_id=m.instance_id,
                    rack_id=m.rack_id,
                    member_epoch=m.member_epoch,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    subscribed_topic_names=list(m.subscribed_topic_names),
                    subscribed_topic_regex=m.subscribed_topic_regex,
                    assignment=A(topic_partitions=tps(m.assigned, A.TopicPartitions)),
                    target_assignment=TA(
                        topic_partitions=tps(group.target.get(m.member_id, {}), TA.TopicPartitions)
                    ),
                    member_type=1,  # v1+ (KIP-1099): every member of a consumer group speaks KIP-848
                )
                for m in group.members.values()
            ]
            out.append(
                G(
                    error_code=0,
                    error_message=None,
                    group_id=gid,
                    group_state=group.describe_state(),
                    group_epoch=group.group_epoch,
                    assignment_epoch=group.assignment_epoch,
                    assignor_name=group.assignor_name,
                    members=members,
                    authorized_operations=ops,
                )
            )
        self.core.reply(token, ConsumerGroupDescribeResponse(throttle_time_ms=0, groups=out))
