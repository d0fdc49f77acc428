"""The reference pipeline end to end on a small input, its results checked exactly: Avro page
views through the registry the module's broker serves (the default), JSON as the option."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from spark_helpers import Broker

from gregor.pipelines import clickstream as cs
from gregor.testing import BrokerProcess, process_group


@pytest.fixture(scope="module")
def gregor() -> Iterator[Broker]:
    """This module's broker serves a schema registry (``registry``), as the main job's does."""
    config = {"log.retention.ms": "-1", "schema.registry.listener": "http://127.0.0.1:0"}
    with BrokerProcess(config=config) as b:
        yield Broker("gregor", b.bootstrap_servers, b)


@pytest.fixture(scope="module")
def registry(gregor: Broker) -> str:
    url = gregor.process.wait_schema_registry()
    assert url.startswith("http://127.0.0.1:")
    return str(url)


def test_generator_is_deterministic_and_bounded() -> None:
    a = cs.generate_events(500, users=50, minutes=5, jitter_s=20, seed=3)
    assert a == cs.generate_events(500, users=50, minutes=5, jitter_s=20, seed=3)
    ts = [e["ts"] for e in a]
    assert min(ts) >= cs.START_MS and max(ts) < cs.START_MS + 5 * 60_000
    assert any(b < x for x, b in zip(ts, ts[1:], strict=False))  # out of order ...
    assert all(
        x - b < 20_000 for x, b in zip(ts, ts[1:], strict=False)
    )  # ... by less than the jitter
    marker = cs.end_marker(a)
    assert marker["ts"] == (max(ts) // 60_000 + 1) * 60_000 + 120_000
    exp = cs.expected_windows([*a, marker])
    assert sum(v for v, _u in exp.values()) == 500
    assert {start for start, _p in exp} == {cs.START_MS + m * 60_000 for m in range(5)}


def test_pipeline_end_to_end(spark: Any, gregor: Broker, registry: str, tmp_path: Path) -> None:
    config = cs.PipelineConfig(
        gregor.bootstrap_servers,
        schema_registry=registry,
        input_topic="views-e2e",
        output_topic="windows-e2e",
        output_dir=str(tmp_path / "out"),
        events=600,
        users=40,
        minutes=4,
        max_offsets_per_trigger=250,
    )
    cs.create_topics(config)
    events = cs.generate_events(
        config.events, users=config.users, minutes=config.minutes, seed=config.seed
    )
    encode = cs.event_encoder(config)  # registers PageView under views-e2e-value
    produced = [*events, cs.end_marker(events)]
    assert cs.produce_events(config.bootstrap_servers, config.input_topic, produced, encode) == 601
    # the input is Confluent's Avro: confluent-kafka's deserializer reads every record back
    assert _deserialized(config, 601) == sorted(produced, key=lambda e: e["event_id"])
    progress: list[dict] = []
    cs.run_job(spark, config, on_progress=progress.append)
    # 601 offsets in partitions of 178, 280 and 143 (the keyless end marker in partition 0),
    # 250 per trigger shared by backlog with Spark's rounding down: 249, 248, then the
    # remaining 104, then the no-data batch that closes the windows
    assert [p["numInputRows"] for p in progress] == [249, 248, 104, 0]

    expected = cs.expected_windows(events)
    assert len(expected) == 4 * len(cs.PAGES)
    assert cs.parquet_results(spark, config) == expected
    in_topic = cs.topic_results(spark, config)
    got = {}
    for r in in_topic:
        start = cs.START_MS + (int(r["window_start"][14:16]) * 60_000)
        assert (
            r["window_start"][:14] == "2026-01-01T00:" and r["window_end"][:14] == "2026-01-01T00:"
        )
        got[(start, r["page"])] = (r["views"], r["users"])
    assert len(in_topic) == len(expected)
    assert got == expected


def _deserialized(config: cs.PipelineConfig, n: int) -> list[dict]:
    """The input topic's ``n`` values decoded by confluent-kafka's ``AvroDeserializer`` with
    the registry's schema, sorted by event id."""
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    deserialize = AvroDeserializer(SchemaRegistryClient({"url": config.schema_registry}))
    consumer = Consumer({"bootstrap.servers": config.bootstrap_servers, "group.id": "avro-check"})
    consumer.assign([TopicPartition(config.input_topic, p, 0) for p in range(config.partitions)])
    ctx = SerializationContext(config.input_topic, MessageField.VALUE)
    got: list[dict] = []
    try:
        while len(got) < n:
            m = consumer.poll(30)
            assert m is not None and m.error() is None, m and m.error()
            got.append(deserialize(m.value(), ctx))
    finally:
        consumer.close()
    return sorted(got, key=lambda e: e["event_id"])


