"""The old path of the ACL and SCRAM values, now in :mod:`gregor.client.admin.types`, kept for
importers outside the client (the CLI, the console, tests); new code imports the admin's."""

from gregor.client.admin.types import (
    CLUSTER_NAME,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    ScramMechanism,
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
