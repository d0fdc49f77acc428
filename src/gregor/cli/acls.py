"""``gregor acls``: add, list and remove ACLs, with kafka-acls.sh's flags.

``add`` and ``remove`` take the resources (``--topic``, ``--group``, ``--cluster``,
``--transactional-id``, ``--delegation-token``, ``--user-principal``; each repeatable) and the
entries: ``--allow-principal`` / ``--deny-principal`` with ``--allow-host`` / ``--deny-host``
(``*`` when none is given) and ``--operation`` (repeatable; ALL when none is given). Like
kafka-acls, ``--producer`` means WRITE, DESCRIBE and CREATE on the topics (WRITE and DESCRIBE
on ``--transactional-id``s, IDEMPOTENT_WRITE on the cluster with ``--idempotent``) and
``--consumer`` READ and DESCRIBE on the topics and READ on the ``--group``s. ``remove`` with
resources but no principal removes every ACL on those resources, and asks first unless
``--force``. ``list`` shows the ACLs on the resources named (all of them when none is),
optionally only those of ``--principal``. With ``--subject`` or ``--registry`` the commands
manage the schema registry's ACLs instead (``registry_acls``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import click

from gregor.cli import registry_acls
from gregor.cli.clientopts import client_config, client_options, fail, output_option

if TYPE_CHECKING:
    from gregor.client.acls import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        ResourceType,
    )

OPERATION_NAMES = (
    "All, Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, "
    "AlterConfigs, IdempotentWrite, CreateTokens, DescribeTokens"
)


def _resource_options(fn: Any) -> Any:
    for opt in reversed(
        [
            click.option(
                "--topic", "topics", multiple=True, help="A topic (or prefix); repeatable."
            ),
            click.option(
                "--group", "groups", multiple=True, help="A consumer group (or prefix); repeatable."
            ),
            click.option("--cluster", is_flag=True, help="The cluster resource."),
            click.option(
                "--transactional-id",
                "transactional_ids",
                multiple=True,
                help="A transactional id; repeatable.",
            ),
            click.option(
                "--delegation-token",
                "tokens",
                multiple=True,
                help="A delegation token id; repeatable.",
            ),
            click.option(
                "--user-principal",
                "users",
                multiple=True,
                help="A user resource (User:name); repeatable.",
            ),
            click.option(
                "--subject",
                "subjects",
                multiple=True,
                help="A schema registry subject (or prefix; * for all): registry ACLs; repeatable.",
            ),
            click.option(
                "--registry",
                is_flag=True,
                help="The schema registry itself (GLOBAL_ operations); with list: every registry ACL.",
            ),
            click.option(
                "--acl-topic",
                default="_schemas_acl",
                show_default=True,
                help="With --subject / --registry: the registry's ACL topic.",
            ),
        ]
    ):
        fn = opt(fn)
    return fn


def _entry_options(fn: Any) -> Any:
    for opt in reversed(
        [
            click.option(
                "--allow-principal",
                "allow_principals",
                multiple=True,
                help="Principal to allow (User:name).",
            ),
            click.option(
                "--deny-principal",
                "deny_principals",
                multiple=True,
                help="Principal to deny (User:name).",
            ),
            click.option(
                "--allow-host",
                "allow_hosts",
                multiple=True,
                help="Host the allow entries apply to (default *).",
            ),
            click.option(
                "--deny-host",
                "deny_hosts",
                multiple=True,
                help="Host the deny entries apply to (default *).",
            ),
            click.option(
                "--operation",
                "operations",
                multiple=True,
                help=f"Operation: {OPERATION_NAMES}; repeatable.",
            ),
            click.option(
                "--producer", is_flag=True, help="Convenience: the ACLs a producer needs."
            ),
            click.option(
                "--consumer",
                is_flag=True,
                help="Convenience: the ACLs a consumer needs (with --group).",
            ),
            click.option(
                "--idempotent",
                is_flag=True,
                help="With --producer: IDEMPOTENT_WRITE on the cluster.",
            ),
            click.option(
                "--resource-pattern-type",
                "pattern",
                default="literal",
                show_default=True,
                type=click.Choice(["literal", "prefixed"], case_sensitive=False),
                help="How resource names match.",
            ),
        ]
    ):
        fn = opt(fn)
    return fn


def _resources(kw: dict[str, Any]) -> list[tuple[ResourceType, str]]:
    from gregor.client.acls import CLUSTER_NAME, ResourceType

    out = [(ResourceType.TOPIC, n) for n in kw["topics"]]
    out += [(ResourceType.GROUP, n) for n in kw["groups"]]
    if kw["cluster"]:
        out.append((ResourceType.CLUSTER, CLUSTER_NAME))
    out += [(ResourceType.TRANSACTIONAL_ID, n) for n in kw["transactional_ids"]]
    out += [(ResourceType.DELEGATION_TOKEN, n) for n in kw["tokens"]]
    out += [(ResourceType.USER, n) for n in kw["users"]]
    return out


def _operations(names: Iterable[str]) -> list[AclOperation]:
    from gregor.client.acls import AclOperation

    ops: list[AclOperation] = []
    for name in names:
        try:
            op = AclOperation.parse(name)
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="--operation") from None
        if op in (AclOperation.ANY, AclOperation.UNKNOWN):
            raise click.BadParameter(
                f"{name!r} is not an operation an ACL can grant", param_hint="--operation"
            )
        ops.append(op)
    return ops


def _bindings(kw: dict[str, Any]) -> list[AclBinding]:
    """The ACLs ``add`` (or a targeted ``remove``) names, in kafka-acls's order."""
    from gregor.client.acls import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        PatternType,
        ResourceType,
    )

    pattern = PatternType.parse(kw["pattern"])
    resources = _resources(kw)
    if not resources and not kw["producer"] and not kw["consumer"]:
        raise click.UsageError("name at least one resource (--topic, --group, --cluster, ...)")
    if not kw["allow_principals"] and not kw["deny_principals"]:
        raise click.UsageError("name a principal (--allow-principal or --deny-principal)")
    wanted: list[tuple[ResourceType, str, AclOperation]] = []
    if kw["producer"] or kw["consumer"]:
        if kw["operations"]:
            raise click.UsageError("--operation cannot be combined with --producer or --consumer")
        if kw["consumer"] and not kw["groups"]:
            raise click.UsageError("--consumer needs --group")
        if not kw["topics"]:
            raise click.UsageError("--producer and --consumer need --topic")
        for kind, name in resources:
            if kw["producer"] and kind is ResourceType.TOPIC:
                wanted += [
                    (kind, name, op)
                    for op in (AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE)
                ]
            if kw["producer"] and kind is ResourceType.TRANSACTIONAL_ID:
                wanted += [(kind, name, op) for op in (AclOperation.WRITE, AclOperation.DESCRIBE)]
            if kw["consumer"] and kind is ResourceType.TOPIC:
                wanted += [(kind, name, op) for op in (AclOperation.READ, AclOperation.DESCRIBE)]
            if kw["consumer"] and kind is ResourceType.GROUP:
                wanted.append((kind, name, AclOperation.READ))
        if kw["producer"] and kw["idempotent"]:
            from gregor.client.acls import CLUSTER_NAME

            wanted.append((ResourceType.CLUSTER, CLUSTER_NAME, AclOperation.IDEMPOTENT_WRITE))
    else:
        ops = _operations(kw["operations"]) or [AclOperation.ALL]
        wanted = [(kind, name, op) for kind, name in resources for op in ops]
    out: list[AclBinding] = []
    for principals, hosts, permission in (
        (kw["allow_principals"], kw["allow_hosts"] or ("*",), AclPermissionType.ALLOW),
        (kw["deny_principals"], kw["deny_hosts"] or ("*",), AclPermissionType.DENY),
    ):
        for kind, name, op in wanted:
            for principal in principals:
                for host in hosts:
                    b = AclBinding(
                        kind,
                        name,
                        PatternType.LITERAL if kind is ResourceType.CLUSTER else pattern,
                        principal,
                        host,
                        op,
                        permission,
                    )
                    if b not in out:
                        out.append(b)
    return out


