"""A metadata store that keeps its image in memory only: for tests and throwaway brokers.

Everything the local store base describes holds (one writer at a time, versions, deltas,
listeners, watch); nothing survives the process. ``start()`` sets the cluster id given, or a
new random one.
"""

from __future__ import annotations

import dataclasses

from gregor.cluster.image import EMPTY, MetadataImage
from gregor.cluster.local_store import LocalMetadataStore, new_cluster_id


class _Memory:
    async def load(self, cluster_id: str | None) -> MetadataImage:
        return dataclasses.replace(EMPTY, cluster_id=cluster_id or new_cluster_id())

    async def commit(self, image: MetadataImage) -> None:
        return None

    async def close(self) -> None:
        return None


class MemoryMetadataStore(LocalMetadataStore):
    def __init__(self, cluster_id: str | None = None) -> None:
        super().__init__(_Memory(), cluster_id)
