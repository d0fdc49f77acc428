"""Client telemetry (KIP-714): which metrics each client instance should push, and the values
it last pushed.

Theory of operation. A client asks GetTelemetrySubscriptions with a zero instance id and is
given a fresh one; with it, it learns its subscription: the union of the metric prefixes of
every CLIENT_METRICS subscription (``client_metrics_configs``) whose ``match`` patterns all
match the client (instance id, client id, software name and version, source address and port),
the shortest of their push intervals, and a ``subscription_id`` that changes whenever that
answer would. No match: no metrics, Kafka's default interval. It then pushes, at most once per
interval, OTLP ``MetricsData`` compressed with one of the accepted codecs; each push is checked
as Kafka checks it (UNKNOWN_SUBSCRIPTION_ID after the subscriptions changed,
THROTTLING_QUOTA_EXCEEDED when early, TELEMETRY_TOO_LARGE, UNSUPPORTED_COMPRESSION_TYPE,
INVALID_REQUEST for a second terminating push or a payload that is not OTLP), then decoded,
and its data points replace that instance's previous values.

``ClientInstance`` objects are this broker's memory only (like Kafka's client instance cache):
one per instance id, forgotten once idle for three push intervals, and at most
``MAX_INSTANCES`` (the least recently seen goes first). The values are exposed on the
metrics endpoint (``gregor_client_telemetry``) and read by ``gregor clients metrics``.
"""

from __future__ import annotations

import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import crc32c

from gregor.broker.config.client_metrics_configs import (
    ALL_METRICS,
    DEFAULT_INTERVAL_MS,
    Subscription,
    parse_subscription,
)
from gregor.broker.config.topic_configs import ConfigResourceType
from gregor.protocol.errors import (
    InvalidRequestError,
    KafkaError,
    TelemetryTooLargeError,
    ThrottlingQuotaExceededError,
    UnknownSubscriptionIdError,
    UnsupportedCompressionTypeError,
)
from gregor.protocol.exceptions import ProtocolError
from gregor.protocol.records.compression import Compression, decompress

MAX_INSTANCES = 16384
#: What the broker accepts for PushTelemetry, in Kafka's order of preference.
ACCEPTED_COMPRESSION = (Compression.ZSTD, Compression.LZ4, Compression.GZIP, Compression.SNAPPY)
ZERO_UUID = uuid.UUID(int=0)


@dataclass(frozen=True, slots=True)
class MetricPoint:
    """One data point as last pushed: the OTLP metric name, the point's attributes and value
    (a histogram or summary point: its sum, with ``count`` set)."""

    name: str
    attributes: tuple[tuple[str, str], ...]
    value: float
    time_unix_nano: int
    count: int | None = None


@dataclass(slots=True)
class ClientInstance:
    instance_id: uuid.UUID
    client: dict[str, str]  # the selectors' values
    subscription_id: int = 0
    metrics: tuple[str, ...] = ()
    interval_ms: int = DEFAULT_INTERVAL_MS
    last_get_ms: int = -1
    last_push_ms: int = -1
    last_seen_ms: int = 0
    terminating: bool = False
    last_error: int = 0
    #: The last push's points, by (name, attributes).
    points: dict[tuple[str, tuple[tuple[str, str], ...]], MetricPoint] = field(default_factory=dict)
    pushes: int = 0


def _subscription_id(instance_id: uuid.UUID, metrics: Sequence[str], interval_ms: int) -> int:
    text = f"{instance_id}|{','.join(metrics)}|{interval_ms}".encode()
    value = crc32c.crc32c(text)
    return value - (1 << 32) if value >= 1 << 31 else value


