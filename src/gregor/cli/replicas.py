"""``gregor leader-election`` (kafka-leader-election) and ``gregor reassign``
(kafka-reassign-partitions), for a cluster.

``leader-election --election-type preferred|unclean`` with ``--topic T --partition P``,
``--path-to-json-file F`` (``{"partitions": [{"topic": "t", "partition": 0}]}``) or
``--all-topic-partitions``; it prints, as Kafka's tool does, the partitions whose leader was
elected, those whose preferred replica already led, and the errors.

``reassign`` takes kafka-reassign-partitions' JSON (``{"version": 1, "partitions": [{"topic":
"t", "partition": 0, "replicas": [2, 3]}]}``): ``--generate --topics-to-move-json-file F
--broker-list 1,2,3`` proposes an assignment spreading the topics' partitions over the brokers
(round-robin, the replication factor kept); ``--execute`` starts the moves and prints the
current assignment first (keep it to roll back); ``--verify`` says which moves are done and
which are still in progress; ``--cancel`` cancels them.
"""

from __future__ import annotations

import json
from typing import Any

import click

from gregor.cli.clientopts import client_config, client_options, fail


def _admin(bootstrap_server: str, properties: tuple[str, ...]) -> Any:
    from gregor.client import AdminClient

    return AdminClient(client_config(bootstrap_server, properties))


def _read_json(path: str, option: str) -> Any:
    try:
        with open(path) as f:
            return json.load(f)
    except OSError as e:
        raise click.BadParameter(f"cannot read {path}: {e.strerror}", param_hint=option) from None
    except json.JSONDecodeError as e:
        raise click.BadParameter(f"{path} is not JSON: {e}", param_hint=option) from None


def _tp_list(doc: Any, option: str, with_replicas: bool) -> list[tuple[str, int, list[int] | None]]:
    try:
        out = []
        for p in doc["partitions"]:
            replicas = [int(r) for r in p["replicas"]] if with_replicas else None
            out.append((str(p["topic"]), int(p["partition"]), replicas))
        return out
    except (KeyError, TypeError, ValueError):
        needs = (
            '"topic", "partition" and "replicas"' if with_replicas else '"topic" and "partition"'
        )
        raise click.BadParameter(
            f'expected {{"partitions": [...]}} with {needs} in each', param_hint=option
        ) from None