def test_the_main_job_from_the_cli_against_an_external_broker(
    gregor: Broker, registry: str, tmp_path: Path
) -> None:
    # what `bash scripts/run.sh` runs, at a small volume, as `gregor pipeline run` against a
    # broker of its own choosing: a live progress line per batch, the exact check, the summary
    # and the printed table (one job: test_cli_is_the_main_job; the embedded broker, started
    # without --bootstrap-servers, is test_ctrl_c_stops_the_main_job_and_everything_it_started's)
    out = tmp_path / "cli"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "gregor",
            "pipeline",
            "run",
            "--bootstrap-servers",
            gregor.bootstrap_servers,
            "--schema-registry",
            registry,
            "--master",
            "local[2]",
            "--events",
            "30000",
            "--minutes",
            "4",
            "--max-offsets-per-trigger",
            "10000",
            "--input-topic",
            "cli-in",
            "--output-topic",
            "cli-out",
            "--output-dir",
            str(out),
            "--rows",
            "all",
        ],
        capture_output=True,
        timeout=300,
    )
    text = r.stdout.decode()
    assert r.returncode == 0, text[-3000:] + r.stderr.decode()[-3000:]
    expected = cs.expected_windows(cs.generate_columns(30000, users=300, minutes=4, seed=7))
    assert len(expected) == 4 * len(cs.PAGES)
    assert f"check: all {len(expected)} windows match" in text
    assert cs.parquet_results(None, cs.PipelineConfig("", output_dir=str(out))) == expected
    # the printed table: one line per window, as the generator's ground truth says
    printed = {}
    for ln in text.splitlines():
        if ln.startswith("2026-01-01T00:"):
            when, page, views, users = ln.split()
            printed[(cs.START_MS + int(when[14:16]) * 60_000, page)] = (int(views), int(users))
    assert printed == expected
    lines = [ln for ln in text.splitlines() if ln.startswith("[pipeline] batch")]
    read = [int(ln.split("read")[1].split("/")[0].replace(",", "")) for ln in lines]
    assert read[-1] == 30001 and read == sorted(read)  # every event and the end marker, in order
    assert all("events/s" in ln and "lag" in ln and "watermark" in ln for ln in lines)
    assert "[pipeline] summary: 30,000 events in" in text
    assert f"(subject cli-in-value at {registry})" in text


def test_avro_against_an_external_broker_needs_its_registry(gregor: Broker, tmp_path: Path) -> None:
    # both command lines refuse it before they touch the output directory
    for argv in (["gregor.pipelines"], ["gregor", "pipeline", "run"]):
        r = subprocess.run(
            [sys.executable, "-m", *argv, "-b", gregor.bootstrap_servers],
            capture_output=True,
            timeout=120,
            cwd=tmp_path,
        )
        assert r.returncode == 2 and r.stdout == b""
        last = r.stderr.decode().splitlines()[-1]
        assert (
            "rror: the page views are Avro through a schema registry by default: give the "
            "cluster's registry with --schema-registry URL, or use --value-format json"
        ) in last, last
        assert list(tmp_path.iterdir()) == []


