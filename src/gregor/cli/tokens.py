"""``gregor tokens``: delegation tokens, as ``kafka-delegation-tokens.sh`` manages them.

``create [--max-life-time-period MS] [--renewer-principal User:bob ...] [--owner-principal
User:carol]``, ``renew --hmac H [--renew-time-period MS]``, ``expire --hmac H
[--expiry-time-period MS]`` and ``describe [--owner-principal User:alice ...]``. The HMAC is
the base64 text ``create`` and ``describe`` print; a client logs in with SCRAM, user name the
token id, password that HMAC, and ``-X sasl.scram.tokenauth=true``. Token requests must come
over an authenticated connection (SASL or SSL with a client certificate), so pass the login
with ``-X`` settings. Dates print as Kafka's tool prints them (``yyyy-MM-ddTHH:mm``, UTC).
"""

from __future__ import annotations

import base64
import binascii
import datetime
import json
from typing import Any

import click

from gregor.cli.clientopts import client_config, client_options, done, fail, output_option

_ROW = "{:<24} {:<90} {:<15} {:<15} {:<25} {:<17} {:<17} {:<17}"


def _admin(bootstrap_server: str, properties: tuple[str, ...]) -> Any:
    from gregor.client import AdminClient

    return AdminClient(client_config(bootstrap_server, properties))


def _date(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).strftime("%Y-%m-%dT%H:%M")


def _print_tokens(tokens: list[Any]) -> None:
    click.echo(
        _ROW.format(
            "TOKENID",
            "HMAC",
            "OWNER",
            "REQUESTER",
            "RENEWERS",
            "ISSUEDATE",
            "EXPIRYDATE",
            "MAXDATE",
        )
    )
    for t in tokens:
        click.echo(
            _ROW.format(
                t.token_id,
                t.password,
                t.owner,
                t.requester,
                ",".join(t.renewers) or "[]",
                _date(t.issue_timestamp_ms),
                _date(t.expiry_timestamp_ms),
                _date(t.max_timestamp_ms),
            )
        )


def _token_json(t: Any) -> dict[str, Any]:
    return {
        "token_id": t.token_id,
        "hmac": t.password,
        "owner": t.owner,
        "requester": t.requester,
        "renewers": list(t.renewers),
        "issue_timestamp_ms": t.issue_timestamp_ms,
        "expiry_timestamp_ms": t.expiry_timestamp_ms,
        "max_timestamp_ms": t.max_timestamp_ms,
    }


def _principal(value: str, option: str) -> str:
    kind, sep, name = value.partition(":")
    if not sep or not kind or not name:
        raise click.BadParameter(f"{value!r} is not a principal like User:alice", param_hint=option)
    return value


