"""ACL bindings and filters, SCRAM mechanisms: the admin client's values for the security APIs.

The enums carry the protocol's numbers (``protocol.acl_codes``, and ScramMechanism here);
``parse`` takes a name in any case, with ``-`` or ``_`` (``TransactionalId``,
``transactional-id`` and ``TRANSACTIONAL_ID`` are the same), as Kafka's tools accept them. A filter's ``None`` fields match anything (the protocol's null
strings and ANY values).
"""

from __future__ import annotations

from dataclasses import dataclass

from gregor.protocol.acl_codes import (
    CLUSTER_NAME,
    AclCode,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

__all__ = [
    "CLUSTER_NAME",
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "PatternType",
    "ResourceType",
    "ScramMechanism",
]


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
