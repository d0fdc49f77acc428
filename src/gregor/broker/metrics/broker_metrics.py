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
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

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


TOPIC_FIELDS = (
    "bytes_in",
    "messages_in",
    "bytes_out",
    "bytes_rejected",
    "produce_requests",
    "failed_produce_requests",
    "fetch_requests",
    "failed_fetch_requests",
)
TIME_FAMILIES = (
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
        topics=[(name, tuple(getattr(t, f) for f in TOPIC_FIELDS)) for name, t in m.topics.items()],
        requests=dict(m.requests),
        errors=dict(m.errors),
        times={
            family: {key: (list(h.counts), h.total) for key, h in getattr(m, attr).items()}
            for family, attr, _ in TIME_FAMILIES
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
