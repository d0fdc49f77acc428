"""The main job: the reference pipeline at volume, with a live progress line and a checked result.

    python -m gregor.pipelines [--events 1000000] [--bootstrap-servers HOST:PORT] [--master URL] ...

Theory of operation. Four things run at once: a Gregor broker (a child process, unless
``--bootstrap-servers`` names one), a generator process (at a lower priority) that produces the
page views chunk by chunk with Gregor's producer (vectorized in Arrow:
:func:`clickstream.generate_columns`), the Spark streaming query of
:mod:`gregor.pipelines.clickstream` (started while the generator is producing, so Spark's
start-up overlaps it) and, in this process, a loop that prints one line per micro-batch
(events read, events/s, lag behind the input's end offsets, watermark, windows written) from
the query's progress.

Draining. The end-of-stream marker (an event far ahead in event time) is produced only once
the generator is done and what the query has left to read, with the marker, fits in one batch
(``maxOffsetsPerTrigger``): the batch that reads the marker then reads every event before it,
so no event can fall behind a watermark the marker moved. The batch that reads the marker
moves the watermark past every window; the no-data batch after it emits the last windows;
then the query stops. The result is checked exactly: the windows in the Parquet output
against the ground truth counted from the same deterministic generator
(:func:`clickstream.expected_windows`). The summary gives events, seconds (from the first
produced event to the last written window), events/s and windows. ``GREGOR_PIPELINE_DEBUG=1``
adds timestamps and each batch's durations.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from gregor.pipelines import clickstream as cs
from gregor.pipelines import output_dir
from gregor.pipelines.options import (
    AVRO_NEEDS_REGISTRY,
    KEEP_HELP,
    OUTPUT_DIR_HELP,
    ROWS_HELP,
    SCHEMA_REGISTRY_HELP,
    VALUE_FORMAT_HELP,
    rows_arg,
)

_DEBUG = bool(os.environ.get("GREGOR_PIPELINE_DEBUG"))  # timestamps, batch durations
_T0 = time.monotonic()
#: Set by the job's SIGINT handler: a Ctrl-C reaches the whole process group, and a call into
#: Spark's JVM that was in flight may fail with Py4J's own error before (or instead of) the
#: KeyboardInterrupt, so an error after a Ctrl-C is reported as the Ctrl-C it is.
_interrupted = False


def _on_sigint(signum: int, frame: object) -> None:
    global _interrupted
    _interrupted = True
    raise KeyboardInterrupt


# Start-up is most of the job's time on a small machine: Spark's JVM with only the C1 compiler
# starts in about half the time (C2's compiler threads compete for the cores) for a small loss
# of peak speed, a gain for a job of a minute (GREGOR_PIPELINE_JAVA_OPTIONS replaces it); and
# the generator yields the CPU to Spark's start-up (it is done long before the first batch).
JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"
GENERATOR_NICE = 5


def generate_and_produce(
    bootstrap: str,
    topic: str,
    n: int,
    users: int,
    minutes: int,
    jitter_s: int,
    seed: int,
    produced: Any,
    started: Any,
    finished: Any,
    schema_id: int | None = None,
) -> None:
    """The generator process: every chunk of events to ``topic`` (key: user id), as Avro with
    ``schema_id`` (Confluent's framing), or as JSON when it is None."""
    from gregor.client import Producer, partition_for_key
    from gregor.pipelines.pageview_avro import avro_values

    os.nice(GENERATOR_NICE)
    config = {
        "bootstrap.servers": bootstrap,
        "linger.ms": 20,
        "batch.size": 512 * 1024,
        "acks": "all",
    }
    with Producer(config) as p:
        count = len(p.partitions_for(topic))
        where: dict[
            bytes, int
        ] = {}  # key -> partition: the default partitioner's choice, once per user
        for k in range(-(-n // cs.CHUNK)):
            table = cs.generate_columns(
                n, users=users, minutes=minutes, jitter_s=jitter_s, seed=seed, chunk=k
            )
            encoded = cs.json_values(table) if schema_id is None else avro_values(table, schema_id)
            values = encoded.to_pylist()
            keys = table.column("user_id").cast("binary").to_pylist()
            if started.value == 0:
                started.value = time.time()
            send = p.send
            for key in set(keys) - where.keys():
                where[key] = partition_for_key(key, count)
            futures = [send(topic, v, key, where[key]) for v, key in zip(values, keys, strict=True)]
            p.flush()
            for f in futures[-1:]:
                f.result(60)
            bad = next((f.exception() for f in futures if f.exception() is not None), None)
            if bad is not None:
                raise bad
            with produced.get_lock():
                produced.value += len(values)
    finished.value = time.time()


@dataclass
class Summary:
    events: int
    seconds: float
    windows: int
    batches: int
    mismatches: list[str] | None  # None: not checked (nothing generated)
    total_seconds: float
    busy_seconds: float = 0.0  # Spark's trigger time of the batches that read events
    produce_seconds: float = 0.0  # the generator's first to last event

    @property
    def processing_rate(self) -> float:
        return self.events / self.busy_seconds if self.busy_seconds else 0.0

    @property
    def rate(self) -> float:
        return self.events / self.seconds if self.seconds else 0.0


def run(
    config: cs.PipelineConfig,
    *,
    master: str = "local[*]",
    say: Callable[[str], None] = print,
    rows: int | None = 30,
    produce: bool = True,
    spark_config: Mapping[str, str] | None = None,
) -> Summary:
    """Produce, process and check ``config.events`` page views; print progress and the result
    table (``rows`` lines, None: all, 0: none). ``produce=False`` generates nothing: the job
    reads what the input topic holds (from its start) and the result is not checked.
    ``spark_config`` is added to the Spark session's settings (``spark.jars``, say)."""
    t0 = time.monotonic()
    out = Path(config.output_dir)
    broker = None
    # without a broker given, the started one serves the registry (below)
    embedded = not config.bootstrap_servers and not config.schema_registry
    why = cs.format_error(replace(config, schema_registry="embedded") if embedded else config)
    if why is not None:
        raise ValueError(why)
    if not config.bootstrap_servers:
        from gregor.launch import BrokerProcess

        say("starting a Gregor broker")
        props = {"log.retention.ms": "-1"}
        serve_registry = config.value_format == "avro" and not config.schema_registry
        if serve_registry:  # the broker serves the registry the page views' schema goes to
            props["schema.registry.listener"] = "http://127.0.0.1:0"
        broker = BrokerProcess(data_dir=out / "broker", config=props).start()
        config = replace(
            config,
            bootstrap_servers=broker.bootstrap_servers,
            schema_registry=broker.wait_schema_registry()
            if serve_registry
            else config.schema_registry,
        )
        say(f"broker listening on {config.bootstrap_servers} (data in {out / 'broker'})")
        if serve_registry:
            say(f"schema registry beside it at {config.schema_registry}")
    spark = None
    gen: Any = None
    try:
        cs.create_topics(config)
        before = cs.input_end_offsets(config)
        older = sum(sum(p.values()) for p in before.values())
        if older and produce:
            config = replace(config, starting_offsets=json.dumps(before))
            say(f"{config.input_topic} already holds {older} records; the job starts after them")
        say(
            f"topics {config.input_topic} ({config.partitions} partitions) and {config.output_topic} ready"
        )
        schema_id = cs.register_schema(config)
        if schema_id is not None:
            say(
                f"page views as Avro: schema id {schema_id} "
                f"(subject {config.input_topic}-value at {config.schema_registry})"
            )
        ctx = mp.get_context("spawn")
        produced, started, finished = ctx.Value("q", 0), ctx.Value("d", 0.0), ctx.Value("d", 0.0)
        if produce:
            gen = ctx.Process(
                target=generate_and_produce,
                args=(
                    config.bootstrap_servers,
                    config.input_topic,
                    config.events,
                    config.users,
                    config.minutes,
                    config.jitter_s,
                    config.seed,
                    produced,
                    started,
                    finished,
                    schema_id,
                ),
                daemon=True,
            )
            gen.start()
            say(f"generator producing {config.events:,} page views to {config.input_topic}")
        else:
            produced.value, started.value = older, time.time()
            say(f"reading the {older:,} records {config.input_topic} holds (nothing generated)")

        from gregor.spark import local_session

        say(f"starting Spark ({master})")
        spark = local_session(
            "gregor-clickstream",
            master=master,
            config={
                "spark.sql.shuffle.partitions": "2",
                "spark.sql.streaming.metricsEnabled": "false",
                "spark.driver.extraJavaOptions": os.environ.get(
                    "GREGOR_PIPELINE_JAVA_OPTIONS", JAVA_OPTIONS
                ),
                **(spark_config or {}),
            },
        )
        spark.sparkContext.setLogLevel("ERROR")
        # PySpark's own Ctrl-C handler calls into the JVM from the signal handler (to cancel
        # the jobs) and fails there with a traceback while a call is in flight; a plain
        # KeyboardInterrupt lets the finally below stop the query, Spark and the broker.
        signal.signal(signal.SIGINT, _on_sigint)
        if _DEBUG:
            say("Spark session ready")
        encode = cs.event_encoder(config, schema_id)
        end_time, batches, busy = _stream(spark, config, gen, produced, say, encode)
        got = cs.parquet_results(spark, config)
        if rows != 0:
            say("")
            say(cs.format_table(got, rows))
            say("")
        problems = None
        if produce:
            problems = cs.check(
                cs.expected_windows(
                    cs.generate_columns(
                        config.events,
                        users=config.users,
                        minutes=config.minutes,
                        jitter_s=config.jitter_s,
                        seed=config.seed,
                    )
                ),
                got,
            )
        seconds = end_time - started.value if started.value else 0.0
        produce_s = finished.value - started.value if finished.value else 0.0
        events = config.events if produce else produced.value
        return Summary(
            events, seconds, len(got), batches, problems, time.monotonic() - t0, busy, produce_s
        )
    finally:
        # Everything this job started ends before it returns, on a Ctrl-C too (SIGINT to the
        # whole process group): no child is left running, or unreaped, after the job.
        if gen is not None:
            if gen.is_alive():
                gen.kill()
            gen.join()
        if spark is not None:
            _stop_spark(spark)
        if broker is not None:
            say("stopping the broker")
            broker.stop()


def _stop_spark(spark: Any) -> None:
    """Stop the session and wait for Spark's JVM to end. PySpark starts the JVM ignoring SIGINT
    and leaves it to end when this process ends (closing its stdin): after a Ctrl-C it would
    outlive the job. Closing the pipe ends it now; the next session starts a new one."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    try:
        spark.stop()
    except Exception:  # noqa: BLE001 - the JVM may be gone already; it is ended below
        pass
    proc = getattr(gateway, "proc", None)
    if proc is None:
        return
    if proc.stdin is not None:
        proc.stdin.close()
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    SparkContext._gateway = None
    SparkContext._jvm = None


def _stream(
    spark: Any,
    config: cs.PipelineConfig,
    gen: Any,
    produced: Any,
    say: Callable[[str], None],
    encode: Callable[[dict], bytes],
) -> tuple[float, int, float]:
    """Run the query until the generated input and the marker are processed; (end time,
    batches, seconds Spark spent in batches that read events)."""
    query = (
        cs.windows_stream(spark, config)
        .writeStream.outputMode("append")
        .foreachBatch(cs.write_batch(config))
        .option("checkpointLocation", config.checkpoint_dir)
        .queryName("pageview_windows")
        .trigger(processingTime="1 second")
        .start()
    )
    if _DEBUG:
        say("query started")
    target: dict | None = None  # the input's end offsets once the generator is done
    marker_target: dict | None = None
    marker_batch = -1
    marker_seen_at = 0.0
    seen = -1
    windows = 0
    read = 0
    busy = 0.0
    try:
        while query.isActive:
            query.awaitTermination(0.5)
            for p in query.recentProgress:
                if p["batchId"] <= seen:
                    continue
                seen = p["batchId"]
                end = _source(p, "endOffset")
                latest = _source(p, "latestOffset")
                read += p.get("numInputRows", 0)
                if p.get("numInputRows", 0):
                    busy += (p.get("durationMs") or {}).get("triggerExecution", 0) / 1000
                windows = _windows_written(config)
                lag = _lag(end, latest)
                wm = (p.get("eventTime") or {}).get("watermark", "-")
                rate = p.get("processedRowsPerSecond") or 0.0
                say(
                    f"batch {seen:>3}: {p.get('numInputRows', 0):>8,} events {rate:>10,.0f} events/s  "
                    f"read {read:>9,}/{produced.value:,}  lag {lag:>8,}  watermark {wm}  "
                    f"windows {windows}"
                )
                if _DEBUG:
                    say(f"  durations {p.get('durationMs')}")
                if marker_target is not None and marker_batch < 0 and end == marker_target:
                    marker_batch, marker_seen_at = seen, time.monotonic()
                elif target is not None and marker_target is None and _fits(config, end, target):
                    marker_target = _produce_marker(config, target, encode)
            if target is None and (gen is None or not gen.is_alive()):
                if gen is not None and gen.exitcode != 0:
                    raise RuntimeError(f"the generator failed (exit code {gen.exitcode})")
                target = cs.input_end_offsets(config)
                if marker_target is None and _fits(config, _last_end(query), target):
                    marker_target = _produce_marker(config, target, encode)
            if marker_batch >= 0 and not query.status["isTriggerActive"]:
                # the batch after the marker's emits the last windows; Spark runs none when
                # nothing is left to close
                if seen > marker_batch or time.monotonic() - marker_seen_at > 10:
                    break
    finally:
        if query.isActive:
            query.stop()
    if query.exception() is not None:
        raise RuntimeError(f"the streaming query failed: {query.exception()}")
    return time.time(), seen + 1, busy


def _fits(config: cs.PipelineConfig, end: Any, target: dict) -> bool:
    """Whether the input left after the last finished batch (``end``), with the marker, fits in
    one batch. Every batch planned from now on starts at ``end`` or later, so once the marker is
    produced the batch that reads it reads everything before it too (a batch admits all of a
    backlog within ``maxOffsetsPerTrigger``), and no event can come after the watermark it moves."""
    if not end:
        return False
    left = sum(
        max(int(o) - int(end.get(t, {}).get(p, 0)), 0)
        for t, parts in target.items()
        for p, o in parts.items()
    )
    return left + 1 < config.max_offsets_per_trigger  # strictly: no float rounding can cut it short


def _produce_marker(
    config: cs.PipelineConfig, target: dict, encode: Callable[[dict], bytes]
) -> dict:
    from gregor.client import Producer

    marker = cs.end_marker(cs.START_MS + config.minutes * 60_000)
    with Producer({"bootstrap.servers": config.bootstrap_servers}) as p:
        meta = p.send(config.input_topic, encode(marker), partition=0).result(60)
    new = json.loads(json.dumps(target))
    new[config.input_topic][str(meta.partition)] = meta.offset + 1
    return new


def _source(progress: dict, key: str) -> Any:
    sources = progress.get("sources") or []
    if not sources or not sources[0].get(key):
        return None
    v = sources[0][key]
    return json.loads(v) if isinstance(v, str) else v


def _last_end(query: Any) -> Any:
    p = query.lastProgress
    return _source(p, "endOffset") if p else None


def _lag(end: Any, latest: Any) -> int:
    if not end or not latest:
        return 0
    return sum(
        max(int(o) - int(end.get(t, {}).get(p, 0)), 0)
        for t, parts in latest.items()
        for p, o in parts.items()
    )


def _windows_written(config: cs.PipelineConfig) -> int:
    import pyarrow.parquet as pq

    path = Path(config.parquet_dir)
    return (
        sum(pq.ParquetFile(f).metadata.num_rows for f in path.glob("batch_id=*/*.parquet"))
        if path.exists()
        else 0
    )


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(
        prog="python -m gregor.pipelines",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument(
        "--bootstrap-servers", "-b", default=None, help="an existing broker (default: start one)"
    )
    ap.add_argument("--master", default="local[*]", help="Spark master, e.g. spark://host:7077")
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--users", type=int, default=300)
    ap.add_argument(
        "--minutes", type=int, default=10, help="event-time span of the generated views"
    )
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--partitions", type=int, default=4, help="partitions of the input topic")
    ap.add_argument("--input-topic", default="pageviews")
    ap.add_argument("--output-topic", default="pageview-windows")
    ap.add_argument("--output-dir", default="gregor-pipeline", help=OUTPUT_DIR_HELP)
    ap.add_argument("--max-offsets-per-trigger", type=int, default=340_000)
    ap.add_argument(
        "--value-format", choices=cs.VALUE_FORMATS, default="avro", help=VALUE_FORMAT_HELP
    )
    ap.add_argument("--schema-registry", default="", metavar="URL", help=SCHEMA_REGISTRY_HELP)
    ap.add_argument("--keep", action="store_true", help=KEEP_HELP)
    ap.add_argument("--rows", type=rows_arg, default=30, help=ROWS_HELP)
    a = ap.parse_args(argv)
    if a.bootstrap_servers and a.value_format == "avro" and not a.schema_registry:
        ap.error(AVRO_NEEDS_REGISTRY)
    try:
        out = output_dir.prepare(a.output_dir, keep=a.keep)
    except output_dir.OutputDirError as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1

    def say(msg: str) -> None:  # one-line messages get the prefix; the result table does not
        stamp = f"{time.monotonic() - _T0:6.1f}s " if _DEBUG else ""
        print(f"[pipeline] {stamp}{msg}" if msg and "\n" not in msg else msg, flush=True)

    config = cs.PipelineConfig(
        a.bootstrap_servers or "",
        input_topic=a.input_topic,
        output_topic=a.output_topic,
        output_dir=str(out.resolve()),
        events=a.events,
        users=a.users,
        minutes=a.minutes,
        seed=a.seed,
        partitions=a.partitions,
        max_offsets_per_trigger=a.max_offsets_per_trigger,
        value_format=a.value_format,
        schema_registry=a.schema_registry,
    )
    try:
        summary = run(config, master=a.master, say=say, rows=a.rows)
    except KeyboardInterrupt:
        print("Aborted!", file=sys.stderr)
        return 1
    except Exception as e:
        if _interrupted:  # the Ctrl-C's consequence, not a failure of its own
            print("Aborted!", file=sys.stderr)
            return 1
        if os.environ.get("GREGOR_DEBUG", "").strip().lower() not in ("", "0", "false", "no"):
            raise
        print(f"Error: {_one_line(e)}", file=sys.stderr)
        return 1
    finally:
        _stop_resource_tracker()
    return report(summary, say)


def _stop_resource_tracker() -> None:
    """End multiprocessing's resource tracker (the generator's spawn started it) and wait for
    it, instead of leaving it to end after this process (it ignores SIGINT)."""
    from multiprocessing import resource_tracker

    stop = getattr(resource_tracker._resource_tracker, "_stop", None)  # Python's own, private
    if stop is not None:
        stop()


def _one_line(exc: BaseException) -> str:
    """An error of the job in one line (``GREGOR_DEBUG=1`` shows the traceback instead). A
    Spark error's message carries the JVM's stack: its first line says what failed."""
    from gregor.client import KafkaError

    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    text = lines[0] if lines else type(exc).__name__
    if isinstance(exc, KafkaError | OSError | RuntimeError):
        return text
    return f"{type(exc).__name__}: {text} (GREGOR_DEBUG=1 shows the traceback)"


def report(s: Summary, say: Callable[[str], None]) -> int:
    """Print the summary and the check; the exit status (1 when a window differs)."""
    for m in (s.mismatches or [])[:20]:
        print(f"  MISMATCH {m}", file=sys.stderr)
    say(
        f"summary: {s.events:,} events in {s.seconds:.1f} s = {s.rate:,.0f} events/s; {s.windows} windows in "
        f"{s.batches} batches; produced in {s.produce_seconds:.1f} s; Spark busy {s.busy_seconds:.1f} s "
        f"({s.processing_rate:,.0f} events/s); {s.total_seconds:.1f} s with start-up"
    )
    if s.mismatches is None:
        say("check: skipped (nothing was generated, so there is no ground truth)")
        return 0
    if s.mismatches:
        say(f"check: {len(s.mismatches)} windows differ from the generator's ground truth")
        return 1
    say(f"check: all {s.windows} windows match the generator's ground truth")
    return 0


__all__ = ["Summary", "generate_and_produce", "main", "report", "run"]
