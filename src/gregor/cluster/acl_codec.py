"""ACL bindings as JSON documents, for the stores that persist the image as JSON.

A binding is an object with the enum members by Kafka's names (``"TOPIC"``, ``"PREFIXED"``,
``"READ"``, ``"ALLOW"``), which reads well in a metadata file and does not depend on codes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from gregor.security.acls import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

__all__ = ["decode_acls", "encode_acls"]


def encode_acls(acls: Iterable[AclBinding]) -> list[dict[str, str]]:
    return [
        {
            "resource_type": b.resource_type.name,
            "resource_name": b.resource_name,
            "pattern_type": b.pattern_type.name,
            "principal": b.principal,
            "host": b.host,
            "operation": b.operation.name,
            "permission_type": b.permission_type.name,
        }
        for b in acls
    ]


def decode_acls(docs: Iterable[dict[str, Any]]) -> tuple[AclBinding, ...]:
    return tuple(
        AclBinding(
            ResourceType[d["resource_type"]],
            str(d["resource_name"]),
            PatternType[d["pattern_type"]],
            str(d["principal"]),
            str(d["host"]),
            AclOperation[d["operation"]],
            AclPermissionType[d["permission_type"]],
        )
        for d in docs
    )
