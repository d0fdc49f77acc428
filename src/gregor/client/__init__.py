"""Gregor's Kafka client: an asyncio core with a thin synchronous facade.

Asyncio: :class:`AIOProducer`, :class:`AIOConsumer`, :class:`AIOShareConsumer`,
:class:`AIOAdminClient`, :func:`fetch_arrow`. Synchronous: :class:`Producer`, :class:`Consumer`,
:class:`ShareConsumer`, :class:`AdminClient`, :class:`BulkReader`. Configuration uses Kafka's
names (``bootstrap.servers``, ``acks``, ``linger.ms``, ``group.id``, ...). The package speaks
only the Kafka protocol (through :mod:`gregor.protocol`), so it works with any
Kafka-compatible broker.

Where things live, by role (each package's docstring lists its modules):

- ``core/``: connections, cluster metadata, settings, TLS and SASL, errors, the loop thread;
- ``producer/``: the producer, its batching, the per-record path and its compiled twin,
  transactions;
- ``consumer/``: the consumer, fetching, group membership and assignors, the share consumer,
  the Arrow bulk readers;
- ``admin/``: the admin client, one module per family of calls;
- ``sync``: the synchronous facade over all of them.

The import contract in ``pyproject.toml`` layers them: ``sync`` > ``admin`` > ``producer`` |
``consumer`` > ``core``. The other modules here (``conn``, ``errors``, ``bulk``, ``acls``, ...)
are the old paths, re-exporting the new modules for importers outside the client.

The names below are imported on first use (module ``__getattr__``): importing one module of the
client (the broker imports ``gregor.client.core.sasl`` for its inter-broker logins) does not
import the producer, the consumer and the admin client with it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gregor.client.admin import AIOAdminClient, ConfigEntry, NewTopic, TopicDescription
    from gregor.client.consumer import (
        AIOConsumer,
        AIOShareConsumer,
        ConsumerGroupMetadata,
        ConsumerRecord,
        OffsetAndMetadata,
        RebalanceListener,
        ShareRecord,
    )
    from gregor.client.consumer.arrow import ArrowBatchBuilder, fetch_arrow, spark_schema
    from gregor.client.core.config import Config
    from gregor.client.core.errors import (
        BufferFullError,
        ConfigError,
        IllegalStateError,
        KafkaConnectionError,
        KafkaError,
        KafkaTimeoutError,
        NoBrokersAvailableError,
        UnsupportedForBrokerError,
    )
    from gregor.client.core.metadata import TopicPartition
    from gregor.client.producer import (
        AIOProducer,
        ProduceFuture,
        RecordMetadata,
        TransactionHandle,
        end_transaction,
        murmur2,
        partition_for_key,
    )
    from gregor.client.sync import AdminClient, BulkReader, Consumer, Producer, ShareConsumer

#: public name -> the module it lives in (pyarrow comes only with the bulk read path's names).
_HOME = {
    **dict.fromkeys(
        ("AIOAdminClient", "ConfigEntry", "NewTopic", "TopicDescription"), "gregor.client.admin"
    ),
    **dict.fromkeys(
        (
            "AIOConsumer",
            "AIOShareConsumer",
            "ConsumerGroupMetadata",
            "ConsumerRecord",
            "OffsetAndMetadata",
            "RebalanceListener",
            "ShareRecord",
        ),
        "gregor.client.consumer",
    ),
    **dict.fromkeys(
        ("ArrowBatchBuilder", "fetch_arrow", "spark_schema"), "gregor.client.consumer.arrow"
    ),
    "Config": "gregor.client.core.config",
    **dict.fromkeys(
        (
            "BufferFullError",
            "ConfigError",
            "IllegalStateError",
            "KafkaConnectionError",
            "KafkaError",
            "KafkaTimeoutError",
            "NoBrokersAvailableError",
            "UnsupportedForBrokerError",
        ),
        "gregor.client.core.errors",
    ),
    "TopicPartition": "gregor.client.core.metadata",
    **dict.fromkeys(
        (
            "AIOProducer",
            "ProduceFuture",
            "RecordMetadata",
            "TransactionHandle",
            "end_transaction",
            "murmur2",
            "partition_for_key",
        ),
        "gregor.client.producer",
    ),
    **dict.fromkeys(
        ("AdminClient", "BulkReader", "Consumer", "Producer", "ShareConsumer"), "gregor.client.sync"
    ),
}


def __getattr__(name: str) -> object:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'gregor.client' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


__all__ = [
    "AIOAdminClient",
    "AIOConsumer",
    "AIOProducer",
    "AIOShareConsumer",
    "AdminClient",
    "ArrowBatchBuilder",
    "BufferFullError",
    "BulkReader",
    "Config",
    "ConfigEntry",
    "ConfigError",
    "Consumer",
    "ConsumerGroupMetadata",
    "ConsumerRecord",
    "IllegalStateError",
    "KafkaConnectionError",
    "KafkaError",
    "KafkaTimeoutError",
    "NewTopic",
    "NoBrokersAvailableError",
    "OffsetAndMetadata",
    "ProduceFuture",
    "Producer",
    "RebalanceListener",
    "RecordMetadata",
    "ShareConsumer",
    "ShareRecord",
    "TopicDescription",
    "TopicPartition",
    "TransactionHandle",
    "UnsupportedForBrokerError",
    "end_transaction",
    "fetch_arrow",
    "murmur2",
    "partition_for_key",
    "spark_schema",
]
