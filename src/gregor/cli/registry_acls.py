"""``gregor acls ... --subject NAME / --registry``: the schema registry's ACLs.

They are not Kafka ACLs: they live in the registry's ACL topic (``--acl-topic``, by default
``_schemas_acl``; ``gregor.schema_registry.acls``), which this command reads to its end and
writes through the cluster with the client settings given (``-X``), so the topic's own Kafka
ACLs decide who may change them. ``--subject`` names a subject (``*`` for all; a prefix with
``--resource-pattern-type prefixed``) for the SUBJECT_ operations, ``--registry`` the registry
for the GLOBAL_ ones; ``list --registry`` lists every registry ACL.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import click

from gregor.cli.clientopts import client_config, fail

if TYPE_CHECKING:
    from gregor.schema_registry.acls import AclStore, RegistryAcl

KAFKA_RESOURCES = ("topics", "groups", "cluster", "transactional_ids", "tokens", "users")


def wanted(kw: dict[str, Any]) -> bool:
    """Whether the command is about registry ACLs (and not also Kafka ones)."""
    if not kw["subjects"] and not kw["registry"]:
        return False
    if any(kw[k] for k in KAFKA_RESOURCES):
        raise click.UsageError(
            "--subject / --registry (schema registry ACLs) cannot be mixed with Kafka resources"
        )
    return True


def _run(
    bootstrap_server: str,
    properties: tuple[str, ...],
    topic: str,
    action: Callable[[AclStore], Awaitable[Any]],
) -> Any:
    try:
        from gregor.schema_registry.acls import AclState, AclStore
        from gregor.schema_registry.errors import RegistryError
    except ImportError:
        fail("registry ACLs need the schema-registry extra: pip install 'gregor[schema-registry]'")
        raise
    if not topic or len(topic) > 249:
        raise click.BadParameter("a topic name of 1 to 249 characters", param_hint="--acl-topic")
    store = AclStore(client_config(bootstrap_server, properties), AclState(), topic=topic)

    async def go() -> Any:
        try:
            await store.start()
            return await action(store)
        finally:
            await store.close()

    try:
        return asyncio.run(go())
    except RegistryError as e:
        fail(f"the ACL topic {topic}: {e.message}")
    except Exception as e:  # a Kafka error: not allowed, unreachable
        fail(f"the ACL topic {topic}: {type(e).__name__}: {e}")


def _bindings(kw: dict[str, Any]) -> list[RegistryAcl]:
    from gregor.schema_registry.acls import Operation, Pattern, Permission, RegistryAcl

    if not kw["allow_principals"] and not kw["deny_principals"]:
        raise click.UsageError("name a principal (--allow-principal or --deny-principal)")
    if kw["producer"] or kw["consumer"] or kw["allow_hosts"] or kw["deny_hosts"]:
        raise click.UsageError("registry ACLs have no --producer, --consumer or hosts")
    if not kw["operations"]:
        raise click.UsageError("name the registry operation (--operation SUBJECT_READ, ...)")
    try:
        ops = [Operation.parse(name) for name in kw["operations"]]
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--operation") from None
    pattern = Pattern(kw["pattern"].upper())
    resources: list[str | None] = [*kw["subjects"], *([None] if kw["registry"] else [])]
    out: list[RegistryAcl] = []
    for principals, permission in (
        (kw["allow_principals"], Permission.ALLOW),
        (kw["deny_principals"], Permission.DENY),
    ):
        for subject in resources:
            for op in ops:
                if op.is_global != (subject is None):
                    continue  # SUBJECT_ ops go to the subjects, GLOBAL_ ones to the registry
                for principal in principals:
                    try:
                        acl = RegistryAcl(
                            principal,
                            op,
                            subject,
                            pattern if subject is not None else Pattern.LITERAL,
                            permission,
                        )
                    except ValueError as e:
                        raise click.UsageError(str(e)) from None
                    if acl not in out:
                        out.append(acl)
    if not out:
        raise click.UsageError(
            "no ACL: SUBJECT_ operations need --subject, GLOBAL_ operations --registry"
        )
    return out


def _print(acls: list[RegistryAcl], title: str) -> None:
    by: dict[tuple[str, str, str], list[RegistryAcl]] = {}
    for a in acls:
        j = a.to_json()
        by.setdefault((j["resource_type"], j["name"], j["pattern_type"]), []).append(a)
    for (kind, name, pattern), entries in by.items():
        shown = f", name={name}" if kind == "SUBJECT" else ""
        click.echo(
            f"{title} `RegistryResource(resourceType={kind}{shown}, patternType={pattern})`:"
        )
        for e in entries:
            click.echo(
                f" \t(principal={e.principal}, operation={e.operation.name}, "
                f"permissionType={e.permission.value})"
            )
        click.echo("")


def add(
    bootstrap_server: str, properties: tuple[str, ...], output: str, kw: dict[str, Any]
) -> None:
    acls = _bindings(kw)

    async def put(store: AclStore) -> None:
        for acl in acls:
            await store.put(acl)

    _run(bootstrap_server, properties, kw["acl_topic"], put)
    if output == "json":
        click.echo(json.dumps({"result": "ok", "added": [a.to_json() for a in acls]}))
    else:
        _print(acls, "Adding registry ACLs for resource")


def list_acls(
    bootstrap_server: str, properties: tuple[str, ...], output: str, kw: dict[str, Any]
) -> None:
    async def read(store: AclStore) -> list[RegistryAcl]:
        state = store.acl_state
        principals = kw["principals"] or (None,)
        found: list[RegistryAcl] = []
        for principal in principals:
            for subject in kw["subjects"] or (None,):
                found += [a for a in state.matching(principal, subject) if a not in found]
        return found

    found = _run(bootstrap_server, properties, kw["acl_topic"], read)
    if output == "json":
        click.echo(json.dumps([a.to_json() for a in found]))
    else:
        _print(found, "Current registry ACLs for resource")


def remove(
    bootstrap_server: str, properties: tuple[str, ...], output: str, kw: dict[str, Any]
) -> None:
    targeted = bool(kw["allow_principals"] or kw["deny_principals"])
    named = _bindings(kw) if targeted else []

    async def drop(store: AclStore) -> list[RegistryAcl]:
        state = store.acl_state
        if targeted:
            gone = [a for a in named if a in state.acls]
        else:
            gone = [a for s in kw["subjects"] for a in state.matching(subject=s)]
            if kw["registry"]:
                gone += state.matching(resource_type="REGISTRY")
        for acl in gone:
            await store.remove(acl)
        return gone

    gone = _run(bootstrap_server, properties, kw["acl_topic"], drop)
    if output == "json":
        click.echo(json.dumps({"result": "ok", "removed": [a.to_json() for a in gone]}))
    else:
        _print(gone, "Removed registry ACLs for resource")
