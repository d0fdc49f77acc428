"""Gregor's Kafka client: an asyncio core with a thin synchronous facade.

Asyncio: :class:`AIOProducer`, :class:`AIOConsumer`, :class:`AIOAdminClient`,
:func:`fetch_arrow`. Synchronous: :class:`Producer`, :class:`Consumer`, :class:`AdminClient`,
:class:`BulkReader`. Configuration uses Kafka's names (``bootstrap.servers``, ``acks``,
``linger.ms``, ``group.id``, ...). The package speaks only the Kafka protocol (through
:mod:`gregor.protocol`), so it works with any Kafka-compatible broker.
"""

from gregor.client.admin import AIOAdminClient, ConfigEntry, NewTopic, TopicDescription
from gregor.client.arrow import ArrowBatchBuilder, fetch_arrow, spark_schema
from gregor.client.config import Config
from gregor.client.consumer import AIOConsumer
from gregor.client.errors import (
    ConfigError,
    IllegalStateError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    NoBrokersAvailableError,
    UnsupportedForBrokerError,
)
from gregor.client.fetcher import ConsumerRecord
from gregor.client.futures import ProduceFuture, RecordMetadata
from gregor.client.group import ConsumerGroupMetadata, OffsetAndMetadata, RebalanceListener
from gregor.client.metadata import TopicPartition
from gregor.client.partitioner import murmur2, partition_for_key
from gregor.client.producer import AIOProducer
from gregor.client.sync import AdminClient, BulkReader, Consumer, Producer

__all__ = [
    "AIOAdminClient",
    "AIOConsumer",
    "AIOProducer",
    "AdminClient",
    "ArrowBatchBuilder",
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
    "TopicDescription",
    "TopicPartition",
    "UnsupportedForBrokerError",
    "fetch_arrow",
    "murmur2",
    "partition_for_key",
    "spark_schema",
]
