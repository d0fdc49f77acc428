"""``gregor transactions``: what kafka-transactions.sh shows.

``list`` asks every broker's transaction coordinator (ListTransactions; ``--state`` and
``--producer-id`` filter); ``describe --transactional-id ID`` asks the id's coordinator
(DescribeTransactions); ``describe-producers --topic T --partition P`` asks the partition's
leader for its active producers and the start offset of each one's open transaction
(DescribeProducers), which is how a hanging transaction is found; ``abort --topic T
--partition P --start-offset O`` then writes the abort marker for the producer whose open
transaction starts there (WriteTxnMarkers to the leader, which needs CLUSTER_ACTION), as
kafka-transactions' abort does. Tables as the Kafka tool prints them, tab-separated, or
``--output json``.
"""

from __future__ import annotations

import json
import time
from typing import Any

import click

from gregor.cli.clientopts import client_config, client_options, fail


def _admin(bootstrap_server: str, properties: tuple[str, ...]) -> Any:
    from gregor.client import AdminClient

    return AdminClient(client_config(bootstrap_server, properties))


def _table(header: list[str], rows: list[list[Any]]) -> None:
    widths = (
        [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=True)]
        if rows
        else [len(h) for h in header]
    )
    for row in [header, *rows]:
        click.echo("\t".join(str(x).ljust(w) for x, w in zip(row, widths, strict=True)).rstrip())


def _producers_of(admin: Any, tp: Any) -> list[dict[str, int]]:
    """A partition's active producers (DescribeProducers), or a one-line failure."""
    found = admin.describe_producers([tp]).get(tp)
    if found is None or isinstance(found, Exception):
        fail(f"cannot describe the producers of {tp.topic}-{tp.partition}: {found}")
    assert isinstance(found, list)
    return found


_OUTPUT = click.option(
    "--output", type=click.Choice(["text", "json"]), default="text", show_default=True
)


@click.group(
    epilog="""
\b
Examples:
  gregor transactions list
  gregor transactions describe --transactional-id orders-writer
  gregor transactions describe-producers --topic orders --partition 0
  gregor transactions abort --topic orders --partition 0 --start-offset 42
"""
)
def transactions() -> None:
    """List and describe transactions and producers (like kafka-transactions)."""


@transactions.command(
    "list",
    epilog="""
\b
Examples:
  gregor transactions list
  gregor transactions list --state Ongoing --output json
""",
)
@client_options
@click.option(
    "--state",
    "states",
    multiple=True,
    help="Only transactions in this state (e.g. Ongoing); repeatable.",
)
@click.option(
    "--producer-id",
    "producer_ids",
    multiple=True,
    type=int,
    help="Only this producer id; repeatable.",
)
@_OUTPUT
def list_(
    bootstrap_server: str,
    properties: tuple[str, ...],
    states: tuple[str, ...],
    producer_ids: tuple[int, ...],
    output: str,
) -> None:
    """Every transactional id the coordinators know, with its producer id and state."""
    with _admin(bootstrap_server, properties) as admin:
        found = admin.list_transactions(states, producer_ids)
    if output == "json":
        click.echo(
            json.dumps(
                [
                    {"transactionalId": t, "coordinator": c, "producerId": p, "transactionState": s}
                    for t, c, p, s in found
                ]
            )
        )
        return
    _table(
        ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"],
        [list(r) for r in found],
    )


