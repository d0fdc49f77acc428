"""``gregor groups``: list, describe (with lag), reset offsets of, and delete consumer groups."""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable, Mapping
from typing import Any

import click

from gregor.cli.clientopts import (
    client_config,
    client_options,
    done_in_part,
    fail,
    no_such_topic,
    output_option,
)
from gregor.client import timespec

#: Group states with no members: the only ones whose offsets may be reset (as Kafka's tool says).
INACTIVE = ("Empty", "Dead")


def group_param(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The group as the argument GROUP or as ``--group`` / ``-g`` (kafka-consumer-groups' form)."""

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        given = [
            g for g in (kwargs.pop("group_argument"), kwargs.pop("group_option")) if g is not None
        ]
        if not given:
            raise click.UsageError("name a group: GROUP or --group GROUP")
        if len(given) == 2 and given[0] != given[1]:
            raise click.UsageError(f"name one group, not two: {given[0]}, {given[1]}")
        kwargs["group"] = given[0]
        return fn(*args, **kwargs)

    run = click.option(
        "--group",
        "-g",
        "group_option",
        default=None,
        metavar="GROUP",
        help="The group (or give it as the argument GROUP).",
    )(run)
    return click.argument("group_argument", metavar="[GROUP]", required=False)(run)


def _describe(admin: Any, group: str) -> Any:
    """The group's description (None when the coordinator knows no such group); an error the
    coordinator answered ends the command."""
    desc = admin.describe_groups([group]).get(group)
    if desc is not None and desc.error is not None:
        if desc.error.name == "GROUP_ID_NOT_FOUND":
            return None
        fail(f"group {group!r}: {desc.error.name}: {desc.error}")
    return desc


def _exists(desc: Any, committed: Mapping[Any, Any]) -> bool:
    """Whether a described group is there: Kafka's tool calls a Dead group with nothing
    committed one that does not exist."""
    if desc is None:
        return bool(committed)
    return desc.state != "Dead" or bool(desc.members) or bool(committed)


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
@group_param
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
        desc = _describe(admin, group)
        committed = admin.list_consumer_group_offsets(group)
        if not _exists(desc, committed):
            fail(f"Consumer group '{group}' does not exist.")
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
            rows.append(
                {
                    "topic": tp.topic,
                    "partition": tp.partition,
                    "current_offset": cur.offset if cur else None,
                    "log_end_offset": end,
                    "lag": end - cur.offset if cur is not None and end is not None else None,
                    "consumer_id": member,
                    "host": host,
                    "client_id": client,
                }
            )
        click.echo(
            json.dumps(
                {
                    "group": group,
                    "state": state,
                    "members": len(desc.members) if desc else 0,
                    "partitions": rows,
                }
            )
        )
        return
    click.echo(f"Consumer group '{group}' ({state}, {len(desc.members) if desc else 0} members)")
    click.echo(
        "TOPIC\tPARTITION\tCURRENT-OFFSET\tLOG-END-OFFSET\tLAG\tCONSUMER-ID\tHOST\tCLIENT-ID"
    )
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
@click.argument("names", metavar="[GROUP] [TOPIC]...", nargs=-1)
@click.option(
    "--group",
    "-g",
    "group_option",
    default=None,
    metavar="GROUP",
    help="The group (or give it as the first argument).",
)
@click.option(
    "--topic",
    "-t",
    "topic_options",
    multiple=True,
    metavar="TOPIC[:P1,P2]",
    help="TOPIC or TOPIC:P1,P2 (every partition unless listed); repeatable, or give them as arguments "
    "after the group.",
)
@click.option("--to-earliest", "mode", flag_value="earliest")
@click.option("--to-latest", "mode", flag_value="latest")
@click.option("--to-offset", type=int, default=None)
@click.option("--shift-by", type=int, default=None)
@click.option(
    "--to-datetime",
    "to_datetime",
    default=None,
    metavar="YYYY-MM-DDTHH:mm:SS.sss",
    help="The first offset at or after this time (Kafka's format, UTC unless it ends in Z or "
    "+hh:mm; or ms since the epoch).",
)
@click.option(
    "--by-duration",
    default=None,
    metavar="PnDTnHnMnS",
    help="The first offset at or after now minus this ISO-8601 duration.",
)
@click.option("--all-topics", is_flag=True, help="Every topic the group has committed offsets for.")
@click.option("--dry-run", is_flag=True, help="Only print the plan (the default).")
@click.option("--execute", is_flag=True, help="Apply the plan (default: only print it).")
@click.option("--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
def reset_offsets(
    bootstrap_server: str,
    properties: tuple[str, ...],
    names: tuple[str, ...],
    group_option: str | None,
    topic_options: tuple[str, ...],
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
      gregor groups reset-offsets readers events:0,1 --shift-by -10 --execute
      gregor groups reset-offsets --group readers --topic events --to-latest --execute
      gregor groups reset-offsets readers --all-topics --to-datetime 2026-11-26T00:00:00.000 --execute
      gregor groups reset-offsets readers -t events --by-duration PT1H --execute
    """
    from gregor.client import TopicPartition
    from gregor.protocol.errors import UnknownMemberIdError, UnknownTopicOrPartitionError

    positional = list(names)
    if group_option is None and not positional:
        raise click.UsageError("name a group: GROUP or --group GROUP")
    group = group_option if group_option is not None else positional.pop(0)
    topic_specs = (*positional, *topic_options)
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
        desc = _describe(admin, group)
        state = desc.state if desc is not None else "Dead"
        if state not in INACTIVE:
            inactive = (
                f"Assignments can only be reset if the group '{group}' is inactive, but the current "
                f"state is {state}."
            )
            if execute:
                fail(inactive)
            click.echo(
                f"Warning: {inactive} --execute will be refused until its members leave.", err=True
            )
        tps: list[TopicPartition] = []
        if all_topics:
            tps = sorted(admin.list_consumer_group_offsets(group))
            if not tps:
                fail(f"group {group} has no committed offsets")
        for spec in topic_specs:
            name, _, parts = spec.partition(":")
            d = admin.describe_topics([name])[name]
            if isinstance(d, UnknownTopicOrPartitionError):
                fail(no_such_topic(name, admin.list_topics(internal=True)))
            if isinstance(d, Exception):
                fail(f"topic {name!r}: {d}")
            known = [p.partition for p in d.partitions]
            if not parts:
                tps += [TopicPartition(name, p) for p in known]
                continue
            for p in parts.split(","):
                if not p.strip().isdigit():
                    raise click.BadParameter(
                        f"{spec!r}: {p!r} is not a partition number", param_hint="--topic"
                    )
                if int(p) not in known:
                    fail(
                        f"topic {name!r} has no partition {int(p)} (it has {len(known)}: 0-{len(known) - 1})"
                    )
                tps.append(TopicPartition(name, int(p)))
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
            plan = {
                tp: (current[tp].offset if tp in current else latest[tp][0]) + shift_by
                for tp in tps
            }
        plan = {tp: max(earliest[tp][0], min(off, latest[tp][0])) for tp, off in plan.items()}
        if output == "json":
            click.echo(
                json.dumps(
                    [
                        {
                            "group": group,
                            "topic": tp.topic,
                            "partition": tp.partition,
                            "new_offset": plan[tp],
                        }
                        for tp in sorted(plan)
                    ]
                )
            )
        else:
            click.echo("TOPIC\tPARTITION\tNEW-OFFSET")
            for tp in sorted(plan):
                click.echo(f"{tp.topic}\t{tp.partition}\t{plan[tp]}")
        if execute:
            try:
                admin.alter_consumer_group_offsets(group, plan)
            except UnknownMemberIdError:
                # a member joined between the look and the commit
                fail(
                    f"Assignments can only be reset if the group '{group}' is inactive, but it has members now."
                )
            click.echo(f"Reset {len(plan)} offsets of group {group}.", err=True)
        else:
            click.echo("Dry run: add --execute to apply.", err=True)


@groups.command()
@client_options
@click.argument("group_arguments", metavar="[GROUP]...", nargs=-1)
@click.option(
    "--group",
    "-g",
    "group_options",
    multiple=True,
    metavar="GROUP",
    help="A group (or give them as arguments); repeatable.",
)
@output_option
def delete(
    bootstrap_server: str,
    properties: tuple[str, ...],
    group_arguments: tuple[str, ...],
    group_options: tuple[str, ...],
    output: str,
) -> None:
    """Delete groups (they must have no active members).

    \b
    Examples:
      gregor groups delete readers
      gregor groups delete old-a old-b --output json
    """
    group_ids = (*group_arguments, *group_options)
    if not group_ids:
        raise click.UsageError("name a group: GROUP or --group GROUP")
    with _admin(bootstrap_server, properties) as admin:
        res = admin.delete_groups(list(group_ids))
    errors = {g: _delete_error(g, e) for g, e in res.items() if e is not None}
    deleted = [g for g in group_ids if g not in errors]
    done_in_part(output, "\n".join(f"Deleted group {g}." for g in deleted), errors, deleted=deleted)


def _delete_error(group: str, e: Exception) -> str:
    name = getattr(e, "name", "")
    if name == "GROUP_ID_NOT_FOUND":
        return f"Consumer group '{group}' does not exist."
    if name == "NON_EMPTY_GROUP":
        return f"Consumer group '{group}' is not empty: its members must leave first."
    return f"group {group!r}: {e}"
