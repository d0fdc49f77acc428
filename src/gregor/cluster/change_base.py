"""What every metadata change ends with (``changes``, ``access_changes``): the next image, the
given parts replaced, ``version`` one higher and the controller recomputed."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence

from gregor.cluster.image import (
    AclBinding,
    BrokerRegistration,
    ConfigResourceKey,
    DelegationToken,
    MetadataImage,
    QuotaEntity,
    ScramCredential,
    TopicImage,
)

__all__ = ["controller_for", "next_image"]


def controller_for(brokers: Mapping[int, BrokerRegistration]) -> int:
    """The local stores' controller: the lowest unfenced registered node id, -1 when none."""
    live = [node_id for node_id, reg in brokers.items() if not reg.fenced]
    return min(live) if live else -1


def next_image(
    image: MetadataImage,
    *,
    topics: Mapping[str, TopicImage] | None = None,
    topics_by_id: Mapping[uuid.UUID, TopicImage] | None = None,
    brokers: Mapping[int, BrokerRegistration] | None = None,
    next_producer_id: int | None = None,
    scram_credentials: Mapping[str, Mapping[str, ScramCredential]] | None = None,
    config_resources: Mapping[ConfigResourceKey, Mapping[str, str]] | None = None,
    acls: Sequence[AclBinding] | None = None,
    client_quotas: Mapping[QuotaEntity, Mapping[str, float]] | None = None,
    delegation_tokens: Mapping[str, DelegationToken] | None = None,
    features: Mapping[str, int] | None = None,
) -> MetadataImage:
    """``image`` with the given parts replaced, ``version`` + 1 and the controller recomputed."""
    brokers = image.brokers if brokers is None else brokers
    return MetadataImage(
        version=image.version + 1,
        cluster_id=image.cluster_id,
        controller_id=controller_for(brokers),
        topics=image.topics if topics is None else topics,
        topics_by_id=image.topics_by_id if topics_by_id is None else topics_by_id,
        brokers=brokers,
        next_producer_id=image.next_producer_id if next_producer_id is None else next_producer_id,
        scram_credentials=image.scram_credentials
        if scram_credentials is None
        else scram_credentials,
        config_resources=image.config_resources if config_resources is None else config_resources,
        acls=image.acls if acls is None else tuple(acls),
        client_quotas=image.client_quotas if client_quotas is None else client_quotas,
        delegation_tokens=image.delegation_tokens
        if delegation_tokens is None
        else delegation_tokens,
        features=image.features if features is None else features,
        controller_epoch=image.controller_epoch,
    )
