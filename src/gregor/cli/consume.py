"""``gregor consume``: print records of a topic (like kafka-console-consumer).

Where to start: with ``--group``, the group's committed offsets (``--from-beginning``: the
earliest offset where none is committed); with ``--partition`` and ``--offset``, that offset
(``beginning`` / ``earliest``, ``end`` / ``latest`` or a number); otherwise the end of every
partition, or the beginning with ``--from-beginning`` or ``-o beginning``. As in Kafka's tool a
numeric ``--offset`` needs ``--partition``, and the partition and the offset are checked
against the topic before anything is read: a partition the topic does not have, or an offset
outside the partition's log, is a one-line error, not a wait that never ends.
``--timeout-ms`` ends the command once no record came for that long, whatever the reason.

``--property`` sets how records are printed, with kafka-console-consumer's names
(``print.key``, ``print.timestamp``, ``print.partition``, ``print.offset``,
``print.headers``, ``print.value``, ``key.separator``, ``headers.separator``,
``line.separator``, ``null.literal``); ``--print-key``, ``--print-headers`` and
``--key-separator`` are the same settings.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import click

from gregor.cli.clientopts import (
    client_config,
    console_client_options,
    fail,
    no_such_topic,
    parse_kv,
    topic_param,
)

_TRUE = ("true", "1", "yes")
_FALSE = ("false", "0", "no")
_EARLIEST = ("beginning", "earliest")
_LATEST = ("end", "latest")


def _text(b: bytes | None) -> str | None:
    if b is None:
        return None
    return b.decode("utf-8", errors="backslashreplace")


@dataclass
class Formatter:
    """kafka-console-consumer's DefaultMessageFormatter settings."""

    print_timestamp: bool = False
    print_partition: bool = False
    print_offset: bool = False
    print_headers: bool = False
    print_key: bool = False
    print_value: bool = True
    key_separator: str = "\t"
    headers_separator: str = ","
    line_separator: str = "\n"
    null_literal: str = "null"

    FLAGS = (
        "print.timestamp",
        "print.partition",
        "print.offset",
        "print.headers",
        "print.key",
        "print.value",
    )
    TEXTS = ("key.separator", "headers.separator", "line.separator", "null.literal")

    @classmethod
    def from_properties(cls, props: dict[str, str], base: Formatter) -> Formatter:
        f = base
        for key, value in props.items():
            attr = key.replace(".", "_")
            if key in cls.FLAGS:
                v = value.strip().lower()
                if v not in _TRUE + _FALSE:
                    raise click.BadParameter(
                        f"{key}={value!r}: expected true or false", param_hint="--property"
                    )
                setattr(f, attr, v in _TRUE)
            elif key in cls.TEXTS:
                setattr(f, attr, value)
            else:
                raise click.BadParameter(
                    f"{key!r} is not a formatter property (known: {', '.join(cls.FLAGS + cls.TEXTS)}); "
                    "client settings go to -X / --consumer-property",
                    param_hint="--property",
                )
        return f

    def _field(self, b: bytes | None) -> str:
        return self.null_literal if b is None else b.decode("utf-8", errors="backslashreplace")

    def render(self, r: Any) -> str:
        parts = []
        if self.print_timestamp:
            kind = {0: "CreateTime", 1: "LogAppendTime"}.get(r.timestamp_type)
            parts.append(f"{kind}:{r.timestamp}" if kind else "NO_TIMESTAMP")
        if self.print_partition:
            parts.append(f"Partition:{r.partition}")
        if self.print_offset:
            parts.append(f"Offset:{r.offset}")
        if self.print_headers:
            parts.append(
                self.headers_separator.join(f"{k}:{self._field(v)}" for k, v in r.headers)
                or "NO_HEADERS"
            )
        if self.print_key:
            parts.append(self._field(r.key))
        if self.print_value:
            parts.append(self._field(r.value))
        return self.key_separator.join(parts)


def _parse_offset(text: str | None) -> str | int | None:
    if text is None:
        return None
    t = text.strip().lower()
    if t in _EARLIEST:
        return "earliest"
    if t in _LATEST:
        return "latest"
    try:
        value = int(t)
    except ValueError:
        value = -1
    if value < 0:
        raise click.BadParameter(
            f"{text!r}: give beginning (earliest), end (latest) or an offset >= 0",
            param_hint="--offset",
        )
    return value


