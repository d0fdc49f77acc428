"""The registry's ACLs: who may do which registry operation on which subject, kept in a topic.

Theory of operation. The operations are those of Confluent's Schema Registry ACL authorizer
(``Operation``): five on subjects (SUBJECT_READ, SUBJECT_WRITE, SUBJECT_DELETE,
SUBJECT_COMPATIBILITY_READ, SUBJECT_COMPATIBILITY_WRITE) and three on the registry as a whole
(GLOBAL_COMPATIBILITY_READ, GLOBAL_COMPATIBILITY_WRITE, GLOBAL_SUBJECTS_READ); reading a schema
by id is not an ACL of its own but SUBJECT_READ on one of the subjects using the id, as there.
An ACL (``RegistryAcl``) names a principal (``User:name``, or ``User:*`` / ``*`` for every
user), a resource (a subject, literal or a prefix, ``*`` for every subject; or the registry),
an operation and ALLOW or DENY. As in Kafka, a DENY that matches wins over any ALLOW, and
nothing is allowed without an ALLOW; super users are allowed everything.

The ACLs live in a compacted, one-partition topic, by default the registry's topic suffixed
with ``_acl`` (``_schemas_acl``; Confluent's ``confluent.schema.registry.acl.topic`` derives
the same name). Each ACL is one record whose key is the ACL itself (JSON, sorted keys) and
whose value is ``{"version": 1}``; removing it writes a tombstone under the same key, so
compaction keeps exactly the ACLs in force. ``AclStore`` reads the topic like the schema store
reads ``_schemas`` (to its end before the registry answers, then following it), so every
registry reading the same topic enforces the same ACLs, and ``gregor acls`` changes them by
writing records through the cluster (the topic's own Kafka ACLs decide who may).
"""

from __future__ import annotations

import enum
import json
import logging
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Any

from gregor.schema_registry.state import RegistryState
from gregor.schema_registry.store import KafkaStore

log = logging.getLogger("gregor.schema_registry")

ACL_TOPIC_SUFFIX = "_acl"
REGISTRY_RESOURCE = "REGISTRY"
SUBJECT_RESOURCE = "SUBJECT"
WILDCARD = "*"
RECORD_VERSION = 1


class Operation(enum.Enum):
    """A registry operation and how a refusal names it (Confluent says e.g.
    ``User is denied operation Write on Subject: orders-value``)."""

    SUBJECT_READ = "Read"
    SUBJECT_WRITE = "Write"
    SUBJECT_DELETE = "Delete"
    SUBJECT_COMPATIBILITY_READ = "ReadCompatibility"
    SUBJECT_COMPATIBILITY_WRITE = "AlterCompatibility"
    GLOBAL_COMPATIBILITY_READ = "ReadGlobalCompatibility"
    GLOBAL_COMPATIBILITY_WRITE = "AlterGlobalCompatibility"
    GLOBAL_SUBJECTS_READ = "ReadSubjects"

    @property
    def is_global(self) -> bool:
        return self.name.startswith("GLOBAL_")

    @classmethod
    def parse(cls, name: str) -> Operation:
        key = name.strip().upper().replace("-", "_")
        if key == "GLOBAL_READ":  # the newer documentation's name for GLOBAL_SUBJECTS_READ
            key = "GLOBAL_SUBJECTS_READ"
        try:
            return cls[key]
        except KeyError:
            raise ValueError(
                f"unknown registry operation {name!r} (known: {', '.join(o.name for o in cls)})"
            ) from None


class Permission(enum.Enum):
    ALLOW = "ALLOW"
    DENY = "DENY"


class Pattern(enum.Enum):
    LITERAL = "LITERAL"
    PREFIXED = "PREFIXED"


