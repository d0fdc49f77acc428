"""``gregor groups``: list, describe (with lag), reset offsets of, and delete consumer groups."""

from __future__ import annotations

import click

from gregor.cli.clientopts import client_config, client_options, fail


def _admin(bootstrap_server: str, properties: tuple[str, ...]):  # noqa: ANN202
    from gregor.client import AdminClient

    return AdminClient(client_config(bootstrap_server, properties))


@click.group()
def groups() -> None:
    """Manage consumer groups (like kafka-consumer-groups)."""


@groups.command("list")
@client_options
def list_groups(bootstrap_server: str, properties: tuple[str, ...]) -> None:
    """List group ids (with their state)."""
    with _admin(bootstrap_server, properties) as admin:
        for gid, _ptype, state in admin.list_groups():
            click.echo(f"{gid}\t{state}" if state else gid)


@groups.command()
@client_options
@click.argument("group")
def describe(bootstrap_server: str, properties: tuple[str, ...], group: str) -> None:
    """Committed offset, log end offset and lag per partition, and who owns it."""
    from gregor.client import TopicPartition

    with _admin(bootstrap_server, properties) as admin:
        desc = admin.describe_groups([group]).get(group)
        committed = admin.list_consumer_group_offsets(group)
        owners: dict[TopicPartition, tuple[str, str, str]] = {}
        if desc is not None:
            for m in desc.members:
                for tp in m.assignment:
                    owners[tp] = (m.member_id, m.client_host, m.client_id)
        tps = sorted(set(committed) | set(owners))
        ends = admin.list_offsets({tp: "latest" for tp in tps}) if tps else {}
    state = desc.state if desc is not None else "Unknown"
    click.echo(f"Consumer group '{group}' ({state}, {len(desc.members) if desc else 0} members)")
    click.echo("TOPIC\tPARTITION\tCURRENT-OFFSET\tLOG-END-OFFSET\tLAG\tCONSUMER-ID\tHOST\tCLIENT-ID")
    for tp in tps:
        cur = committed.get(tp)
        end = ends.get(tp, (None, -1))[0]
        lag = end - cur.offset if cur is not None and end is not None else None
        member, host, client = owners.get(tp, ("-", "-", "-"))
        click.echo(
            f"{tp.topic}\t{tp.partition}\t{cur.offset if cur else '-'}\t{end if end is not None else '-'}\t"
            f"{lag if lag is not None else '-'}\t{member}\t{host}\t{client}"
        )


@groups.command("reset-offsets")
@client_options
@click.argument("group")
@click.option("--topic", "-t", "topic_specs", multiple=True, required=True,
              help="TOPIC or TOPIC:P1,P2 (default: every partition); repeatable.")
@click.option("--to-earliest", "mode", flag_value="earliest")
@click.option("--to-latest", "mode", flag_value="latest")
@click.option("--to-offset", type=int, default=None)
@click.option("--shift-by", type=int, default=None)
@click.option("--to-datetime", "to_ms", type=int, default=None, help="A timestamp in ms since the epoch.")
@click.option("--execute", is_flag=True, help="Apply the plan (default: only print it).")
def reset_offsets(
    bootstrap_server: str,
    properties: tuple[str, ...],
    group: str,
    topic_specs: tuple[str, ...],
    mode: str | None,
    to_offset: int | None,
    shift_by: int | None,
    to_ms: int | None,
    execute: bool,
) -> None:
    """Move a group's committed offsets (the group must have no active members)."""
    from gregor.client import TopicPartition

    chosen = [x for x in (mode, to_offset, shift_by, to_ms) if x is not None]
    if len(chosen) != 1:
        fail("give exactly one of --to-earliest, --to-latest, --to-offset, --shift-by, --to-datetime")
    with _admin(bootstrap_server, properties) as admin:
        tps: list[TopicPartition] = []
        for spec in topic_specs:
            name, _, parts = spec.partition(":")
            if parts:
                tps += [TopicPartition(name, int(p)) for p in parts.split(",")]
            else:
                d = admin.describe_topics([name])[name]
                if isinstance(d, Exception):
                    fail(f"{name}: {d}")
                tps += [TopicPartition(name, p.partition) for p in d.partitions]
        earliest = admin.list_offsets({tp: "earliest" for tp in tps})
        latest = admin.list_offsets({tp: "latest" for tp in tps})
        plan: dict[TopicPartition, int] = {}
        if mode is not None:
            src = earliest if mode == "earliest" else latest
            plan = {tp: src[tp][0] for tp in tps}
        elif to_offset is not None:
            plan = {tp: to_offset for tp in tps}
        elif to_ms is not None:
            found = admin.list_offsets({tp: to_ms for tp in tps})
            plan = {tp: found[tp][0] if found[tp][0] is not None else latest[tp][0] for tp in tps}
        else:
            current = admin.list_consumer_group_offsets(group, tps)
            plan = {tp: (current[tp].offset if tp in current else latest[tp][0]) + shift_by for tp in tps}
        plan = {tp: max(earliest[tp][0], min(off, latest[tp][0])) for tp, off in plan.items()}
        click.echo("TOPIC\tPARTITION\tNEW-OFFSET")
        for tp in sorted(plan):
            click.echo(f"{tp.topic}\t{tp.partition}\t{plan[tp]}")
        if execute:
            admin.alter_consumer_group_offsets(group, plan)
            click.echo(f"Reset {len(plan)} offsets of group {group}.", err=True)
        else:
            click.echo("Dry run: add --execute to apply.", err=True)


@groups.command()
@client_options
@click.argument("group_ids", nargs=-1, required=True)
def delete(bootstrap_server: str, properties: tuple[str, ...], group_ids: tuple[str, ...]) -> None:
    """Delete groups (they must have no active members)."""
    with _admin(bootstrap_server, properties) as admin:
        res = admin.delete_groups(list(group_ids))
    bad = {g: e for g, e in res.items() if e is not None}
    for g in group_ids:
        if g not in bad:
            click.echo(f"Deleted group {g}.")
    if bad:
        fail("; ".join(f"{g}: {e}" for g, e in bad.items()))
