"""``gregor consume``: print records of a topic (like kafka-console-consumer)."""

from __future__ import annotations

import json
import time

import click

from gregor.cli.clientopts import client_config, client_options, fail


def _text(b: bytes | None) -> str | None:
    if b is None:
        return None
    return b.decode("utf-8", errors="backslashreplace")


@click.command(epilog="""
\b
Examples:
  gregor consume events --from-beginning -n 10
  gregor consume events -g readers --print-key
  gregor consume events --format json --from-beginning
""")
@client_options
@click.argument("topic")
@click.option("--group", "-g", default=None, help="Consume as a member of this group (commits offsets).")
@click.option("--from-beginning", is_flag=True, help="Start at the earliest offset when nothing is committed.")
@click.option("--partition", "-p", type=int, default=None, help="Read only this partition (no group needed).")
@click.option("--offset", "-o", type=int, default=None, help="With --partition: start at this offset.")
@click.option("--max-messages", "-n", type=int, default=None, help="Exit after this many records.")
@click.option("--timeout-ms", type=int, default=None, help="Exit when no record arrives for this long.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--print-key", is_flag=True, help="text format: print KEY<sep>VALUE.")
@click.option("--print-headers", is_flag=True, help="text format: print headers before the value.")
@click.option("--key-separator", default="\t", show_default=repr("\t"))
@click.option("--isolation-level", type=click.Choice(["read_uncommitted", "read_committed"]), default=None)
def consume(
    bootstrap_server: str,
    properties: tuple[str, ...],
    topic: str,
    group: str | None,
    from_beginning: bool,
    partition: int | None,
    offset: int | None,
    max_messages: int | None,
    timeout_ms: int | None,
    fmt: str,
    print_key: bool,
    print_headers: bool,
    key_separator: str,
    isolation_level: str | None,
) -> None:
    """Print records of TOPIC, one per line."""
    from gregor.client import Consumer, KafkaError, TopicPartition

    cfg = client_config(
        bootstrap_server,
        properties,
        **{
            "group.id": group,
            "auto.offset.reset": "earliest" if from_beginning else None,
            "isolation.level": isolation_level,
        },
    )
    count = 0
    try:
        with Consumer(cfg) as c:
            if partition is not None:
                tp = TopicPartition(topic, partition)
                c.assign([tp])
                if offset is not None:
                    c.seek(tp, offset)
            elif group is not None:
                c.subscribe([topic])
            else:
                parts = c.partitions_for_topic(topic)
                c.assign([TopicPartition(topic, p) for p in sorted(parts)])
            last = time.monotonic()
            while max_messages is None or count < max_messages:
                limit = None if max_messages is None else max_messages - count
                recs = c.poll(200, max_records=limit)
                if not recs:
                    if timeout_ms is not None and (time.monotonic() - last) * 1000 >= timeout_ms:
                        break
                    continue
                last = time.monotonic()
                for r in recs:
                    click.echo(_render(r, fmt, print_key, print_headers, key_separator))
                count += len(recs)
            if group is not None:
                c.commit()
    except KafkaError as e:
        fail(str(e))
    except KeyboardInterrupt:
        pass
    click.echo(f"Processed {count} records.", err=True)


def _render(r, fmt: str, print_key: bool, print_headers: bool, sep: str) -> str:  # noqa: ANN001
    if fmt == "json":
        return json.dumps(
            {
                "topic": r.topic,
                "partition": r.partition,
                "offset": r.offset,
                "timestamp": r.timestamp,
                "key": _text(r.key),
                "value": _text(r.value),
                "headers": [[k, _text(v)] for k, v in r.headers],
            },
            ensure_ascii=False,
        )
    parts = []
    if print_headers:
        parts.append(",".join(f"{k}:{_text(v)}" for k, v in r.headers) or "NO_HEADERS")
    if print_key:
        parts.append(_text(r.key) or "null")
    parts.append(_text(r.value) or "null")
    return sep.join(parts)