def _hmac(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise click.BadParameter(
            f"{text!r} is not base64 (the HMAC create and describe print)", param_hint="--hmac"
        ) from None


def _call(fn: Any, *args: Any) -> Any:
    from gregor.protocol.errors import KafkaError

    try:
        return fn(*args)
    except KafkaError as e:
        fail(f"{e.name}: {e}")


@click.group()
def tokens() -> None:
    """Create, renew, expire and describe delegation tokens (like kafka-delegation-tokens).

    \b
    Examples:
      gregor tokens create -b host:9094 -X security.protocol=SASL_SSL -X sasl.mechanism=SCRAM-SHA-256 \\
          -X sasl.username=alice -X sasl.password=... --renewer-principal User:bob
      gregor tokens renew --hmac <HMAC> --renew-time-period 3600000 -b ... -X ...
      gregor tokens describe --owner-principal User:alice -b ... -X ...
    """


@tokens.command(
    epilog="""
\b
Examples:
  gregor tokens create --renewer-principal User:bob -X security.protocol=SASL_SSL ...
  gregor tokens create --owner-principal User:carol --max-life-time-period 86400000 --output json
"""
)
@client_options
@click.option(
    "--max-life-time-period",
    "max_life",
    type=int,
    default=-1,
    show_default=True,
    help="Longest life of the token in ms (-1: the broker's delegation.token.max.lifetime.ms).",
)
@click.option(
    "--renewer-principal",
    "renewers",
    multiple=True,
    metavar="User:NAME",
    help="A principal allowed to renew the token; repeatable.",
)
@click.option(
    "--owner-principal",
    "owner",
    default=None,
    metavar="User:NAME",
    help="Create the token for this owner (needs CREATE_TOKENS on that user).",
)
@output_option
def create(
    bootstrap_server: str,
    properties: tuple[str, ...],
    max_life: int,
    renewers: tuple[str, ...],
    owner: str | None,
    output: str,
) -> None:
    """Create a token; prints its id and HMAC."""
    names = [_principal(r, "--renewer-principal") for r in renewers]
    if owner is not None:
        _principal(owner, "--owner-principal")
    if output == "text":
        click.echo(
            f"Calling create token operation with renewers :[{', '.join(names)}] , "
            f"max-life-time-period :{max_life}"
        )
    with _admin(bootstrap_server, properties) as admin:
        token = _call(admin.create_delegation_token, names, max_life, owner)
    if output == "json":
        click.echo(json.dumps(_token_json(token)))
        return
    click.echo(f"Created delegation token with tokenId : {token.token_id}")
    _print_tokens([token])


@tokens.command(
    epilog="""
\b
Examples:
  gregor tokens renew --hmac <HMAC> --renew-time-period 3600000
"""
)
@client_options
@click.option("--hmac", "hmac_text", required=True, help="The token's HMAC (base64).")
@click.option(
    "--renew-time-period",
    "period",
    type=int,
    default=-1,
    show_default=True,
    help="Renew for this many ms (-1: the broker's delegation.token.expiry.time.ms).",
)
@output_option
def renew(
    bootstrap_server: str, properties: tuple[str, ...], hmac_text: str, period: int, output: str
) -> None:
    """Renew a token (its owner, requester or a renewer)."""
    mac = _hmac(hmac_text)
    with _admin(bootstrap_server, properties) as admin:
        expiry = _call(admin.renew_delegation_token, mac, period)
    done(
        output,
        f"Completed renew operation. New expiry date : {_date(expiry)}",
        expiry_timestamp_ms=expiry,
    )


@tokens.command(
    epilog="""
\b
Examples:
  gregor tokens expire --hmac <HMAC>                      # now
  gregor tokens expire --hmac <HMAC> --expiry-time-period 60000
"""
)
@client_options
@click.option("--hmac", "hmac_text", required=True, help="The token's HMAC (base64).")
@click.option(
    "--expiry-time-period",
    "period",
    type=int,
    default=-1,
    show_default=True,
    help="Expire after this many ms (-1: now).",
)
@output_option
def expire(
    bootstrap_server: str, properties: tuple[str, ...], hmac_text: str, period: int, output: str
) -> None:
    """Expire a token now or after a period."""
    mac = _hmac(hmac_text)
    with _admin(bootstrap_server, properties) as admin:
        expiry = _call(admin.expire_delegation_token, mac, period)
    done(
        output,
        f"Completed expire operation. New expiry date : {_date(expiry)}",
        expiry_timestamp_ms=expiry,
    )


@tokens.command(
    epilog="""
\b
Examples:
  gregor tokens describe
  gregor tokens describe --owner-principal User:alice --output json
"""
)
@client_options
@click.option(
    "--owner-principal",
    "owners",
    multiple=True,
    metavar="User:NAME",
    help="Only these owners' tokens; repeatable (default: every token you may see).",
)
@output_option
def describe(
    bootstrap_server: str, properties: tuple[str, ...], owners: tuple[str, ...], output: str
) -> None:
    """List tokens with their HMACs and dates."""
    names = [_principal(o, "--owner-principal") for o in owners]
    with _admin(bootstrap_server, properties) as admin:
        found = _call(admin.describe_delegation_tokens, names or None)
    if output == "json":
        click.echo(json.dumps([_token_json(t) for t in found]))
        return
    click.echo(f"Total number of tokens : {len(found)}")
    _print_tokens(found)
