"""The transaction coordinator's configuration, outbox entries and results.

``TransactionCoordinator`` (``coordinator.txn.coordinator``) asks for ``MarkerWrite``s as the
effects of its outbox; the broker reports their outcomes back with the error codes that
``MARKER_DONE``/``MARKER_FENCED`` interpret.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from gregor.coordinator.txn.state import TopicPartition
from gregor.protocol.errors import ErrorCode


@dataclass
class TxnCoordinatorConfig:
    num_partitions: int = 50
    max_timeout_ms: int = 900000
    id_expiration_ms: int = 7 * 24 * 3600 * 1000
    id_expiration_check_interval_ms: int = 3600 * 1000
    retry_backoff_ms: int = 100

    @classmethod
    def from_props(cls, get: Callable[[str, Any], Any]) -> TxnCoordinatorConfig:
        """Build from Kafka broker keys; ``get(key, default)`` reads the broker config."""

        def i(key: str, default: int) -> int:
            return int(get(key, default))

        return cls(
            num_partitions=i("transaction.state.log.num.partitions", 50),
            max_timeout_ms=i("transaction.max.timeout.ms", 900000),
            id_expiration_ms=i("transactional.id.expiration.ms", 7 * 24 * 3600 * 1000),
            id_expiration_check_interval_ms=i(
                "transaction.remove.expired.transaction.cleanup.interval.ms", 3600 * 1000
            ),
            retry_backoff_ms=i("transaction.retry.backoff.ms", 100),
        )


class MarkerWrite(NamedTuple):
    id: int
    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    partitions: tuple[TopicPartition, ...]


class InitProducerIdResult(NamedTuple):
    error_code: int
    producer_id: int = -1
    producer_epoch: int = -1


class EndTxnResult(NamedTuple):
    """EndTxn's answer: the error, and for a transaction version 2 client the producer id
    and epoch to go on with (the epoch bumped by the end, or a new id at epoch 0)."""

    error_code: int
    producer_id: int = -1
    producer_epoch: int = -1


class TxnDescription(NamedTuple):
    """One DescribeTransactions entry; on an error only the error is set (the other fields
    keep the wire defaults, as Kafka leaves them)."""

    transactional_id: str
    error_code: int
    state: str = ""
    timeout_ms: int = 0
    start_ms: int = 0
    producer_id: int = 0
    producer_epoch: int = 0
    partitions: tuple[TopicPartition, ...] = ()


class TxnListing(NamedTuple):
    transactional_id: str
    producer_id: int
    state: str


# Marker results after which a partition needs no further marker.
MARKER_DONE = frozenset({0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION})
# A newer producer epoch or coordinator already wrote to the partition: sending again is futile.
MARKER_FENCED = frozenset(
    {ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED}
)


class TxnOperation(enum.IntEnum):
    """What a transactional write's request version lets the leader do about a partition
    the producer's transaction does not cover yet (Kafka's ``TransactionSupportedOperation``)."""

    DEFAULT_ERROR = 0  # verify; not in the transaction -> INVALID_TXN_STATE
    GENERIC_ERROR = 1  # verify; not in the transaction -> TRANSACTION_ABORTABLE
    ADD_PARTITION = 2  # transaction version 2: add the partition to the transaction

    @classmethod
    def for_produce(cls, version: int) -> TxnOperation:
        return (
            cls.ADD_PARTITION
            if version > 11
            else cls.GENERIC_ERROR
            if version > 10
            else cls.DEFAULT_ERROR
        )

    @classmethod
    def for_txn_offset_commit(cls, version: int) -> TxnOperation:
        return (
            cls.ADD_PARTITION
            if version > 4
            else cls.GENERIC_ERROR
            if version > 3
            else cls.DEFAULT_ERROR
        )
