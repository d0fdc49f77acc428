"""Cluster administration: the metadata writes of the admin APIs that are not about topics.

SCRAM credentials (AlterUserScramCredentials), client quotas (AlterClientQuotas), ACLs
(CreateAcls, DeleteAcls), finalized features (UpdateFeatures), leader elections
(ElectLeaders) and partition reassignments (AlterPartitionReassignments) each go to the
metadata store, which checks them under its own lock (a write is answered with Kafka's error
per entry, never half applied); the store's publisher has applied the change to this broker by
the time the call returns. The handlers have already checked the request (ACLs, validation);
``TopicAdmin`` beside this one does the same for topics.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from gregor.broker.controller.controller import elect_leaders
from gregor.cluster.image import AclBinding, ScramCredential
from gregor.cluster.store import MetadataStore
from gregor.protocol.errors import ErrorCode, KafkaError
from gregor.security.acls import AclBindingFilter


class ClusterAdmin:
    """The non-topic metadata writes, on the broker's metadata store."""

    def __init__(self, store: MetadataStore) -> None:
        self.store = store

    async def alter_scram_credentials(
        self,
        deletions: Sequence[tuple[str, str]],
        upsertions: Sequence[tuple[str, ScramCredential]],
    ) -> dict[str, KafkaError | None]:
        """Change SCRAM credentials; per user, None or the error."""
        return await self.store.alter_scram_credentials(deletions, upsertions)

    async def alter_client_quotas(
        self,
        entries: Sequence[
            tuple[Sequence[tuple[str, str | None]], Sequence[tuple[str, float, bool]]]
        ],
        validate_only: bool = False,
    ) -> list[KafkaError | None]:
        """Set and remove client quotas; per entry, None or the error."""
        return await self.store.alter_client_quotas(entries, validate_only)

    async def create_acls(self, bindings: Sequence[AclBinding]) -> list[KafkaError | None]:
        """Add ACL bindings; per binding, None or the error."""
        return await self.store.create_acls(bindings)

    async def delete_acls(
        self, filters: Sequence[AclBindingFilter]
    ) -> list[KafkaError | list[AclBinding]]:
        """Remove the bindings each filter matches; per filter, the removed ones or the error."""
        return await self.store.delete_acls(filters)

    async def update_features(
        self, change: Callable[[Mapping[str, int]], Mapping[str, int]]
    ) -> int:
        """Finalize feature levels (``change`` checks them against the image written to and
        may raise the refusal); the new finalized features' epoch."""
        return await self.store.update_features(change)

    async def elect_leaders(
        self, election_type: int, partitions: list[tuple[str, int]] | None
    ) -> dict[tuple[str, int], ErrorCode]:
        """ElectLeaders: preferred (0) or unclean (1) elections of these partitions (None:
        all); the result of each."""
        return await elect_leaders(self.store, election_type, partitions)

    async def reassign_partitions(
        self, reassignments: Sequence[tuple[str, int, Sequence[int] | None]]
    ) -> list[KafkaError | None]:
        """AlterPartitionReassignments: start, replace or (None) cancel reassignments; per
        partition None or the error that refused it."""
        return await self.store.reassign_partitions(reassignments)
