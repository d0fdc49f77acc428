"""The broker's metrics, named after Kafka's JMX metrics, served for Prometheus.

Theory of operation. The hot paths only add to plain counters here (dicts and lists, no
locks, no label lookups): the dispatcher records each request's API, total time, throttle
time and top-level error; the produce and fetch handlers record bytes and records in and out
per topic and failed requests per topic; every connection adds the bytes it reads and writes
to its listener's totals. Everything that is state rather than traffic (connections per
listener, partitions and leaders, log sizes and offsets, under-replicated and offline
partitions, the active controller, consumer-group lag, purgatories) is read when Prometheus
scrapes.

A scrape costs the event loop only a copy: ``take_snapshot`` runs on the loop and copies the
counters and each partition's figures into a ``Snapshot`` of plain numbers (with the
immutable metadata image), a few hundred partitions per turn of the loop. Building the metric
families and the text exposition (``render``, prometheus-client's ``generate_latest``), which
is most of a scrape's cost (tens of milliseconds for a few hundred partitions), runs on a
worker thread, where it reads only the snapshot. ``metrics_http`` serves it.

Names follow the convention Kafka's JMX exporter setups use: ``kafka_<domain>_<type>_<name>``
in lower case (``kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec,topic=t`` becomes
``kafka_server_brokertopicmetrics_bytesin_total{topic="t"}``); Kafka's meters (rates) are
counters here, since Prometheus computes rates itself; Kafka's request-time histograms are
Prometheus histograms in milliseconds.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
from collections.abc import Iterator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from gregor.protocol.messages import API_KEYS

if TYPE_CHECKING:
    from gregor.broker.coordination.group_service import GroupService
    from gregor.broker.metrics.client_telemetry import ClientTelemetry
    from gregor.broker.replication.replica_manager import ReplicaManager
    from gregor.cluster.image import MetadataImage


class _ListenerInfo(Protocol):
    @property
    def listener(self) -> str: ...


class _Connection(Protocol):
    """A broker connection (``net.server.Connection``) as the metrics see it."""

    @property
    def info(self) -> _ListenerInfo: ...


class Broker(Protocol):
    """What the metrics read of the broker."""

    metrics: BrokerMetrics
    node_id: int

    @property
    def connections(self) -> AbstractSet[_Connection]: ...

    bound_listeners: list[tuple[str, str, int]]
    client_telemetry: ClientTelemetry

    @property
    def image(self) -> MetadataImage: ...

    @property
    def replicas(self) -> ReplicaManager: ...

    @property
    def groups(self) -> GroupService: ...


log = logging.getLogger("gregor.broker")

#: Bucket bounds (ms) of the request-time histograms.
TIME_BUCKETS_MS = (
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    25.0,
    50.0,
    100.0,
    250.0,
    500.0,
    1000.0,
    2500.0,
    5000.0,
    10000.0,
)


class _Histogram:
    __slots__ = ("counts", "total")

    def __init__(self) -> None:
        self.counts = [0] * (len(TIME_BUCKETS_MS) + 1)
        self.total = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(TIME_BUCKETS_MS, value)] += 1
        self.total += value

    def family_samples(self) -> tuple[list[tuple[str, float]], float]:
        buckets: list[tuple[str, float]] = []
        running = 0
        for bound, n in zip((*TIME_BUCKETS_MS, float("inf")), self.counts, strict=True):
            running += n
            buckets.append(("+Inf" if bound == float("inf") else repr(bound), running))
        return buckets, self.total


class TopicTraffic:
    """Kafka's BrokerTopicMetrics of one topic (and of all topics, under the key "")."""

    __slots__ = (
        "bytes_in",
        "messages_in",
        "bytes_out",
        "produce_requests",
        "failed_produce_requests",
        "fetch_requests",
        "failed_fetch_requests",
        "bytes_rejected",
    )

    def __init__(self) -> None:
        self.bytes_in = self.messages_in = self.bytes_out = self.bytes_rejected = 0
        self.produce_requests = self.failed_produce_requests = 0
        self.fetch_requests = self.failed_fetch_requests = 0