def _filter_of(b: AclBinding) -> AclBindingFilter:
    from gregor.client.acls import AclBindingFilter

    return AclBindingFilter(
        b.resource_type, b.name, b.pattern_type, b.principal, b.host, b.operation, b.permission_type
    )


def _admin(bootstrap_server: str, properties: tuple[str, ...]) -> Any:
    from gregor.client import AdminClient

    return AdminClient(client_config(bootstrap_server, properties))


def _binding_json(b: AclBinding) -> dict[str, str]:
    return {
        "resource_type": b.resource_type.name,
        "name": b.name,
        "pattern_type": b.pattern_type.name,
        "principal": b.principal,
        "host": b.host,
        "operation": b.operation.name,
        "permission_type": b.permission_type.name,
    }


def _print_by_resource(bindings: Iterable[AclBinding], title: str) -> None:
    by: dict[tuple[Any, str, Any], list[AclBinding]] = {}
    for b in bindings:
        by.setdefault((b.resource_type, b.name, b.pattern_type), []).append(b)
    for (kind, name, pattern), entries in by.items():
        click.echo(
            f"{title} `ResourcePattern(resourceType={kind.name}, name={name}, patternType={pattern.name})`:"
        )
        for e in entries:
            click.echo(
                f" \t(principal={e.principal}, host={e.host}, operation={e.operation.name}, "
                f"permissionType={e.permission_type.name})"
            )
        click.echo("")


@click.group()
def acls() -> None:
    """Manage ACLs (like kafka-acls)."""


