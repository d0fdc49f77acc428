"""A Kafka Streams application (``gregor.jvm.StreamsApp``: page views re-keyed by page, counted in
1-minute windows in a state store, exactly_once_v2, record cache off) on a real Gregor broker:
its repartition and changelog topics, a SIGKILL mid-run, a clean restart, and exactly one output
record per input record, each page's window counting 1, 2, ..., n."""

from __future__ import annotations

import collections
import signal
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from gregor.testing import BrokerProcess
from gregor.testing.kafka import java_process

pytestmark = pytest.mark.jvm

PAGES = 5
BASE_TS = 1_700_000_000_000  # event time of the first view; one view per second after it


def view(i: int) -> dict[str, object]:
    return {"key": f"user{i % 7}", "value": f"page{i % PAGES}", "timestamp": BASE_TS + i * 1000}


def window_key(i: int) -> str:
    ts = BASE_TS + i * 1000
    return f"page{i % PAGES}@{ts - ts % 60_000}"


class App:
    """One run of the Streams application as a process."""

    def __init__(
        self, cp: str, bootstrap: str, app_id: str, source: str, sink: str, state: Path, log: Path
    ) -> None:
        with open(log, "ab") as err:
            self.proc = java_process(
                cp,
                "gregor.jvm.StreamsApp",
                bootstrap,
                app_id,
                source,
                sink,
                str(state),
                stdout=subprocess.PIPE,
                stderr=err,
            )
        self.log = log

    def wait_running(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.strip() == b"STATE RUNNING":
                return
        raise AssertionError(
            f"the Streams app exited ({self.proc.wait()}):\n{self.log.read_text()[-4000:]}"
        )

    def stop(self, sig: int) -> list[bytes]:
        """Signal the process, wait for it to end; the state lines it printed meanwhile."""
        self.proc.send_signal(sig)
        lines = self.proc.stdout.read().split() if self.proc.stdout is not None else []
        self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        return lines

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-6000:]


@pytest.fixture
def apps() -> Iterator[list[App]]:
    started: list[App] = []
    yield started
    for app in started:
        if app.proc.poll() is None:
            app.stop(signal.SIGKILL)


def committed_output(
    java_harness, broker: BrokerProcess, sink: str, count: int = 0
) -> list[dict[str, object]]:  # noqa: ANN001
    """The output's committed records: at least ``count`` of them, or (count 0) all there are."""
    props = {"bootstrap.servers": broker.bootstrap_servers, "isolation.level": "read_committed"}
    return java_harness.call(
        "consume", props=props, assign=[[sink, 0], [sink, 1]], count=count, to_end=count == 0
    )["records"]


def test_windowed_count_exactly_once_through_sigkill_and_restart(
    java_harness,
    broker: BrokerProcess,
    tmp_path: Path,
    apps: list[App],  # noqa: ANN001
) -> None:
    b = broker.bootstrap_servers
    app_id = f"views-{uuid.uuid4().hex[:6]}"
    source, sink = f"{app_id}-in", f"{app_id}-out"
    admin = AdminClient({"bootstrap.servers": b})
    for f in admin.create_topics([NewTopic(source, 2, 1), NewTopic(sink, 2, 1)]).values():
        f.result(30)
    state = tmp_path / "state"

    def produce(lo: int, hi: int) -> None:
        java_harness.call(
            "produce",
            props={"bootstrap.servers": b},
            topic=source,
            records=[view(i) for i in range(lo, hi)],
        )

    def start() -> App:
        app = App(java_harness.cp, b, app_id, source, sink, state, tmp_path / "streams.log")
        apps.append(app)
        app.wait_running()
        return app

    produce(0, 200)
    first = start()
    committed_output(java_harness, broker, sink, 50)  # it is under way ...
    first.stop(signal.SIGKILL)  # ... and dies mid-run, transactions open
    produce(200, 400)
    second = start()  # same state directory: same process id, so it fences the dead one
    committed_output(java_harness, broker, sink, 400)
    # A clean close this time: the shutdown hook closes Streams (it commits and leaves the group).
    lines = second.stop(signal.SIGTERM)
    closed = lines[lines.index(b"CLOSED") :] if b"CLOSED" in lines else lines[-6:]
    assert closed[:3] == [b"CLOSED", b"true", b"NOT_RUNNING"], (closed, second.log_tail())
    produce(400, 500)
    third = start()
    committed_output(java_harness, broker, sink, 500)
    third.stop(signal.SIGTERM)

    out = committed_output(java_harness, broker, sink)
    expected = collections.Counter(window_key(i) for i in range(500))
    assert len(out) == 500  # one committed output record per input record: none lost, none twice
    by_key: dict[str, list[int]] = collections.defaultdict(list)
    for r in sorted(out, key=lambda r: (r["partition"], r["offset"])):
        by_key[str(r["key"])].append(int(str(r["value"])))
    assert {k: v for k, v in by_key.items()} == {
        k: list(range(1, n + 1)) for k, n in expected.items()
    }

    topics = admin.list_topics(timeout=30).topics
    repartition, changelog = f"{app_id}-by-page-repartition", f"{app_id}-counts-changelog"
    assert repartition in topics and changelog in topics
    configs = admin.describe_configs([ConfigResource("topic", changelog)])
    (entries,) = [f.result(30) for f in configs.values()]
    assert "compact" in entries["cleanup.policy"].value
