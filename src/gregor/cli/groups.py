"""``gregor groups``: list, describe (with lag), reset offsets of, and delete consumer groups."""

from __future__ import annotations

import json
import time

import click

from gregor.cli.clientopts import client_config, client_options, done, fail, output_option
from gregor.client import timespec


def _admin(bootstrap_server: str, properties: tuple[str, ...]):  # noqa: ANN202
    from gregor.client import AdminClient

    return AdminClient(client_config(bootstrap_server, properties))


@click.group()
def groups() -> None:
    """Manage consumer groups (like kafka-consumer-groups)."""


@groups.command("list")
@client_options
@click.option("--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
def list_groups(bootstrap_server: str, properties: tuple[str, ...], output: str) -> None:
    """List group ids (with their state).

    \b
    Examples:
      gregor groups list
      gregor groups list --output json
    """
    with _admin(bootstrap_server, properties) as admin:
        found = admin.list_groups()
    if output == "json":
        click.echo(json.dumps([{"group": g, "protocol_type": t, "state": s} for g, t, s in found]))
        return
    for gid, _ptype, state in found:
        click.echo(f"{gid}\t{state}" if state else gid)


@groups.command()
@client_options
@click.argument("group")
@click.option("--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
def describe(bootstrap_server: str, properties: tuple[str, ...], group: str, output: str) -> None:
    """Committed offset, log end offset and lag per partition, and who owns it.

    \b
    Examples:
      gregor groups describe readers
      gregor groups describe readers --output json
    """
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
    if output == "json":
        rows = []
        for tp in tps:
            cur = committed.get(tp)
            end = ends.get(tp, (None, -1))[0]
            member, host, client = owners.get(tp, (None, None, None))
            rows.append({
                "topic": tp.topic, "partition": tp.partition, "current_offset": cur.offset if cur else None,
                "log_end_offset": end, "lag": end - cur.offset if cur is not None and end is not None else None,
                "consumer_id": member, "host": host, "client_id": client,
            })
        click.echo(json.dumps({"group": group, "state": state, "members": len(desc.members) if desc else 0,
                               "partitions": rows}))
        return
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


def parse_datetime(text: str) -> int:
    """``--to-datetime``: Kafka's format or ms since the epoch (``client.timespec``)."""
    try:
        return timespec.parse_datetime(text)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--to-datetime") from None


def parse_duration_ms(text: str) -> int:
    """``--by-duration``: an ISO-8601 duration in ms (``client.timespec``)."""
    try:
        return timespec.parse_duration_ms(text)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--by-duration") from None


@groups.command("reset-offsets")
@client_options
@click.argument("group")
@click.option("--topic", "-t", "topic_specs", multiple=True,
              help="TOPIC or TOPIC:P1,P2 (default: every partition); repeatable.")
@click.option("--to-earliest", "mode", flag_value="earliest")
@click.option("--to-latest", "mode", flag_value="latest")
@click.option("--to-offset", type=int, default=None)
@click.option("--shift-by", type=int, default=None)
@click.option("--to-datetime", "to_datetime", default=None, metavar="YYYY-MM-DDTHH:mm:SS.sss",
              help="The first offset at or after this time (Kafka's format, UTC unless it ends in Z or "
                   "+hh:mm; or ms since the epoch).")
@click.option("--by-duration", default=None, metavar="PnDTnHnMnS",
              help="The first offset at or after now minus this ISO-8601 duration.")
@click.option("--all-topics", is_flag=True, help="Every topic the group has committed offsets for.")
@click.option("--dry-run", is_flag=True, help="Only print the plan (the default).")
@click.option("--execute", is_flag=True, help="Apply the plan (default: only print it).")
@click.option("--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
def reset_offsets(
    bootstrap_server: str,
    properties: tuple[str, ...],
    group: str,
    topic_specs: tuple[str, ...],
    mode: str | None,
    to_offset: int | None,
    shift_by: int | None,
    to_datetime: str | None,
    by_duration: str | None,
    all_topics: bool,
    dry_run: bool,
    execute: bool,
    output: str,
) -> None:
    """Move a group's committed offsets (the group must have no active members).

    \b
    Examples:
      gregor groups reset-offsets readers -t events --to-earliest            # dry run
      gregor groups reset-offsets readers -t events:0,1 --shift-by -10 --execute
      gregor groups reset-offsets readers --all-topics --to-datetime 2026-11-26T00:00:00.000 --execute
      gregor groups reset-offsets readers -t events --by-duration PT1H --execute
    """
    from gregor.client import TopicPartition

    if dry_run and execute:
        raise click.UsageError("give --dry-run or --execute, not both")
    if bool(topic_specs) == all_topics:
        raise click.UsageError("give --topic (repeatable) or --all-topics")
    to_ms = None
    if to_datetime is not None:
        to_ms = parse_datetime(to_datetime)
    if by_duration is not None:
        to_ms = int(time.time() * 1000) - parse_duration_ms(by_duration)
    chosen = [x for x in (mode, to_offset, shift_by, to_datetime, by_duration) if x is not None]
    if len(chosen) != 1:
        raise click.UsageError(
            "give exactly one of --to-earliest, --to-latest, --to-offset, --shift-by, --to-datetime, --by-duration"
        )
    with _admin(bootstrap_server, properties) as admin:
        tps: list[TopicPartition] = []
        if all_topics:
            tps = sorted(admin.list_consumer_group_offsets(group))
            if not tps:
                fail(f"group {group} has no committed offsets")
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
        if output == "json":
            click.echo(json.dumps([
                {"group": group, "topic": tp.topic, "partition": tp.partition, "new_offset": plan[tp]} for tp in sorted(plan)
            ]))
        else:
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
@output_option
def delete(bootstrap_server: str, properties: tuple[str, ...], group_ids: tuple[str, ...], output: str) -> None:
    """Delete groups (they must have no active members).

    \b
    Examples:
      gregor groups delete readers
      gregor groups delete old-a old-b --output json
    """
    with _admin(bootstrap_server, properties) as admin:
        res = admin.delete_groups(list(group_ids))
    bad = {g: e for g, e in res.items() if e is not None}
    deleted = [g for g in group_ids if g not in bad]
    if deleted:
        done(output, "\n".join(f"Deleted group {g}." for g in deleted), deleted=deleted)
    if bad:
        fail("; ".join(f"{g}: {e}" for g, e in bad.items()))
