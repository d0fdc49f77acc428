"""Spark batch read throughput: the gregor data source beside Spark's own Kafka connector,
Parquet and librdkafka.

    .venv/bin/python bench/spark.py [--records 5000000] [--partitions 4] [--master local[*]]

Loads N records with 100-byte values into a topic of a Gregor broker (confluent-kafka
producer), then times, in one run and on one SparkSession:

1. the gregor source into Spark's no-op sink (``format("noop")``), all columns;
2. the gregor source into Parquet (this writes the file used next);
3. Spark reading that Parquet file into the no-op sink: the upper bound, Spark's own
   vectorized reader with no network and no Python;
4. a confluent-kafka (librdkafka) consumer reading the whole topic in this process;
5. the client's bulk path alone (``RangeReader``, one thread, no Spark);
6. a Python data source that yields ready-made Arrow batches of the same shape into the
   no-op sink and into Parquet: what Spark's Python Data Source API itself can carry on this
   machine, the ceiling for any Python source (no network, no decoding);
7. the same prebuilt source, where each task first takes its partition's log file over a
   loopback TCP connection (``sendfile`` from a thread of this process into a blocking
   ``recv_into``, batch by batch) and drops the bytes: the ceiling for a source that has to
   move the records from another process on this machine, but with no broker and no decoding.

8. Spark's own Kafka connector (``spark-sql-kafka-0-10``, the JVM source Spark users pick;
   ``scripts/kafka.sh fetch-spark``) reading the same Gregor topic into the no-op sink and into
   Parquet: the peer. Then the reference pipeline (``gregor.pipelines``, ``--pipeline-events``
   page views, its own broker and session) runs once with each source; ``--no-jvm-peer`` skips
   both.

The Spark runs alternate round by round in a rotating order, after a warm-up round that is not
counted (the machine drifts between runs, and the JVM compiles as it goes); each figure is the
best of ``--repeat`` rounds (five unless told). Prints records/s, ratios to the Parquet upper
bound, and the gregor source's ratio to each ceiling, from the best runs and round by round
with the rounds' median (one slow round of either side moves only its own ratio). Run with
``GREGOR_NO_EXTENSIONS=1`` for the pure-Python record walk.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def load(bootstrap: str, topic: str, n: int) -> float:
    import confluent_kafka

    p = confluent_kafka.Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "compression.type": "none",
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    value = b"x" * 100
    t = time.perf_counter()
    for _ in range(n):
        while True:
            try:
                p.produce(topic, value)
                break
            except BufferError:
                p.poll(0.005)
    p.flush()
    return time.perf_counter() - t


def best(fn, repeat: int) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def confluent_read(bootstrap: str, topic: str, partitions: int, n: int) -> float:
    import confluent_kafka

    c = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{time.time()}",
            "enable.auto.commit": False,
            "fetch.max.bytes": 52428800,
            "max.partition.fetch.bytes": 8388608,
        }
    )
    c.assign(
        [
            confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
            for p in range(partitions)
        ]
    )
    got = 0
    t = time.perf_counter()
    while got < n:
        for m in c.consume(10000, 1.0):
            if m.error() is None:
                got += 1
    elapsed = time.perf_counter() - t
    c.close()
    return elapsed


def bulk_read(bootstrap: str, topic: str, partitions: int, n: int) -> float:
    from gregor.client import TopicPartition
    from gregor.client.bulk import RangeReader, end_offsets, shared_client

    client = shared_client({"bootstrap.servers": bootstrap})
    ends = end_offsets(client, [TopicPartition(topic, p) for p in range(partitions)])
    t = time.perf_counter()
    got = 0
    for p in range(partitions):
        for batch in RangeReader(client, topic, p, 0, ends[TopicPartition(topic, p)]):
            got += batch.num_rows
    assert got == n, got
    return time.perf_counter() - t


class LogServer:
    """Serves byte ranges of files over loopback TCP with ``sendfile``: a request is a file
    number, an offset and a length (three big-endian int64), answered with exactly those bytes."""

    def __init__(self, files: list[Path]) -> None:
        import socket
        import threading

        self.files = files
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        import threading

        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn) -> None:  # type: ignore[no-untyped-def]
        import socket
        import struct

        fds = [os.open(f, os.O_RDONLY) for f in self.files]
        try:
            while True:
                head = conn.recv(24, socket.MSG_WAITALL)
                if len(head) < 24:
                    return
                i, offset, length = struct.unpack(">qqq", head)
                while length > 0:
                    sent = os.sendfile(conn.fileno(), fds[i], offset, length)
                    offset += sent
                    length -= sent
        finally:
            for fd in fds:
                os.close(fd)
            conn.close()

    def close(self) -> None:
        self.sock.close()


def register_ceiling(
    spark,
    n: int,
    partitions: int,
    chunk: int,
    log: tuple[int, list[int]] | None = None,
    name: str = "gregor_bench_ceiling",
) -> None:  # type: ignore[no-untyped-def]
    """A Python source yielding prebuilt Spark-schema Arrow batches (no I/O, no decoding).

    With ``log`` (a :class:`LogServer`'s port and its files' sizes, one file per partition)
    each task first takes its share of its file's bytes over TCP for every batch it yields."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    from gregor.spark.schema import kafka_schema

    class Reader(DataSourceReader):
        def partitions(self):  # type: ignore[no-untyped-def]
            return [InputPartition(i) for i in range(partitions)]

        def read(self, partition):  # type: ignore[no-untyped-def]
            import pyarrow as pa

            from gregor.spark.schema import arrow_schema

            cols = [
                pa.nulls(chunk, pa.binary()),
                pa.array([b"x" * 100] * chunk, pa.binary()),
                pa.array(["bench"] * chunk),
                pa.array([partition.value] * chunk, pa.int32()),
                pa.array(range(chunk), pa.int64()),
                pa.array([0] * chunk, pa.timestamp("us", tz="UTC")),
                pa.array([0] * chunk, pa.int32()),
            ]
            batch = pa.RecordBatch.from_arrays(cols, schema=arrow_schema(False))
            total = left = n // partitions + (1 if partition.value < n % partitions else 0)
            pull = _puller(partition.value, total) if log is not None else None
            while left > 0:
                k = min(chunk, left)
                if pull is not None:
                    pull(k)
                yield batch.slice(0, k)
                left -= k

    def _puller(p: int, records: int):  # type: ignore[no-untyped-def]
        import socket
        import struct

        assert log is not None
        port, sizes = log
        f = p % len(sizes)
        sock = socket.create_connection(("127.0.0.1", port))
        buf = memoryview(bytearray(8 << 20))
        state = {"offset": 0, "records": 0}

        def pull(k: int) -> None:  # the bytes of the next k of this task's records
            start = state["offset"]
            state["records"] += k
            end = sizes[f] * state["records"] // records
            state["offset"] = end
            sock.sendall(struct.pack(">qqq", f, start, end - start))
            left = end - start
            while left > 0:
                got = sock.recv_into(buf[: min(len(buf), left)])
                if not got:
                    raise EOFError("log server closed")
                left -= got

        return pull

    class Ceiling(DataSource):
        @classmethod
        def name(cls) -> str:
            return name

        def schema(self):  # type: ignore[no-untyped-def]
            return kafka_schema(False)

        def reader(self, schema):  # type: ignore[no-untyped-def]
            return Reader()

    spark.dataSource.register(Ceiling)


