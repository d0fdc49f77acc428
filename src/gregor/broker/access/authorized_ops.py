"""Authorized operations (KIP-430): the bit set a describe answers for one resource.

Metadata (``include_topic_authorized_operations``, and ``include_cluster_authorized_operations``
in v8-v10), DescribeTopicPartitions, DescribeCluster and DescribeGroups can report which ACL
operations the caller may perform on a resource, as a 32-bit field with bit ``1 << code`` set
for each allowed operation (Kafka's ``AclOperation`` codes). Kafka computes it from the
operations the resource type supports: without an authorizer all of them, with one those the
authorizer allows. A resource that was not asked about carries ``OPERATIONS_NOT_REQUESTED``
(``Integer.MIN_VALUE``).

``authorized_operations(resource_type, name, authorizer)`` is that computation; the security
work plugs its authorizer in as the ``Authorizer`` callable (one operation at a time).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from gregor.security.acls import AclOperation, ResourceType

__all__ = [
    "OPERATIONS_NOT_REQUESTED",
    "AclOperation",
    "Authorizer",
    "ResourceType",
    "SUPPORTED_OPERATIONS",
    "authorized_operations",
    "bitfield",
]

OPERATIONS_NOT_REQUESTED = -(1 << 31)


_O = AclOperation
#: The operations each resource type supports (Kafka's ``AclEntry.supportedOperations``).
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (
        _O.READ,
        _O.WRITE,
        _O.CREATE,
        _O.DESCRIBE,
        _O.DELETE,
        _O.ALTER,
        _O.DESCRIBE_CONFIGS,
        _O.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (_O.READ, _O.DESCRIBE, _O.DELETE),
    ResourceType.CLUSTER: (
        _O.CREATE,
        _O.CLUSTER_ACTION,
        _O.DESCRIBE_CONFIGS,
        _O.ALTER_CONFIGS,
        _O.IDEMPOTENT_WRITE,
        _O.ALTER,
        _O.DESCRIBE,
    ),
    ResourceType.TRANSACTIONAL_ID: (_O.DESCRIBE, _O.WRITE),
    ResourceType.DELEGATION_TOKEN: (_O.DESCRIBE,),
    ResourceType.USER: (_O.CREATE_TOKENS, _O.DESCRIBE_TOKENS),
}

#: May the caller perform ``operation`` on the resource (type, name)? Given by an authorizer.
Authorizer = Callable[[ResourceType, str, AclOperation], bool]


def bitfield(operations: Iterable[AclOperation]) -> int:
    """The 32-bit field with bit ``1 << code`` set for each operation."""
    bits = 0
    for op in operations:
        bits |= 1 << int(op)
    return bits


def authorized_operations(
    resource_type: ResourceType, name: str = "", authorizer: Authorizer | None = None
) -> int:
    """The authorized-operations field for one resource: every supported operation without an
    authorizer, the ones it allows with one."""
    ops = SUPPORTED_OPERATIONS[resource_type]
    if authorizer is not None:
        ops = tuple(op for op in ops if authorizer(resource_type, name, op))
    return bitfield(ops)
