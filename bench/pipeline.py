"""The main job's sustained throughput, beside Spark running the same query on files.

    .venv/bin/python bench/pipeline.py [--events 1000000] [--master local[*]] [--rounds 3] [--no-peer]

1. The main job (``gregor.pipelines.runner``, what ``bash scripts/run.sh`` runs), twice: with
   Avro page views through the registry its broker serves (the default) and with JSON; the
   generator producing while the Spark streaming query reads, windows written and checked
   exactly. Prints end-to-end events/s (first event produced to last window written) and
   Spark's processing rate (events / the trigger time of the batches that read events), and
   the ratios Avro / JSON.
1b. Each format's whole input topic read by the data source into Spark's no-op sink, the values
   decoded into the page view's columns (Avro typed in the source, JSON with ``from_json``),
   median of ``--rounds``: the decode itself, Avro against JSON (issue 38's goal: Avro not
   slower).
2. The peer: the same events as JSON lines in files, the same query on Spark's own file
   source (``readStream.text``, Trigger.AvailableNow, same batch size): Spark without Kafka,
   without a network and without a Python data source. Its processing rate is the ceiling of
   what the job could reach on this machine; the ratio shows what the Kafka path costs. It
   runs in the job's JVM (PySpark keeps it), so with the job's Java options (C1 only:
   ``gregor.pipelines.runner.JAVA_OPTIONS``).

Prints the machine's load average beside the figures: on a shared machine they move with it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def peer(events: int, work: Path, master: str, per_batch: int) -> tuple[float, float]:
    """(processing seconds, events) of the same query on Spark's file source."""
    from gregor.pipelines import clickstream as cs
    from gregor.spark import local_session

    src = work / "json"
    src.mkdir(parents=True)
    chunks = -(-events // cs.CHUNK)
    for k in range(chunks):
        t = cs.generate_columns(events, chunk=k)
        lines = cs.json_values(t).to_pylist()
        (src / f"part-{k:05d}.json").write_bytes(b"\n".join(lines) + b"\n")
    spark = local_session(
        "gregor-bench-peer", master=master, config={"spark.sql.shuffle.partitions": "2"}
    )
    spark.sparkContext.setLogLevel("ERROR")
    from pyspark.sql import functions as F

    lines = (
        spark.readStream.format("text")
        .option("maxFilesPerTrigger", str(max(per_batch // cs.CHUNK, 1)))
        .load(str(src))
    )
    events_df = (
        lines.select(F.from_json(F.col("value"), cs.event_schema()).alias("e"))
        .select("e.*")
        .withColumn("event_time", F.timestamp_millis(F.col("ts")))
        .withWatermark("event_time", "1 minute")
    )
    windows = events_df.groupBy(F.window("event_time", "1 minute"), F.col("page")).agg(
        F.count(F.lit(1)).alias("views"), F.size(F.collect_set("user_id")).alias("users")
    )
    q = (
        windows.writeStream.outputMode("append")
        .format("noop")
        .option("checkpointLocation", str(work / "peer-cp"))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination()
    busy = (
        sum(
            p["durationMs"].get("triggerExecution", 0)
            for p in q.recentProgress
            if p["numInputRows"]
        )
        / 1000
    )
    n = sum(p["numInputRows"] for p in q.recentProgress)
    spark.stop()
    return busy, n


def source_rates(
    bootstrap: str, registry: str, topics: dict[str, str], master: str, rounds: int
) -> dict[str, list[tuple[int, float]]]:
    """Each format's input topic read whole by the data source into Spark's no-op sink, the
    values decoded into the page view's columns (Avro: ``valueFormat avro``, typed in the
    source; JSON: ``from_json``); (rows, seconds) per round, the formats alternating."""
    import time

    from pyspark.sql import functions as F

    from gregor.pipelines import clickstream as cs
    from gregor.spark import local_session

    spark = local_session(
        "gregor-bench-source", master=master, config={"spark.sql.shuffle.partitions": "2"}
    )
    spark.sparkContext.setLogLevel("ERROR")
    out: dict[str, list[tuple[int, float]]] = {fmt: [] for fmt in topics}
    try:
        for r in range(rounds):
            order = list(topics) if r % 2 == 0 else list(reversed(topics))
            for fmt in order:
                reader = (
                    spark.read.format("gregor")
                    .option("kafka.bootstrap.servers", bootstrap)
                    .option("subscribe", topics[fmt])
                )
                if fmt == "avro":
                    df = (
                        reader.option("valueFormat", "avro")
                        .option("schemaRegistry", registry)
                        .load()
                        .select("value.*")
                    )
                else:
                    df = (
                        reader.load()
                        .select(
                            F.from_json(F.col("value").cast("string"), cs.event_schema()).alias("e")
                        )
                        .select("e.*")
                    )
                t0 = time.perf_counter()
                df.write.format("noop").mode("overwrite").save()
                secs = time.perf_counter() - t0
                out[fmt].append((df.count() if r == 0 else out[fmt][0][0], secs))
    finally:
        spark.stop()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--master", default="local[*]")
    ap.add_argument("--max-offsets-per-trigger", type=int, default=340_000)
    ap.add_argument("--rounds", type=int, default=3, help="rounds of the source-to-noop reads")
    ap.add_argument("--no-peer", action="store_true")
    args = ap.parse_args()
    import statistics

    from gregor.pipelines import clickstream as cs
    from gregor.pipelines.runner import run
    from gregor.testing import BrokerProcess

    work = Path(tempfile.mkdtemp(prefix="gregor-bench-pipeline-"))
    broker = BrokerProcess(
        config={"log.retention.ms": "-1", "schema.registry.listener": "http://127.0.0.1:0"},
        data_dir=work / "broker",
    ).start()
    registry = broker.wait_schema_registry()
    try:
        load0 = os.getloadavg()
        rows = []
        jobs = {}
        for fmt in cs.VALUE_FORMATS:  # avro (the main job's default), then json
            config = cs.PipelineConfig(
                broker.bootstrap_servers,
                input_topic=f"pageviews-{fmt}",
                output_topic=f"windows-{fmt}",
                output_dir=str(work / f"job-{fmt}"),
                events=args.events,
                partitions=4,
                max_offsets_per_trigger=args.max_offsets_per_trigger,
                value_format=fmt,
                schema_registry=registry,
            )
            s = run(
                config,
                master=args.master,
                say=lambda m: print(m, flush=True) if m.startswith("batch") else None,
                rows=0,
            )
            assert not s.mismatches, s.mismatches[:5]
            jobs[fmt] = s
            rows += [
                (f"main job {fmt}, end to end (first event to last window)", s.events, s.seconds),
                (f"main job {fmt}, generator (Gregor producer)", s.events, s.produce_seconds),
                (f"main job {fmt}, Spark processing (busy batches)", s.events, s.busy_seconds),
            ]
        load1 = os.getloadavg()
        rates = source_rates(
            broker.bootstrap_servers,
            registry,
            {fmt: f"pageviews-{fmt}" for fmt in cs.VALUE_FORMATS},
            args.master,
            args.rounds,
        )
        median = {fmt: statistics.median(secs for _, secs in got) for fmt, got in rates.items()}
        for fmt in cs.VALUE_FORMATS:
            n_read = rates[fmt][0][0]
            rows.append((f"source -> noop, {fmt} values to columns (median)", n_read, median[fmt]))
        if not args.no_peer:
            busy, n = peer(args.events, work / "peer", args.master, args.max_offsets_per_trigger)
            rows.append(("peer: same query on Spark's file source (JSON)", n, busy))
        print(
            f"\n{args.events:,} page views per format, windows checked exactly, Spark {args.master}, "
            f"{os.cpu_count()} CPUs, load average {load0[0]:.1f} before, {load1[0]:.1f} after the jobs"
        )
        print(f"{'run':<58} {'events':>10} {'seconds':>8} {'events/s':>10}")
        for name, n, secs in rows:
            print(f"{name:<58} {n:>10,} {secs:>8.1f} {n / secs if secs else 0:>10,.0f}")
        a, j = jobs["avro"], jobs["json"]
        print(
            f"Avro / JSON, Spark processing rate of the job: {a.processing_rate / j.processing_rate:.2f}x"
        )
        print(f"Avro / JSON, end to end: {a.rate / j.rate:.2f}x")
        print(
            "Avro / JSON, source -> noop rate (median of "
            f"{args.rounds}; rounds avro {[round(s, 2) for _, s in rates['avro']]} s, "
            f"json {[round(s, 2) for _, s in rates['json']]} s): {median['json'] / median['avro']:.2f}x"
        )
        if not args.no_peer and rows[-1][2]:
            print(
                f"processing rate of the Avro job vs the peer: {a.processing_rate / (rows[-1][1] / rows[-1][2]):.2f}x"
            )
        print(
            f"with start-up (Spark, check): avro {a.total_seconds:.1f} s, json {j.total_seconds:.1f} s"
        )
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
