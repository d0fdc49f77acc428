"""Offset requests: OffsetCommit, OffsetFetch, OffsetDelete, and offset retention.

A commit is validated against the group (generation for classic groups, member epoch for
KIP-848 groups; generation/epoch -1 is a "simple" commit, allowed while the group has no
members, and creating an empty classic group when there is none), written as one batch of OffsetCommit records, and acknowledged - and made
visible to OffsetFetch - only when the write completes.

Retention (``offsets.retention.minutes``, checked every
``offsets.retention.check.interval.ms``) follows Kafka: offsets of an empty group expire
that long after the group became empty (or after the commit, for groups that never had
members); offsets of an active consumer group expire only for topics it no longer subscribes
to; an explicit expire timestamp (OffsetCommit v2-v4 ``retention_time_ms``) wins. A group left
empty and without offsets is deleted.

OffsetFetch with a group-level error (the group's partition is loading, or not led here):
v0-1 have only partition errors; v2-7 carry the error at the top, as Kafka answers, and here
on each requested partition too (offset -1). Clients that read only the partition entries of
v2+ (aiokafka 0.14, pykafka) would otherwise take the empty list for "no committed offset" and
restart from their reset policy; every client that reads the top-level error reads it first.
"""

from __future__ import annotations

from gregor.coordinator.common.append_errors import OFFSET_COMMIT_APPEND_ERRORS
from gregor.coordinator.common.outbox import Token
from gregor.coordinator.group.classic import ClassicGroup, ClassicState
from gregor.coordinator.group.classic_ops import ClassicGroups
from gregor.coordinator.group.consumer_group import ConsumerGroup
from gregor.coordinator.group.consumer_protocol import CONSUMER_PROTOCOL_TYPE
from gregor.coordinator.group.core import Group, GroupCore
from gregor.coordinator.group.offsets import OffsetAndMetadata
from gregor.coordinator.group.records import (
    CONSUMER_GROUP_METADATA,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA,
    ConsumerGroupKey,
    GroupMetadataKey,
    Key,
    OffsetCommitKey,
    OffsetCommitValue,
    Value,
)
from gregor.protocol.errors import ErrorCode
from gregor.protocol.messages.offset_commit import OffsetCommitRequest, OffsetCommitResponse
from gregor.protocol.messages.offset_delete import OffsetDeleteRequest, OffsetDeleteResponse
from gregor.protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchResponse


