"""The ACL authorizer: may this principal, from this host, perform this operation on this
resource? Kafka's ``StandardAuthorizer`` semantics.

Theory of operation. The authorizer holds no ACLs of its own: ``acls()`` returns the current
bindings (the metadata image's ``acls``, replaced whole on every change). It keeps an index
of them by resource type, rebuilt when ``acls()`` returns a different object, so a decision
looks only at bindings of the resource's type.

A decision, in Kafka's order:

1. A principal named in ``super.users`` (``User:a;User:b``) may do anything.
2. The bindings that apply are those whose pattern matches the resource (a LITERAL binding of
   that name, the LITERAL ``*`` binding, a PREFIXED binding whose name starts the resource's
   name), whose principal is the caller's or ``User:*``, and whose host is the caller's
   address or ``*``.
3. A DENY binding for the operation, or for ALL, denies: DENY wins over ALLOW.
4. An ALLOW binding for the operation, or for ALL, allows; an ALLOW of READ, WRITE, DELETE or
   ALTER also allows DESCRIBE, and an ALLOW of ALTER_CONFIGS also allows DESCRIBE_CONFIGS.
   Implication never extends a DENY.
5. Otherwise the answer is no, except that when no binding at all matches the resource (for
   any principal, host or operation) ``allow.everyone.if.no.acl.found=true`` allows.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping

from gregor.security.acls import (
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    AclBinding,
    AclOperation,
    AclPermissionType,
    ResourceType,
)

__all__ = ["AclAuthorizer", "parse_super_users"]

_O = AclOperation
#: Operations an ALLOW binding grants beyond its own.
_IMPLIED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    _O.DESCRIBE: frozenset({_O.DESCRIBE, _O.READ, _O.WRITE, _O.DELETE, _O.ALTER, _O.ALL}),
    _O.DESCRIBE_CONFIGS: frozenset({_O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS, _O.ALL}),
}


def parse_super_users(value: str) -> frozenset[str]:
    """``super.users``: principals separated by semicolons (``User:admin;User:ops``)."""
    return frozenset(p.strip() for p in value.split(";") if p.strip())


class AclAuthorizer:
    """Decides with the bindings ``acls()`` returns; see the module docstring."""

    def __init__(
        self,
        acls: Callable[[], Collection[AclBinding]],
        super_users: Iterable[str] = (),
        allow_everyone_if_no_acl_found: bool = False,
    ) -> None:
        self._acls = acls
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._indexed: Collection[AclBinding] | None = None
        self._by_type: Mapping[ResourceType, tuple[AclBinding, ...]] = {}

    @classmethod
    def from_config(
        cls, acls: Callable[[], Collection[AclBinding]], get: Callable[[str, str], str]
    ) -> AclAuthorizer:
        """Built from broker settings: ``get(key, default)``."""
        return cls(
            acls,
            parse_super_users(get("super.users", "")),
            get("allow.everyone.if.no.acl.found", "false").strip().lower() == "true",
        )

    def _bindings(self, resource_type: ResourceType) -> tuple[AclBinding, ...]:
        current = self._acls()
        if current is not self._indexed:
            by_type: dict[ResourceType, list[AclBinding]] = {}
            for b in current:
                by_type.setdefault(b.resource_type, []).append(b)
            self._by_type = {t: tuple(bs) for t, bs in by_type.items()}
            self._indexed = current
        return self._by_type.get(resource_type, ())

    def authorize(
        self,
        principal: str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        resource_name: str,
    ) -> bool:
        """May ``principal`` connected from ``host`` perform ``operation`` on the resource?"""
        if principal in self.super_users:
            return True
        found_resource_acls = False
        allowed = False
        granting = _IMPLIED_BY.get(operation, frozenset({operation, _O.ALL}))
        for b in self._bindings(resource_type):
            if not b.matches_resource(resource_type, resource_name):
                continue
            found_resource_acls = True
            if b.principal != principal and b.principal != WILDCARD_PRINCIPAL:
                continue
            if b.host != host and b.host != WILDCARD_HOST:
                continue
            if b.permission_type == AclPermissionType.DENY:
                if b.operation == operation or b.operation == _O.ALL:
                    return False
            elif b.operation in granting:
                allowed = True
        if allowed:
            return True
        return not found_resource_acls and self.allow_everyone_if_no_acl_found

    def authorized_operations(
        self,
        principal: str,
        host: str,
        resource_type: ResourceType,
        resource_name: str,
        operations: Iterable[AclOperation],
    ) -> list[AclOperation]:
        """Those of ``operations`` the principal may perform (KIP-430 authorized operations)."""
        return [
            op
            for op in operations
            if self.authorize(principal, host, op, resource_type, resource_name)
        ]
