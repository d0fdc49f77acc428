"""ACL bindings and filters, SCRAM mechanisms: the admin client's values for the security APIs.

The enums carry the protocol's numbers (Kafka's ResourceType, PatternType, AclOperation,
AclPermissionType and ScramMechanism); ``parse`` takes a name in any case, with ``-`` or
``_`` (``TransactionalId``, ``transactional-id`` and ``TRANSACTIONAL_ID`` are the same), as
Kafka's tools accept them. A filter's ``None`` fields match anything (the protocol's null
strings and ANY values).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Self


class _Named(enum.IntEnum):
    @classmethod
    def parse(cls, name: str | int) -> Self:
        if isinstance(name, int):
            return cls(name)
        key = name.strip().upper().replace("-", "_")
        if key not in cls.__members__:
            key = "".join(ch for ch in key if ch != "_")
            found = [m for n, m in cls.__members__.items() if n.replace("_", "") == key]
            if not found:
                choices = ", ".join(n.lower() for n in cls.__members__ if n not in ("UNKNOWN", "ANY"))
                raise ValueError(f"unknown {cls.__name__} {name!r} (one of {choices})")
            return found[0]
        return cls.__members__[key]


class ResourceType(_Named):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(_Named):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(_Named):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(_Named):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


class ScramMechanism(_Named):
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


#: The cluster resource's only name.
CLUSTER_NAME = "kafka-cluster"


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
