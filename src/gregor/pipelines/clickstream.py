"""The reference pipeline: per-page views and distinct users over event-time windows.

A generator writes page views to an input topic (key: user id), by default as Confluent-framed
Avro records of the ``PageView`` schema registered in a schema registry
(:mod:`gregor.pipelines.pageview_avro`), or, with ``value_format="json"``, as JSON::

    {"event_id": 17, "user_id": "u042", "page": "/products/3", "ts": 1767225612345,
     "referrer": "search", "duration_ms": 5120}

A Spark Structured Streaming job reads them through the ``gregor`` data source (Avro as typed
columns, ``valueFormat avro``; JSON parsed with ``from_json``), takes ``ts`` as event time with
a watermark, and counts views and distinct users per
page in tumbling windows. Windows are emitted once the watermark has passed them (append
mode) and each micro-batch goes to two places: the output topic (one JSON record per window,
key: page) and Parquet files under ``<output>/windows/batch_id=N`` (overwritten whole when a
batch is replayed after a crash, so the Parquet side holds every window exactly once).

Events arrive out of order by up to ``jitter_s`` seconds, less than the watermark delay, so no
event is dropped as late. The generator ends with an end-of-stream marker whose event time is
far enough ahead to close every window; its own window never closes, so it is never written. Everything is
deterministic for a seed, and :func:`expected_windows` computes the exact answer from the
generated events, which :func:`check` compares with what the job wrote.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gregor.pipelines import pageview_avro
from gregor.pipelines.generator import (
    CHUNK,
    END_PAGE,
    PAGES,
    REFERRERS,
    START_MS,
    end_marker,
    generate_columns,
    generate_events,
    json_values,
)

VALUE_FORMATS = ("avro", "json")


@dataclass(frozen=True)
class PipelineConfig:
    bootstrap_servers: str
    input_topic: str = "pageviews"
    output_topic: str = "pageview-windows"
    output_dir: str = "gregor-pipeline"
    events: int = 20000
    users: int = 300
    minutes: int = 10
    window: str = "1 minute"
    watermark: str = "1 minute"
    jitter_s: int = 20
    seed: int = 7
    partitions: int = 3
    max_offsets_per_trigger: int = 5000
    starting_offsets: str = "earliest"  # or Spark's JSON form, to skip older input
    #: The streaming source: Gregor's data source, or "kafka", Spark's own connector (its jars on
    #: spark.jars: bench/spark.py runs the job with each; JSON values only).
    source_format: str = "gregor"
    #: The input's values: "avro" through ``schema_registry`` (subject ``<input_topic>-value``)
    #: or "json".
    value_format: str = "avro"
    schema_registry: str = ""

    @property
    def parquet_dir(self) -> str:
        return str(Path(self.output_dir) / "windows")

    @property
    def checkpoint_dir(self) -> str:
        return str(Path(self.output_dir) / "checkpoint")


def format_error(config: PipelineConfig) -> str | None:
    """Why the config's value format cannot run, or None."""
    if config.value_format not in VALUE_FORMATS:
        return (
            f"value format must be one of {', '.join(VALUE_FORMATS)}, not {config.value_format!r}"
        )
    if config.value_format == "avro" and not config.schema_registry:
        return (
            "Avro page views need the cluster's schema registry: give its URL "
            "(--schema-registry URL), or --value-format json"
        )
    if config.value_format == "avro" and config.source_format != "gregor":
        return "Spark's own Kafka connector reads Avro only with spark-avro: use the json format"
    return None


def register_schema(config: PipelineConfig) -> int | None:
    """For Avro, the ``PageView`` schema's id, registered under the input topic's value subject
    (the id it has when already there); None for JSON."""
    why = format_error(config)
    if why is not None:
        raise ValueError(why)
    if config.value_format != "avro":
        return None
    return pageview_avro.register(config.schema_registry, config.input_topic)


def event_encoder(config: PipelineConfig, schema_id: int | None = None) -> Callable[[dict], bytes]:
    """One page view (a dict) as the input topic's value in the config's format (for Avro with
    ``schema_id``, registered first when not given)."""
    if config.value_format == "json":
        return lambda e: json.dumps(e, separators=(",", ":")).encode()
    sid = register_schema(config) if schema_id is None else schema_id
    assert sid is not None
    return lambda e: pageview_avro.avro_record(e, sid)


