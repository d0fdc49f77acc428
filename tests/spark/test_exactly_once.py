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

from spark_helpers import Broker, create_topic, produce

JOB = Path(__file__).with_name("stream_job.py")


def batch_ids(d: Path) -> set[int]:
    return {int(p.name) for p in d.glob("[0-9]*")} if d.exists() else set()


def test_kill_driver_mid_batch_and_restart(spark: Any, gregor: Broker, topic: str, tmp_path: Path) -> None:
    create_topic(gregor, topic, 2)
    produced = produce(gregor, topic, {0: 120, 1: 80})  # 200 offsets: 5 batches of 40
    out, cp = tmp_path / "out", tmp_path / "cp"
    args = [sys.executable, str(JOB), gregor.bootstrap_servers, topic, str(out), str(cp)]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    log = open(tmp_path / "job.log", "wb")
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
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
