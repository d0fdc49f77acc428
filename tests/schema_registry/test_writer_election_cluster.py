"""The registries beside the brokers of a real cluster (broker processes on etcd) elect one
writer: schemas registered through every broker get unique ids, the writer's broker is
killed, a survivor's registry becomes the writer and allocates above the old maximum, and
the killed broker, restarted, rebuilds every schema from the topic."""

from __future__ import annotations

import json
import re
import time
from typing import Any

import pytest

from gregor.testing.cluster import ClusterProcess
from gregor.testing.etcd import etcd_binary
from gregor.testing.ports import free_port

from .conftest import Registry
from .conftest import avro_record as _avro_record


def avro_record(name: str, *fields: tuple[str, str]) -> str:
    """The schema as the registry keeps it (canonical: no blanks), so answers compare as text."""
    return json.dumps(json.loads(_avro_record(name, *fields)), separators=(",", ":"))


pytestmark = [
    pytest.mark.process,
    pytest.mark.slow,
    pytest.mark.skipif(etcd_binary() is None, reason="no etcd binary (scripts/system-deps.sh)"),
]

CONFIG: dict[str, object] = {
    "replica.lag.time.max.ms": 3000,
    "replica.fetch.backoff.ms": 200,
    "offsets.topic.replication.factor": 3,
    "offsets.topic.num.partitions": 5,
    "default.replication.factor": 3,  # the _schemas topic the registries create
}


class At(Registry):
    """Raw HTTP to a registry at a known URL (the fixture's ``Registry`` without a server)."""

    def __init__(self, url: str) -> None:
        super().__init__(None, "")  # type: ignore[arg-type]
        self._url = url

    @property
    def url(self) -> str:
        return self._url


def started(cluster: ClusterProcess, node: int, since: int = 0) -> None:
    """Until the broker's log says its registry started (after ``since`` characters)."""
    deadline = time.monotonic() + 180  # a bound on the wait, not a timing assertion
    b = cluster.broker(node)
    while "event=schema_registry.started" not in b.read_log()[since:]:
        assert b.proc is not None and b.proc.poll() is None, b.read_log()[-3000:]
        assert time.monotonic() < deadline, b.read_log()[-3000:]
        time.sleep(0.05)


def until_answered(reg: Registry, method: str, path: str, body: Any) -> Any:
    """A write, asked again while no writer can take it (50003/50004: the election is
    settling); the first other answer."""
    deadline = time.monotonic() + 180
    while True:
        try:
            reply = reg.call(method, path, body)
        except OSError:
            reply = None
        if reply is not None and not (
            reply.status == 500
            and isinstance(reply.body, dict)
            and reply.body.get("error_code") in (50002, 50003, 50004)
        ):
            return reply
        assert time.monotonic() < deadline, reply and reply.text
        time.sleep(0.1)


def writers(cluster: ClusterProcess, urls: dict[int, str]) -> list[int]:
    """The brokers whose registry logged that it is the writer (most recent election last)."""
    found = []
    for node, url in urls.items():
        log = cluster.broker(node).read_log()
        for m in re.finditer(rf"{re.escape(url)} is the writer of _schemas", log):
            found.append((m.start(), node))
    return [node for _, node in found]


def test_the_cluster_keeps_every_schema_and_id_when_the_writer_dies() -> None:
    ports = {n: free_port() for n in (1, 2, 3)}
    urls = {n: f"http://127.0.0.1:{p}" for n, p in ports.items()}
    per_broker = {n: {"schema.registry.listener": urls[n]} for n in ports}
    with ClusterProcess(3, config=CONFIG, broker_config=per_broker) as cluster:
        for n in ports:
            started(cluster, n)
        regs = {n: At(u) for n, u in urls.items()}
        ids = {}
        for i, n in enumerate([1, 2, 3, 1, 2, 3]):
            schema = avro_record(f"C{i}", ("a", "int"))
            reply = until_answered(regs[n], "POST", f"/subjects/c{i}/versions", {"schema": schema})
            assert reply.status == 200, reply.text
            ids[reply.body["id"]] = (f"c{i}", schema)
            assert regs[n].get(f"/subjects/c{i}/versions/1").body["id"] == reply.body["id"]
        assert sorted(ids) == [1, 2, 3, 4, 5, 6]
        elected = writers(cluster, urls)
        assert len(set(elected)) == 1, elected  # one writer throughout
        writer = elected[-1]

        cluster.kill(writer)
        survivors = [n for n in ports if n != writer]
        reply = until_answered(
            regs[survivors[0]],
            "POST",
            "/subjects/after/versions",
            {"schema": avro_record("After", ("a", "int"))},
        )
        assert reply.body == {"id": 7, "version": 1}, reply.text
        ids[7] = ("after", avro_record("After", ("a", "int")))
        reply = until_answered(
            regs[survivors[1]],
            "POST",
            "/subjects/later/versions",
            {"schema": avro_record("Later", ("a", "int"))},
        )
        assert reply.body == {"id": 8, "version": 1}, reply.text
        ids[8] = ("later", avro_record("Later", ("a", "int")))
        new_writer = writers(cluster, {n: urls[n] for n in survivors})[-1]
        assert new_writer in survivors

        # the killed broker, restarted, rebuilds its registry from the topic
        since = len(cluster.broker(writer).read_log())
        cluster.restart(writer)
        started(cluster, writer, since)
        for sid, (subject, schema) in ids.items():
            for n in ports:
                deadline = time.monotonic() + 180
                while (got := regs[n].get(f"/schemas/ids/{sid}")).body != {"schema": schema}:
                    assert time.monotonic() < deadline, (n, sid, got.text)
                    time.sleep(0.05)
                assert regs[n].get(f"/subjects/{subject}/versions/1").body["id"] == sid
        # and writes through it still reach the one writer
        reply = until_answered(
            regs[writer],
            "POST",
            "/subjects/back/versions",
            {"schema": avro_record("B", ("a", "int"))},
        )
        assert reply.body == {"id": 9, "version": 1}, reply.text
