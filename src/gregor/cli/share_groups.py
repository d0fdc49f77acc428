"""``gregor share-groups`` (kafka-share-groups): list and describe share groups (KIP-932).

``list`` names the share groups with their state; ``describe GROUP`` prints each member with
its client, epoch and the partitions it fetches from (members of a share group may share
partitions). ``--output json`` on both.
"""

from __future__ import annotations

import json
from typing import Any

import click

from gregor.cli.clientopts import client_config, client_options, fail, output_option


def _admin(bootstrap_server: str, properties: tuple[str, ...]) -> Any:
    from gregor.client import AdminClient

    return AdminClient(client_config(bootstrap_server, properties))


@click.group("share-groups")
def share_groups() -> None:
    """List and describe share groups (like kafka-share-groups).

    \b
    Examples:
      gregor share-groups list
      gregor share-groups describe orders-workers --output json
    """


@share_groups.command("list", epilog="""
\b
Examples:
  gregor share-groups list
  gregor share-groups list --output json
""")
@client_options
@output_option
def list_(bootstrap_server: str, properties: tuple[str, ...], output: str) -> None:
    """Share group ids with their state."""
    with _admin(bootstrap_server, properties) as admin:
        found = [(g, s) for g, ptype, s in admin.list_groups() if ptype == "share"]
    if output == "json":
        click.echo(json.dumps([{"group": g, "state": s} for g, s in found]))
        return
    for g, s in found:
        click.echo(f"{g}\t{s}")


@share_groups.command(epilog="""
\b
Examples:
  gregor share-groups describe orders-workers
  gregor share-groups describe orders-workers --output json
""")
@client_options
@click.argument("group")
@output_option
def describe(bootstrap_server: str, properties: tuple[str, ...], group: str, output: str) -> None:
    """A share group's state, epochs and members."""
    from gregor.protocol.errors import KafkaError

    with _admin(bootstrap_server, properties) as admin:
        try:
            found = admin.describe_share_groups([group])[group]
        except KafkaError as e:
            fail(f"{e.name}: {e}")
            return
    if isinstance(found, KafkaError):
        fail(f"{found.name}: {found}")
        return
    members = [
        {"member_id": m.member_id, "member_epoch": m.member_epoch, "client_id": m.client_id, "host": m.client_host,
         "subscribed": m.subscribed_topics, "assignment": sorted(f"{tp.topic}:{tp.partition}" for tp in m.assignment)}
        for m in sorted(found.members, key=lambda m: m.member_id)
    ]
    if output == "json":
        click.echo(json.dumps({"group": found.group_id, "state": found.state, "group_epoch": found.group_epoch,
                               "assignment_epoch": found.assignment_epoch, "members": members}))
        return
    click.echo(f"GROUP {found.group_id}  STATE {found.state}  GROUP-EPOCH {found.group_epoch}  "
               f"ASSIGNMENT-EPOCH {found.assignment_epoch}  MEMBERS {len(members)}")
    click.echo(f"{'MEMBER-ID':<40} {'EPOCH':>5} {'CLIENT-ID':<24} {'HOST':<18} ASSIGNMENT")
    for m in members:
        click.echo(f"{m['member_id']:<40} {m['member_epoch']:>5} {m['client_id']:<24} {m['host']:<18} "
                   f"{','.join(m['assignment']) or '-'}")