def produce_events(
    bootstrap_servers: str,
    topic: str,
    events: Iterable[dict],
    encode: Callable[[dict], bytes] | None = None,
) -> int:
    """Produce ``events`` to ``topic``, each encoded by ``encode`` (default: JSON)."""
    from gregor.client import Producer

    to_bytes = encode or (lambda e: json.dumps(e, separators=(",", ":")).encode())

    n = 0
    with Producer(
        {"bootstrap.servers": bootstrap_servers, "linger.ms": 10, "compression.type": "lz4"}
    ) as p:
        futures = []
        for e in events:
            key = e["user_id"].encode() or None
            # a keyless record (the end marker) goes to partition 0, not to a sticky random one,
            # so that the same input always lands in the same partitions
            futures.append(p.send(topic, to_bytes(e), key, None if key else 0))
            n += 1
        p.flush()
        for f in futures:
            f.result(60)
    return n


def create_topics(config: PipelineConfig) -> None:
    from gregor.client import AdminClient, NewTopic

    with AdminClient({"bootstrap.servers": config.bootstrap_servers}) as admin:
        existing = admin.list_topics()
        new = [
            NewTopic(name, parts)  # the broker's default.replication.factor (3 in a cluster, say)
            for name, parts in ((config.input_topic, config.partitions), (config.output_topic, 1))
            if name not in existing
        ]
        if new:
            admin.create_topics(new, raise_on_error=True)


# --- the ground truth ---


