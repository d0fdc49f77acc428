"""The Prometheus exposition of a broker's metrics: the metric families built from a
``broker_metrics.Snapshot`` (``BrokerCollector``) and their text form (``render``).

It holds no state of its own and reads only the snapshot, so it runs on a worker thread while
the event loop goes on serving (``metrics_http`` calls ``render`` in the executor). Names follow
the JMX exporter convention described in ``broker_metrics``.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from gregor.broker.metrics.broker_metrics import (
    TIME_BUCKETS_MS,
    TIME_FAMILIES,
    TOPIC_FIELDS,
    Snapshot,
)
from gregor.protocol.messages import API_KEYS


def api_name(api_key: int) -> str:
    info = API_KEYS.get(api_key)
    return info.name if info is not None else str(api_key)


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
            i = TOPIC_FIELDS.index(attr)
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
            c.add_metric([api_name(key)], n)
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
            e.add_metric([api_name(key), error], n)
        yield e
        for name, _, doc in TIME_FAMILIES:
            h = HistogramMetricFamily(
                f"kafka_network_requestmetrics_{name}", doc, labels=["request"]
            )
            for key, (counts, total) in sorted(s.times[name].items()):
                buckets: list[tuple[str, float]] = []
                running = 0
                for bound, n in zip((*TIME_BUCKETS_MS, float("inf")), counts, strict=True):
                    running += n
                    buckets.append(("+Inf" if bound == float("inf") else repr(bound), running))
                h.add_metric([api_name(key)], buckets, total)
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
