"""Reading ``__transaction_state`` back at load: records in log order to transaction metadata.

The log is compacted, so a partition holds the latest record of each transactional id plus
whatever the cleaner has not reached yet; replaying every record in order and keeping the last
one per id rebuilds the coordinator's state. A tombstone (null value) removes the id.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from gregor.coordinator.txn.records import decode_key, decode_value
from gregor.coordinator.txn.state import TxnMetadata, TxnState
from gregor.protocol.exceptions import ProtocolError
from gregor.protocol.records.batch import decode_batch
from gregor.protocol.records.header import iter_batches

log = logging.getLogger("gregor.coordinator.transactions")


def replay_transaction_log(data: bytes | memoryview) -> Iterator[tuple[str, TxnMetadata | None]]:
    """(transactional id, its metadata or None for a tombstone) for each record of the whole
    batches in ``data``, in log order. Control batches are skipped; an unreadable record is
    logged and skipped."""
    for pos, h in iter_batches(data):
        if h.is_control:
            continue
        for rec in decode_batch(data, pos).records:
            try:
                tid = decode_key(rec.key)
                value = decode_value(rec.value) if tid is not None else None
                state = TxnState(value.state) if value is not None else None
            except (ProtocolError, ValueError) as e:
                log.warning(
                    "skipping unreadable __transaction_state record at %d: %s", rec.offset, e
                )
                continue
            if tid is None:
                continue
            if value is None or state is None:
                yield tid, None
                continue
            yield (
                tid,
                TxnMetadata(
                    tid,
                    value.producer_id,
                    value.transaction_timeout_ms,
                    producer_epoch=value.producer_epoch,
                    last_producer_id=value.previous_producer_id,
                    state=state,
                    partitions=set(value.partitions),
                    start_ms=value.start_timestamp_ms,
                    last_update_ms=value.last_update_timestamp_ms,
                    next_producer_id=value.next_producer_id,
                    client_transaction_version=value.client_transaction_version,
                ),
            )