class BrokerMetrics:
    """The traffic counters the hot paths add to."""

    def __init__(self) -> None:
        self.topics: dict[str, TopicTraffic] = {}
        self.requests: dict[int, int] = {}
        self.errors: dict[tuple[int, int], int] = {}
        self.total_time: dict[int, _Histogram] = {}
        self.queue_time: dict[int, _Histogram] = {}
        self.local_time: dict[int, _Histogram] = {}
        self.remote_time: dict[int, _Histogram] = {}
        self.throttle_time: dict[int, _Histogram] = {}
        #: Time each handler's own steps (set when the metrics are served): local and remote time.
        self.timing = False
        #: listener -> [bytes read, bytes written, connections accepted, connections closed]
        self.network: dict[str, list[int]] = {}
        #: [ISR shrinks, ISR expansions] (the replica manager's partitions add to it).
        self.isr_changes = [0, 0]

    def topic(self, name: str) -> TopicTraffic:
        t = self.topics.get(name)
        if t is None:
            t = self.topics[name] = TopicTraffic()
        return t

    def listener(self, name: str) -> list[int]:
        n = self.network.get(name)
        if n is None:
            n = self.network[name] = [0, 0, 0, 0]
        return n

    def request(
        self,
        api_key: int,
        handle_ms: float,
        queue_ms: float,
        throttle_ms: float,
        error_code: int,
        local_ms: float | None = None,
        remote_ms: float | None = None,
    ) -> None:
        """One request: its time from arrival to answer is queue_ms (waiting behind the
        connection's earlier requests) plus handle_ms; of the handling, local_ms ran on the
        loop and remote_ms waited (acks, long polls), when timed."""
        self.requests[api_key] = self.requests.get(api_key, 0) + 1
        h = self.total_time.get(api_key)
        if h is None:
            h = self.total_time[api_key] = _Histogram()
            self.queue_time[api_key] = _Histogram()
            self.throttle_time[api_key] = _Histogram()
        h.observe(handle_ms + queue_ms)
        self.queue_time[api_key].observe(queue_ms)
        self.throttle_time[api_key].observe(throttle_ms)
        if local_ms is not None and remote_ms is not None:
            local = self.local_time.get(api_key)
            if local is None:
                local = self.local_time[api_key] = _Histogram()
                self.remote_time[api_key] = _Histogram()
            local.observe(local_ms)
            self.remote_time[api_key].observe(remote_ms)
        if error_code:
            key = (api_key, error_code)
            self.errors[key] = self.errors.get(key, 0) + 1


def _api_name(api_key: int) -> str:
    info = API_KEYS.get(api_key)
    return info.name if info is not None else str(api_key)


@dataclass(slots=True)
class PartitionSample:
    """One hosted partition's log figures, read at scrape time."""

    topic: str
    index: int
    size: int
    start: int
    end: int
    segments: int
    leader: bool
    high_watermark: int
    under_replicated: bool


@dataclass
class Snapshot:
    """Everything a scrape reports, copied from the broker on its event loop (plain numbers
    and the immutable metadata image), so the exposition can be rendered on another thread."""

    node_id: int
    topics: list[tuple[str, tuple[int, ...]]]
    requests: dict[int, int]
    errors: dict[tuple[int, int], int]
    #: family name (``totaltimems``, ...) -> api key -> (bucket counts, sum)
    times: dict[str, dict[int, tuple[list[int], float]]]
    live: dict[str, int]
    network: dict[str, list[int]]
    listeners: list[str]
    partitions: list[PartitionSample] = field(default_factory=list)
    isr_changes: tuple[int, int] = (0, 0)
    image: MetadataImage | None = None
    produce_waiting: int = 0
    fetch_waiting: int = 0
    committed: dict[str, dict[tuple[str, int], int]] = field(default_factory=dict)
    #: ((instance id, client id, software name, software version), pushes,
    #: [(metric, attributes, value, count)])
    telemetry: list[
        tuple[tuple[str, str, str, str], int, list[tuple[str, str, float, int | None]]]
    ] = field(default_factory=list)


