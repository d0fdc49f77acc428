"""``gregor perf produce`` and ``gregor perf consume``: kafka-producer-perf-test and
kafka-consumer-perf-test with Gregor's client, against any Kafka-compatible broker.

``produce`` sends ``--num-records`` records of ``--record-size`` random bytes (or lines of
``--payload-file``) at ``--throughput`` records/s (-1: as fast as it can), with
``--producer-props``/``-X`` client settings; every ``--reporting-interval`` ms it prints what
kafka-producer-perf-test prints (records sent, records/s, MB/s, average and maximum latency),
and at the end the totals with the 50th, 95th, 99th and 99.9th latency percentiles. Latency is
the time from ``send`` to the broker's acknowledgement. ``consume`` reads ``--messages`` records
from the start (or as ``--group``, from its committed offsets) and prints the header and row
of kafka-consumer-perf-test. A progress bar goes to stderr when it is a terminal.
``--output json`` prints the final figures as JSON instead.
"""

from __future__ import annotations

import json
import os
import random
import sys
import threading
import time
from typing import Any

import click

from gregor.cli.clientopts import client_config, client_options, fail, topic_param

MB = 1024 * 1024


def _percentile(sorted_values: list[float], p: float) -> float:
    if not sorted_values:
        return 0.0
    return sorted_values[min(len(sorted_values) - 1, int(len(sorted_values) * p))]


@click.group()
def perf() -> None:
    """Throughput and latency tests (like kafka-producer-perf-test and kafka-consumer-perf-test)."""