@acls.command()
@client_options
@_resource_options
@_entry_options
@output_option
def add(bootstrap_server: str, properties: tuple[str, ...], output: str, **kw: Any) -> None:
    """Add ACLs.

    \b
    Examples:
      gregor acls add --allow-principal User:alice --operation Read --topic events
      gregor acls add --allow-principal User:app --producer --topic orders --transactional-id app-
      gregor acls add --deny-principal User:bob --operation All --topic pay --resource-pattern-type prefixed
      gregor acls add --allow-principal User:alice --operation SUBJECT_WRITE --subject orders-value
    """
    if registry_acls.wanted(kw):
        return registry_acls.add(bootstrap_server, properties, output, kw)
    bindings = _bindings(kw)
    with _admin(bootstrap_server, properties) as admin:
        results = admin.create_acls(bindings)
    failed = [(b, e) for b, e in results.items() if e is not None]
    if output == "json":
        click.echo(
            json.dumps(
                {
                    "result": "ok" if not failed else "failed",
                    "added": [_binding_json(b) for b, e in results.items() if e is None],
                }
            )
        )
    else:
        _print_by_resource([b for b, e in results.items() if e is None], "Adding ACLs for resource")
    for b, e in failed:
        click.echo(f"Error adding {b}: {e}", err=True)
    if failed:
        fail(f"{len(failed)} of {len(bindings)} ACLs were not added")


@acls.command("list")
@client_options
@_resource_options
@click.option(
    "--resource-pattern-type",
    "pattern",
    default="any",
    show_default=True,
    type=click.Choice(["any", "match", "literal", "prefixed"], case_sensitive=False),
    help="Which patterns to list: any, those that match the names (match), or literal / prefixed ones.",
)
@click.option(
    "--principal", "principals", multiple=True, help="Only the ACLs of this principal; repeatable."
)
@click.option("--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
def list_acls(bootstrap_server: str, properties: tuple[str, ...], output: str, **kw: Any) -> None:
    """List ACLs (on the resources named, or all).

    \b
    Examples:
      gregor acls list
      gregor acls list --topic events --output json
      gregor acls list --principal User:alice
      gregor acls list --registry --output json             # the schema registry's ACLs
    """
    from gregor.client.acls import AclBindingFilter, PatternType

    if registry_acls.wanted(kw):
        return registry_acls.list_acls(bootstrap_server, properties, output, kw)
    pattern = PatternType.parse(kw["pattern"])
    filters = [AclBindingFilter(kind, name, pattern) for kind, name in _resources(kw)] or [
        AclBindingFilter()
    ]
    if kw["principals"]:
        filters = [
            AclBindingFilter(f.resource_type, f.name, f.pattern_type, principal=p)
            for f in filters
            for p in kw["principals"]
        ]
    found: list[AclBinding] = []
    with _admin(bootstrap_server, properties) as admin:
        for f in filters:
            for b in admin.describe_acls(f):
                if b not in found:
                    found.append(b)
    if output == "json":
        click.echo(json.dumps([_binding_json(b) for b in found]))
        return
    _print_by_resource(found, "Current ACLs for resource")


@acls.command()
@client_options
@_resource_options
@_entry_options
@click.option("--force", is_flag=True, help="Do not ask before removing.")
@output_option
def remove(
    bootstrap_server: str, properties: tuple[str, ...], force: bool, output: str, **kw: Any
) -> None:
    """Remove ACLs: those named, or every ACL on the resources when no principal is given.

    \b
    Examples:
      gregor acls remove --topic events --force                  # every ACL on the topic
      gregor acls remove --allow-principal User:alice --operation Read --topic events --force
    """
    from gregor.client.acls import AclBindingFilter, PatternType

    if registry_acls.wanted(kw):
        if not force and not click.confirm(
            "Are you sure you want to remove these ACLs?", default=False
        ):
            fail("nothing removed")
        return registry_acls.remove(bootstrap_server, properties, output, kw)
    if kw["allow_principals"] or kw["deny_principals"]:
        filters = [_filter_of(b) for b in _bindings(kw)]
    else:
        resources = _resources(kw)
        if not resources:
            raise click.UsageError("name at least one resource (--topic, --group, --cluster, ...)")
        pattern = PatternType.parse(kw["pattern"])
        filters = [AclBindingFilter(kind, name, pattern) for kind, name in resources]
    if not force and not click.confirm(
        "Are you sure you want to remove these ACLs?", default=False
    ):
        fail("nothing removed")
    with _admin(bootstrap_server, properties) as admin:
        results = admin.delete_acls(filters)
    removed: list[AclBinding] = []
    errors = []
    for f, r in zip(filters, results, strict=True):
        if isinstance(r, Exception):
            errors.append(f"Error removing ACLs matching {f}: {r}")
        else:
            removed += [b for b in r if b not in removed]
    if output == "json":
        click.echo(
            json.dumps(
                {
                    "result": "ok" if not errors else "failed",
                    "removed": [_binding_json(b) for b in removed],
                }
            )
        )
    else:
        _print_by_resource(removed, "Removed ACLs for resource")
    for line in errors:
        click.echo(line, err=True)
    if errors:
        fail(f"{len(errors)} of {len(filters)} removals failed")