@dataclass(frozen=True)
class RegistryAcl:
    principal: str
    operation: Operation
    subject: str | None = None  # None: the registry resource (GLOBAL_ operations)
    pattern: Pattern = Pattern.LITERAL
    permission: Permission = Permission.ALLOW

    def __post_init__(self) -> None:
        if not self.principal or (
            self.principal != WILDCARD and not self.principal.startswith("User:")
        ):
            raise ValueError(f"a principal is User:NAME or *, not {self.principal!r}")
        if self.operation.is_global != (self.subject is None):
            raise ValueError(
                f"{self.operation.name} is an operation on "
                + ("the registry (--registry)" if self.operation.is_global else "a subject")
            )
        if self.subject is not None and (not self.subject or len(self.subject) > 255 * 4):
            raise ValueError("a subject of 1 to 1020 characters")
        if self.subject is None and self.pattern is not Pattern.LITERAL:
            raise ValueError("the registry resource has no prefix")

    @property
    def resource_type(self) -> str:
        return REGISTRY_RESOURCE if self.subject is None else SUBJECT_RESOURCE

    def matches(self, principal: str, operation: Operation, subject: str | None) -> bool:
        if self.operation is not operation:
            return False
        if self.principal not in (principal, WILDCARD, "User:*"):
            return False
        if self.subject is None or subject is None:
            return self.subject is None and subject is None
        if self.pattern is Pattern.PREFIXED:
            return subject.startswith(self.subject)
        return self.subject in (subject, WILDCARD)

    def to_json(self) -> dict[str, str]:
        return {
            "principal": self.principal,
            "resource_type": self.resource_type,
            "name": self.subject if self.subject is not None else "",
            "pattern_type": self.pattern.value,
            "operation": self.operation.name,
            "permission_type": self.permission.value,
        }

    def key(self) -> bytes:
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, obj: Any) -> RegistryAcl | None:
        """The ACL a record key holds, or None when it is not one (skipped, never fatal)."""
        try:
            resource = obj["resource_type"]
            return cls(
                str(obj["principal"]),
                Operation[str(obj["operation"])],
                None if resource == REGISTRY_RESOURCE else str(obj["name"]),
                Pattern(obj["pattern_type"]),
                Permission(obj["permission_type"]),
            )
        except (KeyError, TypeError, ValueError):
            return None


VALUE = json.dumps({"version": RECORD_VERSION}).encode()


class AclState:
    """The ACLs in force, rebuilt record by record from the ACL topic."""

    def __init__(self) -> None:
        self.acls: set[RegistryAcl] = set()
        self.skipped = 0

    def apply(self, key: bytes | None, value: bytes | None) -> None:
        try:
            acl = RegistryAcl.from_json(json.loads(key)) if key else None
        except (ValueError, RecursionError):
            acl = None
        if acl is None:
            self.skipped += 1
            return
        if value is None:
            self.acls.discard(acl)
        else:
            self.acls.add(acl)

    def matching(
        self,
        principal: str | None = None,
        subject: str | None = None,
        resource_type: str | None = None,
    ) -> list[RegistryAcl]:
        """The ACLs of ``principal`` on exactly ``subject`` / ``resource_type`` (None: any)."""
        out = [
            a
            for a in self.acls
            if (principal is None or a.principal == principal)
            and (subject is None or a.subject == subject)
            and (resource_type is None or a.resource_type == resource_type)
        ]
        return sorted(out, key=lambda a: (a.resource_type, a.subject or "", a.principal, a.key()))


class RegistryAuthorizer:
    """Decides whether a principal may do an operation (see the module)."""

    def __init__(self, state: AclState, super_users: Collection[str] = ()) -> None:
        self.state = state
        self.super_users = frozenset(super_users)

    def authorize(self, principal: str, operation: Operation, subject: str | None = None) -> bool:
        if principal in self.super_users:
            return True
        allowed = False
        for acl in self.state.acls:
            if acl.matches(principal, operation, subject):
                if acl.permission is Permission.DENY:
                    return False
                allowed = True
        return allowed

    def readable(self, principal: str, subjects: Iterable[str]) -> list[str]:
        """The subjects of ``subjects`` the principal may read, in their order."""
        return [s for s in subjects if self.authorize(principal, Operation.SUBJECT_READ, s)]


class AclStore(KafkaStore):
    """The ACL topic read into an ``AclState`` and followed; ``put`` / ``remove`` write it."""

    def __init__(
        self,
        client_config: dict[str, Any],
        acl_state: AclState,
        *,
        topic: str,
        replication_factor: int = -1,
        timeout_s: float = 30.0,
    ) -> None:
        # The schema state is not used: this store applies its records to ``acl_state``.
        super().__init__(
            client_config,
            RegistryState(),
            topic=topic,
            replication_factor=replication_factor,
            timeout_s=timeout_s,
        )
        self.acl_state = acl_state

    def _apply(self, key: bytes | None, value: bytes | None) -> None:
        self.acl_state.apply(key, value)

    async def _started(self) -> None:
        # No NOOP: a registry only reads this topic (it may not be allowed to write it).
        log.info(
            "schema registry ACLs ready: %s at offset %d, %d ACLs",
            self.topic,
            self.position,
            len(self.acl_state.acls),
        )

    async def put(self, acl: RegistryAcl) -> None:
        await self.write(acl.key(), VALUE)

    async def remove(self, acl: RegistryAcl) -> None:
        await self.write(acl.key(), None)
