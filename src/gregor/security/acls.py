"""ACL bindings and binding filters, with Kafka's codes and Kafka's filter matching.

An ``AclBinding`` is one access-control entry on one resource pattern: (resource type,
resource name, pattern type LITERAL or PREFIXED) x (principal, host, operation, permission
ALLOW or DENY). An ``AclBindingFilter`` has the same fields where a name, principal or host
may be None (any) and the enums may be ANY; DescribeAcls and DeleteAcls select bindings with
it. The pattern type filter MATCH selects every binding that would apply to the named
resource: the LITERAL binding of that name, the LITERAL ``*`` binding and every PREFIXED
binding whose name is a prefix of it (Kafka's ``ResourcePatternFilter.matches``).

The numeric values are Kafka's (``ResourceType``, ``PatternType``, ``AclOperation``,
``AclPermissionType``, from ``protocol.acl_codes``); a code Kafka does not define reads as
UNKNOWN. Everything here is
pure: no state, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from gregor.protocol.acl_codes import (
    CLUSTER_NAME,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

__all__ = [
    "CLUSTER_NAME",
    "WILDCARD_PRINCIPAL",
    "WILDCARD_RESOURCE",
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "PatternType",
    "ResourceType",
    "binding_error",
    "filter_error",
]

#: A LITERAL resource name that matches every resource of its type.
WILDCARD_RESOURCE = "*"
#: A principal that matches every principal.
WILDCARD_PRINCIPAL = "User:*"
#: A host that matches every client address.
WILDCARD_HOST = "*"


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL: who (principal, host) may or may not (permission) do what (operation) to
    which resources (type, name, pattern type)."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def matches_resource(self, resource_type: ResourceType, name: str) -> bool:
        """Does this binding's pattern apply to the resource (type, name)?"""
        if self.resource_type != resource_type:
            return False
        if self.pattern_type == PatternType.LITERAL:
            return self.resource_name == name or self.resource_name == WILDCARD_RESOURCE
        return self.pattern_type == PatternType.PREFIXED and name.startswith(self.resource_name)


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """Selects bindings: None (name, principal, host) and ANY (enums) match everything."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    def matches(self, b: AclBinding) -> bool:
        return self._matches_pattern(b) and self._matches_entry(b)

    def _matches_pattern(self, b: AclBinding) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != b.resource_type:
            return False
        if (
            self.pattern_type not in (PatternType.ANY, PatternType.MATCH)
            and self.pattern_type != b.pattern_type
        ):
            return False
        if self.resource_name is None:
            return True
        if self.pattern_type in (PatternType.ANY, b.pattern_type):
            return self.resource_name == b.resource_name
        # MATCH: the bindings that would apply to a resource of this name.
        if b.pattern_type == PatternType.LITERAL:
            return self.resource_name == b.resource_name or b.resource_name == WILDCARD_RESOURCE
        return b.pattern_type == PatternType.PREFIXED and self.resource_name.startswith(
            b.resource_name
        )

    def _matches_entry(self, b: AclBinding) -> bool:
        if self.principal is not None and self.principal != b.principal:
            return False
        if self.host is not None and self.host != b.host:
            return False
        if self.operation != AclOperation.ANY and self.operation != b.operation:
            return False
        return self.permission_type in (AclPermissionType.ANY, b.permission_type)


def binding_error(b: AclBinding) -> str | None:
    """Why Kafka refuses to create ``b`` (INVALID_REQUEST), or None when it is acceptable."""
    if b.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return f"Invalid resourceType {b.resource_type.name}"
    if b.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid patternType {b.pattern_type.name}"
    if b.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        return f"Invalid operation {b.operation.name}"
    if b.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        return f"Invalid permissionType {b.permission_type.name}"
    if not b.resource_name:
        return "Resource name should not be empty"
    if b.resource_type == ResourceType.CLUSTER and b.resource_name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if ":" not in b.principal:
        return (
            f"Could not parse principal from `{b.principal}` (no colon is present separating "
            "the principal type from the principal name)"
        )
    return None


def filter_error(f: AclBindingFilter) -> str | None:
    """Why Kafka refuses a filter (INVALID_REQUEST: an element it does not know), or None."""
    for field, value in (
        ("Resource type", f.resource_type),
        ("Resource pattern type", f.pattern_type),
        ("Operation", f.operation),
        ("Permission type", f.permission_type),
    ):
        if value == 0:
            return f"{field} is UNKNOWN."
    return None
