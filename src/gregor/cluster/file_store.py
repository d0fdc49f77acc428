"""The single-node metadata store: the image kept in one JSON file in the first log dir.

Theory of operation: ``cluster-metadata.json`` holds the cluster id, the image version, the next
free producer id and every topic (id, config overrides, internal flag, and per partition the
leader, leader_epoch, partition_epoch, replicas and ISR), the users' salted SCRAM credentials,
the config overrides of non-topic resources and the ACL bindings, encoded by ``codec``. It is
the format the broker has always written; fields added since (``version``, ``partition_epoch``,
``offline_replicas``, ``scram_credentials``, ``config_resources``, ``acls``)
have defaults when an older file lacks them, and older readers ignore them. Broker
registrations are ephemeral, like an etcd lease: they are in the image but never in the file,
so after a restart every broker registers again.

Every change rewrites the whole file before the new image is published: the image (immutable,
so safe to hand to another thread) is encoded and written to ``cluster-metadata.tmp``,
fsynced, renamed over the real file (atomic on POSIX) and the directory fsynced, all in the
event loop's default executor so a slow disk never stalls the loop. A crash leaves either the
old or the new file; a torn ``.tmp`` left behind is ignored and removed at the next start.

The file holds secrets (SCRAM credentials, delegation token HMACs, encrypted password
configs), so it is created readable and writable by the broker's user only (mode 0600,
whatever the umask); a file an older version left readable by others is replaced by such a
file at the next start, when the store writes it again.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from gregor.cluster.codec import decode, encode
from gregor.cluster.image import EMPTY, MetadataImage
from gregor.cluster.local_store import LocalMetadataStore, new_cluster_id
from gregor.protocol.errors import InconsistentClusterIdError, KafkaStorageError

METADATA_FILE = "cluster-metadata.json"
#: Owner read and write only: the file holds credentials.
FILE_MODE = 0o600

T = TypeVar("T")


class MetadataFile:
    """Blocking reads and writes of one metadata file; call them off the event loop."""

    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / METADATA_FILE
        self.tmp_path = self.path.with_suffix(".tmp")

    def read(self) -> MetadataImage | None:
        """The stored image, or None when there is no file yet. Removes a torn temp file."""
        self.tmp_path.unlink(missing_ok=True)
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return None
        try:
            return decode(json.loads(text))
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise ValueError(f"{self.path} is not a readable metadata file: {e!r}") from e

    def write(self, image: MetadataImage) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = json.dumps(encode(image), indent=1, sort_keys=True)
        fd = os.open(self.tmp_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
        with open(fd, "w") as f:
            os.fchmod(fd, FILE_MODE)  # also when a torn .tmp of another mode was left behind
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(self.tmp_path, self.path)
        fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class _FileBackend:
    def __init__(self, file: MetadataFile) -> None:
        self.file = file

    async def _run(self, fn: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(None, fn)

    async def load(self, cluster_id: str | None) -> MetadataImage:
        stored = await self._run(self.file.read)
        image = stored if stored is not None else EMPTY
        if cluster_id and image.cluster_id and cluster_id != image.cluster_id:
            raise InconsistentClusterIdError(
                f"cluster.id {cluster_id!r} does not match {image.cluster_id!r} in {self.file.path}"
            )
        if not image.cluster_id:
            image = dataclasses.replace(image, cluster_id=cluster_id or new_cluster_id())
        # Written at once, so a generated cluster id is durable and an old file gains the new
        # fields before anything else happens.
        await self.commit(image)
        return image

    async def commit(self, image: MetadataImage) -> None:
        try:
            await self._run(lambda: self.file.write(image))
        except OSError as e:
            raise KafkaStorageError(f"cannot write {self.file.path}: {e}") from e

    async def close(self) -> None:
        return None


class FileMetadataStore(LocalMetadataStore):
    """Metadata in ``directory/cluster-metadata.json``; see the module docstring."""

    def __init__(self, directory: Path, cluster_id: str | None = None) -> None:
        self.file = MetadataFile(directory)
        super().__init__(_FileBackend(self.file), cluster_id)

    @property
    def path(self) -> Path:
        return self.file.path
