"""``gregor perf produce|consume`` against a real broker; what they report is checked against
what the topic holds, read by confluent-kafka."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from gregor.testing import BrokerProcess
from gregor.testing.cli import run_command

pytestmark = pytest.mark.interop


def run(b: BrokerProcess, *args: str) -> tuple[int, str, str]:
    return run_command(b.bootstrap_servers, *args)


def records_in(b: BrokerProcess, topic: str, partitions: int) -> int:
    c = Consumer({"bootstrap.servers": b.bootstrap_servers, "group.id": "count"})
    try:
        return sum(
            c.get_watermark_offsets(TopicPartition(topic, p), 30)[1] for p in range(partitions)
        )
    finally:
        c.close()


def test_perf_produce_then_consume(tmp_path: Path) -> None:
    with BrokerProcess(config={"num.partitions": 2}) as b:
        code, out, _ = run(
            b,
            "perf",
            "produce",
            "--topic",
            "perf",
            "--num-records",
            "5000",
            "--record-size",
            "100",
            "--throughput",
            "-1",
            "--producer-props",
            "acks=all",
        )
        last = out.splitlines()[-1]
        assert code == 0 and last.startswith("5000 records sent, ") and last.endswith("ms 99.9th.")
        assert records_in(b, "perf", 2) == 5000
        # a rate limit: 300 records at 200/s cannot take less than the 1.495 s the last one is due at
        code, out, _ = run(
            b,
            "perf",
            "produce",
            "--topic",
            "perf",
            "--num-records",
            "300",
            "--record-size",
            "10",
            "--throughput",
            "200",
            "--output",
            "json",
        )
        figures = json.loads(out)
        assert code == 0 and figures["records"] == 300 and figures["seconds"] >= 1.49
        assert figures["p50_ms"] <= figures["p99_ms"] <= figures["max_latency_ms"]
        payloads = tmp_path / "payloads.txt"
        payloads.write_text("alpha\nbeta\ngamma\n")
        assert (
            run(
                b,
                "perf",
                "produce",
                "--topic",
                "perf",
                "--num-records",
                "100",
                "--payload-file",
                str(payloads),
                "--throughput",
                "-1",
            )[0]
            == 0
        )
        assert records_in(b, "perf", 2) == 5400

        code, out, _ = run(b, "perf", "consume", "--topic", "perf", "--messages", "5400")
        header, row = out.splitlines()
        assert (
            code == 0
            and header.split(", ")[4] == "data.consumed.in.nMsg"
            and row.split(", ")[4] == "5400"
        )
        code, out, err = run(
            b,
            "perf",
            "consume",
            "--topic",
            "perf",
            "--messages",
            "6000",
            "--group",
            "perf-g",
            "--timeout",
            "1000",
            "--output",
            "json",
        )
        assert (
            code == 1
            and json.loads(out)["data.consumed.in.nMsg"] == 5400
            and "timeout (1000 ms)" in err
        )
        # bad input
        assert (
            run(
                b, "perf", "produce", "--topic", "perf", "--num-records", "1", "--throughput", "-1"
            )[0]
            == 2
        )
        assert (
            run(
                b,
                "perf",
                "produce",
                "--topic",
                "perf",
                "--num-records",
                "0",
                "--record-size",
                "1",
                "--throughput",
                "-1",
            )[0]
            == 2
        )
        assert run(b, "perf", "consume", "--topic", "perf", "--messages", "0")[0] == 2
