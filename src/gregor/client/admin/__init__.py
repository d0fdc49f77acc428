"""The admin client, split by API family the way franz-go's ``kadm`` is.

- ``client``: :class:`AIOAdminClient`, assembled from the families below;
- ``base``: what every family uses (the client, the controller, per-item error helpers);
- ``topics``: create, delete, describe topics, add partitions;
- ``configs``: describe and alter configs, client metrics resources;
- ``groups``: consumer and share groups, their committed offsets;
- ``records``: delete records, list offsets;
- ``security``: ACLs, SCRAM credentials, client quotas, delegation tokens;
- ``transactions``: list, describe, abort and end transactions, describe producers;
- ``cluster``: the cluster, features, leader elections, reassignments, log directories;
- ``types``: the values the calls take and return.

A new admin call goes into its family's module; a new family gets a module and a base class
of :class:`AIOAdminClient`.
"""

from gregor.client.admin.client import AIOAdminClient
from gregor.client.admin.types import (
    BROKER,
    CLIENT_METRICS,
    CLUSTER_NAME,
    CONFIG_SOURCES,
    OP_APPEND,
    OP_DELETE,
    OP_SET,
    OP_SUBTRACT,
    RESOURCE_TYPES,
    TOPIC,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ClusterDescription,
    ConfigEntry,
    DelegationToken,
    FeatureMetadata,
    GroupDescription,
    LogDirDescription,
    MemberDescription,
    NewTopic,
    PartitionInfo,
    PatternType,
    ReplicaLogDir,
    ResourceType,
    ScramMechanism,
    ShareGroupDescription,
    ShareMemberDescription,
    TopicDescription,
    TransactionDescription,
)
from gregor.client.core.errors import UnsupportedForBrokerError
from gregor.protocol.features import SAFE_DOWNGRADE, UNSAFE_DOWNGRADE, UPGRADE

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
    "SAFE_DOWNGRADE",
    "TOPIC",
    "UNSAFE_DOWNGRADE",
    "UPGRADE",
    "AIOAdminClient",
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
    "UnsupportedForBrokerError",
]
