"""A replicated cluster against one broker, same machine, same client (confluent-kafka): Gregor
beside Apache Kafka.

Rows (each for Gregor and for Kafka):
  produce    acks=all, 100 B and 1 KB records (random bytes, linger.ms=5) to a topic with
             1 or 3 partitions: a 3-broker cluster with replication.factor=3 and
             min.insync.replicas=2, and one broker with replication.factor=1. Runs take turns;
             the median run is shown with cluster/single (goal: at least 0.5 on 2 cores, where
             three brokers, etcd and the client share the cores).
  latency    100 B at a fixed rate for 3 s, acks=all, linger.ms=0 (one record per request):
             p50 and p99 ms and the rate the acknowledgements came back at, for each rate of
             ``--latency-rates`` (100, 300 and 1,000 records/s unless told). A rate a target
             does not keep up with (acknowledged below 95 % of the offered rate) is marked
             "saturated": its latencies then measure the backlog, not the broker.
  failover   a producer (acks=all, idempotent, linger.ms=0) writes to one RF=3 partition
             without pause; once its acknowledgements flow, the partition leader is SIGKILLed; the time from the kill to the
             first acknowledgement of a record sent after it (the new leader's), then the
             broker is restarted and the next round waits for a full ISR. The brokers'
             ``broker.session.timeout.ms`` (the etcd lease: how soon a dead broker is noticed)
             is ``--session-timeout-ms``, 1000 by default (Kafka's own default is 9000 ms;
             its docs allow lowering it on a fast network).

Kafka runs the same rows: a 3-node KRaft cluster (every node broker and controller, combined
mode) and one node, ``gregor.testing.kafka`` (jars from ``scripts/kafka.sh fetch``), with the
same replication settings and ``broker.session.timeout.ms`` (heartbeats every quarter of it),
so that both notice a dead broker equally soon; in combined mode the node killed may also be
the quorum's leader, which Kafka then elects anew. Every broker gets the same untimed warm-up
first (its JVM compiles its hot paths). Beside the rates: the CPU time the brokers used per
record (all of a cluster's processes, etcd's too for Gregor) and their resident memory at the
end (summed over a cluster's processes).

Where the data lives: every broker's log directory (and etcd's) is made under ``--data-dir``,
by default a RAM-backed one (/dev/shm) when the machine has it, for the cluster and the single
broker alike. On one machine the three replicas share one disk, and a machine that keeps
little page cache (this one keeps about 0.5 GB) starts writing at the disk's own speed once a
gigabyte or two has been written: the cluster, writing three copies, gets there three times
sooner, and the figures then depend on the order of the runs, not on the brokers (on disk
here, the 1 KB cluster runs fall from ~300 to ~100 MB/s after about 1.5 GB). ``--data-dir
/tmp`` measures on disk.

Run: .venv/bin/python bench/cluster.py [--scale 1.0] [--repeats 3] [--failovers 5]
                                       [--session-timeout-ms 1000] [--data-dir DIR] [--no-kafka]
                                       [--latency-rates 100,300,1000]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from broker import cpu_seconds, latency, latency_run, memory_kb, produce  # noqa: E402  (bench/broker.py)
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from gregor.testing import BrokerProcess  # noqa: E402
from gregor.testing.cluster import ClusterProcess  # noqa: E402
from gregor.testing.kafka import KafkaBroker, KafkaCluster  # noqa: E402

COUNTS = {100: 200_000, 1024: 60_000}


def create(bootstrap: str, name: str, partitions: int, rf: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics(
        [NewTopic(name, partitions, rf, config={"min.insync.replicas": str(min(rf, 2))})]
    )[name].result(30)
    while True:  # every replica in the ISR before timing
        md = admin.list_topics(name, timeout=10).topics[name]
        if (
            md.error is None
            and len(md.partitions) == partitions
            and all(p.leader >= 0 and len(p.isrs) == rf for p in md.partitions.values())
        ):
            return


def wait_brokers(bootstrap: str, n: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    while len(admin.list_topics(timeout=10).brokers) < n:
        pass


def leader_of(bootstrap: str, topic: str) -> tuple[int, int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    while True:
        try:
            p = admin.list_topics(topic, timeout=10).topics[topic].partitions[0]
        except Exception:  # noqa: BLE001 - a dead bootstrap broker: ask again
            continue
        if p.leader >= 0:
            return p.leader, len(p.isrs)


def failover_once(cluster: ClusterProcess, topic: str) -> float:
    while True:
        leader, isr = leader_of(cluster.bootstrap_servers, topic)
        if isr == 3:
            break
    p = Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 0,
            "message.timeout.ms": 60000,
        }
    )
    state = {"killed_at": 0.0, "first_after": 0.0, "errors": 0, "acked": 0}
    stop = threading.Event()

    def run() -> None:
        i = 0
        while not stop.is_set():
            sent_at = time.perf_counter()

            def done(err, msg, sent_at=sent_at) -> None:  # noqa: ANN001
                if err is not None:
                    state["errors"] += 1
                    return
                state["acked"] += 1
                if state["killed_at"] and sent_at > state["killed_at"] and not state["first_after"]:
                    state["first_after"] = time.perf_counter()

            try:
                p.produce(topic, b"%d" % i, partition=0, on_delivery=done)
                i += 1
            except BufferError:
                pass
            p.poll(0.002)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    # Steady state before the kill: acknowledgements flowing (a new idempotent producer takes
    # a while to get its producer id and its connection to the leader), then half a second.
    while state["acked"] < 100:
        time.sleep(0.005)
    time.sleep(0.5)
    state["killed_at"] = time.perf_counter()
    cluster.kill(leader)
    while not state["first_after"]:
        time.sleep(0.005)
    stop.set()
    t.join()
    p.flush(60)
    if state["errors"]:
        raise RuntimeError(f"{state['errors']} records failed during failover")
    cluster.restart(leader)
    return state["first_after"] - state["killed_at"]


def cluster_pids(target: object) -> list[int]:
    """Every process of a broker or cluster (Gregor's etcd too)."""
    if isinstance(target, ClusterProcess):
        procs = [b.proc for b in target.brokers.values()] + [target.etcd.proc]  # type: ignore[attr-defined]
    elif isinstance(target, KafkaCluster) and not isinstance(target, KafkaBroker):
        procs = [n.proc for n in target.nodes.values()]
    else:
        procs = [target.proc]  # type: ignore[attr-defined]
    return [p.pid for p in procs if p is not None and p.poll() is None]


def cpu_of(pids: list[int]) -> float:
    return sum(cpu_seconds(pid) for pid in pids)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--failovers", type=int, default=5)
    ap.add_argument("--session-timeout-ms", type=int, default=1000)
    ap.add_argument(
        "--data-dir",
        default="/dev/shm" if os.path.isdir("/dev/shm") else None,
        help="where the brokers' and etcd's data directories are made (default: /dev/shm)",
    )
    ap.add_argument("--no-kafka", action="store_true", help="Gregor only")
    ap.add_argument(
        "--latency-rates",
        default="100,300,1000",
        help="records/s of the latency rows, comma-separated (default 100,300,1000)",
    )
    args = ap.parse_args()
    tempfile.tempdir = args.data_dir  # every launcher makes its directories with tempfile
    config = {
        "replica.lag.time.max.ms": 10000,
        "offsets.topic.replication.factor": 3,
        "transaction.state.log.replication.factor": 3,
    }
    kafka_config = {
        "replica.lag.time.max.ms": 10000,
        "broker.session.timeout.ms": args.session_timeout_ms,
        "broker.heartbeat.interval.ms": max(50, args.session_timeout_ms // 4),
    }
    with contextlib.ExitStack() as stack:
        systems: dict[str, dict[str, object]] = {
            "gregor": {
                "cluster": stack.enter_context(
                    ClusterProcess(3, config=config, session_timeout_ms=args.session_timeout_ms)
                ),
                "single": stack.enter_context(BrokerProcess({})),
            },
        }
        if not args.no_kafka:
            systems["kafka"] = {
                "cluster": stack.enter_context(KafkaCluster(size=3, config=kafka_config)),
                "single": stack.enter_context(KafkaBroker()),
            }
        targets: dict[str, tuple[object, str, int]] = {}
        for system, pair in systems.items():
            for kind, t in pair.items():
                rf = 3 if kind == "cluster" else 1
                bootstrap = t.bootstrap_servers  # type: ignore[attr-defined]
                wait_brokers(bootstrap, rf)
                targets[f"{system}-{kind}"] = (t, bootstrap, rf)
        for label, (_, bootstrap, rf) in targets.items():  # the same warm-up for every broker
            create(bootstrap, f"warm-{label}", 1, rf)
            produce(bootstrap, f"warm-{label}", 100, int(100_000 * max(args.scale, 0.1)), "all", 1)
            create(bootstrap, f"warm-lat-{label}", 1, rf)
            try:
                latency(bootstrap, f"warm-lat-{label}", "all")
            except RuntimeError as e:  # untimed; a machine busy elsewhere may outlast its flush
                print(f"warm-up latency run on {label}: {e}", flush=True)
        rows: dict[str, dict[str, list[tuple[float, float, float]]]] = {}
        n_topic = 0
        for size in (100, 1024):
            for parts in (1, 3):
                key = f"produce {size} B p={parts} acks=all"
                n = int(COUNTS[size] * args.scale)
                for _ in range(args.repeats):
                    for label, (t, bootstrap, rf) in targets.items():
                        n_topic += 1
                        topic = f"bench-{label}-{n_topic}"
                        create(bootstrap, topic, parts, rf)
                        pids = cluster_pids(t)
                        cpu0 = cpu_of(pids)
                        r = produce(bootstrap, topic, size, n, "all", parts)
                        cpu = (cpu_of(pids) - cpu0) / n * 1e6
                        rows.setdefault(key, {}).setdefault(label, []).append(
                            (r.msgs_per_s, r.mb_per_s, cpu)
                        )
        rates = [int(r) for r in args.latency_rates.split(",") if r]
        lat: dict[int, dict[str, list[tuple[float, float, float]]]] = {}
        for rate in rates:
            for _ in range(args.repeats):
                for label, (_, bootstrap, rf) in targets.items():
                    n_topic += 1
                    topic = f"lat-{label}-{n_topic}"
                    create(bootstrap, topic, 1, rf)
                    run = latency_run(bootstrap, topic, "all", rate)
                    lat.setdefault(rate, {}).setdefault(label, []).append(run)
        memory = {
            label: sum(memory_kb(pid)[0] for pid in cluster_pids(t))
            for label, (t, _, _) in targets.items()
        }
        failovers: dict[str, list[float]] = {}
        for system, pair in systems.items():
            cluster = pair["cluster"]
            create(cluster.bootstrap_servers, "failover", 1, 3)  # type: ignore[attr-defined]
            failovers[system] = [failover_once(cluster, "failover") for _ in range(args.failovers)]  # type: ignore[arg-type]

    labels = list(targets)
    print(
        f"\n3 brokers RF=3 min.insync=2 vs 1 broker RF=1, confluent-kafka, scale {args.scale}, "
        f"median of {args.repeats}, data in {tempfile.gettempdir()}"
    )
    print(
        f"{'workload':30}"
        + "".join(f" {label + ' msg/s':>20} {'MB/s':>6}" for label in labels)
        + f" {'G/K cluster':>12} {'G/K single':>11}"
    )
    for key, by in rows.items():
        med = {label: sorted(by[label])[len(by[label]) // 2] for label in labels}
        line = f"{key:30}" + "".join(
            f" {med[label][0]:20,.0f} {med[label][1]:6.1f}" for label in labels
        )
        if "kafka-cluster" in med:
            line += f" {med['gregor-cluster'][0] / med['kafka-cluster'][0]:12.2f}"
            line += f" {med['gregor-single'][0] / med['kafka-single'][0]:11.2f}"
        print(line)
    print("\nbroker CPU per record (µs; all of a cluster's processes), median run")
    for key, by in rows.items():
        med = {label: sorted(by[label])[len(by[label]) // 2] for label in labels}
        print(f"  {key:30}" + "".join(f" {label} {med[label][2]:7.1f}" for label in labels))
    print("\nlatency, 100 B, acks=all, linger.ms=0 (the run with the median p99)")
    for rate, by in lat.items():
        for label, runs in by.items():
            p50, p99, acked = sorted(runs, key=lambda r: r[1])[len(runs) // 2]
            mark = "   saturated" if acked < 0.95 * rate else ""
            print(
                f"  {rate:6,}/s {label:15} p50 {p50:9.2f} ms   p99 {p99:9.2f} ms"
                f"   acknowledged {acked:7,.0f}/s{mark}"
            )
    print("\nresident memory at the end (summed over a cluster's processes)")
    print("  " + "   ".join(f"{label} {kb / 1024:.0f} MiB" for label, kb in memory.items()))
    print(
        f"\nfailover, leader SIGKILL to first ack on the new leader "
        f"(broker.session.timeout.ms={args.session_timeout_ms}), {args.failovers} runs"
    )
    for system, times in failovers.items():
        print(
            f"  {system:7} "
            + "  ".join(f"{t:.2f}" for t in times)
            + f"   median {statistics.median(times):.2f} s, max {max(times):.2f} s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