@transactions.command(
    epilog="""
\b
Examples:
  gregor transactions describe --transactional-id orders-writer
"""
)
@client_options
@click.option("--transactional-id", "transactional_id", required=True)
@_OUTPUT
def describe(
    bootstrap_server: str, properties: tuple[str, ...], transactional_id: str, output: str
) -> None:
    """The coordinator's view of one transactional id."""
    with _admin(bootstrap_server, properties) as admin:
        found = admin.describe_transactions([transactional_id]).get(transactional_id)
    if found is None or isinstance(found, Exception):
        fail(f"cannot describe transactional id {transactional_id}: {found}")
    assert isinstance(found, dict)
    start = found["start_time_ms"]
    duration = int(time.time() * 1000) - start if start >= 0 else None
    partitions = ",".join(f"{t}-{p}" for t, p in found["partitions"])
    if output == "json":
        click.echo(
            json.dumps(
                {
                    "transactionalId": transactional_id,
                    **found,
                    "duration_ms": duration,
                    "partitions": [f"{t}-{p}" for t, p in found["partitions"]],
                }
            )
        )
        return
    _table(
        [
            "CoordinatorId",
            "TransactionalId",
            "ProducerId",
            "ProducerEpoch",
            "TransactionState",
            "TransactionTimeoutMs",
            "CurrentTransactionStartTimeMs",
            "TransactionDurationMs",
            "TopicPartitions",
        ],
        [
            [
                found["coordinator"],
                transactional_id,
                found["producer_id"],
                found["producer_epoch"],
                found["state"],
                found["timeout_ms"],
                "None" if start < 0 else start,
                "None" if duration is None else duration,
                partitions,
            ]
        ],
    )


@transactions.command(
    "describe-producers",
    epilog="""
\b
Examples:
  gregor transactions describe-producers --topic orders --partition 0
""",
)
@client_options
@click.option("--topic", required=True)
@click.option("--partition", type=click.IntRange(min=0), required=True)
@_OUTPUT
def describe_producers(
    bootstrap_server: str, properties: tuple[str, ...], topic: str, partition: int, output: str
) -> None:
    """The active producers of a partition, and where each one's open transaction starts."""
    from gregor.client.metadata import TopicPartition

    with _admin(bootstrap_server, properties) as admin:
        found = _producers_of(admin, TopicPartition(topic, partition))
    if output == "json":
        click.echo(json.dumps(found))
        return
    _table(
        [
            "ProducerId",
            "ProducerEpoch",
            "LatestCoordinatorEpoch",
            "LastSequence",
            "LastTimestamp",
            "CurrentTransactionStartOffset",
        ],
        [
            [
                p["producer_id"],
                p["producer_epoch"],
                p["coordinator_epoch"],
                p["last_sequence"],
                p["last_timestamp"],
                "None" if p["current_txn_start_offset"] < 0 else p["current_txn_start_offset"],
            ]
            for p in found
        ],
    )


@transactions.command(
    epilog="""
\b
Examples:
  gregor transactions abort --topic orders --partition 0 --start-offset 42
"""
)
@client_options
@click.option("--topic", required=True)
@click.option("--partition", type=click.IntRange(min=0), required=True)
@click.option(
    "--start-offset",
    type=click.IntRange(min=0),
    required=True,
    help="Where the hanging transaction starts (describe-producers' CurrentTransactionStartOffset).",
)
@_OUTPUT
def abort(
    bootstrap_server: str,
    properties: tuple[str, ...],
    topic: str,
    partition: int,
    start_offset: int,
    output: str,
) -> None:
    """Abort a hanging transaction on one partition."""
    from gregor.client.metadata import TopicPartition

    tp = TopicPartition(topic, partition)
    with _admin(bootstrap_server, properties) as admin:
        found = _producers_of(admin, tp)
        producer = next((p for p in found if p["current_txn_start_offset"] == start_offset), None)
        if producer is None:
            fail(f"no open transaction starts at offset {start_offset} of {topic}-{partition}")
        assert producer is not None
        from gregor.protocol.errors import KafkaError

        try:
            admin.abort_transaction(
                tp,
                producer["producer_id"],
                producer["producer_epoch"],
                producer["coordinator_epoch"],
            )
        except KafkaError as e:
            fail(
                f"cannot abort the transaction of producer {producer['producer_id']} on {topic}-{partition}: {e.name}: {e}"
            )
    if output == "json":
        click.echo(
            json.dumps(
                {
                    "result": "ok",
                    "topic": topic,
                    "partition": partition,
                    "start_offset": start_offset,
                    "producer_id": producer["producer_id"],
                    "producer_epoch": producer["producer_epoch"],
                }
            )
        )
        return
    click.echo(
        f"Aborted the transaction of producer {producer['producer_id']} (epoch {producer['producer_epoch']}) "
        f"starting at offset {start_offset} of {topic}-{partition}."
    )
