"""``gregor share-groups`` (kafka-share-groups): list and describe share groups (KIP-932).

``list`` names the share groups with their state; ``describe GROUP`` prints each member with
its client, epoch and the partitions it fetches from (members of a share group may share
partitions); ``offsets GROUP`` prints each partition's start offset and lag. While the group
has no members, ``reset-offsets GROUP --topic T --to-earliest|--to-latest|--to-offset N``
moves its start offsets (a dry run unless ``--execute``, as Kafka's tool) and
``delete-offsets GROUP --topic T`` forgets its state for a topic. ``--output json`` on all.
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
      gregor share-groups offsets orders-workers
      gregor share-groups reset-offsets orders-workers --topic orders --to-earliest --execute
    """


@share_groups.command(
    "list",
    epilog="""
\b
Examples:
  gregor share-groups list
  gregor share-groups list --output json
""",
)
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


@share_groups.command(
    epilog="""
\b
Examples:
  gregor share-groups describe orders-workers
  gregor share-groups describe orders-workers --output json
"""
)
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
        {
            "member_id": m.member_id,
            "member_epoch": m.member_epoch,
            "client_id": m.client_id,
            "host": m.client_host,
            "subscribed": m.subscribed_topics,
            "assignment": sorted(f"{tp.topic}:{tp.partition}" for tp in m.assignment),
        }
        for m in sorted(found.members, key=lambda m: m.member_id)
    ]
    if output == "json":
        click.echo(
            json.dumps(
                {
                    "group": found.group_id,
                    "state": found.state,
                    "group_epoch": found.group_epoch,
                    "assignment_epoch": found.assignment_epoch,
                    "members": members,
                }
            )
        )
        return
    click.echo(
        f"GROUP {found.group_id}  STATE {found.state}  GROUP-EPOCH {found.group_epoch}  "
        f"ASSIGNMENT-EPOCH {found.assignment_epoch}  MEMBERS {len(members)}"
    )
    click.echo(f"{'MEMBER-ID':<40} {'EPOCH':>5} {'CLIENT-ID':<24} {'HOST':<18} ASSIGNMENT")
    for m in members:
        click.echo(
            f"{m['member_id']:<40} {m['member_epoch']:>5} {m['client_id']:<24} {m['host']:<18} "
            f"{','.join(m['assignment']) or '-'}"
        )


@share_groups.command(
    epilog="""
\b
Examples:
  gregor share-groups offsets orders-workers
  gregor share-groups offsets orders-workers --output json
"""
)
@client_options
@click.argument("group")
@output_option
def offsets(bootstrap_server: str, properties: tuple[str, ...], group: str, output: str) -> None:
    """Start offset and lag of each partition the share group has state for."""
    from gregor.protocol.errors import KafkaError

    with _admin(bootstrap_server, properties) as admin:
        try:
            found = admin.describe_share_group_offsets(group)
        except KafkaError as e:
            fail(f"{e.name}: {e}")
            return
    rows = [
        {"topic": tp.topic, "partition": tp.partition, "start_offset": v[0], "lag": v[1]}
        if not isinstance(v, KafkaError)
        else {"topic": tp.topic, "partition": tp.partition, "error": v.name}
        for tp, v in sorted(found.items())
    ]
    if output == "json":
        click.echo(json.dumps(rows))
        return
    click.echo(f"{'GROUP':<24} {'TOPIC':<24} {'PARTITION':>9} {'START-OFFSET':>12} {'LAG':>8}")
    for r in rows:
        click.echo(
            f"{group:<24} {r['topic']:<24} {r['partition']:>9} {r.get('start_offset', '-'):>12} "
            f"{r.get('lag', r.get('error', '-')):>8}"
        )


