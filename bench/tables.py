"""Topics as tables (issue 39): Spark through the table vs through the topic, freshness, and
what translating costs the produce path.

    .venv/bin/python bench/tables.py [--records 2000000] [--partitions 4] [--rounds 3]
                                     [--rates 1,10] [--seconds 20] [--lag-ms 5000]

One Gregor broker process (``gregor.testing.BrokerProcess``, pyiceberg's SQL catalog in its
data directory), confluent-kafka producing, one local SparkSession. In one run:

1. Produce: ``--records`` records of 100 B into a topic with ``iceberg.mode=key_value`` and
   into one without, alternating round by round; records/s of each (median of ``--rounds``)
   and the median of the rounds' on/off ratios (goal >= 0.8; a round's two topics are
   produced back to back, so the ratio does not see the machine's drift between rounds).
   Before the first round a warm-up table topic is produced to and translated: the broker's
   first table imports pyarrow and pyiceberg and makes the catalog, once in its life.
   The table topics have ``iceberg.target.lag.ms`` of ``--produce-lag-ms`` (10 s, Redpanda's
   least), and each table round is followed by a wait until its table has every record, so
   no round runs beside an earlier round's translation; their maintenance interval is an
   hour, so no pass compacts them beside the later phases.
2. Spark: when the table has caught up, the same aggregate (count and total value bytes per
   partition) over the table's topic three ways, alternating round by round: through the table
   (``gregor.spark.tables.read_table``: pyiceberg plans, Spark's Parquet reader reads), through
   the ``gregor`` data source (the broker, batch by batch), and over a plain Parquet directory
   of the same rows that Spark wrote itself (its own reader, no catalog). Seconds of each
   (median of rounds) and the ratios table/source (goal >= 2.5) and table/Parquet (goal >= 0.8).
3. Freshness: at each of ``--rates`` MB/s of 1 KB records for ``--seconds`` into a table topic
   with ``iceberg.target.lag.ms=--lag-ms``, the time from each record's send to the first poll
   (every 100 ms) that finds its offset committed to the table; p50, p95 and max.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def produce(bootstrap: str, topic: str, n: int, size: int = 100) -> float:
    """Records/s of ``n`` records of ``size`` bytes, flushed (acks=all)."""
    import confluent_kafka

    p = confluent_kafka.Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    value = b"x" * size
    t = time.perf_counter()
    for _ in range(n):
        while True:
            try:
                p.produce(topic, value)
                break
            except BufferError:
                p.poll(0.005)
    assert p.flush(120) == 0
    return n / (time.perf_counter() - t)


def create(bootstrap: str, topic: str, partitions: int, **configs: str) -> None:
    from gregor.client import AdminClient, NewTopic

    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1, configs=configs)], raise_on_error=True)


def ends(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    import confluent_kafka

    c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-ends"})
    try:
        return {
            p: c.get_watermark_offsets(
                confluent_kafka.TopicPartition(topic, p), timeout=30, cached=False
            )[1]
            for p in range(partitions)
        }
    finally:
        c.close()


class TableOffsets:
    """The committed offsets of a topic's table, read from its current snapshot."""

    def __init__(self, data_dir: Path, topic: str) -> None:
        from gregor.tables.settings import catalog_settings

        self.settings = catalog_settings({}, str(data_dir))
        self.topic = topic

    def __call__(self) -> dict[int, int]:
        from pyiceberg.catalog import load_catalog

        from gregor.tables.offsets import table_offsets

        try:
            catalog = load_catalog(self.settings.name, **self.settings.load_properties())
            table = catalog.load_table((self.settings.namespace, self.topic))
        except Exception:  # noqa: BLE001 - not created yet
            return {}
        return table_offsets(table)


def wait_caught_up(offsets: TableOffsets, end: dict[int, int]) -> None:
    while any(offsets().get(p, 0) < e for p, e in end.items() if e > 0):
        time.sleep(0.2)


def aggregate(frame: Any) -> list[tuple[int, int, int]]:
    from pyspark.sql import functions as F

    rows = (
        frame.groupBy("partition")
        .agg(F.count("*").alias("n"), F.sum(F.length("value")).alias("bytes"))
        .collect()
    )
    return sorted((r["partition"], r["n"], r["bytes"]) for r in rows)


def spark_rounds(
    spark: Any, bootstrap: str, topic: str, parquet_dir: Path, rounds: int
) -> dict[str, list[float]]:
    from gregor.spark.tables import read_table

    def through_table() -> Any:
        return read_table(spark, topic, bootstrap_servers=bootstrap)

    def through_source() -> Any:
        return (
            spark.read.format("gregor")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .load()
        )

    def plain_parquet() -> Any:
        return spark.read.parquet(str(parquet_dir))

    ways = {"table": through_table, "source": through_source, "parquet": plain_parquet}
    through_source().select("key", "value", "partition", "offset", "timestamp").write.parquet(
        str(parquet_dir)
    )
    expected = aggregate(through_source())
    for way in ways.values():  # warm-up, not counted; every way gives the same answer
        assert aggregate(way()) == expected, "the three reads disagree"
    times: dict[str, list[float]] = {k: [] for k in ways}
    for r in range(rounds):
        order = list(ways)[r % 3 :] + list(ways)[: r % 3]
        for name in order:
            t = time.perf_counter()
            aggregate(ways[name]())
            times[name].append(time.perf_counter() - t)
    return times


