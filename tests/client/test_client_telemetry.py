"""Client telemetry (KIP-714) with a real client: librdkafka (confluent-kafka) asks for its
subscription, pushes OTLP metrics (zstd-compressed) to a broker process, and the values show on
the broker's metrics endpoint and in ``gregor clients metrics``; ``gregor clients`` manages the
subscriptions as kafka-client-metrics does."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import Producer

from gregor.testing import BrokerProcess
from gregor.testing.cli import run_command

pytestmark = [pytest.mark.interop, pytest.mark.timeout(180)]

PREFIX = "org.apache.kafka.producer."


def test_librdkafka_pushes_its_subscribed_metrics() -> None:
    with BrokerProcess(config={"num.partitions": 1, "metrics.listener": "http://127.0.0.1:0"}) as b:

        def gregor(*args: str) -> tuple[int, str, str]:
            return run_command(b.bootstrap_servers, "clients", *args)

        assert gregor(
            "alter",
            "--name",
            "producers",
            "--metrics",
            PREFIX,
            "--interval",
            "200",
            "--match",
            "client_id=billing-.*",
        )[:2] == (0, "Completed updating config for client-metrics producers.\n")
        assert (
            gregor("alter", "--name", "nobody", "--metrics", "*", "--match", "client_id=nobody")[0]
            == 0
        )
        assert gregor("list")[:2] == (0, "nobody\nproducers\n")
        code, out, _ = gregor("describe", "--name", "producers", "--output", "json")
        assert (code, json.loads(out)) == (
            0,
            [
                {
                    "name": "producers",
                    "metrics": PREFIX,
                    "interval.ms": "200",
                    "match": "client_id=billing-.*",
                }
            ],
        )

        p = Producer({"bootstrap.servers": b.bootstrap_servers, "client.id": "billing-1"})
        assert b.metrics_url is not None
        try:
            rows: list[dict[str, object]] = []
            while not any(r["metric"] == PREFIX + "node.request.latency.avg" for r in rows):
                p.produce("billing", b"x" * 100)
                p.poll(0.2)  # librdkafka pushes every 200 ms once subscribed
                code, out, _ = run_command(
                    None,
                    "clients",
                    "metrics",
                    "--metrics-url",
                    b.metrics_url,
                    "--client-id",
                    "billing-1",
                    "--output",
                    "json",
                )
                assert code == 0
                rows = json.loads(out)
            assert p.flush(30) == 0
        finally:
            p.flush(30)
        assert {r["client_id"] for r in rows} == {"billing-1"}
        assert {r["client_software_name"] for r in rows} == {"confluent-kafka-python"}
        assert all(str(r["metric"]).startswith(PREFIX) for r in rows)  # only what it was asked for
        code, text, _ = run_command(None, "clients", "metrics", "--metrics-url", b.metrics_url)
        assert code == 0 and " billing-1 (confluent-kafka-python " in text
        assert f"{PREFIX}node.request.latency.avg" in text

        assert gregor("delete", "--name", "producers")[:2] == (
            0,
            "Completed deleting client-metrics producers.\n",
        )
        assert gregor("list")[:2] == (0, "nobody\n")
        code, _, err = gregor("delete", "--name", "producers")
        assert code == 1 and "no client metrics subscription named 'producers'" in err
        code, _, err = gregor("alter", "--name", "x", "--interval", "5")
        assert code == 1 and err.startswith("Error: INVALID_CONFIG: ")
        code, _, err = gregor("alter", "--name", "x")
        assert code == 2 and "give at least one of" in err
