"""The reference pipeline (``gregor pipeline run``) against a 3-broker cluster whose topics
are replicated 3 times, with the leader of an input partition SIGKILLed after the first
micro-batch: the job still ends with the exact result table (the producer, the Spark source
and the Kafka sink all move to the new leaders).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gregor.pipelines import clickstream as cs
from gregor.testing.cluster import ClusterProcess
from gregor.testing.etcd import etcd_binary

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(etcd_binary() is None, reason="no etcd binary (scripts/system-deps.sh)"),
]


@pytest.fixture
def cluster() -> Iterator[ClusterProcess]:
    config = {
        "default.replication.factor": 3,
        "min.insync.replicas": 2,
        "offsets.topic.replication.factor": 3,
        "offsets.topic.num.partitions": 5,
        "transaction.state.log.replication.factor": 3,
        "transaction.state.log.num.partitions": 5,
        "replica.lag.time.max.ms": 3000,
    }
    with ClusterProcess(3, config=config) as c:
        yield c


def leader_of(cluster: ClusterProcess, topic: str, partition: int) -> int:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    while True:
        try:
            md = AdminClient({"bootstrap.servers": cluster.bootstrap_servers}).list_topics(
                topic, timeout=10
            )
        except KafkaException:
            continue
        p = md.topics[topic].partitions.get(partition) if md.topics[topic].error is None else None
        if p is not None and p.leader >= 0 and len(p.isrs) == 3:
            return int(p.leader)


def test_pipeline_survives_a_leader_kill(cluster: ClusterProcess, tmp_path: Path) -> None:
    events, minutes = 20000, 3
    job = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gregor",
            "pipeline",
            "run",
            "--bootstrap-servers",
            cluster.bootstrap_servers,
            "--master",
            "local[2]",
            "--events",
            str(events),
            "--minutes",
            str(minutes),
            "--max-offsets-per-trigger",
            "4000",
            "--input-topic",
            "views-ha",
            "--output-topic",
            "windows-ha",
            "--output-dir",
            str(tmp_path / "out"),
            "--rows",
            "0",
            "--value-format",
            "json",  # the Avro default needs a registry; tests/spark/test_pipeline.py has it
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert job.stdout is not None
    lines: list[str] = []
    killed = -1
    for line in job.stdout:
        lines.append(line)
        if killed < 0 and line.startswith("[pipeline] batch"):
            killed = leader_of(cluster, "views-ha", 0)
            cluster.kill(killed)
    assert job.wait() == 0, "".join(lines)[-4000:]
    text = "".join(lines)
    expected = cs.expected_windows(cs.generate_columns(events, users=300, minutes=minutes, seed=7))
    assert killed > 0
    assert f"check: all {len(expected)} windows match" in text, text[-4000:]
    assert (
        cs.parquet_results(None, cs.PipelineConfig("", output_dir=str(tmp_path / "out")))
        == expected
    )