@perf.command(
    "produce",
    epilog="""
\b
Examples:
  gregor perf produce --topic perf --num-records 1000000 --record-size 100 --throughput -1
  gregor perf produce --topic perf --num-records 10000 --record-size 1024 --throughput 1000 \\
      --producer-props acks=all linger.ms=5
""",
)
@client_options
@topic_param()
@click.option("--num-records", type=click.IntRange(min=1), required=True)
@click.option(
    "--record-size", type=click.IntRange(min=0), default=None, help="Bytes per record (random)."
)
@click.option(
    "--payload-file",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="Records from this file's lines instead of random bytes.",
)
@click.option("--throughput", type=int, required=True, help="Records/s to aim for; -1: no limit.")
@click.option(
    "--producer-props", multiple=True, metavar="K=V", help="Client settings (as -X); repeatable."
)
@click.option(
    "--reporting-interval",
    type=click.IntRange(min=100),
    default=5000,
    show_default=True,
    help="ms.",
)
@click.option("--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
def produce(
    bootstrap_server: str,
    properties: tuple[str, ...],
    topic: str,
    num_records: int,
    record_size: int | None,
    payload_file: str | None,
    throughput: int,
    producer_props: tuple[str, ...],
    reporting_interval: int,
    output: str,
) -> None:
    """Produce records as fast as asked and report throughput and latency."""
    from gregor.client import Producer

    if (record_size is None) == (payload_file is None):
        raise click.UsageError("give exactly one of --record-size and --payload-file")
    if payload_file is not None:
        with open(payload_file, "rb") as f:
            payloads = [line for line in f.read().split(b"\n") if line]
        if not payloads:
            raise click.UsageError(f"{payload_file} has no lines")
    else:
        assert record_size is not None
        payloads = [os.urandom(record_size)]
    rng = random.Random(0)
    cfg = client_config(bootstrap_server, properties + producer_props)
    latencies: list[float] = []
    lock = threading.Lock()
    window = {"count": 0, "bytes": 0, "lat_sum": 0.0, "lat_max": 0.0, "start": 0.0}
    errors: list[BaseException] = []

    def report_window(now: float) -> None:
        n = window["count"]
        elapsed = max(now - window["start"], 1e-9)
        if n and output == "text":
            click.echo(
                f"{n} records sent, {n / elapsed:.1f} records/sec ({window['bytes'] / elapsed / MB:.2f} MB/sec), "
                f"{window['lat_sum'] / n:.1f} ms avg latency, {window['lat_max']:.1f} ms max latency."
            )
        window.update(count=0, bytes=0, lat_sum=0.0, lat_max=0.0, start=now)

    def delivered(started: float, size: int) -> Any:
        def done(fut: Any) -> None:
            ms = (time.perf_counter() - started) * 1000
            exc = fut.exception() if hasattr(fut, "exception") else None
            with lock:
                if exc is not None:
                    errors.append(exc)
                    return
                latencies.append(ms)
                window["count"] += 1
                window["bytes"] += size
                window["lat_sum"] += ms
                window["lat_max"] = max(window["lat_max"], ms)

        return done

    bar = (
        click.progressbar(length=num_records, label="producing", file=sys.stderr)
        if sys.stderr.isatty()
        else None
    )
    start = time.perf_counter()
    window["start"] = start
    next_report = start + reporting_interval / 1000
    with Producer(cfg) as producer:
        for i in range(num_records):
            value = payloads[rng.randrange(len(payloads))] if len(payloads) > 1 else payloads[0]
            now = time.perf_counter()
            if throughput > 0:
                due = start + i / throughput
                if due > now:
                    time.sleep(due - now)
                    now = time.perf_counter()
            producer.send(topic, value=value, on_delivery=delivered(now, len(value)))
            if now >= next_report:
                with lock:
                    report_window(now)
                next_report = now + reporting_interval / 1000
            if bar is not None and i % 1000 == 0:
                bar.update(1000 if i else 0)
        producer.flush()
    total_s = time.perf_counter() - start
    if bar is not None:
        bar.render_finish()
    if errors:
        fail(
            f"{len(errors)} records failed, the first with {type(errors[0]).__name__}: {errors[0]}"
        )
    lat = sorted(latencies)
    size = sum(len(p) for p in payloads) / len(payloads)
    figures = {
        "records": len(lat),
        "seconds": round(total_s, 3),
        "records_per_sec": len(lat) / total_s,
        "mb_per_sec": len(lat) * size / total_s / MB,
        "avg_latency_ms": sum(lat) / len(lat) if lat else 0.0,
        "max_latency_ms": lat[-1] if lat else 0.0,
        "p50_ms": _percentile(lat, 0.5),
        "p95_ms": _percentile(lat, 0.95),
        "p99_ms": _percentile(lat, 0.99),
        "p999_ms": _percentile(lat, 0.999),
    }
    if output == "json":
        click.echo(json.dumps(figures))
        return
    click.echo(
        f"{figures['records']} records sent, {figures['records_per_sec']:.1f} records/sec "
        f"({figures['mb_per_sec']:.2f} MB/sec), {figures['avg_latency_ms']:.2f} ms avg latency, "
        f"{figures['max_latency_ms']:.2f} ms max latency, {figures['p50_ms']:.0f} ms 50th, "
        f"{figures['p95_ms']:.0f} ms 95th, {figures['p99_ms']:.0f} ms 99th, {figures['p999_ms']:.0f} ms 99.9th."
    )


@perf.command(
    "consume",
    epilog="""
\b
Examples:
  gregor perf consume --topic perf --messages 1000000
  gregor perf consume --topic perf --messages 100000 --group perf-readers --output json
""",
)
@client_options
@topic_param()
@click.option("--messages", type=click.IntRange(min=1), required=True, help="Records to read.")
@click.option("--group", default=None, help="Read as this group (from its committed offsets).")
@click.option(
    "--timeout",
    "timeout_ms",
    type=click.IntRange(min=1),
    default=10000,
    show_default=True,
    help="Give up after this many ms without a record.",
)
@click.option(
    "--consumer-props", multiple=True, metavar="K=V", help="Client settings (as -X); repeatable."
)
@click.option("--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
def consume(
    bootstrap_server: str,
    properties: tuple[str, ...],
    topic: str,
    messages: int,
    group: str | None,
    timeout_ms: int,
    consumer_props: tuple[str, ...],
    output: str,
) -> None:
    """Read records as fast as possible and report throughput."""
    from gregor.client import Consumer
    from gregor.client.metadata import TopicPartition

    cfg = client_config(bootstrap_server, properties + consumer_props)
    cfg.setdefault("auto.offset.reset", "earliest")
    if group:
        cfg["group.id"] = group
    count = size = 0
    start_wall = time.time()
    start = time.perf_counter()
    first_record: float | None = None
    last_record = time.perf_counter()
    with Consumer(cfg) as consumer:
        if group:
            consumer.subscribe([topic])
        else:
            parts = consumer.partitions_for_topic(topic)
            if not parts:
                fail(f"topic {topic} not found")
            consumer.assign([TopicPartition(topic, p) for p in sorted(parts)])
        while count < messages:
            records = consumer.poll(500, max_records=messages - count)
            now = time.perf_counter()
            if records:
                if first_record is None:
                    first_record = now
                last_record = now
                count += len(records)
                size += sum(len(r.value or b"") + len(r.key or b"") for r in records)
            elif (now - last_record) * 1000 >= timeout_ms and (
                first_record is not None or (now - start) * 1000 >= timeout_ms
            ):
                break
    end = time.perf_counter()
    total_s = max(end - start, 1e-9)
    fetch_s = max(end - (first_record or start), 1e-9)
    figures = {
        "start.time": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(start_wall)),
        "end.time": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(start_wall + total_s)),
        "data.consumed.in.MB": size / MB,
        "MB.sec": size / MB / total_s,
        "data.consumed.in.nMsg": count,
        "nMsg.sec": count / total_s,
        "rebalance.time.ms": int(((first_record or end) - start) * 1000),
        "fetch.time.ms": int(fetch_s * 1000),
        "fetch.MB.sec": size / MB / fetch_s,
        "fetch.nMsg.sec": count / fetch_s,
    }
    if count < messages:
        click.echo(
            f"WARNING: Exiting before consuming the expected number of messages: timeout ({timeout_ms} ms) "
            f"exceeded. You can use the --timeout option to increase the timeout.",
            err=True,
        )
    if output == "json":
        click.echo(json.dumps(figures))
    else:
        click.echo(", ".join(figures))
        click.echo(
            ", ".join(f"{v:.4f}" if isinstance(v, float) else str(v) for v in figures.values())
        )
    if count < messages:
        raise SystemExit(1)