def pipeline_runs(
    work: Path, master: str, events: int, jars: str | None
) -> list[tuple[str, object]]:
    """The reference pipeline, ``events`` page views, with the gregor source and (given the
    connector's jars) with Spark's own Kafka connector; each run checks its result exactly."""
    from gregor.pipelines import clickstream as cs
    from gregor.pipelines.runner import run

    out = []
    kinds = [("the gregor source", "gregor", None)]
    if jars:
        kinds.append(("Spark's Kafka connector (JVM)", "kafka", {"spark.jars": jars}))
    for label, fmt, extra in kinds:
        config = cs.PipelineConfig(
            "",
            output_dir=str(work / f"pipeline-{fmt}"),
            events=events,
            partitions=4,
            max_offsets_per_trigger=max(events // 3, 1),
            source_format=fmt,
            value_format="json",  # the connector has no Avro without spark-avro: JSON for both
        )
        s = run(config, master=master, say=lambda m: None, rows=0, spark_config=extra)
        assert not s.mismatches, s.mismatches[:5]
        out.append((label, s))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--records", type=int, default=5_000_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--master", default="local[*]")
    ap.add_argument(
        "--repeat", type=int, default=5, help="rounds; each figure is the best of its rounds"
    )
    ap.add_argument(
        "--chunk-records", type=int, default=None, help="records per Arrow batch from the source"
    )
    ap.add_argument(
        "--only-source", action="store_true", help="time only the gregor source into noop"
    )
    ap.add_argument(
        "--no-jvm-peer", action="store_true", help="without Spark's own Kafka connector"
    )
    ap.add_argument(
        "--pipeline-events",
        type=int,
        default=300_000,
        help="page views of the reference pipeline run with each source (0: skip)",
    )
    args = ap.parse_args()
    n = args.records

    from gregor.client import AdminClient, NewTopic
    from gregor.protocol.records import walk
    from gregor.spark import local_session
    from gregor.testing import BrokerProcess

    work = Path(tempfile.mkdtemp(prefix="gregor-bench-spark-"))
    try:
        with BrokerProcess(data_dir=work / "broker", log_level="INFO") as broker:
            bs = broker.bootstrap_servers
            topic = "bench"
            with AdminClient({"bootstrap.servers": bs}) as admin:
                admin.create_topics([NewTopic(topic, args.partitions, 1)], raise_on_error=True)
            secs = load(bs, topic, n)
            print(
                f"loaded {n:,} records of 100 bytes into {args.partitions} partitions in {secs:.1f}s",
                flush=True,
            )

            spark_config = {"spark.driver.memory": "4g"}
            jars = None
            if not args.no_jvm_peer:
                from gregor.testing.kafka import spark_kafka_jars

                jars = spark_kafka_jars()
                spark_config["spark.jars"] = jars
            spark = local_session("gregor-bench", master=args.master, config=spark_config)
            spark.sparkContext.setLogLevel("ERROR")
            cores = spark.sparkContext.defaultParallelism

            def source():  # type: ignore[no-untyped-def]
                return (
                    spark.read.format("gregor")
                    .option("kafka.bootstrap.servers", bs)
                    .option("subscribe", topic)
                    .option("minPartitions", str(max(cores, args.partitions)))
                    .options(**chunk)
                    .load()
                )

            chunk = {"gregor.chunkRecords": str(args.chunk_records)} if args.chunk_records else {}
            parquet = str(work / "records.parquet")
            count = source().count()
            assert count == n, count
            results: list[tuple[str, float]] = []
            if args.only_source:
                t_noop = best(
                    lambda: source().write.format("noop").mode("overwrite").save(), args.repeat
                )
                print(f"gregor source -> noop: {n / t_noop:,.0f} records/s")
                spark.stop()
                return
            source().write.mode("overwrite").parquet(parquet)
            assert spark.read.parquet(parquet).count() == n
            parts = max(cores, args.partitions)
            chunk_records = args.chunk_records or 65536
            register_ceiling(spark, n, parts, chunk_records)
            assert spark.read.format("gregor_bench_ceiling").load().count() == n
            logs = sorted(
                work.glob(f"broker/**/{topic}-*/*.log"),
                key=lambda f: int(f.parent.name.rsplit("-", 1)[1]),
            )
            server = LogServer(logs)
            register_ceiling(
                spark,
                n,
                parts,
                chunk_records,
                (server.port, [f.stat().st_size for f in logs]),
                "gregor_bench_tcp_ceiling",
            )
            assert spark.read.format("gregor_bench_tcp_ceiling").load().count() == n
            ceiling_parquet = str(work / "ceiling.parquet")
            jvm_parquet = str(work / "jvm.parquet")

            def jvm_source():  # type: ignore[no-untyped-def]
                return (
                    spark.read.format("kafka")
                    .option("kafka.bootstrap.servers", bs)
                    .option("subscribe", topic)
                    .option("minPartitions", str(max(cores, args.partitions)))
                    .load()
                )

            if jars:
                assert jvm_source().count() == n

            def ceiling(name: str):  # type: ignore[no-untyped-def]
                return spark.read.format(name).load()

            # The compared runs alternate round by round, so the machine's drift (20-30% on a
            # small VM) falls on each of them alike, and each round starts with a different one;
            # a first round warms the JVM's compiler for all of them and is not counted. Each
            # figure is the best of its rounds.
            runs = {
                "gregor source -> noop": lambda: (
                    source().write.format("noop").mode("overwrite").save()
                ),
                "prebuilt Arrow Python source -> noop": lambda: (
                    ceiling("gregor_bench_ceiling").write.format("noop").mode("overwrite").save()
                ),
                "prebuilt Arrow + log over TCP -> noop": lambda: (
                    ceiling("gregor_bench_tcp_ceiling")
                    .write.format("noop")
                    .mode("overwrite")
                    .save()
                ),
                "gregor source -> Parquet": lambda: (
                    source().write.mode("overwrite").parquet(parquet)
                ),
                "prebuilt Arrow Python source -> Parquet": lambda: (
                    ceiling("gregor_bench_ceiling").write.mode("overwrite").parquet(ceiling_parquet)
                ),
            }
            if jars:
                runs["Spark's Kafka connector (JVM) -> noop"] = lambda: (
                    jvm_source().write.format("noop").mode("overwrite").save()
                )
                runs["Spark's Kafka connector (JVM) -> Parquet"] = lambda: (
                    jvm_source().write.mode("overwrite").parquet(jvm_parquet)
                )
            rounds: list[dict[str, float]] = []
            names = list(runs)
            for i in range(args.repeat + 1):
                times = {}
                for name in names[i % len(names) :] + names[: i % len(names)]:
                    t = time.perf_counter()
                    runs[name]()
                    times[name] = time.perf_counter() - t
                if i:
                    rounds.append(times)
            server.close()
            fastest = {name: min(r[name] for r in rounds) for name in runs}
            t_noop = fastest["gregor source -> noop"]
            t_pq = fastest["gregor source -> Parquet"]
            t_ceiling = fastest["prebuilt Arrow Python source -> noop"]
            t_ceiling_pq = fastest["prebuilt Arrow Python source -> Parquet"]
            t_tcp = fastest["prebuilt Arrow + log over TCP -> noop"]
            assert spark.read.parquet(parquet).count() == n
            t_up = best(
                lambda: spark.read.parquet(parquet).write.format("noop").mode("overwrite").save(),
                args.repeat + 1,
            )
            results += [(name, fastest[name]) for name in runs]
            results.append(("Parquet file -> noop (upper bound)", t_up))
            spark.stop()
            pipelines = (
                pipeline_runs(work, args.master, args.pipeline_events, jars)
                if args.pipeline_events
                else []
            )
            results.append(
                (
                    "confluent-kafka consumer (1 thread)",
                    confluent_read(bs, topic, args.partitions, n),
                )
            )
            results.append(
                ("gregor RangeReader alone (1 thread)", bulk_read(bs, topic, args.partitions, n))
            )

        upper = n / t_up
        print(
            f"\n{n:,} records x 100 bytes, Spark {args.master} ({cores} cores), {os.cpu_count()} CPUs on the machine;"
            f" record walk: {walk.implementation()}"
        )
        print(f"{'read':<40} {'seconds':>8} {'records/s':>12} {'vs Parquet':>11}")
        for name, secs in results:
            rate = n / secs
            print(f"{name:<40} {secs:>8.2f} {rate:>12,.0f} {rate / upper:>10.2f}x")
        print(
            f"gregor source -> noop    / prebuilt Arrow source -> noop:    {t_ceiling / t_noop:.2f}x"
        )
        print(
            f"gregor source -> Parquet / prebuilt Arrow source -> Parquet: {t_ceiling_pq / t_pq:.2f}x"
        )
        print(
            f"gregor source -> noop    / prebuilt Arrow + log over TCP:    {t_tcp / t_noop:.2f}x"
            f" (log files: {sum(f.stat().st_size for f in logs) / 1e6:,.0f} MB)"
        )

        if jars:
            jvm_noop = fastest["Spark's Kafka connector (JVM) -> noop"]
            jvm_pq = fastest["Spark's Kafka connector (JVM) -> Parquet"]
            print(
                f"gregor source -> noop    / Spark's Kafka connector -> noop:    {jvm_noop / t_noop:.2f}x"
            )
            print(
                f"gregor source -> Parquet / Spark's Kafka connector -> Parquet: {jvm_pq / t_pq:.2f}x"
            )
        for label, s in pipelines:
            print(
                f"reference pipeline with {label:<34} {s.events:>9,} events {s.seconds:7.1f} s "
                f"{s.events / s.seconds:>9,.0f} events/s; busy {s.busy_seconds:.1f} s "
                f"({s.events / s.busy_seconds:,.0f} events/s), {s.windows} windows checked exactly"
            )
        if len(pipelines) == 2:
            (_, g), (_, k) = pipelines
            print(
                f"pipeline, gregor source / Spark's connector (busy-time rates): "
                f"{(g.events / g.busy_seconds) / (k.events / k.busy_seconds):.2f}x"
            )

        def per_round(a: str, b: str) -> str:
            ratios = [r[b] / r[a] for r in rounds]
            return (
                " ".join(f"{x:.2f}" for x in ratios) + f" (median {statistics.median(ratios):.2f})"
            )

        print(
            "round by round: noop / ceiling",
            per_round("gregor source -> noop", "prebuilt Arrow Python source -> noop"),
            "| Parquet / ceiling",
            per_round("gregor source -> Parquet", "prebuilt Arrow Python source -> Parquet"),
            "| noop / TCP ceiling",
            per_round("gregor source -> noop", "prebuilt Arrow + log over TCP -> noop"),
        )
        if jars:
            print(
                "round by round: noop / JVM connector",
                per_round("gregor source -> noop", "Spark's Kafka connector (JVM) -> noop"),
                "| Parquet / JVM connector",
                per_round("gregor source -> Parquet", "Spark's Kafka connector (JVM) -> Parquet"),
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
