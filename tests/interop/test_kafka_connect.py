"""A Kafka Connect worker in distributed mode (Apache Kafka's ``ConnectDistributed``, the pinned
release) on a real Gregor broker: its config, offset and status topics live on Gregor, and a file
source connector and a file sink connector carry lines from one file through a Gregor topic into
another, end to end, across a restart of the worker."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from gregor.testing import BrokerProcess
from gregor.testing.kafka import java_process
from gregor.testing.ports import free_port

pytestmark = pytest.mark.jvm


class Worker:
    def __init__(self, cp: str, properties: Path, log: Path, port: int) -> None:
        with open(log, "ab") as out:
            self.proc = java_process(
                cp,
                "org.apache.kafka.connect.cli.ConnectDistributed",
                str(properties),
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self.url = f"http://127.0.0.1:{port}"
        self.log = log

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            self.url + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                text = r.read()
                return r.status, json.loads(text) if text else None
        except urllib.error.HTTPError as e:
            text = e.read()
            try:
                return e.code, json.loads(text or b"null")
            except ValueError:  # Jetty's own HTML page, before Connect's resources are up
                return e.code, text.decode(errors="replace")

    def wait_ready(self) -> None:
        """Until its REST API answers and it has joined its group (GET /connectors works)."""
        while True:
            if self.proc.poll() is not None:
                raise AssertionError(f"the Connect worker exited:\n{self.log.read_text()[-4000:]}")
            try:
                if self.request("GET", "/connectors")[0] == 200:
                    return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.2)

    def wait_running(self, name: str) -> dict[str, Any]:
        while True:
            status, body = self.request("GET", f"/connectors/{name}/status")
            if (
                status == 200
                and body["connector"]["state"] == "RUNNING"
                and body["tasks"]
                and all(t["state"] == "RUNNING" for t in body["tasks"])
            ):
                return body
            if status == 200 and any(t["state"] == "FAILED" for t in body["tasks"]):
                raise AssertionError(f"{name} failed: {body}")
            time.sleep(0.2)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def workers() -> Iterator[list[Worker]]:
    started: list[Worker] = []
    yield started
    for w in started:
        if w.proc.poll() is None:
            w.stop()


def lines_of(path: Path, n: int) -> list[str]:
    """The first ``n`` lines the sink wrote, once it has written them."""
    while True:
        if path.exists():
            lines = path.read_text().splitlines()
            if len(lines) >= n:
                return lines
        time.sleep(0.1)


def test_file_source_and_sink_through_gregor(
    java_harness,
    broker: BrokerProcess,
    tmp_path: Path,  # noqa: ANN001
    workers: list[Worker],
) -> None:
    b = broker.bootstrap_servers
    tag = uuid.uuid4().hex[:6]
    topic, configs, offsets, statuses = (
        f"connect-{tag}-{x}" for x in ("lines", "configs", "offsets", "status")
    )
    port = free_port()
    props = tmp_path / "worker.properties"
    props.write_text(
        "\n".join(
            [
                f"bootstrap.servers={b}",
                f"group.id=connect-{tag}",
                f"config.storage.topic={configs}",
                f"offset.storage.topic={offsets}",
                f"status.storage.topic={statuses}",
                "config.storage.replication.factor=1",
                "offset.storage.replication.factor=1",
                "status.storage.replication.factor=1",
                "offset.storage.partitions=2",
                "status.storage.partitions=2",
                "key.converter=org.apache.kafka.connect.storage.StringConverter",
                "value.converter=org.apache.kafka.connect.storage.StringConverter",
                "offset.flush.interval.ms=200",
                f"listeners=http://127.0.0.1:{port}",
                "rest.advertised.host.name=127.0.0.1",
                "plugin.discovery=only_scan",
            ]
        )
        + "\n"
    )
    admin = AdminClient({"bootstrap.servers": b})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    source_file, sink_file = tmp_path / "in.txt", tmp_path / "out.txt"
    first = [f"line {i} {tag}" for i in range(40)]
    source_file.write_text("\n".join(first) + "\n")

    worker = Worker(java_harness.cp, props, tmp_path / "connect.log", port)
    workers.append(worker)
    worker.wait_ready()
    status, _ = worker.request(
        "POST",
        "/connectors",
        {
            "name": "src",
            "config": {
                "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
                "tasks.max": "1",
                "file": str(source_file),
                "topic": topic,
            },
        },
    )
    assert status == 201
    status, _ = worker.request(
        "POST",
        "/connectors",
        {
            "name": "sink",
            "config": {
                "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
                "tasks.max": "1",
                "file": str(sink_file),
                "topics": topic,
            },
        },
    )
    assert status == 201
    worker.wait_running("src")
    worker.wait_running("sink")
    assert lines_of(sink_file, 40) == first

    # The worker's own topics are on Gregor, compacted as Connect requires.
    described = admin.describe_configs(
        [ConfigResource("topic", t) for t in (configs, offsets, statuses)]
    )
    for f in described.values():
        assert f.result(30)["cleanup.policy"].value == "compact"
    assert len(admin.list_topics(offsets, timeout=30).topics[offsets].partitions) == 2

    # A restart of the worker: it reads its configs and the source's offset back from Gregor
    # and carries on from where it was, without sending a line twice.
    worker.stop()
    more = [f"more {i} {tag}" for i in range(10)]
    with open(source_file, "a") as f:
        f.write("\n".join(more) + "\n")
    worker = Worker(java_harness.cp, props, tmp_path / "connect.log", port)
    workers.append(worker)
    worker.wait_ready()
    assert sorted(worker.request("GET", "/connectors")[1]) == ["sink", "src"]
    worker.wait_running("src")
    worker.wait_running("sink")
    assert lines_of(sink_file, 50) == first + more

    c = Consumer({"bootstrap.servers": b, "group.id": f"check-{tag}", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got: list[str] = []
    while len(got) < 50:
        got += [m.value().decode() for m in c.consume(100, 0.5) if m.error() is None]
    c.close()
    assert got == first + more  # each line in the topic once (a single-partition topic: in order)
    assert worker.request("DELETE", "/connectors/src")[0] == 204
    assert worker.request("DELETE", "/connectors/sink")[0] == 204
