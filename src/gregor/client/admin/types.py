"""The admin client's values: what its calls take and return, and the protocol's numbers for them.

Kafka's names throughout: ``NewTopic``, ``ConfigEntry``, ``TopicDescription``, ``AclBinding``,
``ScramMechanism``, ... Config resource types (``TOPIC``, ``BROKER``, ...) are Kafka's
``ConfigResource.Type``, not the ACL resource types. The ACL enums carry the protocol's numbers
(``protocol.acl_codes``, and ScramMechanism here); ``parse`` takes a name in any case, with
``-`` or ``_`` (``TransactionalId``, ``transactional-id`` and ``TRANSACTIONAL_ID`` are the
same), as Kafka's tools accept them. A filter's ``None`` fields match anything (the protocol's
null strings and ANY values). Answers that are plain dicts keep that shape, typed as
``TypedDict``s.
"""

from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass, field
from typing import TypedDict

from gregor.client.core.errors import ConfigError
from gregor.client.core.metadata import TopicPartition
from gregor.protocol.acl_codes import (
    CLUSTER_NAME,
    AclCode,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from gregor.protocol.errors import KafkaError


class ScramMechanism(AclCode):
    UNKNOWN = 0
    SCRAM_SHA_256 = 1
    SCRAM_SHA_512 = 2

    @property
    def kafka_name(self) -> str:
        """``SCRAM-SHA-256``, as Kafka's configs and SASL settings spell it."""
        return self.name.replace("_", "-")

    @property
    def hash_name(self) -> str:
        return "sha256" if self is ScramMechanism.SCRAM_SHA_256 else "sha512"


@dataclass(frozen=True)
class AclBinding:
    """One ACL: a resource pattern and an access control entry."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def __str__(self) -> str:
        return (
            f"(principal={self.principal}, host={self.host}, operation={self.operation.name}, "
            f"permissionType={self.permission_type.name}) on "
            f"ResourcePattern(resourceType={self.resource_type.name}, name={self.name}, "
            f"patternType={self.pattern_type.name})"
        )


@dataclass(frozen=True)
class AclBindingFilter:
    """Which ACLs to describe or delete; ``None`` strings and ANY values match anything."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY


TOPIC = 2
BROKER = 4
#: Config resource types (Kafka's ConfigResource.Type, not the ACL resource types).
CLIENT_METRICS = 16
RESOURCE_TYPES = {
    "topic": TOPIC,
    "broker": BROKER,
    "broker_logger": 8,
    "client_metrics": CLIENT_METRICS,
    "group": 32,
}
CONFIG_SOURCES = {
    0: "UNKNOWN",
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
    7: "CLIENT_METRICS_CONFIG",
    8: "GROUP_CONFIG",
}
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3


def config_resource_type(kind: int | str) -> int:
    """A config resource type given by number or by name (``"topic"``, ``"broker"``, ...)."""
    if isinstance(kind, int):
        return kind
    code = RESOURCE_TYPES.get(kind)
    if code is None:
        raise ConfigError(
            f"unknown config resource type {kind!r} (use one of {', '.join(RESOURCE_TYPES)})"
        )
    return code


@dataclass
class DelegationToken:
    """A delegation token as the broker describes it; log in with SCRAM, user name
    ``token_id``, password ``password`` (the HMAC in base64) and ``sasl.scram.tokenauth``."""

    token_id: str
    hmac: bytes
    owner: str
    requester: str
    renewers: tuple[str, ...]
    issue_timestamp_ms: int
    expiry_timestamp_ms: int
    max_timestamp_ms: int

    @property
    def password(self) -> str:
        return base64.b64encode(self.hmac).decode()


@dataclass
class NewTopic:
    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    configs: dict[str, str] = field(default_factory=dict)
    assignments: dict[int, list[int]] | None = None


@dataclass
class ConfigEntry:
    name: str
    value: str | None
    source: str
    read_only: bool = False
    is_sensitive: bool = False
    synonyms: list[tuple[str, str | None, str]] = field(default_factory=list)


@dataclass
class PartitionInfo:
    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]


@dataclass
class TopicDescription:
    name: str
    topic_id: uuid.UUID
    is_internal: bool
    partitions: list[PartitionInfo]


@dataclass
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    assignment: set[TopicPartition]


@dataclass
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: list[MemberDescription]
    error: KafkaError | None = None


@dataclass
class ShareMemberDescription:
    member_id: str
    member_epoch: int
    client_id: str
    client_host: str
    rack_id: str | None
    subscribed_topics: list[str]
    assignment: set[TopicPartition]


@dataclass
class ShareGroupDescription:
    """ShareGroupDescribe's answer for one share group (KIP-932)."""

    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor: str
    members: list[ShareMemberDescription]


@dataclass
class FeatureMetadata:
    """Kafka's ``FeatureMetadata``: finalized levels and supported ranges by feature name."""

    finalized: dict[str, tuple[int, int]]
    supported: dict[str, tuple[int, int]]
    finalized_epoch: int | None


@dataclass
class ClusterDescription:
    cluster_id: str | None
    controller_id: int
    brokers: list[tuple[int, str, int, str | None]]


class TransactionDescription(TypedDict):
    """A transaction as its coordinator describes it (``describe_transactions``)."""

    coordinator: int
    state: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_time_ms: int
    partitions: list[tuple[str, int]]


class ReplicaLogDir(TypedDict):
    """One replica in a log directory (``describe_log_dirs``)."""

    size: int
    offset_lag: int
    is_future: bool


class LogDirDescription(TypedDict):
    """One log directory of a broker (``describe_log_dirs``): its error (None or the Kafka
    error's name), total and usable bytes (None before DescribeLogDirs v4), its replicas."""

    error: str | None
    total_bytes: int | None
    usable_bytes: int | None
    partitions: dict[tuple[str, int], ReplicaLogDir]


__all__ = [
    "BROKER",
    "CLIENT_METRICS",
    "CLUSTER_NAME",
    "CONFIG_SOURCES",
    "OP_APPEND",
    "OP_DELETE",
    "OP_SET",
    "OP_SUBTRACT",
    "RESOURCE_TYPES",
    "TOPIC",
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "ClusterDescription",
    "ConfigEntry",
    "DelegationToken",
    "FeatureMetadata",
    "GroupDescription",
    "LogDirDescription",
    "MemberDescription",
    "NewTopic",
    "PartitionInfo",
    "PatternType",
    "ReplicaLogDir",
    "ResourceType",
    "ScramMechanism",
    "ShareGroupDescription",
    "ShareMemberDescription",
    "TopicDescription",
    "TransactionDescription",
    "config_resource_type",
]
