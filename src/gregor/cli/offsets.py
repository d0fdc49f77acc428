"""``gregor offsets`` (kafka-get-offsets) and ``gregor log-dirs`` (kafka-log-dirs).

``offsets`` prints ``topic:partition:offset`` for the partitions asked (``--topic`` and
``--partitions``, or ``--topic-partitions t1:0-2,t2``; every topic when none is given) at
``--time``: ``-1`` / ``latest`` (the log end), ``-2`` / ``earliest`` (the log start) or a
timestamp in ms (the first offset at or after it; a partition with none is left out, as Kafka's
tool leaves it out). ``log-dirs describe`` prints what each broker reports for its log
directories (sizes and offset lags per partition), as kafka-log-dirs' JSON.
"""

from __future__ import annotations

import json
from typing import Any

import click

from gregor.cli.clientopts import client_config, client_options, fail, no_such_topic, topic_param


def _admin(bootstrap_server: str, properties: tuple[str, ...]) -> Any:
    from gregor.client import AdminClient

    return AdminClient(client_config(bootstrap_server, properties))


def _parse_partitions(text: str, option: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        low, sep, high = part.partition("-")
        try:
            out.extend(range(int(low), int(high) + 1) if sep else [int(low)])
        except ValueError:
            raise click.BadParameter(
                f"{part!r} is not a partition number or range", param_hint=option
            ) from None
    return out


def _parse_time(text: str) -> str | int:
    t = text.strip().lower()
    if t in ("-1", "latest"):
        return "latest"
    if t in ("-2", "earliest"):
        return "earliest"
    try:
        ts = int(t)
    except ValueError:
        raise click.BadParameter(
            f"{text!r}: use -1/latest, -2/earliest or a timestamp in ms", param_hint="--time"
        ) from None
    if ts < 0:
        raise click.BadParameter(
            f"{text!r}: use -1/latest, -2/earliest or a timestamp in ms", param_hint="--time"
        )
    return ts


@click.command(
    epilog="""
\b
Examples:
  gregor offsets events                               # log end offsets of every partition
  gregor offsets --topic events --partitions 0,2 --time earliest
  gregor offsets --topic-partitions 'events:0-3,audit' --time 1767225600000 --output json
"""
)
@client_options
@topic_param(
    required=False,
    help="A topic (with --partitions: only those); or give it as the argument TOPIC.",
)
@click.option("--partitions", default=None, metavar="P[,P|A-B]", help="Partitions of --topic.")
@click.option(
    "--topic-partitions",
    "topic_partitions",
    default=None,
    metavar="T[:P-Q],...",
    help="Topics, each with optional partitions.",
)
@click.option(
    "--time", "time_spec", default="-1", show_default=True, help="-1/latest, -2/earliest, or ms."
)
@click.option(
    "--exclude-internal-topics", is_flag=True, help="Leave out __consumer_offsets and the like."
)
@click.option("--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
def offsets(
    bootstrap_server: str,
    properties: tuple[str, ...],
    topic: str | None,
    partitions: str | None,
    topic_partitions: str | None,
    time_spec: str,
    exclude_internal_topics: bool,
    output: str,
) -> None:
    """Offsets of partitions at a time (like kafka-get-offsets)."""
    from gregor.client.metadata import TopicPartition
    from gregor.protocol.errors import UnknownTopicOrPartitionError

    if topic_partitions and (topic or partitions):
        raise click.UsageError("give --topic-partitions, or --topic with --partitions, not both")
    if partitions and not topic:
        raise click.UsageError("--partitions needs --topic")
    spec = _parse_time(time_spec)
    wanted: dict[str, list[int] | None] = {}
    if topic:
        wanted[topic] = _parse_partitions(partitions, "--partitions") if partitions else None
    for item in (topic_partitions or "").split(","):
        if not item.strip():
            continue
        name, sep, parts = item.partition(":")
        if sep:
            wanted[name.strip()] = (wanted.get(name.strip()) or []) + _parse_partitions(
                parts, "--topic-partitions"
            )
        else:
            wanted.setdefault(name.strip(), None)
    with _admin(bootstrap_server, properties) as admin:
        described: dict[str, Any] = (
            admin.describe_topics(list(wanted))
            if wanted
            else admin.list_topics(internal=not exclude_internal_topics)
        )
        tps = []
        for name, desc in sorted(described.items()):
            if isinstance(desc, UnknownTopicOrPartitionError):
                fail(no_such_topic(name, admin.list_topics(internal=True)))
            if isinstance(desc, Exception):
                fail(f"topic {name!r}: {desc}")
            if exclude_internal_topics and desc.is_internal:
                continue
            known = [p.partition for p in desc.partitions]
            asked = wanted.get(name) if wanted else None
            for p in asked if asked else known:
                if p not in known:
                    fail(f"topic {name} has no partition {p}")
                tps.append(TopicPartition(name, p))
        found = admin.list_offsets({tp: spec for tp in tps})
    rows = [
        (tp.topic, tp.partition, found[tp][0])
        for tp in sorted(found)
        if found[tp][0] is not None and found[tp][0] >= 0
    ]
    if output == "json":
        click.echo(
            json.dumps([{"topic": t, "partition": p, "offset": o} for t, p, o in rows], indent=2)
        )
    else:
        for t, p, o in rows:
            click.echo(f"{t}:{p}:{o}")


@click.group("log-dirs")
def log_dirs() -> None:
    """Log directories of the brokers (like kafka-log-dirs)."""


@log_dirs.command(
    "describe",
    epilog="""
\b
Examples:
  gregor log-dirs describe
  gregor log-dirs describe --broker-list 1,2 --topic-list events,audit
""",
)
@client_options
@click.option(
    "--broker-list", default=None, metavar="ID[,ID]", help="Only these brokers (default: all)."
)
@click.option(
    "--topic-list", default=None, metavar="T[,T]", help="Only these topics (default: all)."
)
def describe_log_dirs(
    bootstrap_server: str,
    properties: tuple[str, ...],
    broker_list: str | None,
    topic_list: str | None,
) -> None:
    """Sizes and offset lags of the partitions in each broker's log directories, as JSON."""
    try:
        brokers = [int(b) for b in broker_list.split(",") if b.strip()] if broker_list else None
    except ValueError:
        raise click.BadParameter(
            f"{broker_list!r} is not a list of broker ids", param_hint="--broker-list"
        ) from None
    topics = [t.strip() for t in topic_list.split(",") if t.strip()] if topic_list else None
    with _admin(bootstrap_server, properties) as admin:
        found = admin.describe_log_dirs(brokers, topics)
    click.echo("Querying brokers for log directories information", err=True)
    click.echo(
        f"Received log directory information from brokers {','.join(str(b) for b in sorted(found))}",
        err=True,
    )
    doc = {
        "version": 1,
        "brokers": [
            {
                "broker": node,
                "logDirs": [
                    {
                        "logDir": d,
                        "error": info["error"],
                        "totalBytes": info["total_bytes"],
                        "usableBytes": info["usable_bytes"],
                        "partitions": [
                            {
                                "partition": f"{t}-{p}",
                                "size": v["size"],
                                "offsetLag": v["offset_lag"],
                                "isFuture": v["is_future"],
                            }
                            for (t, p), v in sorted(info["partitions"].items())
                        ],
                    }
                    for d, info in sorted(dirs.items())
                ],
            }
            for node, dirs in sorted(found.items())
        ],
    }
    click.echo(json.dumps(doc))