class Offsets:
    """OffsetCommit, OffsetFetch, OffsetDelete and offset retention (a classic member's
    commit also counts as its heartbeat, so this manager uses ``ClassicGroups``)."""

    def __init__(self, core: GroupCore, classic: ClassicGroups) -> None:
        self.core = core
        self.classic = classic

    # --- OffsetCommit ---

    def _validate_commit(
        self,
        group: Group,
        member_id: str,
        instance_id: str | None,
        generation: int,
        version: int,
        partitions: list[tuple[str, int]],
    ) -> int:
        if isinstance(group, ClassicGroup):
            if group.is_(ClassicState.DEAD):
                return ErrorCode.COORDINATOR_NOT_AVAILABLE
            if generation < 0 and group.is_(ClassicState.EMPTY):
                return 0
            if generation >= 0 or member_id or instance_id is not None:
                if group.is_static_member_fenced(member_id, instance_id):
                    return ErrorCode.FENCED_INSTANCE_ID
                if not group.has(member_id):
                    return ErrorCode.UNKNOWN_MEMBER_ID
                if generation != group.generation_id:
                    return ErrorCode.ILLEGAL_GENERATION
            elif not group.is_(ClassicState.EMPTY):
                return ErrorCode.UNKNOWN_MEMBER_ID
            if group.is_(ClassicState.COMPLETING_REBALANCE):
                return ErrorCode.REBALANCE_IN_PROGRESS
            return 0
        # KIP-848 group: epoch -1 commits (admin, assign()) are fine while it has no members.
        if generation < 0 and group.is_empty:
            return 0
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation == member.member_epoch:
            return 0
        stale = ErrorCode.STALE_MEMBER_EPOCH if version >= 9 else ErrorCode.ILLEGAL_GENERATION
        if generation > member.member_epoch or generation < 0:
            return stale
        # An older epoch is fine for partitions the member has held since that epoch (they
        # cannot have moved to anyone else meanwhile), as Kafka allows since KIP-1251. One it
        # got later - e.g. again after leaving and rejoining - may have been another member's
        # in between, so a commit from before is stale.
        for topic, p in partitions:
            tid = self.core.topics.topic_id(topic)
            since = None if tid is None else member.assignment_epochs.get((tid, p))
            if since is None or since > generation:
                return stale
        return 0

    def offset_commit(
        self, token: Token[OffsetCommitResponse], req: OffsetCommitRequest, version: int
    ) -> None:
        gid = req.group_id
        Topic, Part = OffsetCommitResponse.Topics, OffsetCommitResponse.Topics.Partitions
        results: dict[tuple[str, int], int] = {}
        order = [(t.name, p.partition_index) for t in req.topics for p in t.partitions]

        def respond() -> None:
            topics: dict[str, list[OffsetCommitResponse.Topics.Partitions]] = {}
            for name, p in order:
                topics.setdefault(name, []).append(
                    Part(partition_index=p, error_code=results[(name, p)])
                )
            self.core.reply(
                token,
                OffsetCommitResponse(
                    throttle_time_ms=0,
                    topics=[Topic(name=n, partitions=ps) for n, ps in topics.items()],
                ),
            )

        def fail_all(code: int) -> None:
            for tp in order:
                results[tp] = code
            respond()

        if gid is None:
            return fail_all(ErrorCode.INVALID_GROUP_ID)
        err = self.core.partition_error(gid)
        if err:
            return fail_all(err)
        generation = req.generation_id_or_member_epoch if version >= 1 else -1
        member_id = (req.member_id or "") if version >= 1 else ""
        instance_id = req.group_instance_id if version >= 7 else None
        group = self.core.groups.get(gid)
        if group is None:
            # Kafka: a commit with generation/epoch -1 to an unknown group creates a "simple"
            # (classic, empty) group, whatever member id it names (a KIP-848 consumer using
            # assign() sends its own member id); otherwise GROUP_ID_NOT_FOUND from v9,
            # ILLEGAL_GENERATION before.
            if generation >= 0:
                return fail_all(
                    ErrorCode.GROUP_ID_NOT_FOUND if version >= 9 else ErrorCode.ILLEGAL_GENERATION
                )
            group = ClassicGroup(gid, state_timestamp=self.core.clock())
            self.core.groups[gid] = group
        code = self._validate_commit(group, member_id, instance_id, generation, version, order)
        if code:
            return fail_all(code)
        now = self.core.clock()
        records: list[tuple[Key, Value | None]] = []
        staged: list[tuple[tuple[str, int], OffsetAndMetadata]] = []
        for t in req.topics:
            count = self.core.topics.partition_count(t.name)
            for p in t.partitions:
                tp = (t.name, p.partition_index)
                metadata = p.committed_metadata or ""
                if len(metadata.encode()) > self.core.config.offset_metadata_max_bytes:
                    results[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
                    continue
                if count is None or not 0 <= p.partition_index < count:
                    results[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    continue
                commit_ts = p.commit_timestamp if version == 1 and p.commit_timestamp >= 0 else now
                expire_ts = -1
                if 2 <= version <= 4 and req.retention_time_ms >= 0:
                    expire_ts = commit_ts + req.retention_time_ms
                leader_epoch = p.committed_leader_epoch if version >= 6 else -1
                oam = OffsetAndMetadata(
                    p.committed_offset, leader_epoch, metadata, commit_ts, expire_ts
                )
                staged.append((tp, oam))
                records.append(
                    (
                        OffsetCommitKey(gid, tp[0], tp[1]),
                        OffsetCommitValue(
                            p.committed_offset, metadata, commit_ts, leader_epoch, expire_ts
                        ),
                    )
                )
        if isinstance(group, ClassicGroup) and member_id in group.members:
            member = group.members[member_id]
            self.classic.schedule_heartbeat_expiry(group, member, now + member.session_timeout_ms)
        if not records:
            return respond()

        def done(code: int, base_offset: int) -> None:
            for i, (tp, oam) in enumerate(staged):
                if code:
                    results[tp] = OFFSET_COMMIT_APPEND_ERRORS(code)
                else:
                    oam.log_offset = base_offset + i if base_offset >= 0 else -1
                    current = self.core.groups.get(gid)
                    if current is not None:
                        current.offsets.commit(tp, oam)
                    results[tp] = 0
            respond()

        self.core.write(gid, records, done)

    # --- OffsetFetch ---

    def offset_fetch(
        self, token: Token[OffsetFetchResponse], req: OffsetFetchRequest, version: int
    ) -> None:
        require_stable = req.require_stable if version >= 7 else False
        if version >= 8:
            groups = [
                (
                    g.group_id,
                    g.member_id if version >= 9 else None,
                    g.member_epoch if version >= 9 else -1,
                    None
                    if g.topics is None
                    else [(t.name, list(t.partition_indexes)) for t in g.topics],
                )
                for g in req.groups
            ]
        else:
            topics = (
                None
                if req.topics is None
                else [(t.name, list(t.partition_indexes)) for t in req.topics]
            )
            groups = [(req.group_id, None, -1, topics)]
        results = [
            self._fetch_group(gid, mid, epoch, topics, require_stable, version)
            for gid, mid, epoch, topics in groups
        ]
        if version >= 8:
            G, T, P = (
                OffsetFetchResponse.Groups,
                OffsetFetchResponse.Groups.Topics,
                OffsetFetchResponse.Groups.Topics.Partitions,
            )
            out = []
            for (gid, _, _, _), (err, parts) in zip(groups, results, strict=True):
                by_topic: dict[str, list[OffsetFetchResponse.Groups.Topics.Partitions]] = {}
                for (t, p), (off, epoch, meta, code) in parts:
                    by_topic.setdefault(t, []).append(
                        P(
                            partition_index=p,
                            committed_offset=off,
                            committed_leader_epoch=epoch,
                            metadata=meta,
                            error_code=code,
                        )
                    )
                out.append(
                    G(
                        group_id=gid,
                        error_code=err,
                        topics=[T(name=t, partitions=ps) for t, ps in by_topic.items()],
                    )
                )
            self.core.reply(token, OffsetFetchResponse(throttle_time_ms=0, groups=out))
            return
        T1, P1 = OffsetFetchResponse.Topics, OffsetFetchResponse.Topics.Partitions
        err, parts = results[0]
        by_topic_v7: dict[str, list[OffsetFetchResponse.Topics.Partitions]] = {}
        for (t, p), (off, epoch, meta, code) in parts:
            by_topic_v7.setdefault(t, []).append(
                P1(
                    partition_index=p,
                    committed_offset=off,
                    committed_leader_epoch=epoch,
                    metadata=meta,
                    error_code=code,
                )
            )
        self.core.reply(
            token,
            OffsetFetchResponse(
                throttle_time_ms=0,
                error_code=err if version >= 2 else 0,
                topics=[T1(name=t, partitions=ps) for t, ps in by_topic_v7.items()],
            ),
        )

    def _fetch_group(
        self,
        gid: str,
        member_id: str | None,
        member_epoch: int,
        topics: list[tuple[str, list[int]]] | None,
        require_stable: bool,
        version: int,
    ) -> tuple[int, list[tuple[tuple[str, int], tuple[int, int, str | None, int]]]]:
        """(group error, [((topic, partition), (offset, leader epoch, metadata, error))])."""
        missing = (-1, -1, "", 0)

        def per_partition(
            code: int,
        ) -> list[tuple[tuple[str, int], tuple[int, int, str | None, int]]]:
            return [((t, p), (-1, -1, "", code)) for t, ps in (topics or []) for p in ps]

        err = self.core.partition_error(gid) if gid is not None else ErrorCode.INVALID_GROUP_ID
        if err:
            # v0/v1 have no group-level error: carry it on every partition; v2-7 too, for the
            # clients that read no top-level error (see the module docstring).
            return (err, per_partition(err) if version < 8 else [])
        group = self.core.groups.get(gid)
        if isinstance(group, ConsumerGroup) and member_id is not None:
            member = group.members.get(member_id)
            if member is None:
                return (ErrorCode.UNKNOWN_MEMBER_ID, [])
            if member_epoch != member.member_epoch:
                return (ErrorCode.STALE_MEMBER_EPOCH, [])
        if topics is None:
            if group is None:
                return (0, [])
            wanted = sorted(group.offsets.committed)
        else:
            wanted = [(t, p) for t, ps in topics for p in ps]
        out: list[tuple[tuple[str, int], tuple[int, int, str | None, int]]] = []
        for tp in wanted:
            if group is None:
                out.append((tp, missing))
                continue
            if require_stable and group.offsets.has_pending(tp):
                out.append((tp, (-1, -1, "", ErrorCode.UNSTABLE_OFFSET_COMMIT)))
                continue
            oam = group.offsets.get(tp)
            if oam is None:
                out.append((tp, missing))
            else:
                out.append((tp, (oam.offset, oam.leader_epoch, oam.metadata, 0)))
        return (0, out)

    # --- OffsetDelete ---

    def _subscribed(self, group: Group, topic: str) -> bool:
        if isinstance(group, ConsumerGroup):
            return topic in self.core.group_topics(group)
        subs = group.subscribed_topics()
        return True if subs is None else topic in subs

    def offset_delete(
        self, token: Token[OffsetDeleteResponse], req: OffsetDeleteRequest, version: int
    ) -> None:
        gid = req.group_id
        T, P = OffsetDeleteResponse.Topics, OffsetDeleteResponse.Topics.Partitions

        def top(code: int) -> None:
            self.core.reply(
                token, OffsetDeleteResponse(error_code=code, throttle_time_ms=0, topics=[])
            )

        if not gid:
            return top(ErrorCode.INVALID_GROUP_ID)
        err = self.core.partition_error(gid)
        if err:
            return top(err)
        group = self.core.groups.get(gid)
        if group is None or (isinstance(group, ClassicGroup) and group.is_(ClassicState.DEAD)):
            return top(ErrorCode.GROUP_ID_NOT_FOUND)
        if isinstance(group, ClassicGroup) and not group.is_(ClassicState.EMPTY):
            if group.protocol_type != CONSUMER_PROTOCOL_TYPE:
                return top(ErrorCode.NON_EMPTY_GROUP)
        results: list[tuple[str, list[tuple[int, int]]]] = []
        records: list[tuple[Key, Value | None]] = []
        doomed: list[tuple[str, int]] = []
        active = not group.is_empty
        for t in req.topics:
            subscribed = active and self._subscribed(group, t.name)
            parts: list[tuple[int, int]] = []
            for p in t.partitions:
                if subscribed:
                    parts.append((p.partition_index, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC))
                    continue
                parts.append((p.partition_index, 0))
                tp = (t.name, p.partition_index)
                if group.offsets.get(tp) is not None:
                    doomed.append(tp)
                    records.append((OffsetCommitKey(gid, tp[0], tp[1]), None))
            results.append((t.name, parts))

        def respond(code: int = 0) -> None:
            if code:
                return top(code)
            self.core.reply(
                token,
                OffsetDeleteResponse(
                    error_code=0,
                    throttle_time_ms=0,
                    topics=[
                        T(name=n, partitions=[P(partition_index=i, error_code=e) for i, e in ps])
                        for n, ps in results
                    ],
                ),
            )

        if not records:
            return respond()

        def done(code: int, _offset: int) -> None:
            if code:
                return respond(OFFSET_COMMIT_APPEND_ERRORS(code))
            for tp in doomed:
                group.offsets.delete(tp)
            respond()

        self.core.write(gid, records, done)

    # --- retention ---

    def ensure_retention_timer(self) -> None:
        if self.core.timers.deadline(("retention",)) is None:
            self.core.timers.schedule(
                ("retention",),
                self.core.clock() + self.core.config.offsets_retention_check_interval_ms,
                self._run_retention,
            )

    def _expired_offsets(self, group: Group, now: int) -> list[tuple[str, int]]:
        retention = self.core.config.offsets_retention_ms
        offsets = group.offsets
        if isinstance(group, ClassicGroup):
            if group.is_(ClassicState.EMPTY) or group.protocol_type is None:
                empty_since = (
                    group.state_timestamp
                    if group.is_(ClassicState.EMPTY) and group.protocol_type
                    else -1
                )
                subscribed: set[str] = set()
            elif group.protocol_type == CONSUMER_PROTOCOL_TYPE and group.is_(ClassicState.STABLE):
                subs = group.subscribed_topics()
                if subs is None:
                    return []
                subscribed, empty_since = subs, -1
            else:
                return []
        else:
            subscribed, empty_since = self.core.group_topics(group), -1
        out = []
        for tp, oam in offsets.committed.items():
            if tp[0] in subscribed or offsets.has_pending(tp):
                continue
            if oam.expire_timestamp >= 0:
                if now >= oam.expire_timestamp:
                    out.append(tp)
                continue
            base = empty_since if empty_since >= 0 else oam.commit_timestamp
            if now - base >= retention:
                out.append(tp)
        return out

    def _run_retention(self) -> None:
        now = self.core.clock()
        for group in self.core.active_groups():
            gid = group.group_id
            expired = self._expired_offsets(group, now)
            records: list[tuple[Key, Value | None]] = []
            for tp in expired:
                group.offsets.delete(tp)
                records.append((OffsetCommitKey(gid, tp[0], tp[1]), None))
            empty = (
                group.is_(ClassicState.EMPTY) if isinstance(group, ClassicGroup) else group.is_empty
            )
            if empty and not len(group.offsets) and not group.offsets.pending_txn:
                records.extend(self.group_tombstones(group))
                self.core.remove_group(gid)
            if records:
                self.core.write(gid, records)
        self.core.timers.schedule(
            ("retention",),
            now + self.core.config.offsets_retention_check_interval_ms,
            self._run_retention,
        )

    def group_tombstones(self, group: Group) -> list[tuple[Key, Value | None]]:
        gid = group.group_id
        if isinstance(group, ConsumerGroup):
            return [
                (ConsumerGroupKey(CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, gid), None),
                (ConsumerGroupKey(CONSUMER_GROUP_METADATA, gid), None),
            ]
        return [(GroupMetadataKey(gid), None)]
