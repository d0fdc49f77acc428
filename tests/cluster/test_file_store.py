"""The file store's format (old files, torn temp files, unreadable files) and the store factory."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import pytest

from gregor.cluster.etcd_store import EtcdMetadataStore
from gregor.cluster.file_store import FileMetadataStore
from gregor.cluster.memory_store import MemoryMetadataStore
from gregor.cluster.store import open_metadata_store


def _old_format_doc() -> dict[str, object]:
    """A file as the broker wrote it before partition_epoch and version existed."""
    return {
        "cluster_id": "OldClusterId0000000000",
        "next_producer_id_block": 3000,
        "topics": [
            {
                "name": "orders",
                "topic_id": "6b5ad8b4-1f43-4c5d-9a0e-6f1d7bb9d0a1",
                "partitions": [
                    {"partition": 0, "leader": 1, "leader_epoch": 0, "replicas": [1], "isr": [1]},
                    {"partition": 1, "leader": 1, "leader_epoch": 2, "replicas": [1], "isr": [1]},
                ],
                "configs": {"retention.ms": "60000"},
                "internal": False,
            },
            {
                "name": "__consumer_offsets",
                "topic_id": "0a7e4d36-0f1e-4c1a-8d1c-2b0b3c8d9e10",
                "partitions": [{"partition": 0, "leader": 1, "replicas": [1], "isr": [1]}],
                "configs": {"cleanup.policy": "compact"},
                "internal": True,
            },
        ],
    }


def test_file_store_reads_an_old_format_file(tmp_path: Path) -> None:
    (tmp_path / "cluster-metadata.json").write_text(
        json.dumps(_old_format_doc(), indent=1, sort_keys=True)
    )

    async def main() -> None:
        store = FileMetadataStore(tmp_path)
        img = await store.start()
        assert (img.cluster_id, img.version, img.next_producer_id) == (
            "OldClusterId0000000000",
            0,
            3000,
        )
        orders = img.topic("orders")
        assert orders is not None and orders.topic_id == uuid.UUID(
            "6b5ad8b4-1f43-4c5d-9a0e-6f1d7bb9d0a1"
        )
        assert orders.configs == {"retention.ms": "60000"} and not orders.internal
        assert [
            (p.leader, p.leader_epoch, p.partition_epoch, p.replicas, p.isr, p.offline_replicas)
            for p in orders.partitions
        ] == [(1, 0, 0, (1,), (1,), ()), (1, 2, 0, (1,), (1,), ())]
        offsets = img.topic("__consumer_offsets")
        assert offsets is not None and offsets.internal and offsets.partitions[0].leader_epoch == 0
        assert await store.allocate_producer_ids(1000) == 3000
        await store.close()
        doc = json.loads((tmp_path / "cluster-metadata.json").read_text())
        # the same file and format, with the new fields added
        assert (
            doc["cluster_id"] == "OldClusterId0000000000" and doc["next_producer_id_block"] == 4000
        )
        assert [t["name"] for t in doc["topics"]] == ["orders", "__consumer_offsets"]
        assert doc["topics"][0]["partitions"][1] == {
            "partition": 1,
            "leader": 1,
            "leader_epoch": 2,
            "partition_epoch": 0,
            "replicas": [1],
            "isr": [1],
            "offline_replicas": [],
        }

    asyncio.run(main())


def test_file_store_ignores_a_torn_temp_file(tmp_path: Path) -> None:
    async def main() -> None:
        store = FileMetadataStore(tmp_path, "c1")
        await store.start()
        await store.create_topic("a", [[1]], {})
        await store.close()
        (tmp_path / "cluster-metadata.tmp").write_text('{"cluster_id": "c1", "topics": [{"na')
        again = FileMetadataStore(tmp_path)
        img = await again.start()
        assert img.cluster_id == "c1" and list(img.topics) == ["a"]
        assert not (tmp_path / "cluster-metadata.tmp").exists()
        await again.create_topic("b", [[1]], {})
        await again.close()
        assert [
            t["name"]
            for t in json.loads((tmp_path / "cluster-metadata.json").read_text())["topics"]
        ] == ["a", "b"]

    asyncio.run(main())


def test_file_store_refuses_an_unreadable_file(tmp_path: Path) -> None:
    (tmp_path / "cluster-metadata.json").write_text('{"cluster_id": "c1", "topics": [{"na')
    with pytest.raises(ValueError, match="not a readable metadata file"):
        asyncio.run(FileMetadataStore(tmp_path).start())
    assert (
        tmp_path / "cluster-metadata.json"
    ).read_text() == '{"cluster_id": "c1", "topics": [{"na'


def test_file_store_writes_the_file_at_start(tmp_path: Path) -> None:
    async def main() -> str:
        store = FileMetadataStore(tmp_path / "new-dir")
        img = await store.start()
        await store.close()
        return img.cluster_id

    cid = asyncio.run(main())
    doc = json.loads((tmp_path / "new-dir" / "cluster-metadata.json").read_text())
    assert doc == {"cluster_id": cid, "version": 0, "next_producer_id_block": 0, "topics": []}


# --- the factory ---


def test_open_metadata_store(tmp_path: Path) -> None:
    store = open_metadata_store("file", tmp_path, "c")
    assert isinstance(store, FileMetadataStore) and store.path == tmp_path / "cluster-metadata.json"
    assert isinstance(open_metadata_store("memory", tmp_path, None), MemoryMetadataStore)
    etcd = open_metadata_store("etcd://127.0.0.1:2379,10.0.0.2/kafka/c1", tmp_path, None, 3000)
    assert isinstance(etcd, EtcdMetadataStore) and etcd.ttl_s == 3
    assert etcd.target.endpoints == (("127.0.0.1", 2379), ("10.0.0.2", 2379))
    assert etcd.target.prefix == "/kafka/c1"
    for value in ("zookeeper", ""):
        with pytest.raises(ValueError, match="is not available yet"):
            open_metadata_store(value, tmp_path, None)
    with pytest.raises(ValueError, match="key prefix"):
        open_metadata_store("etcd://127.0.0.1:2379/a b", tmp_path, None)


def test_the_metadata_file_is_readable_by_its_owner_only(tmp_path: Path) -> None:
    """It holds SCRAM credentials, delegation token HMACs and encrypted passwords: mode 0600
    whatever the umask, also when an older version left it (or a torn temp file) world-readable."""
    path = tmp_path / "cluster-metadata.json"
    path.write_text(json.dumps(_old_format_doc()))
    path.chmod(0o644)
    (tmp_path / "cluster-metadata.tmp").write_text("torn")
    (tmp_path / "cluster-metadata.tmp").chmod(0o666)
    import os

    old_umask = os.umask(0o022)
    try:

        async def main() -> None:
            store = FileMetadataStore(tmp_path)
            await store.start()
            assert path.stat().st_mode & 0o777 == 0o600
            await store.alter_config_resource(4, "1", {"log.retention.ms": "1000"})
            assert path.stat().st_mode & 0o777 == 0o600
            await store.close()

        asyncio.run(main())
    finally:
        os.umask(old_umask)
    assert json.loads(path.read_text())["cluster_id"] == "OldClusterId0000000000"
