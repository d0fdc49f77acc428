"""What Prometheus scrapes cost another client: Metadata latency with and without scrapers.

One Gregor broker (``gregor serve``, BrokerProcess) with ``metrics.listener`` and a few hundred
partitions (``--topics`` x ``--partitions``, one record each). A client sends Metadata requests
for one topic on one connection, one at a time with a short pause, and records each round
trip. Rounds take turns: *quiet* (no scraper: the peer, measured in the same run) and
*scraped* (``--scrapers`` processes scrape ``/metrics`` in a tight loop meanwhile). Each row is
the median over ``--repeats`` rounds of the round's p50 and p99; the last column is
scraped/quiet. ``--cache-ms`` sets ``metrics.cache.ms`` (0: every scrape renders anew).

Run: .venv/bin/python bench/metrics_scrape.py [--repeats 3] [--requests 500] [--scrapers 4]
                                               [--topics 5] [--partitions 100] [--cache-ms 1000]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time

from confluent_kafka import Producer

from gregor.protocol.connection import ClientConnection
from gregor.protocol.messages.metadata import MetadataRequest
from gregor.testing import BrokerProcess

SCRAPER = """
import sys, urllib.request
url = sys.argv[1]
while True:
    with urllib.request.urlopen(url, timeout=60) as r:
        r.read()
"""


def latencies(bootstrap: str, topic: str, n: int) -> tuple[float, float]:
    host, port = bootstrap.rsplit(":", 1)
    out: list[float] = []
    with socket.create_connection((host, int(port))) as s:
        conn = ClientConnection(client_id="latency")
        req = MetadataRequest(
            topics=[MetadataRequest.Topics(name=topic)], allow_auto_topic_creation=False
        )
        for _ in range(n):
            _, data = conn.send_request(req, 4)
            start = time.perf_counter()
            s.sendall(data)
            while not conn.receive_data(s.recv(65536)):
                pass
            out.append((time.perf_counter() - start) * 1000)
            time.sleep(0.002)
    out.sort()
    return out[len(out) // 2], out[min(len(out) - 1, int(len(out) * 0.99))]


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--requests", type=int, default=500)
    ap.add_argument("--scrapers", type=int, default=4)
    ap.add_argument("--topics", type=int, default=5)
    ap.add_argument("--partitions", type=int, default=100)
    ap.add_argument("--cache-ms", type=int, default=1000)
    args = ap.parse_args()
    config = {
        "metrics.listener": "http://127.0.0.1:0",
        "num.partitions": args.partitions,
        "metrics.cache.ms": args.cache_ms,
    }
    with BrokerProcess(config=config) as b:
        assert b.metrics_url is not None
        p = Producer({"bootstrap.servers": b.bootstrap_servers})
        for t in range(args.topics):
            for i in range(args.partitions):
                p.produce(f"bench-{t}", b"x", partition=i)
        assert p.flush(120) == 0
        quiet: list[tuple[float, float]] = []
        scraped: list[tuple[float, float]] = []
        for _ in range(args.repeats):
            quiet.append(latencies(b.bootstrap_servers, "bench-0", args.requests))
            procs = [
                subprocess.Popen(
                    [sys.executable, "-c", SCRAPER, b.metrics_url], stderr=subprocess.DEVNULL
                )
                for _ in range(args.scrapers)
            ]
            try:
                scraped.append(latencies(b.bootstrap_servers, "bench-0", args.requests))
            finally:
                for proc in procs:
                    proc.kill()
                    proc.wait()
    partitions = args.topics * args.partitions
    load = os.getloadavg()[0]
    print(
        f"# {partitions} partitions, {args.scrapers} scrapers, metrics.cache.ms={args.cache_ms}, "
        f"{args.repeats} rounds of {args.requests} Metadata requests; load average {load:.1f}"
    )
    print(f"{'':10} {'quiet ms':>10} {'scraped ms':>11} {'scraped/quiet':>14}")
    for i, name in enumerate(("p50", "p99")):
        q = statistics.median(r[i] for r in quiet)
        s = statistics.median(r[i] for r in scraped)
        print(f"{name:10} {q:10.2f} {s:11.2f} {s / q:14.1f}")


if __name__ == "__main__":
    main()