def expected_windows(
    events: Any, window_ms: int = 60_000
) -> dict[tuple[int, str], tuple[int, int]]:
    """(window start ms, page) -> (views, distinct users), from the generated events (a list
    of dicts, or a ``pyarrow.Table`` of :func:`generate_columns`, counted in Arrow)."""
    if not isinstance(events, list | tuple):
        return _expected_from_table(events, window_ms)
    views: dict[tuple[int, str], int] = {}
    users: dict[tuple[int, str], set[str]] = {}
    for e in events:
        if e["page"] == END_PAGE:
            continue
        k = (e["ts"] // window_ms * window_ms, e["page"])
        views[k] = views.get(k, 0) + 1
        users.setdefault(k, set()).add(e["user_id"])
    return {k: (views[k], len(users[k])) for k in views}


def _expected_from_table(table: Any, window_ms: int) -> dict[tuple[int, str], tuple[int, int]]:
    import pyarrow as pa
    import pyarrow.compute as pc

    table = table.filter(pc.not_equal(table.column("page"), END_PAGE))
    start = pc.multiply(pc.divide(table.column("ts"), window_ms), window_ms)
    t = pa.table({"start": start, "page": table.column("page"), "user_id": table.column("user_id")})
    agg = t.group_by(["start", "page"]).aggregate(
        [("user_id", "count"), ("user_id", "count_distinct")]
    )
    return {
        (s, p): (v, u)
        for s, p, v, u in zip(
            agg.column("start").to_pylist(),
            agg.column("page").to_pylist(),
            agg.column("user_id_count").to_pylist(),
            agg.column("user_id_count_distinct").to_pylist(),
            strict=True,
        )
    }


# --- the Spark job ---


def event_schema() -> Any:
    from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

    return StructType(
        [
            StructField("event_id", LongType()),
            StructField("user_id", StringType()),
            StructField("page", StringType()),
            StructField("ts", LongType()),
            StructField("referrer", StringType()),
            StructField("duration_ms", IntegerType()),
        ]
    )


def windows_stream(spark: Any, config: PipelineConfig) -> Any:
    """The streaming DataFrame of closed windows: window_start, window_end, page, views, users."""
    from pyspark.sql import functions as F

    why = format_error(config)
    if why is not None:
        raise ValueError(why)
    reader = (
        spark.readStream.format(config.source_format)
        .option("kafka.bootstrap.servers", config.bootstrap_servers)
        .option("subscribe", config.input_topic)
        .option("startingOffsets", config.starting_offsets)
        .option("maxOffsetsPerTrigger", str(config.max_offsets_per_trigger))
    )
    if config.value_format == "avro":  # typed columns, decoded in the data source
        read = reader.option("valueFormat", "avro").option("schemaRegistry", config.schema_registry)
        parsed = read.load().select("value.*")
    else:
        parsed = (
            reader.load()
            .select(F.from_json(F.col("value").cast("string"), event_schema()).alias("e"))
            .select("e.*")
        )
    events = parsed.withColumn("event_time", F.timestamp_millis(F.col("ts"))).withWatermark(
        "event_time", config.watermark
    )
    # The end marker is not filtered out: Spark would push that filter below the watermark and
    # the marker would no longer advance it. Its own window lies beyond the watermark it sets,
    # so it is never emitted.
    return (
        events.groupBy(F.window("event_time", config.window), F.col("page"))
        .agg(F.count(F.lit(1)).alias("views"), F.size(F.collect_set("user_id")).alias("users"))
        .select(
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            "page",
            "views",
            "users",
        )
    )


def write_batch(config: PipelineConfig) -> Callable[[Any, int], None]:
    """The foreachBatch function: one micro-batch of windows to Parquet and to the output topic.

    A batch holds only the windows the watermark closed (a few dozen rows), so they are
    collected to the driver in one Spark job and written from there: a Parquet file under
    ``batch_id=N`` (replaced whole when a batch is replayed, so the Parquet side holds every
    window once) and one JSON record per window on the output topic (key: page).
    """

    def sink(df: Any, batch_id: int) -> None:
        from pyspark.sql import functions as F

        rows = df.select(
            F.unix_millis("window_start"), F.unix_millis("window_end"), "page", "views", "users"
        ).collect()
        if rows:
            write_windows(config, batch_id, [tuple(r) for r in rows])

    return sink


def write_windows(
    config: PipelineConfig, batch_id: int, windows: list[tuple[int, int, str, int, int]]
) -> None:
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    from gregor.client import Producer

    d = Path(config.parquet_dir) / f"batch_id={batch_id}"
    tmp = Path(config.parquet_dir) / f".batch_id={batch_id}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    ts = pa.timestamp("us", tz="UTC")
    table = pa.table(
        {
            "window_start": pa.array([w[0] * 1000 for w in windows], ts),
            "window_end": pa.array([w[1] * 1000 for w in windows], ts),
            "page": pa.array([w[2] for w in windows], pa.string()),
            "views": pa.array([w[3] for w in windows], pa.int64()),
            "users": pa.array([w[4] for w in windows], pa.int32()),
        }
    )
    pq.write_table(table, tmp / "part-00000.parquet")
    shutil.rmtree(d, ignore_errors=True)
    tmp.rename(d)
    with Producer({"bootstrap.servers": config.bootstrap_servers, "linger.ms": 5}) as p:
        futures = [
            p.send(
                config.output_topic,
                json.dumps(
                    {
                        "window_start": _iso(w[0]),
                        "window_end": _iso(w[1]),
                        "page": w[2],
                        "views": w[3],
                        "users": w[4],
                    },
                    separators=(",", ":"),
                ).encode(),
                w[2].encode(),
            )
            for w in windows
        ]
        p.flush()
        for f in futures:
            f.result(60)


def run_job(
    spark: Any,
    config: PipelineConfig,
    *,
    drain: bool = True,
    on_progress: Callable[[dict], None] | None = None,
    poll_s: float = 0.5,
    timeout_s: float = 3600.0,
) -> Any:
    """Run the streaming query; with ``drain``, stop once the input present at the start is
    processed and the windows it closes are written.

    Trigger.AvailableNow would stop right after the batch that reads the last event, before
    the no-data batch in which the advanced watermark emits the last windows, so draining
    runs a processing-time trigger and stops after the batch that follows the one reaching the
    input's end offsets (or a few seconds later when Spark has nothing more to run).
    """
    target = _input_end_offsets(config) if drain else None
    query = (
        windows_stream(spark, config)
        .writeStream.outputMode("append")
        .foreachBatch(write_batch(config))
        .option("checkpointLocation", config.checkpoint_dir)
        .queryName("pageview_windows")
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    seen = -1
    reached: float | None = None  # when a batch reached the target offsets
    reached_batch = -1
    deadline = time.monotonic() + timeout_s
    try:
        while query.isActive:
            query.awaitTermination(poll_s)
            for p in _new_progress(query, seen):
                seen = p["batchId"]
                if on_progress is not None:
                    on_progress(p)
                if target is not None and reached is None and _source_end(p) == target:
                    reached, reached_batch = time.monotonic(), seen
            if reached is not None and not query.status["isTriggerActive"]:
                # the batch after the one that read the last input emits the closed windows;
                # Spark runs none when no window is left to close
                if seen > reached_batch or time.monotonic() - reached > 10:
                    break
            if time.monotonic() > deadline:
                raise TimeoutError(f"the pipeline did not finish in {timeout_s}s")
    except KeyboardInterrupt:
        pass
    finally:
        if query.isActive:
            query.stop()
    if query.exception() is not None:
        raise RuntimeError(f"the streaming query failed: {query.exception()}")
    return query


def input_end_offsets(config: PipelineConfig) -> dict:
    """The input topic's end offsets now, in Spark's JSON form (``{"topic": {"0": n}}``)."""
    return _input_end_offsets(config)


def _input_end_offsets(config: PipelineConfig) -> dict:
    from gregor.client import AdminClient
    from gregor.client.bulk import end_offsets, shared_client
    from gregor.spark.options import offsets_json

    with AdminClient({"bootstrap.servers": config.bootstrap_servers}) as admin:
        desc = admin.describe_topics([config.input_topic])[config.input_topic]
    from gregor.client import TopicPartition

    tps = [TopicPartition(config.input_topic, p.partition) for p in desc.partitions]
    ends = end_offsets(shared_client({"bootstrap.servers": config.bootstrap_servers}), tps)
    return offsets_json(ends)


def _source_end(progress: dict) -> Any:
    sources = progress.get("sources") or []
    if not sources or not sources[0].get("endOffset"):
        return None
    end = sources[0]["endOffset"]
    return json.loads(end) if isinstance(end, str) else end


def _new_progress(query: Any, seen: int) -> Iterator[dict]:
    for p in query.recentProgress:
        if p["batchId"] > seen:
            yield p


# --- results ---


def parquet_results(spark: Any, config: PipelineConfig) -> dict[tuple[int, str], tuple[int, int]]:
    """The windows in the Parquet output (read with pyarrow; ``spark`` is not needed)."""
    import pyarrow.parquet as pq

    path = Path(config.parquet_dir)
    out: dict[tuple[int, str], tuple[int, int]] = {}
    for f in sorted(path.glob("batch_id=*/*.parquet")) if path.exists() else []:
        t = pq.read_table(f)
        for start, page, views, users in zip(
            t.column("window_start").cast("int64").to_pylist(),
            t.column("page").to_pylist(),
            t.column("views").to_pylist(),
            t.column("users").to_pylist(),
            strict=True,
        ):
            k = (start // 1000, page)
            if k in out:
                raise AssertionError(f"window {k} written twice")
            out[k] = (views, users)
    return out


def topic_results(spark: Any, config: PipelineConfig) -> list[dict]:
    df = (
        spark.read.format("gregor")
        .option("kafka.bootstrap.servers", config.bootstrap_servers)
        .option("subscribe", config.output_topic)
        .load()
    )
    return [json.loads(r.value) for r in df.select("value").collect()]


def check(expected: dict, got: dict) -> list[str]:
    """Differences between the ground truth and the job's windows (empty when they match)."""
    problems = []
    for k in sorted(set(expected) | set(got)):
        if expected.get(k) != got.get(k):
            problems.append(f"{_iso(k[0])} {k[1]}: expected {expected.get(k)}, got {got.get(k)}")
    return problems


def format_table(results: dict[tuple[int, str], tuple[int, int]], limit: int | None = None) -> str:
    rows = sorted(results.items())
    header = f"{'window start (UTC)':<21} {'page':<13} {'views':>6} {'users':>6}"
    lines = [header, "-" * len(header)]
    shown = rows if limit is None else rows[:limit]
    for (start, page), (views, users) in shown:
        lines.append(f"{_iso(start):<21} {page:<13} {views:>6} {users:>6}")
    if limit is not None and len(rows) > limit:
        lines.append(f"... {len(rows) - limit} more rows")
    return "\n".join(lines)


def _ms(t: Any) -> int:
    import datetime as dt

    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.UTC)
    return int(t.timestamp() * 1000)


def _iso(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms / 1000))


__all__ = [
    "CHUNK",
    "END_PAGE",
    "PAGES",
    "REFERRERS",
    "START_MS",
    "VALUE_FORMATS",
    "PipelineConfig",
    "event_encoder",
    "format_error",
    "register_schema",
    "generate_columns",
    "json_values",
    "check",
    "create_topics",
    "end_marker",
    "expected_windows",
    "format_table",
    "generate_events",
    "input_end_offsets",
    "parquet_results",
    "produce_events",
    "run_job",
    "topic_results",
]
