"""The single-node metadata store: the image kept in one JSON file in the first log dir.

Theory of operation: ``cluster-metadata.json`` holds the cluster id, the image version, the next
free producer id and every topic (id, config overrides, internal flag, and per partition the
leader, leader_epoch, partition_epoch, replicas and ISR), the users' salted SCRAM credentials
(salt, stored key, server key, iterations; base64) and the config overrides of non-topic
resources (``config_resources``: dynamic broker and group configs) and the ACL bindings
(``acls``, by Kafka's enum names). It is the format the broker
has always written; fields added since (``version``, ``partition_epoch``, ``offline_replicas``,
``scram_credentials``, ``config_resources``, ``acls``)
have defaults when an older file lacks them, and older readers ignore them. Broker
registrations are ephemeral, like an etcd lease: they are in the image but never in the file,
so after a restart every broker registers again.

Every change rewrites the whole file before the new image is published: the image (immutable,
so safe to hand to another thread) is encoded and written to ``cluster-metadata.tmp``,
fsynced, renamed over the real file (atomic on POSIX) and the directory fsynced, all in the
event loop's default executor so a slow disk never stalls the loop. A crash leaves either the
old or the new file; a torn ``.tmp`` left behind is ignored and removed at the next start.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from gregor.cluster.acl_codec import decode_acls, encode_acls
from gregor.cluster.changes import controller_for
from gregor.cluster.image import EMPTY, MetadataImage, PartitionImage, ScramCredential, TopicImage
from gregor.cluster.local_store import LocalMetadataStore, new_cluster_id
from gregor.protocol.errors import InconsistentClusterIdError, KafkaStorageError

METADATA_FILE = "cluster-metadata.json"

T = TypeVar("T")


def encode(image: MetadataImage) -> dict[str, Any]:
    """The file's JSON document for ``image`` (without broker registrations; the SCRAM
    credentials and the ``config_resources`` list only when there are some, so a file without
    them keeps its old shape)."""
    doc = {
        "cluster_id": image.cluster_id,
        "version": image.version,
        "next_producer_id_block": image.next_producer_id,
        "topics": [
            {
                "name": t.name,
                "topic_id": str(t.topic_id),
                "partitions": [
                    {
                        "partition": p.partition,
                        "leader": p.leader,
                        "leader_epoch": p.leader_epoch,
                        "partition_epoch": p.partition_epoch,
                        "replicas": list(p.replicas),
                        "isr": list(p.isr),
                        "offline_replicas": list(p.offline_replicas),
                    }
                    for p in t.partitions
                ],
                "configs": dict(t.configs),
                "internal": t.internal,
            }
            for t in image.topics.values()
        ],
        "scram_credentials": {
            user: {
                mechanism: {
                    "salt": _b64(c.salt),
                    "stored_key": _b64(c.stored_key),
                    "server_key": _b64(c.server_key),
                    "iterations": c.iterations,
                }
                for mechanism, c in creds.items()
            }
            for user, creds in image.scram_credentials.items()
        },
    }
    if not image.scram_credentials:
        del doc["scram_credentials"]
    if image.config_resources:
        doc["config_resources"] = [
            {"resource_type": rtype, "name": name, "configs": dict(configs)}
            for (rtype, name), configs in sorted(image.config_resources.items())
        ]
    if image.acls:
        doc["acls"] = encode_acls(image.acls)
    return doc


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _scram(doc: dict[str, Any]) -> dict[str, dict[str, ScramCredential]]:
    return {
        str(user): {
            str(mechanism): ScramCredential(
                str(mechanism),
                base64.b64decode(c["salt"]),
                base64.b64decode(c["stored_key"]),
                base64.b64decode(c["server_key"]),
                int(c["iterations"]),
            )
            for mechanism, c in creds.items()
        }
        for user, creds in doc.get("scram_credentials", {}).items()
    }


def decode(doc: dict[str, Any]) -> MetadataImage:
    """The image a file holds; fields newer than the file take their defaults."""
    topics = [
        TopicImage(
            name=t["name"],
            topic_id=uuid.UUID(t["topic_id"]),
            partitions=tuple(
                PartitionImage(
                    partition=int(p["partition"]),
                    leader=int(p["leader"]),
                    leader_epoch=int(p.get("leader_epoch", 0)),
                    partition_epoch=int(p.get("partition_epoch", 0)),
                    replicas=tuple(int(b) for b in p["replicas"]),
                    isr=tuple(int(b) for b in p["isr"]),
                    offline_replicas=tuple(int(b) for b in p.get("offline_replicas", ())),
                )
                for p in t["partitions"]
            ),
            configs={str(k): str(v) for k, v in t.get("configs", {}).items()},
            internal=bool(t.get("internal", False)),
        )
        for t in doc.get("topics", [])
    ]
    return MetadataImage(
        version=int(doc.get("version", 0)),
        cluster_id=str(doc.get("cluster_id", "")),
        controller_id=controller_for({}),
        topics={t.name: t for t in topics},
        topics_by_id={t.topic_id: t for t in topics},
        brokers={},
        next_producer_id=int(doc.get("next_producer_id_block", 0)),
        scram_credentials=_scram(doc),
        config_resources={
            (int(r["resource_type"]), str(r["name"])): {str(k): str(v) for k, v in r["configs"].items()}
            for r in doc.get("config_resources", [])
        },
        acls=decode_acls(doc.get("acls", [])),
    )


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
        with open(self.tmp_path, "w") as f:
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