class ClientTelemetry:
    def __init__(
        self,
        subscriptions: Callable[[], Mapping[str, Mapping[str, str]]],
        max_bytes: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        #: CLIENT_METRICS config resources by name, read from the image on each request.
        self._subscriptions = subscriptions
        self.max_bytes = max_bytes
        self._clock = clock
        self.instances: OrderedDict[uuid.UUID, ClientInstance] = OrderedDict()

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    def _expire(self, now: int) -> None:
        for iid in [
            i for i, c in self.instances.items() if now - c.last_seen_ms > 3 * c.interval_ms
        ]:
            del self.instances[iid]
        while len(self.instances) > MAX_INSTANCES:
            self.instances.popitem(last=False)

    def _subscribe(self, inst: ClientInstance) -> None:
        matched: list[Subscription] = [
            parse_subscription(name, configs)
            for name, configs in sorted(self._subscriptions().items())
        ]
        matched = [s for s in matched if s.matches(inst.client)]
        metrics: list[str] = []
        for s in matched:
            metrics.extend(m for m in s.metrics if m not in metrics)
        # "*" subscribes everything: the empty prefix, which every name starts with.
        inst.metrics = ("",) if ALL_METRICS in metrics else tuple(metrics)
        inst.interval_ms = min((s.interval_ms for s in matched), default=DEFAULT_INTERVAL_MS)
        inst.subscription_id = _subscription_id(inst.instance_id, inst.metrics, inst.interval_ms)

    def get_subscriptions(self, instance_id: uuid.UUID, client: dict[str, str]) -> ClientInstance:
        """GetTelemetrySubscriptions: the instance (new for a zero id) with its subscription;
        THROTTLING_QUOTA_EXCEEDED when asked again within the push interval."""
        now = self._now_ms()
        self._expire(now)
        if instance_id == ZERO_UUID:
            instance_id = uuid.uuid4()
        inst = self.instances.get(instance_id)
        if inst is None:
            inst = ClientInstance(instance_id, {**client, "client_instance_id": str(instance_id)})
            self.instances[instance_id] = inst
        elif (
            inst.last_error != UnknownSubscriptionIdError.code
            and inst.last_get_ms >= 0
            and now - inst.last_get_ms < inst.interval_ms
        ):
            inst.last_error = ThrottlingQuotaExceededError.code
            raise ThrottlingQuotaExceededError(
                "the client instance asked for its subscriptions again too soon"
            )
        self.instances.move_to_end(instance_id)
        inst.last_seen_ms = now
        inst.last_get_ms = now
        inst.last_error = 0
        self._subscribe(inst)
        return inst

    def push(
        self,
        instance_id: uuid.UUID,
        subscription_id: int,
        terminating: bool,
        compression: int,
        data: bytes,
        client: dict[str, str],
    ) -> None:
        """PushTelemetry, checked as Kafka checks it; the decoded points replace the
        instance's previous ones."""
        now = self._now_ms()
        self._expire(now)
        if instance_id == ZERO_UUID:
            raise InvalidRequestError("a telemetry push needs the client instance id")
        inst = self.instances.get(instance_id)
        if inst is None:
            # Forgotten, or subscribed through another broker: the subscription id is a function
            # of the instance and its subscription, so a current one is accepted here too.
            inst = ClientInstance(instance_id, {**client, "client_instance_id": str(instance_id)})
            self.instances[instance_id] = inst
        self.instances.move_to_end(instance_id)
        inst.last_seen_ms = now
        self._subscribe(inst)  # as the subscriptions stand now: a changed one has a new id
        try:
            self._check_push(inst, subscription_id, terminating, compression, data, now)
        except KafkaError as e:
            inst.last_error = e.code
            raise
        points = None
        if data:
            try:
                points = decode_metrics(decompress(compression, data, max_size=64 * self.max_bytes))
            except (ProtocolError, ValueError) as e:
                inst.last_error = InvalidRequestError.code
                raise InvalidRequestError(
                    f"the pushed metrics are not OTLP MetricsData: {e}"
                ) from None
        # Only an accepted push counts: for the interval, and as the terminating one.
        inst.last_error = 0
        inst.last_push_ms = now
        inst.terminating = terminating
        if points is not None:
            inst.points = {(p.name, p.attributes): p for p in points}
            inst.pushes += 1

    def _check_push(
        self,
        inst: ClientInstance,
        subscription_id: int,
        terminating: bool,
        compression: int,
        data: bytes,
        now: int,
    ) -> None:
        if inst.terminating and terminating:
            raise InvalidRequestError("the client instance has already sent its terminating push")
        if subscription_id != inst.subscription_id:
            raise UnknownSubscriptionIdError("the subscription has changed: ask for it again")
        if (
            not terminating
            and inst.last_push_ms >= 0
            and now - inst.last_push_ms < inst.interval_ms
        ):
            raise ThrottlingQuotaExceededError(
                "the client instance pushed again before its push interval"
            )
        if compression != Compression.NONE and compression not in ACCEPTED_COMPRESSION:
            raise UnsupportedCompressionTypeError(f"compression type {compression} is not accepted")
        if len(data) > self.max_bytes:
            raise TelemetryTooLargeError(
                f"{len(data)} bytes of metrics exceed telemetry.max.bytes {self.max_bytes}"
            )


def subscriptions_of(
    config_resources: Mapping[tuple[int, str], Mapping[str, str]],
) -> dict[str, Mapping[str, str]]:
    return {
        name: c
        for (rtype, name), c in config_resources.items()
        if rtype == ConfigResourceType.CLIENT_METRICS
    }


def _attrs(kvs: object) -> tuple[tuple[str, str], ...]:
    out = []
    for kv in kvs:  # type: ignore[attr-defined]
        v = kv.value
        which = v.WhichOneof("value")
        out.append((kv.key, "" if which is None else str(getattr(v, which))))
    return tuple(sorted(out))


def decode_metrics(payload: bytes) -> list[MetricPoint]:
    """The data points of an OTLP ``MetricsData`` message (opentelemetry-proto)."""
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData

    data = MetricsData()
    try:
        data.ParseFromString(payload)
    except DecodeError as e:
        raise ValueError(str(e)) from None
    points: list[MetricPoint] = []
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                kind = metric.WhichOneof("data")
                if kind in ("gauge", "sum"):
                    for p in getattr(metric, kind).data_points:
                        value = (
                            p.as_double if p.WhichOneof("value") == "as_double" else float(p.as_int)
                        )
                        points.append(
                            MetricPoint(metric.name, _attrs(p.attributes), value, p.time_unix_nano)
                        )
                elif kind in ("histogram", "exponential_histogram", "summary"):
                    for p in getattr(metric, kind).data_points:
                        points.append(
                            MetricPoint(
                                metric.name,
                                _attrs(p.attributes),
                                float(p.sum),
                                p.time_unix_nano,
                                int(p.count),
                            )
                        )
    return points
