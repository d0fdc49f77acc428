"""The one mapping of a failed append to the error a coordinator's client understands.

A coordinator's write to its internal topic fails with the replica manager's error; Kafka
answers the request with a coordinator error instead, so the client looks the coordinator up
again or retries (``GroupMetadataManager``'s and ``TransactionStateManager``'s mappings):

* the partition is not ready (UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS[_AFTER_APPEND],
  REQUEST_TIMED_OUT) -> COORDINATOR_NOT_AVAILABLE;
* this broker no longer leads it (NOT_LEADER_OR_FOLLOWER, KAFKA_STORAGE_ERROR,
  NOT_COORDINATOR) -> NOT_COORDINATOR;
* the batch is too large (MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE, INVALID_FETCH_SIZE) ->
  the variant's ``too_large``;
* anything else -> the variant's ``otherwise``, or the error itself when that is None.

The variants, one per kind of write: group metadata (too large is UNKNOWN_SERVER_ERROR, the
rest passes through), offset commits, transactional ones included (too large is
INVALID_COMMIT_OFFSET_SIZE; producer errors such as INVALID_PRODUCER_EPOCH pass through so a
fenced producer is told so), ``__transaction_state`` (everything else is
UNKNOWN_SERVER_ERROR) and ``__share_group_state`` (everything else is
COORDINATOR_NOT_AVAILABLE: the share-partition leader retries it).
"""

from __future__ import annotations

from dataclasses import dataclass

from gregor.protocol.errors import ErrorCode

_NOT_AVAILABLE = frozenset(
    {
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.REQUEST_TIMED_OUT,
    }
)
_MOVED = frozenset(
    {ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.NOT_COORDINATOR}
)
_TOO_LARGE = frozenset(
    {ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_FETCH_SIZE}
)


@dataclass(frozen=True, slots=True)
class AppendErrors:
    """One variant of the mapping: call it with the append's error code (0 stays 0)."""

    too_large: int
    otherwise: int | None = None

    def __call__(self, code: int) -> int:
        if not code:
            return 0
        if code in _NOT_AVAILABLE:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if code in _MOVED:
            return ErrorCode.NOT_COORDINATOR
        if code in _TOO_LARGE:
            return self.too_large
        return code if self.otherwise is None else self.otherwise


#: A group's own records (its metadata, a KIP-848 group's records, tombstones).
GROUP_APPEND_ERRORS = AppendErrors(ErrorCode.UNKNOWN_SERVER_ERROR)
#: OffsetCommit and TxnOffsetCommit.
OFFSET_COMMIT_APPEND_ERRORS = AppendErrors(ErrorCode.INVALID_COMMIT_OFFSET_SIZE)
#: ``__transaction_state``.
TXN_LOG_APPEND_ERRORS = AppendErrors(ErrorCode.UNKNOWN_SERVER_ERROR, ErrorCode.UNKNOWN_SERVER_ERROR)
#: ``__share_group_state``.
SHARE_STATE_APPEND_ERRORS = AppendErrors(
    ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_NOT_AVAILABLE
)
