"""``gregor quotas``: client quotas, as ``kafka-configs.sh --entity-type users|clients|ips``
manages them.

The entity is given with ``--user NAME`` or ``--user-defaults``, ``--client-id NAME`` or
``--client-defaults`` (either or both), or ``--ip ADDRESS`` / ``--ip-defaults``. ``alter``
takes ``--add-config producer_byte_rate=1048576,consumer_byte_rate=2097152`` and
``--delete-config KEY[,KEY]``; ``describe`` shows the entities that match what is given
(every entity when nothing is).
"""

from __future__ import annotations

import json
from typing import Any

import click

from gregor.cli.clientopts import client_config, client_options, done, fail, output_option

_LABELS = {"user": "user-principal", "client-id": "client-id", "ip": "ip"}


def _entity_options(fn: Any) -> Any:
    for opt in reversed(
        [
            click.option("--user", default=None, help="A user (principal name)."),
            click.option("--user-defaults", is_flag=True, help="The default user."),
            click.option("--client-id", default=None, help="A client id."),
            click.option("--client-defaults", is_flag=True, help="The default client id."),
            click.option("--ip", default=None, help="A client IP address."),
            click.option("--ip-defaults", is_flag=True, help="The default IP."),
        ]
    ):
        fn = opt(fn)
    return fn


def _entity(kw: dict[str, Any]) -> list[tuple[str, str | None]]:
    pairs: list[tuple[str, str | None]] = []
    for etype, name, default in (
        ("user", kw["user"], kw["user_defaults"]),
        ("client-id", kw["client_id"], kw["client_defaults"]),
        ("ip", kw["ip"], kw["ip_defaults"]),
    ):
        if name is not None and default:
            raise click.UsageError(f"give a {etype} name or its defaults, not both")
        if name is not None or default:
            pairs.append((etype, name))
    return pairs


def describe_entity(entity: tuple[tuple[str, str | None], ...]) -> str:
    order = {"user": 0, "client-id": 1, "ip": 2}
    parts = []
    for etype, name in sorted(entity, key=lambda p: order.get(p[0], 9)):
        label = _LABELS.get(etype, etype)
        parts.append(f"the default {label}" if name is None else f"{label} '{name}'")
    return ", ".join(parts)


def _admin(bootstrap_server: str, properties: tuple[str, ...]) -> Any:
    from gregor.client import AdminClient

    return AdminClient(client_config(bootstrap_server, properties))


@click.group()
def quotas() -> None:
    """Manage client quotas (like kafka-configs --entity-type users|clients|ips)."""


@quotas.command()
@client_options
@_entity_options
@click.option("--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
def describe(bootstrap_server: str, properties: tuple[str, ...], output: str, **kw: Any) -> None:
    """Quotas of the entities matching the one given (all when none is).

    \b
    Examples:
      gregor quotas describe
      gregor quotas describe --user alice --client-defaults --output json
    """
    components = [(etype, 1 if name is None else 0, name) for etype, name in _entity(kw)]
    with _admin(bootstrap_server, properties) as admin:
        found = admin.describe_client_quotas(components, strict=bool(components))
    if output == "json":
        click.echo(
            json.dumps(
                [
                    {
                        "entity": [{"type": t, "name": n} for t, n in entity],
                        "quotas": dict(sorted(found[entity].items())),
                    }
                    for entity in sorted(found, key=describe_entity)
                ]
            )
        )
        return
    for entity in sorted(found, key=describe_entity):
        values = ", ".join(f"{k}={v}" for k, v in sorted(found[entity].items()))
        click.echo(f"Quota configs for {describe_entity(entity)} are {values}")


@quotas.command()
@client_options
@_entity_options
@click.option(
    "--add-config", "add", default=None, metavar="KEY=VALUE[,KEY=VALUE]", help="Quotas to set."
)
@click.option(
    "--delete-config", "delete", default=None, metavar="KEY[,KEY]", help="Quotas to remove."
)
@output_option
def alter(
    bootstrap_server: str,
    properties: tuple[str, ...],
    add: str | None,
    delete: str | None,
    output: str,
    **kw: Any,
) -> None:
    """Set or remove an entity's quotas.

    \b
    Examples:
      gregor quotas alter --client-id app --add-config producer_byte_rate=1048576
      gregor quotas alter --user alice --client-defaults --add-config consumer_byte_rate=2097152
      gregor quotas alter --ip-defaults --add-config connection_creation_rate=50
      gregor quotas alter --user alice --delete-config request_percentage
    """
    pairs = _entity(kw)
    if not pairs:
        raise click.UsageError(
            "name the entity: --user/--user-defaults, --client-id/--client-defaults or --ip"
        )
    if not add and not delete:
        raise click.UsageError("give --add-config and/or --delete-config")
    ops: dict[str, float | None] = {}
    for item in (add or "").split(","):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        try:
            ops[key.strip()] = float(value)
        except ValueError:
            raise click.BadParameter(
                f"{item!r} is not KEY=NUMBER", param_hint="--add-config"
            ) from None
        if not sep:
            raise click.BadParameter(f"{item!r} is not KEY=NUMBER", param_hint="--add-config")
    for key in (delete or "").split(","):
        if key.strip():
            ops[key.strip()] = None
    entity = tuple(sorted(pairs))
    with _admin(bootstrap_server, properties) as admin:
        results = admin.alter_client_quotas({entity: ops})
    err = next(iter(results.values()), None)
    if err is not None:
        fail(f"cannot alter the quotas of {describe_entity(entity)}: {err}")
    done(
        output,
        f"Completed updating config for {describe_entity(entity)}.",
        entity=[{"type": t, "name": n} for t, n in entity],
        quotas=ops,
    )
