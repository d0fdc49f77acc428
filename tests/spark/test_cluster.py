"""A real Spark cluster: a standalone master and two workers started from the pyspark package's
own scripts (``bin/spark-class``), running the reference pipeline with ``--master spark://``,
and the exactly-once sink with one of its executor JVMs SIGKILLed mid-batch.

No Spark test mirrors this (Spark's suites run local mode); it shows the data source and the
main job on executors that are separate JVMs with their own Python workers.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from spark_helpers import Broker, use_jvm_archive

from gregor.pipelines import clickstream as cs
from gregor.testing.ports import free_port

_HANDED_OUT: set[int] = set()


def _free_port() -> int:
    """A free port not handed out before in this process: the master's and the workers' ports
    are only bound later, by Spark, so one could otherwise be offered twice (a worker's web UI
    then took the master's, and /json/ answered with the worker's page)."""
    while True:
        port = free_port()
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port


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
        self.env = dict(
            os.environ,
            SPARK_HOME=str(_spark_home()),
            SPARK_LOCAL_IP="127.0.0.1",
            PYSPARK_PYTHON=sys.executable,
            SPARK_WORKER_DIR=str(work / "workers"),
            SPARK_NO_DAEMONIZE="1",
        )

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _start(self, name: str, *args: str) -> None:
        log = open(self.work / f"{name}.log", "wb")
        cls = str(_spark_home() / "bin" / "spark-class")
        self.procs.append(
            subprocess.Popen(
                [cls, *args],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
                start_new_session=True,
            )
        )

    def _ui_url(self) -> str:
        """The master's web UI as its log says it bound it (Spark moves to the next port when
        the one asked for is taken), else the one asked for."""
        try:
            text = (self.work / "master.log").read_text(errors="replace")
        except OSError:
            text = ""
        found = re.findall(r"MasterWebUI to \S+, and started at (http://\S+)", text)
        return found[-1] if found else f"http://127.0.0.1:{self.ui}"

    def alive_workers(self) -> int:
        try:
            with urllib.request.urlopen(f"{self._ui_url()}/json/", timeout=2) as r:
                return int(json.loads(r.read()).get("aliveworkers", 0))
        except (OSError, ValueError):  # not up yet, or not the master's page yet
            return 0

    def start(self) -> StandaloneCluster:
        self._start(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--webui-port",
            str(self.ui),
        )
        for i in range(self.workers):
            self._start(
                f"worker-{i}",
                "org.apache.spark.deploy.worker.Worker",
                "--host",
                "127.0.0.1",
                "--cores",
                "1",
                "--memory",
                "1g",
                "--webui-port",
                str(_free_port()),
                self.url,
            )
        deadline = time.monotonic() + 180
        while self.alive_workers() < self.workers:
            if time.monotonic() > deadline or any(p.poll() is not None for p in self.procs):
                raise RuntimeError(
                    "the standalone cluster did not come up: "
                    + " ".join(
                        (self.work / f).read_text()[-500:] for f in ("master.log", "worker-0.log")
                    )
                )
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
    use_jvm_archive()
    c = StandaloneCluster(tmp_path_factory.mktemp("cluster")).start()
    try:
        yield c
    finally:
        c.stop()


@pytest.mark.timeout(900)
def test_reference_pipeline_on_a_standalone_cluster(
    cluster: StandaloneCluster, gregor: Broker, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "gregor.pipelines",
            "--master",
            cluster.url,
            "--bootstrap-servers",
            gregor.bootstrap_servers,
            "--events",
            "20000",
            "--minutes",
            "3",
            "--input-topic",
            "cluster-in",
            "--output-topic",
            "cluster-out",
            "--output-dir",
            str(out),
            "--rows",
            "0",
            "--value-format",
            "json",  # the Avro default needs a registry; tests/spark/test_pipeline.py has it
        ],
        capture_output=True,
        timeout=800,
        env=dict(os.environ, SPARK_LOCAL_IP="127.0.0.1"),
    )
    text = r.stdout.decode()
    assert r.returncode == 0, text[-3000:] + r.stderr.decode()[-3000:]
    expected = cs.expected_windows(cs.generate_columns(20000, users=300, minutes=3, seed=7))
    assert f"check: all {len(expected)} windows match" in text
    assert cs.parquet_results(None, cs.PipelineConfig("", output_dir=str(out))) == expected
    # the work ran in executors the two workers started (one application directory each)
    apps = list((cluster.work / "workers").glob("app-*/*"))
    assert len({p.parent.name for p in apps}) == 1 and len(apps) == 2, apps


def _executors(cluster: StandaloneCluster) -> list[int]:
    """Executor JVMs the workers started (they run in the workers' application directories)."""
    root = str(cluster.work / "workers")
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if (
                    os.readlink(d / "cwd").startswith(root)
                    and b"java" in (d / "cmdline").read_bytes()
                ):
                    out.append(int(d.name))
            except OSError:
                continue
    return out


@pytest.mark.timeout(900)
def test_exactly_once_sink_survives_a_killed_executor(
    cluster: StandaloneCluster, gregor: Broker, topic: str, tmp_path: Path
) -> None:
    # SIGKILL an executor JVM while a batch is in flight: Spark runs its tasks again elsewhere,
    # the retried tasks fence the killed ones' transactions, and read_committed consumers see
    # every record once (Spark's own Kafka sink would be at-least-once here)
    from spark_helpers import create_topic, produce
    from test_exactly_once import _read_committed, batch_ids

    create_topic(gregor, topic, 2)
    create_topic(gregor, f"{topic}-out", 2)
    produced = produce(gregor, topic, {0: 100, 1: 100})
    cp = tmp_path / "cp"
    job = Path(__file__).with_name("eos_job.py")
    proc = subprocess.Popen(
        [
            sys.executable,
            str(job),
            gregor.bootstrap_servers,
            topic,
            f"{topic}-out",
            str(cp),
            cluster.url,
        ],
        stdout=open(tmp_path / "job.log", "wb"),
        stderr=subprocess.STDOUT,
        env=dict(os.environ, SPARK_LOCAL_IP="127.0.0.1"),
    )
    killed = None
    deadline = time.monotonic() + 600
    while proc.poll() is None and time.monotonic() < deadline:
        in_flight = batch_ids(cp / "offsets") - batch_ids(cp / "commits")
        executors = _executors(cluster)
        if killed is None and in_flight and batch_ids(cp / "commits") and executors:
            os.kill(executors[0], 9)
            killed = sorted(in_flight)
        time.sleep(0.1)
    assert proc.wait(60) == 0, (tmp_path / "job.log").read_text()[-3000:]
    assert killed is not None
    got = _read_committed(gregor.bootstrap_servers, f"{topic}-out", len(produced))
    assert sorted(got) == sorted(v.upper() for _p, _i, _k, v, _ts in produced)
