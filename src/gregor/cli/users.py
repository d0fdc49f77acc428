"""``gregor users``: SCRAM credentials, as ``kafka-configs.sh --entity-type users`` manages them.

``alter NAME --add-config 'SCRAM-SHA-256=[iterations=8192,password=secret],SCRAM-SHA-512=[password=secret]'``
sets credentials (4096 iterations when none are given, Kafka's default); the password is
salted on this side and only the salted form reaches the broker. Each change is its own
request, since a controller refuses two changes of one user in one request. ``--delete-config
SCRAM-SHA-512`` removes one. ``describe [NAME...]`` shows each user's mechanisms and
iteration counts, never a password or a salt.
"""

from __future__ import annotations

import json
from typing import Any

import click

from gregor.cli.clientopts import client_config, client_options, done, fail, output_option

DEFAULT_ITERATIONS = 4096


def _split_top_level(text: str) -> list[str]:
    """Split on commas outside ``[...]``."""
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth != 0:
        raise click.BadParameter(f"unbalanced brackets in {text!r}", param_hint="--add-config")
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


def parse_scram_configs(text: str) -> list[tuple[str, str, int]]:
    """``MECH=[iterations=N,password=P],...`` -> [(mechanism, password, iterations)]."""
    out = []
    for item in _split_top_level(text):
        mech, sep, rest = item.partition("=")
        rest = rest.strip()
        if not sep or not (rest.startswith("[") and rest.endswith("]")):
            raise click.BadParameter(
                f"{item!r} is not MECHANISM=[password=...,iterations=...]",
                param_hint="--add-config",
            )
        fields: dict[str, str] = {}
        for kv in _split_top_level(rest[1:-1]):
            k, sep, v = kv.partition("=")
            if not sep:
                raise click.BadParameter(f"{kv!r} is not key=value", param_hint="--add-config")
            fields[k.strip()] = v
        unknown = set(fields) - {"password", "iterations"}
        if unknown or "password" not in fields:
            raise click.BadParameter(
                f"{mech.strip()} needs password=... (and optionally iterations=...), not {sorted(unknown)}",
                param_hint="--add-config",
            )
        try:
            iterations = int(fields.get("iterations", DEFAULT_ITERATIONS))
        except ValueError:
            raise click.BadParameter(
                f"iterations must be a number in {item!r}", param_hint="--add-config"
            ) from None
        out.append((mech.strip(), fields["password"], iterations))
    return out


def _admin(bootstrap_server: str, properties: tuple[str, ...]) -> Any:
    from gregor.client import AdminClient

    return AdminClient(client_config(bootstrap_server, properties))


@click.group()
def users() -> None:
    """Manage users' SCRAM credentials (like kafka-configs --entity-type users)."""


@users.command()
@client_options
@click.argument("names", nargs=-1)
@click.option("--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
def describe(
    bootstrap_server: str, properties: tuple[str, ...], names: tuple[str, ...], output: str
) -> None:
    """Each user's SCRAM mechanisms and iterations (every user with a credential when none named).

    \b
    Examples:
      gregor users describe
      gregor users describe alice bob --output json
    """
    with _admin(bootstrap_server, properties) as admin:
        found = admin.describe_user_scram_credentials(list(names) if names else None)
    if output == "json":
        click.echo(
            json.dumps(
                {
                    user: {"error": str(c)}
                    if isinstance(c, Exception)
                    else {m.kafka_name: {"iterations": i} for m, i in sorted(c)}
                    for user, c in sorted(found.items())
                }
            )
        )
        if any(isinstance(c, Exception) for c in found.values()):
            raise SystemExit(1)
        return
    failed = False
    for user in sorted(found):
        creds = found[user]
        if isinstance(creds, Exception):
            click.echo(f"Error describing user {user}: {creds}", err=True)
            failed = True
            continue
        listed = ", ".join(f"{m.kafka_name}=iterations={i}" for m, i in sorted(creds))
        click.echo(f"SCRAM credential configs for user-principal '{user}' are {listed}")
    if failed:
        fail("some users could not be described")


@users.command()
@client_options
@click.argument("name")
@click.option(
    "--add-config",
    "add",
    default=None,
    metavar="MECH=[password=...,iterations=...],...",
    help="Credentials to set (SCRAM-SHA-256, SCRAM-SHA-512).",
)
@click.option(
    "--delete-config",
    "delete",
    default=None,
    metavar="MECH[,MECH]",
    help="Mechanisms whose credential to remove.",
)
@output_option
def alter(
    bootstrap_server: str,
    properties: tuple[str, ...],
    name: str,
    add: str | None,
    delete: str | None,
    output: str,
) -> None:
    """Set or remove a user's SCRAM credentials.

    \b
    Examples:
      gregor users alter alice --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret]'
      gregor users alter alice --delete-config SCRAM-SHA-512
    """
    from gregor.client.acls import ScramMechanism

    if not add and not delete:
        raise click.UsageError("give --add-config and/or --delete-config")
    try:
        ups = [
            (name, ScramMechanism.parse(m), pw, it) for m, pw, it in parse_scram_configs(add or "")
        ]
        dels = [(name, ScramMechanism.parse(m)) for m in _split_top_level(delete or "")]
    except ValueError as e:
        raise click.BadParameter(str(e)) from None
    # One request per change: Kafka's controller (and Gregor) refuse two changes of one user in a
    # request (DUPLICATE_RESOURCE), which is what kafka-configs sends for two mechanisms at once.
    errors = []
    with _admin(bootstrap_server, properties) as admin:
        for d in dels:
            err = admin.alter_user_scram_credentials([], [d]).get(name)
            if err is not None:
                errors.append(
                    f"cannot delete the {d[1].kafka_name} credential of user {name}: {err}"
                )
        for u in ups:
            err = admin.alter_user_scram_credentials([u], []).get(name)
            if err is not None:
                errors.append(f"cannot set the {u[1].kafka_name} credential of user {name}: {err}")
    if errors:
        fail("; ".join(errors))
    done(
        output,
        f"Completed updating config for user {name}.",
        user=name,
        set=[u[1].kafka_name for u in ups],
        deleted=[d[1].kafka_name for d in dels],
    )