@click.command(
    epilog="""
\b
Examples:
  gregor consume events --from-beginning -n 10
  gregor consume --topic events -g readers --property print.key=true --property key.separator=:
  gregor consume events -p 0 -o 42 -n 1 --format json
  gregor consume events -o beginning --timeout-ms 5000     # every partition, until 5 s pass quietly
"""
)
@console_client_options("consumer")
@topic_param()
@click.option(
    "--group", "-g", default=None, help="Consume as a member of this group (commits offsets)."
)
@click.option(
    "--from-beginning", is_flag=True, help="Start at the earliest offset when nothing is committed."
)
@click.option(
    "--partition",
    "-p",
    type=click.IntRange(min=0),
    default=None,
    help="Read only this partition (no group needed).",
)
@click.option(
    "--offset",
    "-o",
    default=None,
    metavar="beginning|end|N",
    help="Where to start: beginning (earliest), end (latest), or an offset (needs --partition).",
)
@click.option(
    "--max-messages",
    "-n",
    type=click.IntRange(min=1),
    default=None,
    help="Exit after this many records.",
)
@click.option(
    "--timeout-ms",
    type=click.IntRange(min=0),
    default=None,
    help="Exit when no record arrives for this long.",
)
@click.option(
    "--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True
)
@click.option(
    "--property",
    "formatter_props",
    multiple=True,
    metavar="KEY=VALUE",
    help="text format: print.key=true, print.timestamp=true, key.separator=..., ... "
    "(kafka-console-consumer's names); repeatable.",
)
@click.option(
    "--print-key", is_flag=True, help="text format: print KEY<sep>VALUE (print.key=true)."
)
@click.option("--print-headers", is_flag=True, help="text format: print headers before the value.")
@click.option(
    "--key-separator",
    default=None,
    help="text format: between the fields (key.separator) [default: tab].",
)
@click.option(
    "--isolation-level", type=click.Choice(["read_uncommitted", "read_committed"]), default=None
)
def consume(
    bootstrap_server: str,
    properties: tuple[str, ...],
    topic: str,
    group: str | None,
    from_beginning: bool,
    partition: int | None,
    offset: str | None,
    max_messages: int | None,
    timeout_ms: int | None,
    fmt: str,
    formatter_props: tuple[str, ...],
    print_key: bool,
    print_headers: bool,
    key_separator: str | None,
    isolation_level: str | None,
) -> None:
    """Print records of TOPIC, one per line."""
    from gregor.client import AdminClient, Consumer, TopicPartition
    from gregor.protocol.errors import UnknownTopicOrPartitionError

    start = _parse_offset(offset)
    if isinstance(start, int) and partition is None:
        raise click.UsageError(
            "an --offset number needs --partition (the partition is required when offset is given)"
        )
    if start is not None and group is not None:
        raise click.UsageError(
            "--offset and --group do not go together: a group starts at its committed offsets"
        )
    if start is not None and from_beginning:
        raise click.UsageError("--offset and --from-beginning do not go together")
    if partition is not None and group is not None:
        raise click.UsageError("--partition and --group do not go together")
    base = Formatter(
        print_key=print_key,
        print_headers=print_headers,
        key_separator=key_separator if key_separator is not None else "\t",
    )
    formatter = Formatter.from_properties(parse_kv(formatter_props, "--property"), base)
    if from_beginning:
        start = "earliest"

    cfg = client_config(
        bootstrap_server,
        properties,
        **{
            "group.id": group,
            "auto.offset.reset": "earliest" if start == "earliest" else None,
            "isolation.level": isolation_level,
        },
    )
    # Check the topic, the partition and the offset first: a partition the topic lacks would
    # be waited for, and an offset outside the log silently reset.
    with AdminClient(client_config(bootstrap_server, properties)) as admin:
        desc = admin.describe_topics([topic])[topic]
        if isinstance(desc, UnknownTopicOrPartitionError):
            fail(no_such_topic(topic, admin.list_topics(internal=True)))
        if isinstance(desc, Exception):
            fail(f"topic {topic!r}: {desc}")
        parts = sorted(p.partition for p in desc.partitions)
        if partition is not None and partition not in parts:
            fail(
                f"topic {topic!r} has no partition {partition} (it has {len(parts)}: 0-{len(parts) - 1})"
            )
        if isinstance(start, int) and partition is not None:
            tp = TopicPartition(topic, partition)
            low = admin.list_offsets({tp: "earliest"})[tp][0]
            high = admin.list_offsets({tp: "latest"})[tp][0]
            if not low <= start <= high:
                held = (
                    f"holds offsets {low} to {high - 1}"
                    if high > low
                    else f"is empty (next offset {high})"
                )
                fail(
                    f"offset {start} is outside {topic}-{partition}, whose log {held}; give {low} to {high}, "
                    "beginning or end"
                )
    count = 0
    with Consumer(cfg) as c:
        if partition is not None:
            tp = TopicPartition(topic, partition)
            c.assign([tp])
            _seek(c, tp, start)
        elif group is not None:
            c.subscribe([topic])
        else:
            tps = [TopicPartition(topic, p) for p in parts]
            c.assign(tps)
            for tp in tps:
                _seek(c, tp, start)
        try:
            last = time.monotonic()
            while max_messages is None or count < max_messages:
                limit = None if max_messages is None else max_messages - count
                wait = (
                    200
                    if timeout_ms is None
                    else max(min(200, timeout_ms - int((time.monotonic() - last) * 1000)), 0)
                )
                recs = c.poll(wait, max_records=limit)
                if not recs:
                    if timeout_ms is not None and (time.monotonic() - last) * 1000 >= timeout_ms:
                        break
                    continue
                last = time.monotonic()
                for r in recs:
                    if fmt == "json":
                        click.echo(_json(r))
                    else:
                        click.echo(formatter.render(r) + formatter.line_separator, nl=False)
                count += len(recs)
        except KeyboardInterrupt:
            pass
        if group is not None:
            c.commit()
    click.echo(f"Processed {count} records.", err=True)


def _seek(c: Any, tp: Any, start: str | int | None) -> None:
    if start == "earliest":
        c.seek(tp, c.beginning_offsets([tp])[tp])
    elif start == "latest" or start is None:
        c.seek(tp, c.end_offsets([tp])[tp])
    else:
        c.seek(tp, start)


def _json(r: Any) -> str:
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
