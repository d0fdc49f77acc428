"""Client telemetry (KIP-714) at the handler, one node: subscriptions as CLIENT_METRICS config
resources (validated, listed, described), GetTelemetrySubscriptions matching them to a client,
and PushTelemetry's checks in Kafka's terms, with the pushed OTLP points kept per client
instance. (librdkafka pushing for real: tests/client/test_client_telemetry.py.)"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import pytest
from handler_wire import Wire
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import (
    Gauge,
    Histogram,
    HistogramDataPoint,
    Metric,
    MetricsData,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
)

from gregor.protocol.errors import ErrorCode
from gregor.protocol.messages.describe_configs import DescribeConfigsRequest
from gregor.protocol.messages.get_telemetry_subscriptions import GetTelemetrySubscriptionsRequest
from gregor.protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from gregor.protocol.messages.list_client_metrics_resources import ListClientMetricsResourcesRequest
from gregor.protocol.messages.push_telemetry import PushTelemetryRequest
from gregor.protocol.records.compression import compress
from gregor.testing import InProcessBroker

pytestmark = pytest.mark.timeout(60)

CLIENT_METRICS = 16
ZERO = uuid.UUID(int=0)
ZSTD, GZIP = 4, 1


@pytest.fixture
def wire_as(runner: asyncio.Runner, inprocess: InProcessBroker) -> Iterator[object]:
    opened: list[Wire] = []

    def make(client_id: str) -> Wire:
        w = Wire(runner, inprocess, client_id=client_id)
        opened.append(w)
        return w

    yield make
    for w in opened:
        w.close()


def subscribe(wire: Wire, name: str, *configs: tuple[str, int, str | None]) -> int:
    resp = wire.request(
        IncrementalAlterConfigsRequest(
            resources=[
                IncrementalAlterConfigsRequest.Resources(
                    resource_type=CLIENT_METRICS,
                    resource_name=name,
                    configs=[
                        IncrementalAlterConfigsRequest.Resources.Configs(
                            name=k, config_operation=op, value=v
                        )
                        for k, op, v in configs
                    ],
                )
            ],
            validate_only=False,
        ),
        1,
    )
    return int(resp.responses[0].error_code)


def get(wire: Wire, instance: uuid.UUID = ZERO) -> object:
    return wire.request(GetTelemetrySubscriptionsRequest(client_instance_id=instance), 0)


def push(
    wire: Wire,
    instance: uuid.UUID,
    subscription: int,
    payload: bytes,
    *,
    codec: int = ZSTD,
    terminating: bool = False,
) -> int:
    data = compress(codec, payload) if codec in (GZIP, ZSTD) else payload
    resp = wire.request(
        PushTelemetryRequest(
            client_instance_id=instance,
            subscription_id=subscription,
            terminating=terminating,
            compression_type=codec,
            metrics=data,
        ),
        0,
    )
    return int(resp.error_code)


def otlp(latency: float, queued: int) -> bytes:
    attrs = [KeyValue(key="node.id", value=AnyValue(string_value="1"))]
    return MetricsData(
        resource_metrics=[
            ResourceMetrics(
                scope_metrics=[
                    ScopeMetrics(
                        metrics=[
                            Metric(
                                name="org.apache.kafka.producer.node.request.latency.avg",
                                gauge=Gauge(
                                    data_points=[
                                        NumberDataPoint(
                                            attributes=attrs,
                                            as_double=latency,
                                            time_unix_nano=1_000,
                                        )
                                    ]
                                ),
                            ),
                            Metric(
                                name="org.apache.kafka.producer.record.queue.time.max",
                                gauge=Gauge(
                                    data_points=[
                                        NumberDataPoint(as_int=queued, time_unix_nano=1_000)
                                    ]
                                ),
                            ),
                            Metric(
                                name="org.apache.kafka.producer.request.latency",
                                histogram=Histogram(
                                    data_points=[
                                        HistogramDataPoint(count=4, sum=10.5, time_unix_nano=1_000)
                                    ]
                                ),
                            ),
                        ]
                    )
                ]
            )
        ]
    ).SerializeToString()


def test_a_new_client_gets_an_instance_id_and_no_metrics_without_a_subscription(wire: Wire) -> None:
    first = get(wire)
    assert first.error_code == 0 and first.client_instance_id != ZERO
    assert (
        first.requested_metrics,
        first.push_interval_ms,
        first.accepted_compression_types,
        first.telemetry_max_bytes,
        first.delta_temporality,
    ) == ([], 300000, [4, 3, 1, 2], 1048576, True)
    # Asking again within the push interval is throttled, as in Kafka.
    assert get(wire, first.client_instance_id).error_code == ErrorCode.THROTTLING_QUOTA_EXCEEDED


def test_subscriptions_match_clients_by_selector(wire_as: object) -> None:
    producer, other = wire_as("billing-producer"), wire_as("reporting")  # type: ignore[operator]
    assert (
        subscribe(
            producer,
            "billing",
            ("metrics", 0, "org.apache.kafka.producer.,org.apache.kafka.consumer."),
            ("interval.ms", 0, "2000"),
            ("match", 0, "client_id=billing-.*"),
        )
        == 0
    )
    assert (
        subscribe(
            producer,
            "everything-slow",
            ("metrics", 0, "*"),
            ("interval.ms", 0, "60000"),
            ("match", 0, "client_id=report.*"),
        )
        == 0
    )
    assert (
        subscribe(
            producer,
            "fast-for-all",
            ("metrics", 0, "org.apache.kafka.producer."),
            ("interval.ms", 0, "1000"),
        )
        == 0
    )  # no match: every client
    mine = get(producer)
    assert (mine.requested_metrics, mine.push_interval_ms) == (
        ["org.apache.kafka.producer.", "org.apache.kafka.consumer."],
        1000,
    )
    theirs = get(other)
    assert (theirs.requested_metrics, theirs.push_interval_ms) == (
        [""],
        1000,
    )  # "*" is every metric
    assert mine.subscription_id != theirs.subscription_id
    listed = producer.request(ListClientMetricsResourcesRequest(), 0)
    assert (listed.error_code, [r.name for r in listed.client_metrics_resources]) == (
        0,
        ["billing", "everything-slow", "fast-for-all"],
    )
    described = producer.request(
        DescribeConfigsRequest(
            resources=[
                DescribeConfigsRequest.Resources(
                    resource_type=CLIENT_METRICS, resource_name="billing", configuration_keys=None
                )
            ]
        ),
        4,
    )
    [result] = described.results
    assert {c.name: (c.value, c.config_source) for c in result.configs} == {
        "metrics": ("org.apache.kafka.producer.,org.apache.kafka.consumer.", 7),
        "interval.ms": ("2000", 7),
        "match": ("client_id=billing-.*", 7),
    }


@pytest.mark.parametrize(
    ("configs", "error"),
    [
        ([("colour", 0, "red")], ErrorCode.INVALID_CONFIG),
        ([("interval.ms", 0, "50")], ErrorCode.INVALID_CONFIG),
        ([("interval.ms", 0, "3600001")], ErrorCode.INVALID_CONFIG),
        ([("interval.ms", 0, "soon")], ErrorCode.INVALID_CONFIG),
        ([("match", 0, "hostname=.*")], ErrorCode.INVALID_CONFIG),
        ([("match", 0, "client_id=(")], ErrorCode.INVALID_CONFIG),
        ([("match", 0, "client_id")], ErrorCode.INVALID_CONFIG),
    ],
)
def test_bad_subscriptions_are_refused(
    wire: Wire, configs: list[tuple[str, int, str]], error: int
) -> None:
    assert subscribe(wire, "bad", *configs) == error
    assert wire.request(ListClientMetricsResourcesRequest(), 0).client_metrics_resources == []
    assert subscribe(wire, "", ("interval.ms", 0, "1000")) == ErrorCode.INVALID_REQUEST


def test_pushes_are_checked_and_their_points_kept(wire: Wire, inprocess: InProcessBroker) -> None:
    assert subscribe(wire, "all", ("metrics", 0, "*"), ("interval.ms", 0, "60000")) == 0
    sub = get(wire)
    iid, sid = sub.client_instance_id, sub.subscription_id
    assert push(wire, iid, sid + 1, otlp(1.0, 1)) == ErrorCode.UNKNOWN_SUBSCRIPTION_ID
    sub = get(wire, iid)  # allowed at once after UNKNOWN_SUBSCRIPTION_ID
    assert (sub.error_code, sub.subscription_id) == (0, sid)
    assert push(wire, iid, sid, otlp(2.5, 7)) == 0
    assert inprocess.broker is not None
    inst = inprocess.broker.client_telemetry.instances[iid]
    assert {(p.name, p.attributes): (p.value, p.count) for p in inst.points.values()} == {
        ("org.apache.kafka.producer.node.request.latency.avg", (("node.id", "1"),)): (2.5, None),
        ("org.apache.kafka.producer.record.queue.time.max", ()): (7.0, None),
        ("org.apache.kafka.producer.request.latency", ()): (10.5, 4),
    }
    assert inst.client["client_id"] == "handler-test"
    assert (
        push(wire, iid, sid, otlp(3.0, 1)) == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    )  # before the interval
    assert (
        push(wire, iid, sid, otlp(4.0, 2), codec=GZIP, terminating=True) == 0
    )  # a last push may be early
    assert (
        inst.points[
            ("org.apache.kafka.producer.node.request.latency.avg", (("node.id", "1"),))
        ].value
        == 4.0
    )
    assert (
        push(wire, iid, sid, otlp(5.0, 3), terminating=True) == ErrorCode.INVALID_REQUEST
    )  # only one


def test_bad_pushes(wire: Wire) -> None:
    assert subscribe(wire, "all", ("metrics", 0, "*"), ("interval.ms", 0, "100")) == 0
    sub = get(wire)
    iid, sid = sub.client_instance_id, sub.subscription_id
    assert push(wire, ZERO, sid, otlp(1.0, 1)) == ErrorCode.INVALID_REQUEST
    assert push(wire, iid, sid, otlp(1.0, 1), codec=9) == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    assert (
        push(wire, iid, sid, b"\xff\x01 not a protobuf message", codec=0)
        == ErrorCode.INVALID_REQUEST
    )
    assert push(wire, iid, sid, b"\x00" * 1_100_000, codec=0) == ErrorCode.TELEMETRY_TOO_LARGE
    # A changed subscription makes the old id unknown.
    assert subscribe(wire, "all", ("interval.ms", 0, "200")) == 0
    assert push(wire, iid, sid, otlp(1.0, 1)) == ErrorCode.UNKNOWN_SUBSCRIPTION_ID
    again = get(wire, iid)
    assert (again.error_code, again.push_interval_ms) == (0, 200) and again.subscription_id != sid
    assert push(wire, iid, again.subscription_id, otlp(1.0, 1)) == 0
