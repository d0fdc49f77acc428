"""``gregor topics``: create, list, describe, alter and delete topics."""

from __future__ import annotations

import json

import click

from gregor.cli.clientopts import (
    client_config,
    client_options,
    done,
    done_in_part,
    fail,
    no_such_topic,
    output_option,
    parse_kv,
    topic_param,
)


def _admin(bootstrap_server: str, properties: tuple[str, ...]):  # noqa: ANN202
    from gregor.client import AdminClient

    return AdminClient(client_config(bootstrap_server, properties))


@click.group()
def topics() -> None:
    """Manage topics (like kafka-topics)."""


@topics.command("list")
@client_options
@click.option("--internal", is_flag=True, help="Include internal topics.")
@click.option("--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
def list_topics(
    bootstrap_server: str, properties: tuple[str, ...], internal: bool, output: str
) -> None:
    """List topic names.

    \b
    Examples:
      gregor topics list
      gregor topics list --internal --output json
    """
    with _admin(bootstrap_server, properties) as admin:
        names = sorted(admin.list_topics(internal=internal))
    if output == "json":
        click.echo(json.dumps(names))
        return
    for name in names:
        click.echo(name)


@topics.command()
@client_options
@topic_param()
@click.option(
    "--partitions", "-p", type=int, default=-1, help="Partition count (default: the broker's)."
)
@click.option(
    "--replication-factor", "-r", type=int, default=-1, help="Replicas (default: the broker's)."
)
@click.option(
    "--config",
    "-c",
    "configs",
    multiple=True,
    metavar="KEY=VALUE",
    help="Topic config; repeatable.",
)
@click.option("--if-not-exists", is_flag=True, help="Succeed when the topic already exists.")
@output_option
def create(
    bootstrap_server: str,
    properties: tuple[str, ...],
    topic: str,
    partitions: int,
    replication_factor: int,
    configs: tuple[str, ...],
    if_not_exists: bool,
    output: str,
) -> None:
    """Create a topic.

    \b
    Examples:
      gregor topics create events -p 6 -r 3
      gregor topics create --topic audit -c cleanup.policy=compact -c retention.ms=-1 --if-not-exists
    """
    from gregor.client import NewTopic
    from gregor.protocol.errors import TopicAlreadyExistsError

    name = topic

    with _admin(bootstrap_server, properties) as admin:
        res = admin.create_topics(
            [NewTopic(name, partitions, replication_factor, parse_kv(configs, "--config"))]
        )
    err = res.get(name)
    if err is not None and not (if_not_exists and isinstance(err, TopicAlreadyExistsError)):
        fail(f"cannot create {name}: {err}")
    done(
        output,
        f"Created topic {name}." if err is None else f"Topic {name} already exists.",
        topic=name,
        created=err is None,
    )


@topics.command()
@client_options
@topic_param(multiple=True, required=False)
@click.option("--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
def describe(
    bootstrap_server: str, properties: tuple[str, ...], topics: tuple[str, ...], output: str
) -> None:
    """Partitions (leader, replicas, ISR) and config overrides of topics (all when none named).

    \b
    Examples:
      gregor topics describe events
      gregor topics describe --topic events --topic audit
      gregor topics describe --output json
    """
    from gregor.client.admin import TOPIC
    from gregor.protocol.errors import UnknownTopicOrPartitionError

    names = topics
    known: set[str] = set()
    with _admin(bootstrap_server, properties) as admin:
        if not names:
            names = tuple(sorted(admin.list_topics()))
        descs = admin.describe_topics(list(names))
        found = [n for n in names if not isinstance(descs.get(n), Exception | None)]
        if len(found) < len(names):
            known = set(admin.list_topics(internal=True))
        try:
            configs = admin.describe_configs([(TOPIC, n) for n in found]) if found else {}
        except Exception:  # a broker without DescribeConfigs still gets partitions shown
            configs = {}
    errors: dict[str, str] = {}
    doc = []
    for name in names:
        d = descs.get(name)
        if d is None or isinstance(d, UnknownTopicOrPartitionError):
            errors[name] = no_such_topic(name, known)
            continue
        if isinstance(d, Exception):
            errors[name] = f"topic {name!r}: {d}"
            continue
        if output == "json":
            entries = configs.get((TOPIC, name))
            doc.append(
                {
                    "topic": name,
                    "topic_id": str(d.topic_id),
                    "internal": d.is_internal,
                    "configs": {
                        e.name: e.value
                        for e in entries.values()
                        if e.source == "DYNAMIC_TOPIC_CONFIG"
                    }
                    if isinstance(entries, dict)
                    else {},
                    "partitions": [
                        {
                            "partition": p.partition,
                            "leader": p.leader,
                            "replicas": p.replicas,
                            "isr": p.isr,
                        }
                        for p in d.partitions
                    ],
                }
            )
            continue
        entries = configs.get((TOPIC, name))
        overrides = ""
        if isinstance(entries, dict):
            overrides = ",".join(
                f"{e.name}={e.value}"
                for e in sorted(entries.values(), key=lambda e: e.name)
                if e.source == "DYNAMIC_TOPIC_CONFIG"
            )
        click.echo(
            f"Topic: {name}\tTopicId: {d.topic_id}\tPartitionCount: {len(d.partitions)}\t"
            f"ReplicationFactor: {len(d.partitions[0].replicas) if d.partitions else 0}\tConfigs: {overrides}"
        )
        for p in d.partitions:
            click.echo(
                f"\tTopic: {name}\tPartition: {p.partition}\tLeader: {p.leader}\t"
                f"Replicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.isr))}"
            )
    if output == "json":
        click.echo(json.dumps(doc))
    if errors:
        fail("; ".join(errors.values()))


@topics.command()
@client_options
@topic_param()
@click.option("--partitions", "-p", type=int, default=None, help="New (larger) partition count.")
@click.option(
    "--config", "-c", "configs", multiple=True, metavar="KEY=VALUE", help="Set a topic config."
)
@click.option(
    "--delete-config", "deletes", multiple=True, metavar="KEY", help="Remove a config override."
)
@output_option
def alter(
    bootstrap_server: str,
    properties: tuple[str, ...],
    topic: str,
    partitions: int | None,
    configs: tuple[str, ...],
    deletes: tuple[str, ...],
    output: str,
) -> None:
    """Add partitions to a topic or change its configs.

    \b
    Examples:
      gregor topics alter events -p 12
      gregor topics alter events -c retention.ms=86400000 --delete-config cleanup.policy
    """
    said: list[str] = []
    from gregor.client.admin import OP_DELETE, OP_SET, TOPIC

    name = topic

    if partitions is None and not configs and not deletes:
        fail("nothing to alter: give --partitions, --config or --delete-config")
    with _admin(bootstrap_server, properties) as admin:
        if partitions is not None:
            err = admin.create_partitions({name: partitions}).get(name)
            if err is not None:
                fail(f"cannot change partitions of {name}: {err}")
            said.append(f"Topic {name} now has {partitions} partitions.")
        if configs or deletes:
            ops: list[tuple[str, int, str | None]] = [
                (k, OP_SET, v) for k, v in parse_kv(configs, "--config").items()
            ]
            ops += [(k, OP_DELETE, None) for k in deletes]
            err = admin.incremental_alter_configs({(TOPIC, name): ops}).get((TOPIC, name))
            if err is not None:
                fail(f"cannot alter configs of {name}: {err}")
            said.append(f"Updated configs of {name}.")
    done(
        output,
        "\n".join(said),
        topic=name,
        partitions=partitions,
        configs=parse_kv(configs, "--config"),
        deleted_configs=list(deletes),
    )


@topics.command()
@client_options
@topic_param(multiple=True)
@output_option
def delete(
    bootstrap_server: str, properties: tuple[str, ...], topics: tuple[str, ...], output: str
) -> None:
    """Delete topics.

    \b
    Examples:
      gregor topics delete events
      gregor topics delete old-a old-b --output json
    """
    from gregor.protocol.errors import UnknownTopicOrPartitionError

    names = topics
    with _admin(bootstrap_server, properties) as admin:
        res = admin.delete_topics(list(names))
        bad = {n: e for n, e in res.items() if e is not None}
        known = set(admin.list_topics(internal=True)) if bad else set()
    errors = {
        n: no_such_topic(n, known)
        if isinstance(e, UnknownTopicOrPartitionError)
        else f"topic {n!r}: {e}"
        for n, e in bad.items()
    }
    deleted = [n for n in names if n not in bad]
    done_in_part(output, "\n".join(f"Deleted topic {n}." for n in deleted), errors, deleted=deleted)
