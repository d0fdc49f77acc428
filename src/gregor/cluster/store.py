"""The metadata store interface every store implements, and the factory for ``metadata.store``.

Stores: ``memory`` (tests), ``file`` (one node, the default), ``etcd://`` (a cluster: see
``etcd_store``, whose behaviour differs where the contract says "local stores").

Contract (checked for every store by ``tests/contract/test_metadata_store.py``):

- ``image`` is the latest ``MetadataImage``; ``start()`` loads or initialises it (and fixes the
  cluster id), ``close()`` ends every ``watch()`` stream.
- Every successful change produces a new image with ``version`` one higher and calls every
  subscribed listener synchronously, in subscription order, with the ``MetadataDelta`` before
  the mutating coroutine returns; ``watch()`` yields the same deltas.
- Refusals are the Kafka exceptions of ``gregor.protocol.errors`` (TOPIC_ALREADY_EXISTS,
  UNKNOWN_TOPIC_OR_PARTITION, INVALID_PARTITIONS, INVALID_REPLICA_ASSIGNMENT,
  FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION, INVALID_REQUEST, BROKER_ID_NOT_REGISTERED);
  a refused change leaves the image and the durable state as they were.
- A new partition has leader = first replica, leader_epoch 0, partition_epoch 0, isr =
  replicas. ``alter_partition`` is a compare-and-set on ``partition_epoch`` and bumps it.
- ``reassign_partitions`` starts a reassignment (adding/removing replicas); the
  ``alter_partition`` that brings the whole target into the ISR completes it.
- Broker registrations are ephemeral; producer-id blocks are durable and never overlap.
- SCRAM credentials (salted, never passwords) are durable; refusals are per user.
- Config overrides of non-topic resources (``image.config_resources``) are durable.
- ACL bindings (``image.acls``) are durable, each held once; refusals are per binding/filter.
- Delegation tokens (``image.delegation_tokens``, no HMACs) are durable.
- ``controller_id``: the local stores report the lowest live registered node; the etcd store
  the node elected through etcd (the first registered, until its lease ends).
- Changes are serialised: concurrent callers never lose an update.
- ``session_confirmed()``: the local stores are always confirmed; the etcd store only while
  its lease is surely held (the coordinators answer NOT_COORDINATOR otherwise).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

from gregor.cluster.etcd_url import is_etcd_url, parse_etcd_url
from gregor.cluster.file_store import FileMetadataStore
from gregor.cluster.image import (
    AclBinding,
    BrokerRegistration,
    DelegationToken,
    MetadataDelta,
    MetadataImage,
    PartitionImage,
    ScramCredential,
    TopicImage,
)
from gregor.cluster.memory_store import MemoryMetadataStore
from gregor.protocol.errors import KafkaError
from gregor.security.acls import AclBindingFilter

__all__ = ["MetadataStore", "open_metadata_store", "STORE_KINDS"]

STORE_KINDS = ("file", "memory", "etcd://host:port[,host:port...][/prefix]")


class MetadataStore(Protocol):
    @property
    def image(self) -> MetadataImage:
        """The latest image."""
        ...

    async def start(self) -> MetadataImage:
        """Load (file) or initialise (memory) the image; sets the cluster id."""
        ...

    async def close(self) -> None: ...

    async def refresh(self) -> None:
        """Bring the image up to the durable state now (etcd: one read, published like a
        watch event); the local stores, which are the durable state, have nothing to do."""
        ...

    def session_confirmed(self) -> bool:
        """True while this broker surely still holds its session with the metadata store, so
        its image is current enough to act as a coordinator from (one cheap call, made on
        every coordinator request). The local stores: always. etcd: until the lease's local
        deadline passes, and after a lapse only once the image is reloaded (``etcd_store``)."""
        ...

    def subscribe(self, listener: Callable[[MetadataDelta], None]) -> None:
        """Call ``listener`` with every delta, synchronously, before the change returns."""
        ...

    def watch(self) -> AsyncIterator[MetadataDelta]:
        """The deltas published from now on, as an async iterator; ends when the store closes."""
        ...

    async def create_topic(
        self,
        name: str,
        assignments: Sequence[Sequence[int]],
        configs: Mapping[str, str],
        internal: bool = False,
        topic_id: uuid.UUID | None = None,
    ) -> TopicImage: ...

    async def delete_topic(self, name: str) -> TopicImage: ...

    async def add_partitions(
        self, name: str, assignments: Sequence[Sequence[int]]
    ) -> TopicImage: ...

    async def alter_topic_configs(self, name: str, configs: Mapping[str, str]) -> TopicImage:
        """Replace the topic's whole set of config overrides."""
        ...

    async def alter_config_resource(
        self, resource_type: int, name: str, configs: Mapping[str, str]
    ) -> None:
        """Replace the whole override set of a non-topic config resource (Kafka's resource
        type code and name: BROKER 4 with a node id or "" for the cluster-wide default,
        GROUP 32 with a group id); an empty ``configs`` removes it. INVALID_REQUEST for a
        topic (type 2: use ``alter_topic_configs``)."""
        ...

    async def alter_partition(
        self,
        topic: str,
        partition: int,
        *,
        leader: int,
        leader_epoch: int,
        isr: Sequence[int],
        expected_partition_epoch: int,
    ) -> PartitionImage: ...

    async def reassign_partitions(
        self, reassignments: Sequence[tuple[str, int, Sequence[int] | None]]
    ) -> list[KafkaError | None]:
        """Start, replace or (target None) cancel partition reassignments in one change; per
        partition None or the Kafka error that refused it (``changes.reassign_partitions``)."""
        ...

    async def register_broker(self, registration: BrokerRegistration) -> None: ...

    async def unregister_broker(self, node_id: int) -> None: ...

    async def allocate_producer_ids(self, count: int) -> int:
        """Reserve ``count`` ids durably; returns the first of the block."""
        ...

    async def alter_client_quotas(
        self,
        entries: Sequence[
            tuple[Sequence[tuple[str, str | None]], Sequence[tuple[str, float, bool]]]
        ],
        validate_only: bool = False,
    ) -> list[KafkaError | None]:
        """Set and remove client quotas; per entry, None or the refusal
        (``access_changes.alter_client_quotas``)."""
        ...

    async def alter_scram_credentials(
        self,
        deletions: Sequence[tuple[str, str]],
        upsertions: Sequence[tuple[str, ScramCredential]],
    ) -> dict[str, KafkaError | None]:
        """Delete (user, mechanism) and upsert (user, credential) SCRAM credentials durably, in
        one change; per user, None or the Kafka error that refused that user's part
        (``access_changes.alter_scram_credentials``)."""
        ...

    async def create_acls(self, bindings: Sequence[AclBinding]) -> list[KafkaError | None]:
        """Add ACL bindings durably, in one change; per binding None or the Kafka error that
        refused it (``access_changes.create_acls``)."""
        ...

    async def delete_acls(
        self, filters: Sequence[AclBindingFilter]
    ) -> list[KafkaError | list[AclBinding]]:
        """Remove every binding a filter matches, in one change; per filter the bindings it
        removed or the Kafka error that refused it (``access_changes.delete_acls``)."""
        ...

    async def create_delegation_token(self, token: DelegationToken) -> DelegationToken:
        """Add a delegation token durably (``access_changes.create_delegation_token``)."""
        ...

    async def change_delegation_token(
        self, token_id: str, change: Callable[[DelegationToken], DelegationToken | None]
    ) -> int:
        """Renew or expire a token in one change (``access_changes.change_delegation_token``): the new
        expiry timestamp, -1 once removed; ``change`` raises the refusals."""
        ...

    async def remove_expired_delegation_tokens(self, now_ms: int) -> list[str]:
        """Remove the tokens whose expiry has passed; their ids."""
        ...

    async def update_features(
        self, change: Callable[[Mapping[str, int]], Mapping[str, int]]
    ) -> int:
        """Finalize feature levels in one change (``changes.update_features``): ``change`` gets
        the finalized levels the image holds and returns those to set (or raises the refusal,
        so the check and the write see the same image); the new finalized features' epoch."""
        ...


def open_metadata_store(
    url_or_kind: str,
    log_dir: Path,
    cluster_id: str | None,
    session_timeout_ms: int = 9000,
) -> MetadataStore:
    """The store a ``metadata.store`` value names: ``file`` (in ``log_dir``), ``memory``, or
    ``etcd://...`` (``etcd_url``; registrations live ``session_timeout_ms`` past the last
    keepalive). The etcd store needs the ``cluster`` extra (aetcd), imported only here."""
    kind = url_or_kind.strip().lower()
    if is_etcd_url(url_or_kind):
        from gregor.cluster.etcd_store import EtcdMetadataStore

        return EtcdMetadataStore(parse_etcd_url(url_or_kind), cluster_id, session_timeout_ms)
    if kind == "file":
        return FileMetadataStore(log_dir, cluster_id)
    if kind == "memory":
        return MemoryMetadataStore(cluster_id)
    raise ValueError(
        f"metadata.store={url_or_kind!r} is not available yet: this broker supports "
        + " and ".join(STORE_KINDS)
    )
