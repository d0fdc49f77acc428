"""SIGKILL a streaming query's driver mid-batch, restart it from its checkpoint: every input
record lands in the file sink exactly once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from spark_helpers import Broker, create_topic, produce

JOB = Path(__file__).with_name("stream_job.py")


def batch_ids(d: Path) -> set[int]:
    return {int(p.name) for p in d.glob("[0-9]*")} if d.exists() else set()


def test_kill_driver_mid_batch_and_restart(
    spark: Any, gregor: Broker, topic: str, tmp_path: Path
) -> None:
    create_topic(gregor, topic, 2)
    produced = produce(gregor, topic, {0: 120, 1: 80})  # 200 offsets: 5 batches of 40
    out, cp = tmp_path / "out", tmp_path / "cp"
    args = [sys.executable, str(JOB), gregor.bootstrap_servers, topic, str(out), str(cp)]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    log = open(tmp_path / "job.log", "wb")
    proc = subprocess.Popen(
        args, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
    )
    killed_in = None
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and proc.poll() is None:
            planned, done = batch_ids(cp / "offsets"), batch_ids(cp / "commits")
            in_flight = planned - done
            if done and in_flight:
                killed_in = max(in_flight)
                os.killpg(proc.pid, signal.SIGKILL)  # the driver, its JVM and its workers
                break
            time.sleep(0.05)
    finally:
        if proc.poll() is None and killed_in is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        log.close()
    assert killed_in is not None, (tmp_path / "job.log").read_text()[-3000:]
    assert proc.returncode == -signal.SIGKILL
    assert killed_in not in batch_ids(cp / "commits")

    rerun = subprocess.run(args, env=env, capture_output=True, timeout=300)
    assert rerun.returncode == 0, rerun.stdout.decode()[-3000:] + rerun.stderr.decode()[-3000:]
    assert max(batch_ids(cp / "commits")) == 4

    rows = [(r.partition, r.offset, r.value) for r in spark.read.parquet(str(out)).collect()]
    assert len(rows) == 200
    assert sorted(rows) == sorted((p, i, v.decode().upper()) for p, i, _k, v, _ts in produced)


# --- the exactly-once Kafka sink under SIGKILL (Spark's own Kafka sink is at-least-once: no
# KafkaSinkSuite test mirrors this; it checks gregor.spark.txsink's protocol end to end) ---

EOS_JOB = Path(__file__).with_name("eos_job.py")


def _children(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(d.name))
    return out


def _python_workers(session: int) -> list[int]:
    """The forked Python workers (children of pyspark.daemon) of a job's process group."""
    daemons = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if os.getpgid(int(d.name)) != session:
                continue
            cmd = (d / "cmdline").read_bytes()
        except OSError:
            continue
        if b"pyspark.daemon" in cmd:
            daemons.append(int(d.name))
    return [c for dpid in daemons for c in _children(dpid) if c not in daemons]


def _decided_batch(bootstrap: str, checkpoint: Path) -> int:
    import json

    from gregor.client import AdminClient, TopicPartition

    meta = checkpoint / "metadata"
    if not meta.exists():
        return -1
    query = json.loads(meta.read_text())["id"]
    tp = TopicPartition("gregor-spark-sink-commits", 0)
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        got = admin.list_consumer_group_offsets(f"gregor-spark-{query}", [tp]).get(tp)
    return int(got.metadata.split("=")[1]) if got is not None and got.metadata else -1


def _read_committed(bootstrap: str, topic: str, expected: int) -> list[bytes]:
    import confluent_kafka

    c = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"v-{topic}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    c.assign(
        [
            confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
            for p in range(2)
        ]
    )
    out: list[bytes] = []
    try:
        idle = 0
        while idle < 10:  # ten empty polls in a row after the expected count: nothing more comes
            got = [m.value() for m in c.consume(500, 0.3) if not m.error()]
            out += got
            idle = idle + 1 if not got and len(out) >= expected else 0
    finally:
        c.close()
    return out


@pytest.mark.timeout(1200)  # three Spark starts; slow on a loaded 2-core machine
def test_exactly_once_sink_survives_sigkill_of_driver_and_python_workers(
    gregor: Broker, topic: str, tmp_path: Path
) -> None:
    import random

    seed = int(os.environ.get("GREGOR_EOS_SEED", time.time_ns() % 10_000))
    rng = random.Random(seed)
    out_topic = f"{topic}-out"
    create_topic(gregor, topic, 2)
    create_topic(gregor, out_topic, 2)
    produced = produce(gregor, topic, {0: 100, 1: 100})  # 200 offsets: 4 batches of 50
    cp = tmp_path / "cp"
    args = [sys.executable, str(EOS_JOB), gregor.bootstrap_servers, topic, out_topic, str(cp)]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    # driver kills at random points: mid-batch, or after the sink decided a batch and before
    # Spark logged it committed; Python workers (where the sink's tasks write) killed mid-write
    plan = rng.sample(["in-flight", "decided"], 2)
    log_lines = [f"seed {seed}, driver kills {plan}"]
    worker_kills = 0
    for run in range(len(plan) + 1):
        kind = plan[run] if run < len(plan) else None
        log = open(tmp_path / f"job-{run}.log", "wb")
        proc = subprocess.Popen(
            args, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        patience = rng.randrange(0, 20)
        killed = False
        try:
            deadline = time.monotonic() + 300
            while proc.poll() is None and time.monotonic() < deadline:
                done = batch_ids(cp / "commits")
                in_flight = batch_ids(cp / "offsets") - done
                if in_flight and worker_kills < 2 and rng.random() < 0.05:
                    workers = _python_workers(proc.pid)
                    if workers:
                        os.kill(rng.choice(workers), signal.SIGKILL)
                        worker_kills += 1
                        log_lines.append(
                            f"run {run}: killed a Python worker while batches {sorted(in_flight)} ran"
                        )
                if kind == "in-flight" and in_flight and done:
                    if patience == 0:
                        os.killpg(proc.pid, signal.SIGKILL)
                        killed = True
                        log_lines.append(
                            f"run {run}: killed the driver with batches {sorted(in_flight)} in flight"
                        )
                        break
                    patience -= 1
                if (
                    kind == "decided"
                    and in_flight
                    and _decided_batch(gregor.bootstrap_servers, cp) in in_flight
                ):
                    os.killpg(proc.pid, signal.SIGKILL)
                    killed = True
                    log_lines.append(
                        f"run {run}: killed the driver after the sink decided batch {sorted(in_flight)}"
                    )
                    break
                time.sleep(0.05)
        finally:
            if proc.poll() is None and not killed and kind is not None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(300)
            log.close()
        if kind is None:
            text = (tmp_path / f"job-{run}.log").read_text()[-3000:]
            assert proc.returncode == 0, "\n".join(log_lines) + "\n" + text
    assert max(batch_ids(cp / "commits")) >= 3, "\n".join(log_lines)

    got = _read_committed(gregor.bootstrap_servers, out_topic, len(produced))
    expected = sorted(v.upper() for _p, _i, _k, v, _ts in produced)
    assert sorted(got) == expected, "\n".join(log_lines)
