"""Bug: the transaction coordinator applies an EndTxn that carries an older producer epoch (a
zombie's, delayed or from a fenced process) to the transaction the current epoch has open: a
new process's transaction is committed or aborted by its predecessor's late request."""

from __future__ import annotations

from collections.abc import Callable

from gregor.coordinator.txn.commit import TxnCommits
from gregor.coordinator.txn.state import TxnMetadata

DESCRIPTION = "the coordinator applies an EndTxn from an older producer epoch"
NEMESIS = ("hold", "crash")


def inject() -> None:
    end = TxnCommits._end

    def end_any_epoch(
        self: TxnCommits,
        md: TxnMetadata,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        from_client: bool,
        done: Callable[[int], None],
    ) -> None:
        if from_client and producer_id == md.producer_id and producer_epoch < md.producer_epoch:
            producer_epoch = md.producer_epoch
        end(self, md, producer_id, producer_epoch, commit, from_client, done)

    TxnCommits._end = end_any_epoch  # type: ignore[method-assign]
