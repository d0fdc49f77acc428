"""``gregor pipeline run``: the reference clickstream pipeline end to end.

With no ``--bootstrap-servers`` it starts a Gregor broker of its own (a child process on a
free port, data under the output directory) and stops it at the end; with one it uses that
broker (Gregor or any Kafka-compatible one). Spark runs in local mode unless ``--master``
names a cluster.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import click


@click.group()
def pipeline() -> None:
    """The reference Spark pipeline (page views -> windowed counts)."""


@pipeline.command("run")
@click.option("--bootstrap-servers", "-b", default=None, help="An existing broker (default: start one).")
@click.option("--master", default="local[*]", show_default=True, help="Spark master, e.g. spark://host:7077.")
@click.option("--events", default=20000, show_default=True, help="Page views to generate.")
@click.option("--users", default=300, show_default=True)
@click.option("--minutes", default=10, show_default=True, help="Event-time span of the generated views.")
@click.option("--seed", default=7, show_default=True)
@click.option("--input-topic", default="pageviews", show_default=True)
@click.option("--output-topic", default="pageview-windows", show_default=True)
@click.option("--output-dir", default="gregor-pipeline", show_default=True, help="Parquet output and checkpoint.")
@click.option("--max-offsets-per-trigger", default=5000, show_default=True)
@click.option("--keep", is_flag=True, help="Keep the previous output directory instead of starting afresh.")
@click.option("--no-produce", is_flag=True, help="Do not generate events (the input topic already has them).")
@click.option("--rows", default=30, show_default=True, help="Result rows to print (0: all).")
def run(
    bootstrap_servers: str | None,
    master: str,
    events: int,
    users: int,
    minutes: int,
    seed: int,
    input_topic: str,
    output_topic: str,
    output_dir: str,
    max_offsets_per_trigger: int,
    keep: bool,
    no_produce: bool,
    rows: int,
) -> None:
    """Produce page views, run the Spark job, print and check the windowed results."""
    from gregor.pipelines import clickstream as cs

    out = Path(output_dir)
    if out.exists() and not keep:
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    broker: Any = None
    if bootstrap_servers is None:
        from gregor.testing.process import BrokerProcess

        say("starting a Gregor broker")
        broker = BrokerProcess(data_dir=out / "broker").start()
        bootstrap_servers = broker.bootstrap_servers
        say(f"broker listening on {bootstrap_servers} (data in {out / 'broker'})")
    spark = None
    try:
        config = cs.PipelineConfig(
            bootstrap_servers,
            input_topic=input_topic,
            output_topic=output_topic,
            output_dir=str(out.resolve()),
            events=events,
            users=users,
            minutes=minutes,
            seed=seed,
            max_offsets_per_trigger=max_offsets_per_trigger,
        )
        cs.create_topics(config)
        say(f"topics {input_topic} ({config.partitions} partitions) and {output_topic} ready")
        generated = cs.generate_events(events, users=users, minutes=minutes, jitter_s=config.jitter_s, seed=seed)
        if not no_produce:
            before = cs.input_end_offsets(config)
            older = sum(sum(parts.values()) for parts in before.values())
            if older:
                # an earlier run's events are there: this run reads only its own
                config = dataclasses.replace(config, starting_offsets=json.dumps(before))
                say(f"{input_topic} already holds {older} records; the job starts after them")
            t = time.monotonic()
            n = cs.produce_events(bootstrap_servers, input_topic, [*generated, cs.end_marker(generated)])
            say(f"produced {n} events to {input_topic} in {time.monotonic() - t:.2f}s")

        from gregor.spark import local_session

        say(f"starting Spark ({master})")
        spark = local_session("gregor-clickstream", master=master)
        spark.sparkContext.setLogLevel("ERROR")
        t = time.monotonic()
        cs.run_job(spark, config, on_progress=show_progress)
        say(f"streaming job done in {time.monotonic() - t:.2f}s")

        got = cs.parquet_results(spark, config)
        click.echo()
        click.echo(cs.format_table(got, rows or None))
        click.echo()
        in_topic = cs.topic_results(spark, config)
        say(f"{len(got)} windows in {config.parquet_dir}, {len(in_topic)} records in topic {output_topic}")
        if not no_produce:
            problems = cs.check(cs.expected_windows(generated), got)
            if problems:
                for p in problems[:20]:
                    click.echo(f"  MISMATCH {p}", err=True)
                raise click.ClickException(f"{len(problems)} windows differ from the generated ground truth")
            say(f"check: all {len(got)} windows match the generator's ground truth")
    finally:
        if spark is not None:
            spark.stop()
        if broker is not None:
            say("stopping the broker")
            broker.stop()


def say(msg: str) -> None:
    click.echo(f"[pipeline] {msg}")
    sys.stdout.flush()


def show_progress(p: dict) -> None:
    rows = p.get("numInputRows", 0)
    rate = p.get("processedRowsPerSecond") or 0.0
    wm = (p.get("eventTime") or {}).get("watermark", "-")
    state = sum(op.get("numRowsTotal", 0) for op in p.get("stateOperators") or [])
    say(f"batch {p['batchId']:>3}: {rows:>6} events, {rate:>9.0f} events/s, watermark {wm}, {state} windows open")


__all__ = ["pipeline"]
