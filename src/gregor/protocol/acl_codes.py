"""Kafka's numeric codes of the ACL APIs: resource types, pattern types, operations and
permission types, shared by the broker's authorizer (``security.acls``) and the admin client
(``client.acls``).

``of(code)`` reads a code off the wire (UNKNOWN for one Kafka does not define); ``parse(name)``
takes a name in any case with ``-`` or ``_`` or none (``TransactionalId``,
``transactional-id``, ``TRANSACTIONAL_ID``), as Kafka's tools accept them.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Self

#: The only name a CLUSTER resource has.
CLUSTER_NAME = "kafka-cluster"


class AclCode(IntEnum):
    @classmethod
    def of(cls, code: int) -> Self:
        """The member for ``code``, UNKNOWN (0) for a code Kafka does not define."""
        try:
            return cls(code)
        except ValueError:
            return cls(0)

    @classmethod
    def parse(cls, name: str | int) -> Self:
        if isinstance(name, int):
            return cls(name)
        key = name.strip().upper().replace("-", "_")
        if key in cls.__members__:
            return cls.__members__[key]
        squashed = key.replace("_", "")
        for member_name, member in cls.__members__.items():
            if member_name.replace("_", "") == squashed:
                return member
        choices = ", ".join(n.lower() for n in cls.__members__ if n not in ("UNKNOWN", "ANY"))
        raise ValueError(f"unknown {cls.__name__} {name!r} (one of {choices})")


class ResourceType(AclCode):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(AclCode):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(AclCode):
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
    TWO_PHASE_COMMIT = 15


class AclPermissionType(AclCode):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3