_TOPIC_FIELDS = (
    "bytes_in",
    "messages_in",
    "bytes_out",
    "bytes_rejected",
    "produce_requests",
    "failed_produce_requests",
    "fetch_requests",
    "failed_fetch_requests",
)
_TIME_FAMILIES = (
    ("totaltimems", "total_time", "From the request's arrival to its answer queued, ms."),
    ("requestqueuetimems", "queue_time", "Waiting behind the connection's earlier requests, ms."),
    ("localtimems", "local_time", "The handler's own steps on the event loop, ms."),
    ("remotetimems", "remote_time", "Waiting inside the handler (acks=all, long polls), ms."),
    ("throttletimems", "throttle_time", "Throttle time given in answers, ms."),
)
#: Partitions read per turn of the event loop while a snapshot is taken.
SNAPSHOT_CHUNK = 500


async def take_snapshot(b: Broker) -> Snapshot:
    """Copy what a scrape reports, on the broker's loop: the counters, then the partitions
    ``SNAPSHOT_CHUNK`` at a time, giving the loop back between chunks."""
    m = b.metrics
    live: dict[str, int] = {}
    for conn in list(b.connections):
        live[conn.info.listener] = live.get(conn.info.listener, 0) + 1
    snap = Snapshot(
        node_id=b.node_id,
        topics=[
            (name, tuple(getattr(t, f) for f in _TOPIC_FIELDS)) for name, t in m.topics.items()
        ],
        requests=dict(m.requests),
        errors=dict(m.errors),
        times={
            family: {key: (list(h.counts), h.total) for key, h in getattr(m, attr).items()}
            for family, attr, _ in _TIME_FAMILIES
        },
        live=live,
        network={name: list(n) for name, n in m.network.items()},
        listeners=[name for name, _, _ in b.bound_listeners],
        isr_changes=(m.isr_changes[0], m.isr_changes[1]),
        image=b.image,
        committed=b.groups.committed_offsets(),
    )
    for inst in list(b.client_telemetry.instances.values()):
        who = (
            str(inst.instance_id),
            inst.client.get("client_id", ""),
            inst.client.get("client_software_name", ""),
            inst.client.get("client_software_version", ""),
        )
        points = [
            (p.name, ",".join(f"{k}={v}" for k, v in p.attributes), p.value, p.count)
            for p in inst.points.values()
        ]
        snap.telemetry.append((who, inst.pushes, points))
    items = list(b.replicas.partitions.items())
    for start in range(0, len(items), SNAPSHOT_CHUNK):
        if start:
            await asyncio.sleep(0)
        for (topic, index), p in items[start : start + SNAPSHOT_CHUNK]:
            try:
                log_ = p.log
                leader = p.is_leader
                snap.partitions.append(
                    PartitionSample(
                        topic,
                        index,
                        log_.size,
                        log_.log_start_offset,
                        log_.log_end_offset,
                        log_.num_segments,
                        leader,
                        log_.high_watermark if leader else 0,
                        leader and len(p.isr) < len(p.replicas),
                    )
                )
                snap.produce_waiting += p.waiting_acks
                snap.fetch_waiting += p.waiting_fetches
            except Exception:  # noqa: BLE001 - a partition stopped meanwhile: leave it out
                continue
    return snap