def compacted_rounds(
    spark: Any, bootstrap: str, topic: str, data_dir: Path, rounds: int
) -> tuple[tuple[int, int], list[float]]:
    """The table as the broker's own maintenance keeps it: the topic's
    ``iceberg.maintenance.interval.ms`` set to 5 s (the translators restart with it, and
    partition 0's runs a pass at once: hour partitions of ``iceberg.compaction.min.input.files``
    small files or more rewritten into one), then read through the table again:
    ((files before, files after), seconds a round)."""
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
    from pyiceberg.catalog import load_catalog

    from gregor.spark.tables import read_table
    from gregor.tables.settings import catalog_settings

    settings = catalog_settings({}, str(data_dir))
    catalog = load_catalog(settings.name, **settings.load_properties())

    def table() -> Any:
        return catalog.load_table((settings.namespace, topic))

    def data_files() -> int:
        return len(list(table().scan().plan_files()))

    before = data_files()
    entry = ConfigEntry(
        "iceberg.maintenance.interval.ms", "5000", incremental_operation=AlterConfigOpType.SET
    )
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[entry])
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.incremental_alter_configs([resource])[resource].result(30)
    while (
        table().current_snapshot().summary.additional_properties.get("gregor.maintenance")
        != "compaction"
    ):
        time.sleep(0.5)
    after = data_files()
    aggregate(read_table(spark, topic, bootstrap_servers=bootstrap))  # warm-up
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        aggregate(read_table(spark, topic, bootstrap_servers=bootstrap))
        times.append(time.perf_counter() - t)
    return (before, after), times


