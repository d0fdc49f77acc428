"""``gregor pipeline run``: the main job (the reference clickstream pipeline at volume).

The same job as ``bash scripts/run.sh`` and ``python -m gregor.pipelines``
(:mod:`gregor.pipelines.runner`): with no ``--bootstrap-servers`` it starts a Gregor broker of
its own (a child process on a free port, data under the output directory) and stops it at the
end; with one it uses that broker (Gregor or any Kafka-compatible one). A generator process
produces the page views while the Spark streaming query reads them; a progress line per
micro-batch, the result table, a summary and the exact check against the generator's ground
truth follow. Spark runs in local mode unless ``--master`` names a cluster.
"""

from __future__ import annotations

import json

import click

from gregor.pipelines.options import (
    AVRO_NEEDS_REGISTRY,
    KEEP_HELP,
    OUTPUT_DIR_HELP,
    ROWS_HELP,
    SCHEMA_REGISTRY_HELP,
    VALUE_FORMAT_HELP,
    parse_rows,
)


def _rows(ctx: click.Context, param: click.Parameter, value: str) -> int | None:
    try:
        return parse_rows(value)
    except ValueError as e:
        raise click.BadParameter(str(e)) from None


@click.group()
def pipeline() -> None:
    """The reference Spark pipeline (page views -> windowed counts)."""


@pipeline.command(
    "run",
    epilog="""
\b
Examples:
  gregor pipeline run                                  # a broker of its own, 1,000,000 events
  gregor pipeline run --bootstrap-servers host:9092 --schema-registry http://host:8081
  gregor pipeline run --bootstrap-servers host:9092 --value-format json --events 100000
  gregor pipeline run --master spark://127.0.0.1:7077
""",
)
@click.option(
    "--bootstrap-servers", "-b", default=None, help="An existing broker (default: start one)."
)
@click.option(
    "--master", default="local[*]", show_default=True, help="Spark master, e.g. spark://host:7077."
)
@click.option("--events", default=1_000_000, show_default=True, help="Page views to generate.")
@click.option("--users", default=300, show_default=True)
@click.option(
    "--minutes", default=10, show_default=True, help="Event-time span of the generated views."
)
@click.option("--seed", default=7, show_default=True)
@click.option("--partitions", default=4, show_default=True, help="Partitions of the input topic.")
@click.option("--input-topic", default="pageviews", show_default=True)
@click.option("--output-topic", default="pageview-windows", show_default=True)
@click.option("--output-dir", default="gregor-pipeline", show_default=True, help=OUTPUT_DIR_HELP)
@click.option("--max-offsets-per-trigger", default=340_000, show_default=True)
@click.option(
    "--value-format",
    type=click.Choice(["avro", "json"]),
    default="avro",
    show_default=True,
    help=VALUE_FORMAT_HELP,
)
@click.option("--schema-registry", default="", metavar="URL", help=SCHEMA_REGISTRY_HELP)
@click.option("--keep", is_flag=True, help=KEEP_HELP)
@click.option(
    "--no-produce",
    is_flag=True,
    help="Generate nothing: read what the input topic holds (the result is not checked).",
)
@click.option(
    "--rows", default="30", show_default=True, metavar="N|all", callback=_rows, help=ROWS_HELP
)
@click.option(
    "--output",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="json: progress to stderr, the summary as one JSON document on stdout.",
)
def run(
    bootstrap_servers: str | None,
    master: str,
    events: int,
    users: int,
    minutes: int,
    seed: int,
    partitions: int,
    input_topic: str,
    output_topic: str,
    output_dir: str,
    max_offsets_per_trigger: int,
    value_format: str,
    schema_registry: str,
    keep: bool,
    no_produce: bool,
    rows: int | None,
    output: str,
) -> None:
    """Produce page views, run the Spark job, print progress and the windows, check them."""
    from gregor.pipelines import clickstream as cs
    from gregor.pipelines import output_dir as outdir
    from gregor.pipelines import runner

    if bootstrap_servers and value_format == "avro" and not schema_registry:
        raise click.UsageError(AVRO_NEEDS_REGISTRY)
    try:
        out = outdir.prepare(output_dir, keep=keep)
    except outdir.OutputDirError as e:
        raise click.ClickException(str(e)) from None
    config = cs.PipelineConfig(
        bootstrap_servers or "",
        input_topic=input_topic,
        output_topic=output_topic,
        output_dir=str(out.resolve()),
        events=events,
        users=users,
        minutes=minutes,
        seed=seed,
        partitions=partitions,
        max_offsets_per_trigger=max_offsets_per_trigger,
        value_format=value_format,
        schema_registry=schema_registry,
    )
    tell = say if output == "text" else say_to_stderr
    summary = runner.run(config, master=master, say=tell, rows=rows, produce=not no_produce)
    failed = runner.report(summary, tell)
    if output == "json":
        click.echo(
            json.dumps(
                {
                    "events": summary.events,
                    "seconds": round(summary.seconds, 3),
                    "events_per_sec": round(summary.rate, 1),
                    "windows": summary.windows,
                    "batches": summary.batches,
                    "produce_seconds": round(summary.produce_seconds, 3),
                    "spark_busy_seconds": round(summary.busy_seconds, 3),
                    "total_seconds": round(summary.total_seconds, 3),
                    "check": "skipped"
                    if summary.mismatches is None
                    else ("mismatch" if summary.mismatches else "ok"),
                    "mismatches": summary.mismatches or [],
                }
            )
        )
    if failed:
        raise click.ClickException(
            f"{len(summary.mismatches or [])} windows differ from the generated ground truth"
        )


def say_to_stderr(msg: str) -> None:
    click.echo(f"[pipeline] {msg}" if msg and "\n" not in msg else msg, err=True)


def say(msg: str) -> None:
    """One-line messages get the prefix; the result table does not."""
    click.echo(f"[pipeline] {msg}" if msg and "\n" not in msg else msg)


__all__ = ["pipeline"]