class BrokerCollector(Collector):
    """Builds the metric families from a ``Snapshot`` (on any thread)."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        s = self.snapshot
        yield from self._topic_traffic(s)
        yield from self._requests(s)
        yield from self._network(s)
        yield from self._partitions(s)
        yield from self._groups(s)
        yield from self._client_telemetry(s)

    @staticmethod
    def _client_telemetry(s: Snapshot) -> Iterator[Metric]:
        """KIP-714: each client instance's last pushed data points (a histogram's: its sum,
        with its count in ``gregor_client_telemetry_count``)."""
        labels = [
            "client_instance_id",
            "client_id",
            "client_software_name",
            "client_software_version",
            "metric",
            "attributes",
        ]
        value = GaugeMetricFamily(
            "gregor_client_telemetry", "Last value a client pushed (KIP-714).", labels=labels
        )
        count = GaugeMetricFamily(
            "gregor_client_telemetry_count", "Count of a pushed histogram point.", labels=labels
        )
        pushes = CounterMetricFamily(
            "gregor_client_telemetry_pushes",
            "Telemetry pushes accepted from a client instance.",
            labels=labels[:4],
        )
        for who, n, points in s.telemetry:
            pushes.add_metric(list(who), n)
            for name, attributes, v, c in points:
                key = [*who, name, attributes]
                value.add_metric(key, v)
                if c is not None:
                    count.add_metric(key, c)
        yield from (value, count, pushes)

    @staticmethod
    def _topic_traffic(s: Snapshot) -> Iterator[Metric]:
        fields = (
            ("bytesin", "bytes_in", "Bytes of record batches appended from clients."),
            ("messagesin", "messages_in", "Records appended from clients."),
            ("bytesout", "bytes_out", "Record bytes sent to consumers (not followers)."),
            ("bytesrejected", "bytes_rejected", "Bytes of produce requests refused."),
            ("totalproducerequests", "produce_requests", "Produce requests, counted per topic."),
            (
                "failedproducerequests",
                "failed_produce_requests",
                "Produce requests refused, per topic.",
            ),
            ("totalfetchrequests", "fetch_requests", "Consumer fetch requests, counted per topic."),
            (
                "failedfetchrequests",
                "failed_fetch_requests",
                "Consumer fetches that failed, per topic.",
            ),
        )
        topics = sorted(s.topics)
        for name, attr, doc in fields:
            i = _TOPIC_FIELDS.index(attr)
            c = CounterMetricFamily(
                f"kafka_server_brokertopicmetrics_{name}", doc, labels=["topic"]
            )
            total = 0
            for topic, values in topics:
                total += values[i]
                c.add_metric([topic], values[i])
            c.add_metric([""], total)  # Kafka's all-topics meter has no topic tag
            yield c

    @staticmethod
    def _requests(s: Snapshot) -> Iterator[Metric]:
        c = CounterMetricFamily(
            "kafka_network_requestmetrics_requests", "Requests handled.", labels=["request"]
        )
        for key, n in sorted(s.requests.items()):
            c.add_metric([_api_name(key)], n)
        yield c
        e = CounterMetricFamily(
            "kafka_network_requestmetrics_errors",
            "Answers with a top-level error code.",
            labels=["request", "error"],
        )
        from gregor.protocol.errors import ErrorCode

        for (key, code), n in sorted(s.errors.items()):
            try:
                error = ErrorCode(code).name
            except ValueError:
                error = str(code)
            e.add_metric([_api_name(key), error], n)
        yield e
        for name, _, doc in _TIME_FAMILIES:
            h = HistogramMetricFamily(
                f"kafka_network_requestmetrics_{name}", doc, labels=["request"]
            )
            for key, (counts, total) in sorted(s.times[name].items()):
                buckets: list[tuple[str, float]] = []
                running = 0
                for bound, n in zip((*TIME_BUCKETS_MS, float("inf")), counts, strict=True):
                    running += n
                    buckets.append(("+Inf" if bound == float("inf") else repr(bound), running))
                h.add_metric([_api_name(key)], buckets, total)
            yield h

    @staticmethod
    def _network(s: Snapshot) -> Iterator[Metric]:
        names = sorted(set(s.live) | set(s.network) | set(s.listeners))
        g = GaugeMetricFamily(
            "kafka_server_socketservermetrics_connection_count",
            "Open connections.",
            labels=["listener"],
        )
        for name in names:
            g.add_metric([name], s.live.get(name, 0))
        yield g
        for i, (metric, doc) in enumerate(
            (
                ("incoming_byte", "Bytes read from clients."),
                ("outgoing_byte", "Bytes written to clients."),
                ("connection_creation", "Connections accepted."),
                ("connection_close", "Connections closed."),
            )
        ):
            c = CounterMetricFamily(
                f"kafka_server_socketservermetrics_{metric}", doc, labels=["listener"]
            )
            for name in names:
                c.add_metric([name], s.network.get(name, [0, 0, 0, 0])[i])
            yield c

    @staticmethod
    def _partitions(s: Snapshot) -> Iterator[Metric]:
        labels = ["topic", "partition"]
        size = GaugeMetricFamily(
            "kafka_log_log_size", "Bytes of the partition's log on this broker.", labels=labels
        )
        start = GaugeMetricFamily(
            "kafka_log_log_logstartoffset", "Log start offset.", labels=labels
        )
        end = GaugeMetricFamily("kafka_log_log_logendoffset", "Log end offset.", labels=labels)
        segments = GaugeMetricFamily(
            "kafka_log_log_numlogsegments", "Segments of the log.", labels=labels
        )
        hw = GaugeMetricFamily(
            "kafka_cluster_partition_highwatermark", "High watermark (leader only).", labels=labels
        )
        urp_by = GaugeMetricFamily(
            "kafka_cluster_partition_underreplicated",
            "1 when the ISR is smaller than the replicas (leader only).",
            labels=labels,
        )
        partitions = leaders = under = 0
        for p in sorted(s.partitions, key=lambda p: (p.topic, p.index)):
            lab = [p.topic, str(p.index)]
            partitions += 1
            size.add_metric(lab, p.size)
            start.add_metric(lab, p.start)
            end.add_metric(lab, p.end)
            segments.add_metric(lab, p.segments)
            if p.leader:
                leaders += 1
                hw.add_metric(lab, p.high_watermark)
                under += p.under_replicated
                urp_by.add_metric(lab, int(p.under_replicated))
        yield from (size, start, end, segments, hw, urp_by)
        rm = "kafka_server_replicamanager_"
        yield GaugeMetricFamily(
            rm + "partitioncount", "Partitions with a replica on this broker.", value=partitions
        )
        yield GaugeMetricFamily(rm + "leadercount", "Partitions this broker leads.", value=leaders)
        yield GaugeMetricFamily(
            rm + "underreplicatedpartitions", "Led partitions whose ISR is short.", value=under
        )
        yield CounterMetricFamily(
            rm + "isrshrinks", "ISR shrinks of partitions led here.", value=s.isr_changes[0]
        )
        yield CounterMetricFamily(
            rm + "isrexpands", "ISR expansions of partitions led here.", value=s.isr_changes[1]
        )
        image = s.image
        assert image is not None
        controller = image.controller_id == s.node_id
        kc = "kafka_controller_kafkacontroller_"
        yield GaugeMetricFamily(
            kc + "activecontrollercount", "1 on the active controller.", value=int(controller)
        )
        offline = (
            sum(1 for t in image.topics.values() for p in t.partitions if p.leader < 0)
            if controller
            else 0
        )
        yield GaugeMetricFamily(
            kc + "offlinepartitionscount",
            "Partitions without a leader (controller only).",
            value=offline,
        )
        yield GaugeMetricFamily(
            kc + "globalpartitioncount",
            "Partitions in the cluster (controller only).",
            value=sum(len(t.partitions) for t in image.topics.values()) if controller else 0,
        )
        yield GaugeMetricFamily(
            kc + "globaltopiccount",
            "Topics in the cluster (controller only).",
            value=len(image.topics) if controller else 0,
        )
        purgatory = GaugeMetricFamily(
            "kafka_server_delayedoperationpurgatory_purgatorysize",
            "Requests waiting.",
            labels=["delayedOperation"],
        )
        purgatory.add_metric(["Produce"], s.produce_waiting)
        purgatory.add_metric(["Fetch"], s.fetch_waiting)
        yield purgatory

    @staticmethod
    def _groups(s: Snapshot) -> Iterator[Metric]:
        lag = GaugeMetricFamily(
            "kafka_consumergroup_lag",
            "High watermark minus the group's committed offset, for partitions led here.",
            labels=["consumergroup", "topic", "partition"],
        )
        offset = GaugeMetricFamily(
            "kafka_consumergroup_current_offset",
            "The group's committed offset.",
            labels=["consumergroup", "topic", "partition"],
        )
        led = {(p.topic, p.index): p.high_watermark for p in s.partitions if p.leader}
        for group_id, committed in sorted(s.committed.items()):
            for (topic, index), value in sorted(committed.items()):
                lab = [group_id, topic, str(index)]
                offset.add_metric(lab, value)
                high = led.get((topic, index))
                if high is not None:
                    lag.add_metric(lab, max(0, high - value))
        yield offset
        yield lag


def render(snapshot: Snapshot) -> bytes:
    """The Prometheus text exposition of ``snapshot`` (runs off the event loop)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BrokerCollector(snapshot))
    return generate_latest(registry)
