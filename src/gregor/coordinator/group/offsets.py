"""Committed offsets of one group, and transactional offsets waiting for their marker.

Theory of operation. ``committed`` maps (topic, partition) to the last offset whose record
reached the log. A plain OffsetCommit becomes visible only after its record is appended (the
coordinator applies it in the write's completion), so a reader never sees an offset that a
crash could lose.

Transactional offsets (TxnOffsetCommit, ``coordinator.transaction_offsets``) are written
inside a producer's transaction; they sit in ``pending_txn[producer_id]`` until the transaction marker is
written: COMMIT moves them to ``committed`` unless a plain commit landed later in the log
(compared by log offset, as Kafka does), ABORT drops them. While any are pending for a
partition, OffsetFetch with ``require_stable`` answers UNSTABLE_OFFSET_COMMIT for it.
"""

from __future__ import annotations

from dataclasses import dataclass

TopicPartition = tuple[str, int]


@dataclass
class OffsetAndMetadata:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1
    log_offset: int = -1  # offset of the record in __consumer_offsets (-1: not yet known)


class OffsetStore:
    __slots__ = ("committed", "pending_txn")

    def __init__(self) -> None:
        self.committed: dict[TopicPartition, OffsetAndMetadata] = {}
        self.pending_txn: dict[int, dict[TopicPartition, OffsetAndMetadata]] = {}

    def __len__(self) -> int:
        return len(self.committed)

    def get(self, tp: TopicPartition) -> OffsetAndMetadata | None:
        return self.committed.get(tp)

    def commit(self, tp: TopicPartition, oam: OffsetAndMetadata) -> None:
        self.committed[tp] = oam

    def delete(self, tp: TopicPartition) -> bool:
        return self.committed.pop(tp, None) is not None

    def topics(self) -> set[str]:
        return {t for t, _ in self.committed}

    def has_pending(self, tp: TopicPartition) -> bool:
        return any(tp in offs for offs in self.pending_txn.values())

    def has_pending_for_topic(self, topic: str) -> bool:
        return any(t == topic for offs in self.pending_txn.values() for t, _ in offs)

    def prepare_txn(self, producer_id: int, tp: TopicPartition, oam: OffsetAndMetadata) -> None:
        self.pending_txn.setdefault(producer_id, {})[tp] = oam

    def complete_txn(self, producer_id: int, commit: bool) -> list[TopicPartition]:
        """Apply (commit) or drop (abort) a producer's pending offsets; returns the partitions
        whose committed offset changed."""
        pending = self.pending_txn.pop(producer_id, None)
        if not pending or not commit:
            return []
        changed = []
        for tp, oam in pending.items():
            cur = self.committed.get(tp)
            if cur is None or cur.log_offset < oam.log_offset or oam.log_offset < 0:
                self.committed[tp] = oam
                changed.append(tp)
        return changed
