"""``gregor produce``: write records from a file or stdin (like kafka-console-producer).

``--property`` sets how lines are read, with kafka-console-producer's names: ``parse.key=true``
splits each line at ``key.separator`` (a tab unless set) into key and value, as ``-K SEP``
does. Client settings are ``-X`` / ``--producer-property``.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from gregor.cli.clientopts import client_config, console_client_options, fail, parse_kv, topic_param

READER_PROPERTIES = ("parse.key", "key.separator")


def _key_separator(key_separator: str | None, props: dict[str, str]) -> str | None:
    """The separator lines are split at into key and value, or None (no key)."""
    unknown = [k for k in props if k not in READER_PROPERTIES]
    if unknown:
        raise click.BadParameter(
            f"{unknown[0]!r} is not a line reader property (known: {', '.join(READER_PROPERTIES)}); client "
            "settings go to -X / --producer-property",
            param_hint="--property",
        )
    parse = props.get("parse.key", "false").strip().lower()
    if parse not in ("true", "false"):
        raise click.BadParameter(
            f"parse.key={props['parse.key']!r}: expected true or false", param_hint="--property"
        )
    if key_separator is not None:
        return key_separator
    if parse == "true":
        return props.get("key.separator", "\t") or "\t"
    return None


@click.command(
    epilog="""
\b
Examples:
  echo hello | gregor produce events
  gregor produce events -K : < keyed-lines.txt          # key:value per line
  gregor produce --topic events --property parse.key=true --property key.separator=: < keyed-lines.txt
  gregor produce events --format json < records.jsonl     # {"key":..., "value":..., "headers":...}
"""
)
@console_client_options("producer")
@topic_param()
@click.option(
    "--file",
    "-f",
    "path",
    type=click.Path(exists=True, dir_okay=False),
    help="Read records from a file (default: stdin).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help='text: one value per line; json: one {"key","value","headers","partition","timestamp"} object per line.',
)
@click.option(
    "--key-separator", "-K", default=None, help="text format: split each line into KEY<sep>VALUE."
)
@click.option(
    "--property",
    "reader_props",
    multiple=True,
    metavar="KEY=VALUE",
    help="text format: parse.key=true, key.separator=... (kafka-console-producer's names); repeatable.",
)
@click.option(
    "--header",
    "-H",
    "headers",
    multiple=True,
    metavar="KEY=VALUE",
    help="Header added to every record.",
)
@click.option(
    "--partition", "-p", type=int, default=None, help="Write every record to this partition."
)
@click.option("--acks", default=None, help="0, 1 or all.")
@click.option("--compression", "-z", default=None, help="none, gzip, snappy, lz4 or zstd.")
def produce(
    bootstrap_server: str,
    properties: tuple[str, ...],
    topic: str,
    path: str | None,
    fmt: str,
    key_separator: str | None,
    reader_props: tuple[str, ...],
    headers: tuple[str, ...],
    partition: int | None,
    acks: str | None,
    compression: str | None,
) -> None:
    """Produce records to TOPIC, one per input line."""
    from gregor.client import KafkaError, Producer

    key_separator = _key_separator(key_separator, parse_kv(reader_props, "--property"))
    common_headers = list(parse_kv(headers, "--header").items())
    stream = open(path, encoding="utf-8") if path else sys.stdin  # noqa: SIM115
    cfg = client_config(
        bootstrap_server, properties, **{"acks": acks, "compression.type": compression}
    )
    count = 0
    errors: list[str] = []

    def on_delivery(fut: Any) -> None:
        if fut.exception() is not None:
            errors.append(str(fut.exception()))

    try:
        with Producer(cfg) as p:
            for lineno, line in enumerate(stream, 1):
                line = line.rstrip("\n")
                if not line and fmt == "json":
                    continue
                key: str | None = None
                value: str | None = line
                hdrs = list(common_headers)
                part = partition
                ts = None
                if fmt == "json":
                    try:
                        obj = json.loads(line)
                    except json.JSONDecodeError as e:
                        fail(f"line {lineno}: not JSON: {e}")
                    if not isinstance(obj, dict):
                        fail(f"line {lineno}: expected a JSON object")
                    key, value = obj.get("key"), obj.get("value")
                    h = obj.get("headers") or {}
                    hdrs += list(h.items()) if isinstance(h, dict) else [tuple(x) for x in h]
                    part = obj.get("partition", part)
                    ts = obj.get("timestamp")
                elif key_separator is not None:
                    if key_separator not in line:
                        fail(f"line {lineno}: no key separator {key_separator!r}")
                    key, value = line.split(key_separator, 1)
                p.send(
                    topic,
                    value,
                    key=key,
                    partition=part,
                    timestamp_ms=ts,
                    headers=[(k, v.encode() if isinstance(v, str) else v) for k, v in hdrs],
                    on_delivery=on_delivery,
                )
                count += 1
            p.flush()
    except KafkaError as e:
        fail(str(e))
    finally:
        if path:
            stream.close()
    if errors:
        fail(f"{len(errors)} of {count} records failed: {errors[0]}")
    click.echo(f"Produced {count} records to {topic}.", err=True)
