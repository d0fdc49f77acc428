"""Bug: offsets sent in a transaction (TxnOffsetCommit) become the group's committed offsets at
once, not when the transaction commits; an aborted transaction's offsets stay committed, and a
consumer that seeks back to its committed offsets after the abort skips what it had read."""

from __future__ import annotations

from gregor.coordinator.group.offsets import OffsetAndMetadata, OffsetStore, TopicPartition

DESCRIPTION = "transactional offsets committed outside their transaction"
NEMESIS = ()


def inject() -> None:
    prepare = OffsetStore.prepare_txn

    def prepare_and_commit(
        self: OffsetStore, producer_id: int, tp: TopicPartition, oam: OffsetAndMetadata
    ) -> None:
        prepare(self, producer_id, tp, oam)
        self.committed[tp] = oam

    OffsetStore.prepare_txn = prepare_and_commit  # type: ignore[method-assign]
