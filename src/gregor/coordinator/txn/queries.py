"""DescribeTransactions and ListTransactions: read-only views of the transaction coordinator's
state, answered at once (no write, no outbox)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from gregor.coordinator.txn.state import STATES_BY_NAME, TxnMetadata, TxnState
from gregor.coordinator.txn.types import TxnDescription, TxnListing
from gregor.protocol.errors import ErrorCode


def describe_transactions(
    txns: Mapping[str, TxnMetadata],
    partition_error: Callable[[str], int],
    transactional_ids: Iterable[str],
) -> list[TxnDescription]:
    """One entry per id; ``partition_error(id)`` is 0 when this coordinator serves the id."""
    out = []
    for tid in transactional_ids:
        err = partition_error(tid) if tid else ErrorCode.INVALID_REQUEST
        md = txns.get(tid) if not err else None
        if err:
            out.append(TxnDescription(tid, err))
        elif md is None or md.state == TxnState.DEAD:
            out.append(TxnDescription(tid, ErrorCode.TRANSACTIONAL_ID_NOT_FOUND))
        else:
            out.append(
                TxnDescription(
                    tid,
                    0,
                    md.state.display_name,
                    md.timeout_ms,
                    md.start_ms,
                    md.producer_id,
                    md.producer_epoch,
                    tuple(sorted(md.partitions)),
                )
            )
    return out


def list_transactions(
    txns: Mapping[str, TxnMetadata],
    partition_error: Callable[[str], int],
    loading: bool,
    clock: Callable[[], int],
    state_filters: Iterable[str],
    producer_id_filters: Iterable[int],
    duration_filter_ms: int = -1,
) -> tuple[int, list[str], list[TxnListing]]:
    """(error, unknown state names, matching transactions, sorted by id)."""
    if loading:
        return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, [], []
    states, unknown = set(), []
    for name in state_filters:
        if name in STATES_BY_NAME:
            states.add(STATES_BY_NAME[name])
        else:
            unknown.append(name)
    pids = set(producer_id_filters)
    now = clock()
    out = []
    for tid, md in sorted(txns.items()):
        if md.state == TxnState.DEAD or partition_error(tid):
            continue
        if pids and md.producer_id not in pids:
            continue
        if states and md.state not in states:
            continue
        if duration_filter_ms >= 0 and now - md.start_ms <= duration_filter_ms:
            continue
        out.append(TxnListing(tid, md.producer_id, md.state.display_name))
    return 0, unknown, out
