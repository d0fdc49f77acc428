"""The main job's sustained throughput, beside Spark running the same query on files.

    .venv/bin/python bench/pipeline.py [--events 1000000] [--master local[*]] [--no-peer]

1. The main job (``gregor.pipelines.runner``, what ``bash scripts/run.sh`` runs): a Gregor
   broker, the generator producing while the Spark streaming query reads, windows written and
   checked exactly. Prints end-to-end events/s (first event produced to last window written)
   and Spark's processing rate (events / the trigger time of the batches that read events).
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


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--master", default="local[*]")
    ap.add_argument("--max-offsets-per-trigger", type=int, default=340_000)
    ap.add_argument("--no-peer", action="store_true")
    args = ap.parse_args()
    from gregor.pipelines import clickstream as cs
    from gregor.pipelines.runner import run

    work = Path(tempfile.mkdtemp(prefix="gregor-bench-pipeline-"))
    try:
        load0 = os.getloadavg()
        config = cs.PipelineConfig(
            "",
            output_dir=str(work / "job"),
            events=args.events,
            partitions=4,
            max_offsets_per_trigger=args.max_offsets_per_trigger,
        )
        s = run(
            config,
            master=args.master,
            say=lambda m: print(m, flush=True) if m.startswith("batch") else None,
            rows=0,
        )
        load1 = os.getloadavg()
        assert not s.mismatches, s.mismatches[:5]
        rows = [
            ("main job, end to end (first event to last window)", s.events, s.seconds),
            ("main job, generator (Gregor producer, concurrent)", s.events, s.produce_seconds),
            ("main job, Spark processing (busy batches)", s.events, s.busy_seconds),
        ]
        if not args.no_peer:
            busy, n = peer(args.events, work / "peer", args.master, args.max_offsets_per_trigger)
            rows.append(("peer: same query on Spark's file source", n, busy))
        print(
            f"\n{args.events:,} page views, {s.windows} windows checked exactly, Spark {args.master}, "
            f"{os.cpu_count()} CPUs, load average {load0[0]:.1f} before, {load1[0]:.1f} after the job"
        )
        print(f"{'run':<52} {'events':>10} {'seconds':>8} {'events/s':>10}")
        for name, n, secs in rows:
            print(f"{name:<52} {n:>10,} {secs:>8.1f} {n / secs if secs else 0:>10,.0f}")
        if not args.no_peer and rows[3][2]:
            print(
                f"processing rate vs the peer: {(s.events / s.busy_seconds) / (rows[3][1] / rows[3][2]):.2f}x"
            )
        print(f"with start-up (broker, Spark, check): {s.total_seconds:.1f} s")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