@click.command(
    "leader-election",
    epilog="""
\b
Examples:
  gregor leader-election --election-type preferred --all-topic-partitions
  gregor leader-election --election-type unclean --topic events --partition 0
""",
)
@client_options
@click.option(
    "--election-type",
    type=click.Choice(["preferred", "unclean"], case_sensitive=False),
    required=True,
)
@click.option("--topic", default=None)
@click.option("--partition", type=click.IntRange(min=0), default=None)
@click.option("--path-to-json-file", "json_file", default=None, type=click.Path(dir_okay=False))
@click.option("--all-topic-partitions", is_flag=True)
@click.option("--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
def leader_election(
    bootstrap_server: str,
    properties: tuple[str, ...],
    election_type: str,
    topic: str | None,
    partition: int | None,
    json_file: str | None,
    all_topic_partitions: bool,
    output: str,
) -> None:
    """Elect partition leaders (like kafka-leader-election)."""
    from gregor.client.metadata import TopicPartition
    from gregor.protocol.errors import ElectionNotNeededError

    given = sum([topic is not None, json_file is not None, all_topic_partitions])
    if given != 1:
        raise click.UsageError(
            "give one of --topic/--partition, --path-to-json-file, --all-topic-partitions"
        )
    if (topic is None) != (partition is None):
        raise click.UsageError("--topic and --partition go together")
    partitions: list[TopicPartition] | None = None
    if topic is not None and partition is not None:
        partitions = [TopicPartition(topic, partition)]
    elif json_file is not None:
        partitions = [
            TopicPartition(t, p)
            for t, p, _ in _tp_list(
                _read_json(json_file, "--path-to-json-file"), "--path-to-json-file", False
            )
        ]
    kind = election_type.upper()
    with _admin(bootstrap_server, properties) as admin:
        results = admin.elect_leaders(0 if kind == "PREFERRED" else 1, partitions)
    done = sorted(tp for tp, err in results.items() if err is None)
    not_needed = sorted(
        tp for tp, err in results.items() if isinstance(err, ElectionNotNeededError)
    )
    failed = sorted(
        (tp, err) for tp, err in results.items() if err is not None and tp not in not_needed
    )
    if output == "json":
        click.echo(
            json.dumps(
                {
                    "election_type": kind,
                    "elected": [f"{t}-{p}" for t, p in done],
                    "not_needed": [f"{t}-{p}" for t, p in not_needed],
                    "errors": {f"{t}-{p}": f"{err.name}: {err}" for (t, p), err in failed},
                }
            )
        )
        if failed:
            raise SystemExit(1)
        return
    if done:
        click.echo(
            f"Successfully completed leader election ({kind}) for partitions "
            + ", ".join(f"{t}-{p}" for t, p in done)
        )
    if not_needed:
        click.echo(
            "Valid replica already elected for partitions "
            + ", ".join(f"{t}-{p}" for t, p in not_needed)
        )
    for (t, p), err in failed:
        click.echo(
            f"Error completing leader election ({kind}) for partition: {t}-{p}: {err}", err=True
        )
    if failed:
        raise SystemExit(1)


def _assignment_doc(rows: list[tuple[str, int, list[int]]]) -> str:
    return json.dumps(
        {
            "version": 1,
            "partitions": [
                {"topic": t, "partition": p, "replicas": r, "log_dirs": ["any"] * len(r)}
                for t, p, r in sorted(rows)
            ],
        }
    )


@click.command(
    epilog="""
\b
Examples:
  echo '{"topics": [{"topic": "events"}], "version": 1}' > move.json
  gregor reassign --generate --topics-to-move-json-file move.json --broker-list 2,3 > plan.json
  gregor reassign --reassignment-json-file plan.json --execute
  gregor reassign --reassignment-json-file plan.json --verify
"""
)
@client_options
@click.option("--generate", "action", flag_value="generate", help="Propose an assignment.")
@click.option("--execute", "action", flag_value="execute", help="Start the moves in the file.")
@click.option("--verify", "action", flag_value="verify", help="Which moves in the file are done.")
@click.option("--cancel", "action", flag_value="cancel", help="Cancel the moves in the file.")
@click.option(
    "--reassignment-json-file", "plan_file", default=None, type=click.Path(dir_okay=False)
)
@click.option(
    "--topics-to-move-json-file", "topics_file", default=None, type=click.Path(dir_okay=False)
)
@click.option(
    "--broker-list", default=None, metavar="ID[,ID]", help="With --generate: the brokers to use."
)
@click.option("--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
def reassign(
    bootstrap_server: str,
    properties: tuple[str, ...],
    action: str | None,
    plan_file: str | None,
    topics_file: str | None,
    broker_list: str | None,
    output: str,
) -> None:
    """Move partition replicas between brokers (like kafka-reassign-partitions)."""
    from gregor.client.metadata import TopicPartition

    if action is None:
        raise click.UsageError("give one of --generate, --execute, --verify, --cancel")
    with _admin(bootstrap_server, properties) as admin:
        if action == "generate":
            if topics_file is None or broker_list is None:
                raise click.UsageError(
                    "--generate needs --topics-to-move-json-file and --broker-list"
                )
            try:
                brokers = [int(b) for b in broker_list.split(",") if b.strip()]
                topics = [
                    str(t["topic"])
                    for t in _read_json(topics_file, "--topics-to-move-json-file")["topics"]
                ]
            except (KeyError, TypeError, ValueError):
                raise click.BadParameter(
                    'expected {"topics": [{"topic": "t"}]} and broker ids',
                    param_hint="--topics-to-move-json-file",
                ) from None
            described = admin.describe_topics(topics)
            current: list[tuple[str, int, list[int]]] = []
            for name in topics:
                d = described.get(name)
                if d is None or isinstance(d, Exception):
                    fail(f"topic {name}: {d or 'not found'}")
                assert d is not None and not isinstance(d, Exception)
                current += [(name, p.partition, list(p.replicas)) for p in d.partitions]
            if not brokers or any(len(r) > len(brokers) for _, _, r in current):
                fail("the broker list has fewer brokers than a partition's replication factor")
            proposed = [
                (t, p, [brokers[(i + k) % len(brokers)] for k in range(len(r))])
                for i, (t, p, r) in enumerate(sorted(current))
            ]
            if output == "json":
                click.echo(
                    json.dumps(
                        {
                            "current": json.loads(_assignment_doc(current)),
                            "proposed": json.loads(_assignment_doc(proposed)),
                        }
                    )
                )
                return
            click.echo("Current partition replica assignment")
            click.echo(_assignment_doc(current))
            click.echo("")
            click.echo("Proposed partition reassignment configuration")
            click.echo(_assignment_doc(proposed))
            return
        if plan_file is None:
            raise click.UsageError(f"--{action} needs --reassignment-json-file")
        plan = _tp_list(
            _read_json(plan_file, "--reassignment-json-file"),
            "--reassignment-json-file",
            action != "cancel",
        )
        tps = [TopicPartition(t, p) for t, p, _ in plan]
        if action == "execute":
            described = admin.describe_topics(sorted({t for t, _, _ in plan}))
            before = []
            for t, p, _ in plan:
                d = described.get(t)
                if d is None or isinstance(d, Exception) or p >= len(d.partitions):
                    fail(f"partition {t}-{p} does not exist")
                assert d is not None and not isinstance(d, Exception)
                before.append((t, p, list(d.partitions[p].replicas)))
            results = admin.alter_partition_reassignments(
                {TopicPartition(t, p): r for t, p, r in plan}
            )
            if output == "json":
                _report_json(results, "started", rollback=json.loads(_assignment_doc(before)))
                return
            click.echo("Current partition replica assignment\n")
            click.echo(_assignment_doc(before))
            click.echo("\nSave this to use as the --reassignment-json-file option during rollback")
            _report(results, "Successfully started partition reassignments for ")
        elif action == "cancel":
            results = admin.alter_partition_reassignments({tp: None for tp in tps})
            if output == "json":
                _report_json(results, "cancelled")
                return
            _report(results, "Successfully cancelled partition reassignments for: ")
        else:
            ongoing = admin.list_partition_reassignments(tps)
            described = admin.describe_topics(sorted({t for t, _, _ in plan}))
            lines: list[str] = []
            status: dict[str, str] = {}
            incomplete = False
            for t, p, target in plan:
                d = described.get(t)
                replicas = (
                    None
                    if d is None or isinstance(d, Exception) or p >= len(d.partitions)
                    else d.partitions[p].replicas
                )
                if TopicPartition(t, p) in ongoing:
                    lines.append(f"Reassignment of partition {t}-{p} is still in progress.")
                    status[f"{t}-{p}"] = "in_progress"
                    incomplete = True
                elif replicas is not None and sorted(replicas) == sorted(target or []):
                    lines.append(f"Reassignment of partition {t}-{p} is completed.")
                    status[f"{t}-{p}"] = "completed"
                else:
                    lines.append(
                        f"There is no active reassignment of partition {t}-{p}, but replica set is "
                        f"{replicas} rather than {target}."
                    )
                    status[f"{t}-{p}"] = "not_as_planned"
                    incomplete = True
            if output == "json":
                click.echo(json.dumps(status))
            else:
                click.echo("Status of partition reassignment:")
                for line in lines:
                    click.echo(line)
            if incomplete:
                raise SystemExit(1)


def _report_json(results: dict[Any, Any], what: str, **extra: Any) -> None:
    errors = {
        f"{t}-{p}": f"{err.name}: {err}" for (t, p), err in results.items() if err is not None
    }
    click.echo(
        json.dumps(
            {
                what: sorted(f"{t}-{p}" for (t, p), err in results.items() if err is None),
                "errors": errors,
                **extra,
            }
        )
    )
    if errors:
        raise SystemExit(1)


def _report(results: dict[Any, Any], success: str) -> None:
    ok = sorted(tp for tp, err in results.items() if err is None)
    if ok:
        click.echo(success + ",".join(f"{t}-{p}" for t, p in ok))
    failed = sorted((tp, err) for tp, err in results.items() if err is not None)
    for (t, p), err in failed:
        click.echo(f"Error for partition {t}-{p}: {err.name}: {err}", err=True)
    if failed:
        raise SystemExit(1)
