"""The old path of :mod:`gregor.client.core.metadata`, kept for importers outside the client (the
CLI); new code imports the core module."""

from gregor.client.core.metadata import (
    BrokerMetadata,
    ClusterMetadata,
    PartitionMetadata,
    TopicMetadata,
    TopicPartition,
)

__all__ = [
    "BrokerMetadata",
    "ClusterMetadata",
    "PartitionMetadata",
    "TopicMetadata",
    "TopicPartition",
]
