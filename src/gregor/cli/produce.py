"""``gregor produce``: write records from a file or stdin (like kafka-console-producer)."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from gregor.cli.clientopts import client_config, client_options, fail, parse_kv


@click.command(epilog="""
\b
Examples:
  echo hello | gregor produce events
  gregor produce events -K : < keyed-lines.txt          # key:value per line
  gregor produce events --format json < records.jsonl     # {"key":..., "value":..., "headers":...}
""")
@client_options
@click.argument("topic")
@click.option("--file", "-f", "path", type=click.Path(exists=True, dir_okay=False), help="Read records from a file (default: stdin).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help='text: one value per line; json: one {"key","value","headers","partition","timestamp"} object per line.')
@click.option("--key-separator", "-K", default=None, help="text format: split each line into KEY<sep>VALUE.")
@click.option("--header", "-H", "headers", multiple=True, metavar="KEY=VALUE", help="Header added to every record.")
@click.option("--partition", "-p", type=int, default=None, help="Write every record to this partition.")
@click.option("--acks", default=None, help="0, 1 or all.")
@click.option("--compression", "-z", default=None, help="none, gzip, snappy, lz4 or zstd.")
def produce(
    bootstrap_server: str,
    properties: tuple[str, ...],
    topic: str,
    path: str | None,
    fmt: str,
    key_separator: str | None,
    headers: tuple[str, ...],
    partition: int | None,
    acks: str | None,
    compression: str | None,
) -> None:
    """Produce records to TOPIC, one per input line."""
    from gregor.client import KafkaError, Producer

    common_headers = list(parse_kv(headers, "--header").items())
    stream = open(path, encoding="utf-8") if path else sys.stdin  # noqa: SIM115
    cfg = client_config(bootstrap_server, properties, **{"acks": acks, "compression.type": compression})
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
                p.send(topic, value, key=key, partition=part, timestamp_ms=ts,
                       headers=[(k, v.encode() if isinstance(v, str) else v) for k, v in hdrs],
                       on_delivery=on_delivery)
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
