"""What the table tests share: a topic's records read by confluent-kafka (read_committed), its
table read by pyiceberg, and the comparison of the two, record by record."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from pyiceberg.catalog import load_catalog

from gregor.tables.offsets import table_offsets
from gregor.tables.settings import catalog_settings

#: (partition, offset, key, value, headers, timestamp ms)
Row = tuple[int, int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...], int]


def wait_until(condition: Callable[[], bool], pause: float = 0.05) -> None:
    """Poll ``condition`` until it holds; the test's timeout bounds the wait."""
    while not condition():
        time.sleep(pause)


def create_table_topic(
    bootstrap: str,
    topic: str,
    partitions: int,
    lag_ms: int = 50,
    replication: int = 1,
    **configs: str,
) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    config = {"iceberg.mode": "key_value", "iceberg.target.lag.ms": str(lag_ms), **configs}
    futures = admin.create_topics([NewTopic(topic, partitions, replication, config=config)])
    futures[topic].result(30)


def open_table(data_dir: Path, topic: str, broker_props: dict[str, str] | None = None) -> Any:
    """The topic's table in the catalog of a broker whose first log dir is ``data_dir`` (and
    whose ``iceberg.*`` settings are ``broker_props``)."""
    settings = catalog_settings(broker_props or {}, str(data_dir))
    catalog = load_catalog(settings.name, **settings.load_properties())
    return catalog.load_table((settings.namespace, topic))


def table_exists(data_dir: Path, topic: str, broker_props: dict[str, str] | None = None) -> bool:
    try:
        open_table(data_dir, topic, broker_props)
    except Exception:  # noqa: BLE001 - not created yet (no catalog file, no namespace, no table)
        return False
    return True


def committed_offsets(data_dir: Path, topic: str) -> dict[int, int]:
    if not table_exists(data_dir, topic):
        return {}
    return table_offsets(open_table(data_dir, topic))


class CommittedOffsets:
    """``committed_offsets`` asked again and again (a wait's condition, across broker
    restarts): the catalog is opened once the table exists and then kept, where each ask of
    ``committed_offsets`` opens it twice (a SQLAlchemy engine and the catalog's table check
    each time). Each ask still loads the table's current metadata from the catalog."""

    def __init__(
        self, data_dir: Path, topic: str, broker_props: dict[str, str] | None = None
    ) -> None:
        self.data_dir = data_dir
        self.topic = topic
        self.broker_props = broker_props or {}
        self._catalog: Any = None
        self._namespace = ""

    def __call__(self) -> dict[int, int]:
        if self._catalog is None:
            if not table_exists(self.data_dir, self.topic, self.broker_props):
                return {}
            settings = catalog_settings(self.broker_props, str(self.data_dir))
            self._catalog = load_catalog(settings.name, **settings.load_properties())
            self._namespace = settings.namespace
        return table_offsets(self._catalog.load_table((self._namespace, self.topic)))


def table_rows(data_dir: Path, topic: str, broker_props: dict[str, str] | None = None) -> list[Row]:
    """Every row of the table, ordered by (partition, offset) as the table's files hold them
    (none before the broker made the table)."""
    if not table_exists(data_dir, topic, broker_props):
        return []
    return rows_of_arrow(open_table(data_dir, topic, broker_props).scan().to_arrow().to_pylist())


def rows_of_arrow(records: Iterable[dict[str, Any]]) -> list[Row]:
    """Table rows (``to_pylist`` dicts of the key_value columns) as sorted :data:`Row` s."""
    out: list[Row] = []
    for r in records:
        ts: datetime = r["timestamp"]
        headers = tuple((h["key"], h["value"]) for h in r["headers"] or ())
        out.append(
            (
                r["partition"],
                r["offset"],
                r["key"],
                r["value"],
                headers,
                int(ts.timestamp() * 1000) if ts is not None else -1,
            )
        )
    return sorted(out, key=lambda row: (row[0], row[1]))


def end_offsets(
    bootstrap: str,
    topic: str,
    partitions: int,
    isolation: str = "read_committed",
    timeout: float = 30.0,
) -> dict[int, int]:
    """Each partition's last stable offset (the read_committed end), or high watermark; a
    KafkaException when a broker does not answer within ``timeout`` seconds."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "ends", "isolation.level": isolation})
    try:
        return {
            p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout, cached=False)[1]
            for p in range(partitions)
        }
    finally:
        c.close()


def topic_rows(
    bootstrap: str, topic: str, partitions: int, isolation: str = "read_committed"
) -> list[Row]:
    """Every committed record of the topic (read_committed, from the start to each end), or
    every record (read_uncommitted)."""
    ends = end_offsets(bootstrap, topic, partitions, isolation)
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "rows",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        done = {p for p, end in ends.items() if end == 0}
        out: list[Row] = []
        while len(done) < partitions:
            msg = c.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == -191:  # _PARTITION_EOF
                    if msg.offset() >= ends[msg.partition()]:
                        done.add(msg.partition())
                    continue
                raise AssertionError(msg.error())
            headers = tuple((k, v) for k, v in msg.headers() or ())
            out.append(
                (msg.partition(), msg.offset(), msg.key(), msg.value(), headers, msg.timestamp()[1])
            )
        return sorted(out, key=lambda row: (row[0], row[1]))
    finally:
        c.close()


def by_partition(rows: Iterable[Row]) -> dict[int, list[Row]]:
    out: dict[int, list[Row]] = {}
    for r in rows:
        out.setdefault(r[0], []).append(r)
    return out


def assert_prefix(table: list[Row], topic: list[Row], partitions: int) -> None:
    """The table holds, for each partition, exactly a prefix of the topic's records."""
    t, k = by_partition(table), by_partition(topic)
    for p in range(partitions):
        have, want = t.get(p, []), k.get(p, [])
        assert have == want[: len(have)], f"partition {p}: the table is not a prefix of the topic"


def now_utc() -> datetime:
    return datetime.now(UTC)