def test_ctrl_c_stops_the_main_job_and_everything_it_started(tmp_path: Path) -> None:
    """``scripts/run.sh``'s job stopped as a terminal's Ctrl-C stops it (SIGINT to its whole
    process group: the job, its broker, the generator and Spark's JVM, while batches run) ends
    with click's one line ``Aborted!`` and exit status 1, as ``gregor`` commands do, and when it
    has exited no process of its group is left, not even a zombie, but those Spark's JVM had
    already left unreaped before the Ctrl-C (the JVM's children, not the job's: an init that
    reaps orphans takes them); its broker stopped cleanly (issue 36)."""
    out = tmp_path / "main"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gregor.pipelines",
            "--master",
            "local[1]",
            "--events",
            "3000000",
            "--output-dir",
            str(out),
            "--rows",
            "0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        process_group=0,
    )
    pgid = proc.pid
    assert proc.stdout is not None
    seen = []
    try:
        for line in proc.stdout:  # until every part runs: the first batch is read
            seen.append(line)
            if line.startswith("[pipeline] batch"):
                break
        else:
            raise AssertionError("the job ended early:\n" + "".join(seen[-40:]))
        before = {pid for pid, state in process_group.members(pgid).items() if state == "Z"}
        os.killpg(pgid, signal.SIGINT)
        rest = proc.stdout.read()
        assert proc.wait() == 1, rest[-3000:]  # pytest-timeout ends a job that hangs
        left = process_group.members(pgid)
        assert {pid: state for pid, state in left.items() if pid not in before} == {}
    finally:
        if proc.poll() is None:
            os.killpg(pgid, signal.SIGKILL)
            proc.wait()
    assert rest.splitlines()[-1] == "Aborted!", rest[-3000:]
    assert "event=broker.stopped" in (out / "broker" / "broker.log").read_text()


def test_cli_is_the_main_job() -> None:
    # `gregor pipeline run` and `python -m gregor.pipelines` (scripts/run.sh) take the same
    # options with the same defaults: one job
    from click.testing import CliRunner

    from gregor.cli.pipeline import pipeline
    from gregor.pipelines.runner import main

    text = CliRunner().invoke(pipeline, ["run", "--help"], terminal_width=200).output
    assert "--events INTEGER" in text and "[default: 1000000]" in text
    assert "--max-offsets-per-trigger INTEGER" in text and "[default: 340000]" in text
    assert "--partitions INTEGER" in text and "[default: 4]" in text
    with pytest.raises(SystemExit):
        main(["--help"])


def test_cli_no_produce_reads_what_the_topic_holds(gregor: Broker, tmp_path: Path) -> None:
    # --no-produce: nothing generated, the job reads the input topic from its start; there is
    # no ground truth of this run, so the check is skipped and the table is what the topic held
    # (JSON page views: the format the option keeps)
    config = cs.PipelineConfig(
        gregor.bootstrap_servers, input_topic="np-in", output_topic="np-out", partitions=2
    )
    cs.create_topics(config)
    events = cs.generate_events(250, users=30, minutes=2, seed=3)
    assert cs.produce_events(gregor.bootstrap_servers, "np-in", events) == 250
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "gregor",
            "pipeline",
            "run",
            "--bootstrap-servers",
            gregor.bootstrap_servers,
            "--master",
            "local[2]",
            "--no-produce",
            "--value-format",
            "json",
            "--minutes",
            "2",
            "--input-topic",
            "np-in",
            "--output-topic",
            "np-out",
            "--output-dir",
            str(tmp_path / "np"),
            "--rows",
            "0",
            "--output",
            "json",
        ],
        capture_output=True,
        timeout=300,
    )
    # --output json: the summary is the one JSON document on stdout, the rest goes to stderr
    text = r.stderr.decode()
    assert r.returncode == 0, r.stdout.decode()[-3000:] + text[-3000:]
    summary = json.loads(r.stdout.decode())
    assert (summary["events"], summary["check"], summary["mismatches"]) == (250, "skipped", [])
    assert summary["windows"] == len(cs.expected_windows(events))
    assert "reading the 250 records np-in holds (nothing generated)" in text
    assert "check: skipped" in text
    # --rows 0 means no table here too, as in python -m gregor.pipelines; the windows are in
    # the Parquet output
    assert "window start (UTC)" not in text
    out = cs.PipelineConfig("", output_dir=str(tmp_path / "np"))
    assert cs.parquet_results(None, out) == cs.expected_windows(events)
