"""The broker's side of topics as tables: its partitions as translator sources, and which
partitions this broker translates.

A translator reads a partition the way a read_committed consumer's Fetch does
(``Partition.read`` with READ_COMMITTED: up to the last stable offset, with the aborted
transactions) and waits on the partition's consumer waiters (woken when the high watermark
moves). :func:`wanted_translations` is what ``TableTranslation.reconcile`` is given after
every metadata change: each partition this broker leads whose topic's ``iceberg.mode`` is not
``disabled``.
"""

from __future__ import annotations

import asyncio

from gregor.broker.config.broker_config import BrokerConfig
from gregor.broker.replication.partition import READ_COMMITTED, Partition
from gregor.broker.replication.replica_manager import ReplicaManager
from gregor.client.schema_registry import RegistryClient
from gregor.cluster.image import MetadataImage
from gregor.tables.service import Wanted
from gregor.tables.settings import TopicTableConfig
from gregor.tables.source import CommittedRead


class PartitionLogSource:
    """One led partition, as ``gregor.tables.translator.PartitionSource``."""

    def __init__(self, partition: Partition) -> None:
        self.partition = partition
        self.topic = partition.topic
        self.index = partition.index

    @property
    def last_stable_offset(self) -> int:
        return self.partition.log.last_stable_offset

    @property
    def log_start_offset(self) -> int:
        return self.partition.log.log_start_offset

    def read_committed(self, offset: int, max_bytes: int) -> CommittedRead:
        read = self.partition.read(
            offset, max_bytes, isolation=READ_COMMITTED, from_follower=False, min_one=True
        )
        aborted = [(a.producer_id, a.first_offset) for a in read.aborted_transactions or ()]
        return CommittedRead(read.records, aborted, read.last_stable_offset, read.log_start_offset)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PartitionLogSource) and other.partition is self.partition

    def __hash__(self) -> int:
        return id(self.partition)

    def wait(self) -> asyncio.Future[None]:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.partition.add_waiter(fut, from_follower=False)
        return fut

    def forget(self, fut: asyncio.Future[None]) -> None:
        self.partition.remove_waiter(fut)


def wanted_translations(
    image: MetadataImage, replicas: ReplicaManager, node_id: int
) -> dict[tuple[str, int], Wanted]:
    """The partitions this broker should translate now, keyed by (topic, partition)."""
    wanted: dict[tuple[str, int], Wanted] = {}
    for topic in image.topics.values():
        config = TopicTableConfig.of(topic.configs)
        if not config.enabled:
            continue
        for p in topic.partitions:
            if p.leader != node_id:
                continue
            hosted = replicas.get_partition(topic.name, p.partition)
            if hosted is None or not hosted.is_leader:
                continue
            wanted[(topic.name, p.partition)] = Wanted(
                PartitionLogSource(hosted), config, p.leader_epoch
            )
    return wanted


class TableRegistry:
    """The registry the typed tables ask, as schema ID validation asks it: its first URL, with
    the broker's login and TLS (``confluent.basic.auth.*``, ``confluent.ssl.*``). Called when a
    translator starts: None when the broker has none, or when the one it serves beside itself
    is not listening yet (its configured port 0 not yet bound: the translator tries again)."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self._client: RegistryClient | None = None

    def __call__(self) -> RegistryClient | None:
        urls, security = self.config.schema_registry_urls, self.config.schema_registry_client
        if not urls or urls[0].rstrip("/").endswith(":0"):
            return None
        client = self._client
        if client is None or client.url != urls[0].rstrip("/"):
            user, password = security.login if security.login is not None else (None, None)
            client = self._client = RegistryClient(
                urls[0], user, password, timeout_s=10.0, ssl_context=security.ssl_context
            )
        return client