def freshness(
    bootstrap: str, data_dir: Path, topic: str, mb_per_s: float, seconds: float
) -> list[float]:
    """Seconds from send to visible in the table, of every record sent."""
    import confluent_kafka

    offsets = TableOffsets(data_dir, topic)
    sent: list[tuple[int, int, float]] = []  # (partition, offset, send time)
    seen: list[float] = []
    done = threading.Event()

    def delivered(err: Any, msg: Any, at: float) -> None:
        if err is None:
            sent.append((msg.partition(), msg.offset(), at))

    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    size = 1024
    per_s = mb_per_s * 1_000_000 / size
    polls: list[tuple[float, dict[int, int]]] = []

    def poller() -> None:
        while not done.is_set():
            polls.append((time.monotonic(), offsets()))
            time.sleep(0.1)

    thread = threading.Thread(target=poller, daemon=True)
    thread.start()
    start = time.monotonic()
    i = 0
    values = [os.urandom(size) for _ in range(256)]
    while (now := time.monotonic()) - start < seconds:
        due = int((now - start) * per_s)
        while i < due:
            at = time.monotonic()
            p.produce(
                topic,
                values[i % 256],
                on_delivery=lambda err, msg, at=at: delivered(err, msg, at),
            )
            i += 1
        p.poll(0)
        time.sleep(0.001)
    p.flush(60)
    # wait until everything sent is in the table
    last = {}
    for part, off, _ in sent:
        last[part] = max(last.get(part, -1), off + 1)
    while not polls or any(polls[-1][1].get(k, 0) < v for k, v in last.items()):
        time.sleep(0.1)
    done.set()
    thread.join()
    import bisect

    times = [when for when, _ in polls]
    by_part = {k: [c.get(k, 0) for _, c in polls] for k in last}  # non-decreasing per partition
    for part, off, at in sent:
        i = bisect.bisect_right(by_part[part], off)  # the first poll whose offset is > off
        if i < len(times):
            seen.append(times[i] - at)
    return seen


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rates", default="1,10", help="MB/s of the freshness runs")
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--lag-ms", type=int, default=5000, help="iceberg.target.lag.ms (freshness)")
    ap.add_argument(
        "--produce-lag-ms", type=int, default=10_000, help="iceberg.target.lag.ms (produce)"
    )
    ap.add_argument("--master", default="local[2]")
    args = ap.parse_args()

    from gregor.spark import local_session
    from gregor.testing import BrokerProcess

    work = Path(tempfile.mkdtemp(prefix="gregor-bench-tables-"))
    try:
        with BrokerProcess(data_dir=work / "broker", config={"log.retention.ms": "-1"}) as broker:
            bs = broker.bootstrap_servers
            data_dir = broker.data_dir / "logs"
            n, parts = args.records, args.partitions

            # 1. produce with the table on and off, after a first table topic has caught up:
            # the broker's first table imports pyarrow and pyiceberg and makes the catalog
            # (a second of CPU, once in a broker's life), which is no round's produce cost
            create(
                bs,
                "warm-up",
                parts,
                **{
                    "iceberg.mode": "key_value",
                    "iceberg.target.lag.ms": "1000",
                    "iceberg.maintenance.interval.ms": "3600000",
                },
            )
            produce(bs, "warm-up", 10_000)
            wait_caught_up(TableOffsets(data_dir, "warm-up"), ends(bs, "warm-up", parts))
            on_rates, off_rates = [], []
            for r in range(args.rounds):
                lag = str(args.produce_lag_ms)
                create(
                    bs,
                    f"on-{r}",
                    parts,
                    **{
                        "iceberg.mode": "key_value",
                        "iceberg.target.lag.ms": lag,
                        # no maintenance pass (5 minutes by default) compacting these tables
                        # beside the later phases' Spark rounds and freshness topic
                        "iceberg.maintenance.interval.ms": "3600000",
                    },
                )
                create(bs, f"off-{r}", parts)
                pair = [("on", f"on-{r}"), ("off", f"off-{r}")]
                for kind, topic in pair if r % 2 == 0 else pair[::-1]:
                    rate = produce(bs, topic, n // args.rounds)
                    (on_rates if kind == "on" else off_rates).append(rate)
                    if kind == "on":  # the next round starts on an idle broker
                        wait_caught_up(TableOffsets(data_dir, topic), ends(bs, topic, parts))
            on, off = statistics.median(on_rates), statistics.median(off_rates)
            # each round's on/off pair runs back to back, so its ratio does not see the
            # machine's drift between rounds (off alone ranged 0.8-1.4 M records/s run to run)
            pair_ratios = [a / b for a, b in zip(on_rates, off_rates, strict=True)]
            print(
                f"produce 100 B, {n // args.rounds:,} records a round, median of {args.rounds}, "
                f"iceberg.target.lag.ms={args.produce_lag_ms}:"
            )
            print(
                f"  table on  {on:12,.0f} records/s   rounds: {', '.join(f'{x:,.0f}' for x in on_rates)}"
            )
            print(
                f"  table off {off:12,.0f} records/s   rounds: {', '.join(f'{x:,.0f}' for x in off_rates)}"
            )
            print(
                f"  on / off  {statistics.median(pair_ratios):12.2f}   (goal >= 0.8; median of the "
                f"rounds' ratios: {', '.join(f'{x:.2f}' for x in pair_ratios)}; "
                f"ratio of the medians {on / off:.2f})"
            )

            # 2. Spark: through the table, through the topic, plain Parquet
            topic = "spark"
            create(  # maintenance later (compacted_rounds): the table as translated first
                bs,
                topic,
                parts,
                **{
                    "iceberg.mode": "key_value",
                    "iceberg.target.lag.ms": "1000",
                    "iceberg.maintenance.interval.ms": "3600000",
                },
            )
            produce(bs, topic, n)
            wait_caught_up(TableOffsets(data_dir, topic), ends(bs, topic, parts))
            spark = local_session("bench-tables", master=args.master)
            spark.sparkContext.setLogLevel("ERROR")
            try:
                times = spark_rounds(spark, bs, topic, work / "plain.parquet", args.rounds)
                files, compacted = compacted_rounds(spark, bs, topic, data_dir, args.rounds)
            finally:
                spark.stop()
            med = {k: statistics.median(v) for k, v in times.items()}
            print(f"\nSpark ({args.master}), count and value bytes per partition of {n:,} records:")
            for k in ("table", "source", "parquet"):
                print(
                    f"  {k:8} {med[k]:7.2f} s  {n / med[k]:12,.0f} records/s   rounds: "
                    + ", ".join(f"{x:.2f}" for x in times[k])
                )
            print(f"  table / source   {med['source'] / med['table']:5.2f}x  (goal >= 2.5)")
            print(f"  table / Parquet  {med['parquet'] / med['table']:5.2f}   (goal >= 0.8)")
            after = statistics.median(compacted)
            print(
                f"  the table as translated had {files[0]} data files; the broker's maintenance "
                f"compacted it to {files[1]}:"
            )
            print(
                f"  table, compacted {after:7.2f} s  {n / after:12,.0f} records/s   rounds: "
                + ", ".join(f"{x:.2f}" for x in compacted)
            )
            print(f"  compacted table / source   {med['source'] / after:5.2f}x  (goal >= 2.5)")
            print(f"  compacted table / Parquet  {med['parquet'] / after:5.2f}   (goal >= 0.8)")

            # 3. freshness
            print(f"\nfreshness, iceberg.target.lag.ms={args.lag_ms}, 1 KB records:")
            for rate in (float(x) for x in args.rates.split(",")):
                t = f"fresh-{rate:g}"
                create(
                    bs,
                    t,
                    parts,
                    **{"iceberg.mode": "key_value", "iceberg.target.lag.ms": str(args.lag_ms)},
                )
                seen = freshness(bs, data_dir, t, rate, args.seconds)
                print(
                    f"  {rate:5g} MB/s  {len(seen):8,} records  p50 {pct(seen, 0.5):6.2f} s  "
                    f"p95 {pct(seen, 0.95):6.2f} s  max {max(seen):6.2f} s"
                )

    finally:  # the broker's logs and the tables: gigabytes at 10 M records
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
