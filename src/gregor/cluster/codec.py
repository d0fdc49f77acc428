"""The durable form of a metadata image, shared by every store that keeps one (file, etcd).

``encode`` turns a ``MetadataImage`` into a JSON-ready document and ``decode`` back; the file
store writes the document as ``cluster-metadata.json``, the etcd store as the value of
``<prefix>/image``. Broker registrations are ephemeral and never part of it (the etcd store
keeps them under leased keys, encoded by ``encode_registration``). A section added to the
image is added here once and both stores keep it. Fields newer than a stored document take
their defaults when it lacks them; older readers ignore fields they do not know.
"""

from __future__ import annotations

import base64
import uuid
from typing import Any

from gregor.cluster.acl_codec import decode_acls, encode_acls
from gregor.cluster.image import (
    BrokerEndpoint,
    BrokerRegistration,
    DelegationToken,
    MetadataImage,
    PartitionImage,
    ScramCredential,
    TopicImage,
)

__all__ = ["decode", "decode_registration", "encode", "encode_registration"]


def encode(image: MetadataImage) -> dict[str, Any]:
    """The durable document for ``image`` (without broker registrations; the SCRAM credentials,
    ``config_resources``, ``acls``, ``client_quotas``, ``delegation_tokens`` and ``features`` only when there are some, so a document without them
    keeps its old shape)."""
    doc: dict[str, Any] = {
        "cluster_id": image.cluster_id,
        "version": image.version,
        "next_producer_id_block": image.next_producer_id,
        "topics": [
            {
                "name": t.name,
                "topic_id": str(t.topic_id),
                "partitions": [_encode_partition(p) for p in t.partitions],
                "configs": dict(t.configs),
                "internal": t.internal,
            }
            for t in image.topics.values()
        ],
    }
    if image.scram_credentials:
        doc["scram_credentials"] = {
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
        }
    if image.config_resources:
        doc["config_resources"] = [
            {"resource_type": rtype, "name": name, "configs": dict(configs)}
            for (rtype, name), configs in sorted(image.config_resources.items())
        ]
    if image.acls:
        doc["acls"] = encode_acls(image.acls)
    if image.delegation_tokens:
        doc["delegation_tokens"] = [
            {
                "token_id": t.token_id,
                "owner": t.owner,
                "requester": t.requester,
                "renewers": list(t.renewers),
                "issue_timestamp_ms": t.issue_timestamp_ms,
                "expiry_timestamp_ms": t.expiry_timestamp_ms,
                "max_timestamp_ms": t.max_timestamp_ms,
            }
            for t in image.delegation_tokens.values()
        ]
    if image.features:
        doc["features"] = dict(sorted(image.features.items()))
    if image.client_quotas:
        doc["client_quotas"] = [
            {"entity": [[t, n] for t, n in entity], "values": dict(values)}
            for entity, values in sorted(image.client_quotas.items(), key=lambda kv: repr(kv[0]))
        ]
    return doc


def _encode_partition(p: PartitionImage) -> dict[str, Any]:
    """One partition; the reassignment fields only while one is in progress."""
    doc: dict[str, Any] = {
        "partition": p.partition,
        "leader": p.leader,
        "leader_epoch": p.leader_epoch,
        "partition_epoch": p.partition_epoch,
        "replicas": list(p.replicas),
        "isr": list(p.isr),
        "offline_replicas": list(p.offline_replicas),
    }
    if p.reassigning:
        doc["adding_replicas"] = list(p.adding_replicas)
        doc["removing_replicas"] = list(p.removing_replicas)
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
    """The image a document holds (no brokers, no controller); missing fields take defaults."""
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
                    adding_replicas=tuple(int(b) for b in p.get("adding_replicas", ())),
                    removing_replicas=tuple(int(b) for b in p.get("removing_replicas", ())),
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
        controller_id=-1,
        topics={t.name: t for t in topics},
        topics_by_id={t.topic_id: t for t in topics},
        brokers={},
        next_producer_id=int(doc.get("next_producer_id_block", 0)),
        scram_credentials=_scram(doc),
        config_resources={
            (int(r["resource_type"]), str(r["name"])): {
                str(k): str(v) for k, v in r["configs"].items()
            }
            for r in doc.get("config_resources", [])
        },
        acls=decode_acls(doc.get("acls", [])),
        client_quotas={
            tuple((str(t), None if n is None else str(n)) for t, n in q["entity"]): {
                str(k): float(v) for k, v in q["values"].items()
            }
            for q in doc.get("client_quotas", [])
        },
        delegation_tokens={
            str(t["token_id"]): DelegationToken(
                str(t["token_id"]),
                str(t["owner"]),
                str(t.get("requester", t["owner"])),
                tuple(str(r) for r in t.get("renewers", ())),
                int(t["issue_timestamp_ms"]),
                int(t["expiry_timestamp_ms"]),
                int(t["max_timestamp_ms"]),
            )
            for t in doc.get("delegation_tokens", [])
        },
        features={str(k): int(v) for k, v in doc.get("features", {}).items()},
    )


def encode_registration(registration: BrokerRegistration) -> dict[str, Any]:
    return {
        "node_id": registration.node_id,
        "endpoints": [
            {
                "listener": e.listener,
                "host": e.host,
                "port": e.port,
                "security_protocol": e.security_protocol,
            }
            for e in registration.endpoints
        ],
        "rack": registration.rack,
        "fenced": registration.fenced,
        "epoch": registration.epoch,
    }


def decode_registration(doc: dict[str, Any]) -> BrokerRegistration:
    return BrokerRegistration(
        node_id=int(doc["node_id"]),
        endpoints=tuple(
            BrokerEndpoint(
                str(e["listener"]), str(e["host"]), int(e["port"]), str(e["security_protocol"])
            )
            for e in doc.get("endpoints", [])
        ),
        rack=None if doc.get("rack") is None else str(doc["rack"]),
        fenced=bool(doc.get("fenced", False)),
        epoch=int(doc.get("epoch", -1)),
    )