@share_groups.command(
    "reset-offsets",
    epilog="""
\b
Examples:
  gregor share-groups reset-offsets orders-workers --topic orders --to-earliest            # dry run
  gregor share-groups reset-offsets orders-workers --topic orders --to-offset 1000 --execute
""",
)
@client_options
@click.argument("group")
@click.option(
    "--topic", "topics", multiple=True, required=True, help="A topic (every partition); repeatable."
)
@click.option("--to-earliest", "mode", flag_value="earliest")
@click.option("--to-latest", "mode", flag_value="latest")
@click.option("--to-offset", "to_offset", type=int, default=None)
@click.option("--execute", is_flag=True, help="Apply the plan (default: only print it).")
@output_option
def reset_offsets(
    bootstrap_server: str,
    properties: tuple[str, ...],
    group: str,
    topics: tuple[str, ...],
    mode: str | None,
    to_offset: int | None,
    execute: bool,
    output: str,
) -> None:
    """Move an empty share group's start offsets."""
    from gregor.client.metadata import TopicPartition
    from gregor.protocol.errors import KafkaError

    if (mode is None) == (to_offset is None):
        raise click.UsageError("give exactly one of --to-earliest, --to-latest, --to-offset")
    if to_offset is not None and to_offset < 0:
        raise click.BadParameter("must be 0 or more", param_hint="--to-offset")
    with _admin(bootstrap_server, properties) as admin:
        try:
            described = admin.describe_topics(topics)
            tps: list[TopicPartition] = []
            for t in topics:
                d = described[t]
                if isinstance(d, KafkaError):
                    fail(f"{t}: {d.name}: {d}")
                    return
                tps.extend(TopicPartition(t, p.partition) for p in d.partitions)
            plan: dict[TopicPartition, int]
            if to_offset is not None:
                plan = dict.fromkeys(tps, to_offset)
            else:
                found = admin.list_offsets({tp: mode for tp in tps})
                plan = {tp: v[0] if v[0] is not None else 0 for tp, v in found.items()}
            results = admin.alter_share_group_offsets(group, plan) if execute else {}
        except KafkaError as e:
            fail(f"{e.name}: {e}")
            return
    rows = [
        {
            "topic": tp.topic,
            "partition": tp.partition,
            "new_start_offset": off,
            "error": None if results.get(tp) is None else results[tp].name,
        }  # type: ignore[union-attr]
        for tp, off in sorted(plan.items())
    ]
    if output == "json":
        click.echo(json.dumps({"executed": execute, "partitions": rows}))
    else:
        click.echo(f"{'GROUP':<24} {'TOPIC':<24} {'PARTITION':>9} {'NEW-START-OFFSET':>16}")
        for r in rows:
            click.echo(
                f"{group:<24} {r['topic']:<24} {r['partition']:>9} {r['new_start_offset']:>16}"
            )
    failed = [r for r in rows if r["error"]]
    if failed:
        fail(f"{len(failed)} partition(s) not reset: {failed[0]['error']}")


@share_groups.command(
    "delete-offsets",
    epilog="""
\b
Examples:
  gregor share-groups delete-offsets orders-workers --topic orders
""",
)
@client_options
@click.argument("group")
@click.option("--topic", "topics", multiple=True, required=True, help="A topic; repeatable.")
@output_option
def delete_offsets(
    bootstrap_server: str,
    properties: tuple[str, ...],
    group: str,
    topics: tuple[str, ...],
    output: str,
) -> None:
    """Forget an empty share group's state for whole topics."""
    from gregor.protocol.errors import KafkaError

    with _admin(bootstrap_server, properties) as admin:
        try:
            results = admin.delete_share_group_offsets(group, topics)
        except KafkaError as e:
            fail(f"{e.name}: {e}")
            return
    errors = {t: e.name for t, e in results.items() if e is not None}
    if output == "json":
        click.echo(json.dumps({"topics": {t: errors.get(t) for t in results}}))
    else:
        for t in results:
            click.echo(
                f"{t}: {errors[t]}"
                if t in errors
                else f"Deleted the share group's offsets for {t}."
            )
    if errors:
        raise SystemExit(1)
