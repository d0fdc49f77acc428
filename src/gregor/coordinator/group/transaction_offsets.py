"""TxnOffsetCommit for the group coordinator: offsets committed inside a transaction.

Theory of operation. A transactional producer that consumed from a group commits the group's
offsets as part of its transaction (``send_offsets_to_transaction``): its AddOffsetsToTxn
added the group's ``__consumer_offsets`` partition to the transaction, and TxnOffsetCommit
writes the offsets there as a *transactional* batch carrying the producer's id and epoch
(so the partition's producer state fences an old epoch, as for any transactional write).

Written offsets are not visible yet: they wait in the group's ``OffsetStore.pending_txn``
under the producer id (OffsetFetch with ``require_stable`` answers UNSTABLE_OFFSET_COMMIT for
their partitions meanwhile). When the transaction coordinator writes the COMMIT or ABORT
marker to the partition, the broker calls :meth:`TxnOffsets.complete_txn_offsets`, which
makes them the committed offsets or drops them; a restart replays the same from the log.

Validation follows Kafka's for transactional commits: a group that does not exist is created
as a simple group when the request carries no generation; a member id, generation or
instance id, when given, must match the group; a classic group in the middle of a rebalance
still accepts the commit (the producer's transaction, not the group, decides its fate).
"""

from __future__ import annotations

from gregor.coordinator.common.append_errors import OFFSET_COMMIT_APPEND_ERRORS
from gregor.coordinator.common.outbox import Token
from gregor.coordinator.group.classic import ClassicGroup, ClassicState
from gregor.coordinator.group.core import Group, GroupCore
from gregor.coordinator.group.offsets import OffsetAndMetadata
from gregor.coordinator.group.records import (
    OffsetCommitKey,
    OffsetCommitValue,
    encode_key,
    encode_value,
)
from gregor.protocol.errors import ErrorCode
from gregor.protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)
from gregor.protocol.records.batch import RecordBatchBuilder


class TxnOffsets:
    """TxnOffsetCommit, and the markers that commit or drop its pending offsets."""

    def __init__(self, core: GroupCore) -> None:
        self.core = core

    def _validate_txn_commit(
        self, group: Group, member_id: str, instance_id: str | None, generation: int
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
            return 0
        # KIP-848 group: the fields are checked only when the request carries them.
        if generation < 0 and group.is_empty:
            return 0
        if generation < 0 and not member_id and instance_id is None:
            return 0
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation != member.member_epoch:
            return ErrorCode.ILLEGAL_GENERATION
        return 0

    def txn_offset_commit(
        self, token: Token[TxnOffsetCommitResponse], req: TxnOffsetCommitRequest, version: int
    ) -> None:
        gid = req.group_id
        Topic, Part = TxnOffsetCommitResponse.Topics, TxnOffsetCommitResponse.Topics.Partitions
        order = [(t.name, p.partition_index) for t in req.topics for p in t.partitions]
        results: dict[tuple[str, int], int] = {}

        def respond() -> None:
            topics: dict[str, list[TxnOffsetCommitResponse.Topics.Partitions]] = {}
            for name, p in order:
                topics.setdefault(name, []).append(
                    Part(partition_index=p, error_code=results[(name, p)])
                )
            self.core.reply(
                token,
                TxnOffsetCommitResponse(
                    throttle_time_ms=0,
                    topics=[Topic(name=n, partitions=ps) for n, ps in topics.items()],
                ),
            )

        def fail_all(code: int) -> None:
            for tp in order:
                results[tp] = code
            respond()

        if not gid:
            return fail_all(ErrorCode.INVALID_GROUP_ID)
        err = self.core.partition_error(gid)
        if err:
            return fail_all(err)
        generation = req.generation_id if version >= 3 else -1
        member_id = (req.member_id or "") if version >= 3 else ""
        instance_id = req.group_instance_id if version >= 3 else None
        now = self.core.clock()
        group = self.core.groups.get(gid)
        if group is None:
            if generation >= 0:
                return fail_all(ErrorCode.ILLEGAL_GENERATION)
            group = ClassicGroup(gid, state_timestamp=now)
            self.core.groups[gid] = group
        code = self._validate_txn_commit(group, member_id, instance_id, generation)
        if code:
            return fail_all(code)
        batch = RecordBatchBuilder(
            producer_id=req.producer_id,
            producer_epoch=req.producer_epoch,
            base_sequence=0,
            is_transactional=True,
        )
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
                leader_epoch = p.committed_leader_epoch if version >= 2 else -1
                staged.append(
                    (tp, OffsetAndMetadata(p.committed_offset, leader_epoch, metadata, now))
                )
                batch.append(
                    now,
                    encode_key(OffsetCommitKey(gid, tp[0], tp[1])),
                    encode_value(
                        OffsetCommitValue(p.committed_offset, metadata, now, leader_epoch)
                    ),
                )
        if not staged:
            return respond()
        producer_id = req.producer_id

        def done(code: int, base_offset: int) -> None:
            for i, (tp, oam) in enumerate(staged):
                if code:
                    results[tp] = OFFSET_COMMIT_APPEND_ERRORS(code)
                    continue
                oam.log_offset = base_offset + i if base_offset >= 0 else -1
                current = self.core.groups.get(gid)
                if current is not None:
                    current.offsets.prepare_txn(producer_id, tp, oam)
                results[tp] = 0
            respond()

        # Transactional writes do not linger (as in Kafka): appended now, after any records
        # lingering for the partition.
        self.core.append_batch(self.core.partition_for(gid), batch.build(), done)

    def complete_txn_offsets(self, partition: int, producer_id: int, commit: bool) -> None:
        """A COMMIT (or ABORT) marker for ``producer_id`` was written to ``partition`` of
        ``__consumer_offsets``: its pending offsets there become committed (or are dropped)."""
        self.core.complete_txn(partition, producer_id, commit)
