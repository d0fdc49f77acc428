"""A real Spark cluster: a standalone master and two workers started from the pyspark package's
own scripts (``bin/spark-class``), running the reference pipeline with ``--master spark://``.

No Spark test mirrors this (Spark's suites run local mode); it shows the data source and the
main job on executors that are separate JVMs with their own Python workers.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from spark_helpers import Broker

from gregor.pipelines import clickstream as cs


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


class StandaloneCluster:
    """``spark-class ...Master`` and ``...Worker`` processes on 127.0.0.1 (one core each)."""

    def __init__(self, work: Path, workers: int = 2) -> None:
        self.work = work
        self.port, self.ui = _free_port(), _free_port()
        self.workers = workers
        self.procs: list[subprocess.Popen[bytes]] = []
        self.env = dict(os.environ, SPARK_HOME=str(_spark_home()), SPARK_LOCAL_IP="127.0.0.1",
                        PYSPARK_PYTHON=sys.executable, SPARK_WORKER_DIR=str(work / "workers"),
                        SPARK_NO_DAEMONIZE="1")

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _start(self, name: str, *args: str) -> None:
        log = open(self.work / f"{name}.log", "wb")
        cls = str(_spark_home() / "bin" / "spark-class")
        self.procs.append(subprocess.Popen([cls, *args], stdout=log, stderr=subprocess.STDOUT, env=self.env,
                                           start_new_session=True))

    def alive_workers(self) -> int:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui}/json/", timeout=2) as r:
                return int(json.loads(r.read()).get("aliveworkers", 0))
        except OSError:
            return 0

    def start(self) -> StandaloneCluster:
        self._start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                    "--port", str(self.port), "--webui-port", str(self.ui))
        for i in range(self.workers):
            self._start(f"worker-{i}", "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                        "--cores", "1", "--memory", "1g", "--webui-port", str(_free_port()), self.url)
        deadline = time.monotonic() + 180
        while self.alive_workers() < self.workers:
            if time.monotonic() > deadline or any(p.poll() is not None for p in self.procs):
                raise RuntimeError("the standalone cluster did not come up: " + " ".join(
                    (self.work / f).read_text()[-500:] for f in ("master.log", "worker-0.log")))
            time.sleep(0.5)
        return self

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                os.killpg(p.pid, 15)
        for p in self.procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, 9)
                p.wait()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    c = StandaloneCluster(tmp_path_factory.mktemp("cluster")).start()
    try:
        yield c
    finally:
        c.stop()


@pytest.mark.timeout(900)
def test_reference_pipeline_on_a_standalone_cluster(cluster: StandaloneCluster, gregor: Broker, tmp_path: Path) -> None:
    out = tmp_path / "out"
    r = subprocess.run(
        [sys.executable, "-m", "gregor.pipelines", "--master", cluster.url, "--bootstrap-servers",
         gregor.bootstrap_servers, "--events", "20000", "--minutes", "3", "--input-topic", "cluster-in",
         "--output-topic", "cluster-out", "--output-dir", str(out), "--rows", "0"],
        capture_output=True, timeout=800, env=dict(os.environ, SPARK_LOCAL_IP="127.0.0.1"),
    )
    text = r.stdout.decode()
    assert r.returncode == 0, text[-3000:] + r.stderr.decode()[-3000:]
    expected = cs.expected_windows(cs.generate_columns(20000, users=300, minutes=3, seed=7))
    assert f"check: all {len(expected)} windows match" in text
    assert cs.parquet_results(None, cs.PipelineConfig("", output_dir=str(out))) == expected
    # the work ran in executors the two workers started (one application directory each)
    apps = list((cluster.work / "workers").glob("app-*/*"))
    assert len({p.parent.name for p in apps}) == 1 and len(apps) == 2, apps
