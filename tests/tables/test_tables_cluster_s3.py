"""Topics as tables in a cluster: three brokers (``InProcessCluster``) share Apache Iceberg's REST
catalog server (a JVM, ``gregor.testing.iceberg_rest``) and one S3 warehouse in moto's server
(``s3_support``), which the server writes the metadata files into and each partition's
leader its data files and manifests.

What holds, through leader changes: each partition's leader runs its translator (and no other
broker does); the table equals the topic's committed records (idempotent producers with
acks=all, committed and aborted transactions), record by record, per partition in offset
order, none twice; the current snapshot's offsets are the partitions' ends; and every
partition's commits, followed back through the snapshots, cover ``[0, end)`` in ranges that
each start exactly where the one before ended, whichever broker made them, so a new leader
resumed from the previous snapshot's offsets. Two changes: a graceful stop of the broker
leading partition 0 (the table's maintainer too), and, with records read into the leaders'
buffers but not yet committed to the table (a target lag of ten minutes), a preferred leader
election back to the restarted broker: the old leaders' buffers are dropped and the new
leaders commit those records, once. The table is read back with pyiceberg's RestCatalog (S3
FileIO properties), DuckDB and polars."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import ElectionType, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
from pyiceberg.catalog import load_catalog
from s3_support import REGION, S3Store, moto_s3
from tables_support import (
    Row,
    create_table_topic,
    end_offsets,
    rows_of_arrow,
    topic_rows,
    wait_until,
)

from gregor.tables.offsets import offsets_snapshot, ranges_of_summary
from gregor.tables.offsets import table_offsets as offsets_of_table
from gregor.testing.iceberg_rest import IcebergRestCatalog, S3Warehouse
from gregor.testing.inprocess_cluster import InProcessCluster

pytestmark = [pytest.mark.jvm, pytest.mark.slow, pytest.mark.timeout(600)]

TOPIC = "orders"
PARTITIONS = 3
#: The target lag of the phase in which records wait in the leaders' buffers.
HELD_LAG_MS = 600_000


@pytest.fixture(scope="module")
def store() -> Iterator[S3Store]:
    with moto_s3() as s:
        yield s


@pytest.fixture(scope="module")
def warehouse(store: S3Store) -> S3Warehouse:
    location = f"s3://{store.new_bucket()}/lake"
    return S3Warehouse(location, store.endpoint, store.access_key, store.secret_key, REGION)


@pytest.fixture(scope="module")
def rest_server(warehouse: S3Warehouse) -> Iterator[IcebergRestCatalog]:
    with IcebergRestCatalog(s3=warehouse) as server:
        yield server


@pytest.fixture
def props(
    store: S3Store, warehouse: S3Warehouse, rest_server: IcebergRestCatalog
) -> dict[str, str]:
    """Every broker's settings: the shared REST catalog and S3 warehouse, a namespace of the
    test's own."""
    return {
        "iceberg.catalog.type": "rest",
        "iceberg.catalog.uri": rest_server.uri,
        "iceberg.namespace": f"t{uuid.uuid4().hex[:12]}",
        **store.broker_props(warehouse.location),
    }


def reader_catalog(props: dict[str, str]) -> Any:
    """pyiceberg's RestCatalog on the server, with the S3 FileIO properties a reader needs."""
    return load_catalog(
        "reader",
        type="rest",
        uri=props["iceberg.catalog.uri"],
        **{
            "s3.endpoint": props["iceberg.s3.endpoint"],
            "s3.region": props["iceberg.s3.region"],
            "s3.access-key-id": props["iceberg.s3.access-key-id"],
            "s3.secret-access-key": props["iceberg.s3.secret-access-key"],
        },
    )


class Table:
    """The topic's table as a reader sees it (loaded again on each ask)."""

    def __init__(self, props: dict[str, str]) -> None:
        self.catalog = reader_catalog(props)
        self.identifier = (props["iceberg.namespace"], TOPIC)

    def exists(self) -> bool:
        return bool(self.catalog.table_exists(self.identifier))

    def load(self) -> Any:
        return self.catalog.load_table(self.identifier)

    def offsets(self) -> dict[int, int]:
        return offsets_of_table(self.load()) if self.exists() else {}

    def rows(self) -> list[Row]:
        return rows_of_arrow(self.load().scan().to_arrow().to_pylist())


def ranges(table: Any) -> dict[int, list[tuple[int, int]]]:
    """Each partition's committed ranges ``[first, next)``, oldest first, from the current
    snapshot's ancestry (the snapshots that carry the offsets)."""
    out: dict[int, list[tuple[int, int]]] = {}
    snapshot = offsets_snapshot(table)
    while snapshot is not None:
        for p, covered in ranges_of_summary(snapshot.summary.additional_properties).items():
            out.setdefault(p, []).insert(0, covered)
        parent = snapshot.parent_snapshot_id
        snapshot = None if parent is None else table.snapshot_by_id(parent)
    return out


def assert_contiguous(history: dict[int, list[tuple[int, int]]], ends: dict[int, int]) -> None:
    """Every partition's commits cover ``[0, end)``, each starting where the one before ended."""
    for p, end in ends.items():
        covered = history.get(p, [])
        assert covered, f"partition {p}: no commit"
        assert covered[0][0] == 0, covered
        assert all(a[1] == b[0] for a, b in zip(covered, covered[1:], strict=False)), covered
        assert all(first < nxt for first, nxt in covered), covered
        assert covered[-1][1] == end, (covered, end)


def leaders(cluster: InProcessCluster) -> dict[int, int]:
    return {p.partition: p.leader for p in cluster.image.topics[TOPIC].partitions}


def translators(cluster: InProcessCluster) -> dict[int, list[tuple[int, Any]]]:
    """Each partition's translators, as (node id, translator), over the running brokers (read on
    the cluster's loop, which owns them)."""

    async def collect() -> dict[int, list[tuple[int, Any]]]:
        out: dict[int, list[tuple[int, Any]]] = {}
        for node, member in cluster.brokers.items():
            broker = member.broker
            if broker is None or broker.tables is None:
                continue
            for (topic, p), translator in broker.tables.translators.items():
                if topic == TOPIC:
                    out.setdefault(p, []).append((node, translator))
        return out

    return cluster.call(collect)


def leaders_translating(cluster: InProcessCluster) -> dict[int, Any] | None:
    """Each partition's translator if its leader, and only it, runs one (None: not so, e.g.
    a new leader's translator still opening the table)."""
    running = translators(cluster)
    lead = leaders(cluster)
    if {p: [node for node, _ in running.get(p, [])] for p in lead} != {
        p: [node] for p, node in lead.items()
    }:
        return None
    return {p: running[p][0][1] for p in lead}


def assert_leaders_translate(cluster: InProcessCluster) -> dict[int, Any]:
    """Each partition's leader, and only it, runs the partition's translator; returns them."""
    running = leaders_translating(cluster)
    assert running is not None, (leaders(cluster), translators(cluster))
    return running


def translating(cluster: InProcessCluster, condition: Callable[[int, Any], bool]) -> bool:
    """Each partition's leader, and only it, runs its translator, and ``condition(partition,
    translator)`` holds for each."""
    running = leaders_translating(cluster)
    return running is not None and all(condition(p, t) for p, t in running.items())


def produce(bootstrap: str, n: int, tag: str) -> None:
    """``n`` records over the partitions (keys, headers, null keys), idempotent, acks=all."""
    p = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 5}
    )
    for i in range(n):
        key = None if i % 7 == 0 else f"{tag}k{i}".encode()
        headers = [("h", f"{i}".encode()), ("empty", None)] if i % 3 == 0 else None
        p.produce(TOPIC, f"{tag}v{i}".encode(), key, partition=i % PARTITIONS, headers=headers)
    assert p.flush(60) == 0


def transactions(bootstrap: str, tag: str) -> None:
    """Four transactions over every partition, the second and fourth aborted."""
    tx = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"cluster-{tag}"})
    tx.init_transactions(60)
    for n in range(4):
        tx.begin_transaction()
        for i in range(6):
            tx.produce(TOPIC, f"{tag}t{n}-{i}".encode(), partition=i % PARTITIONS)
        if n % 2:
            assert tx.flush(60) == 0  # in the log before the abort (else librdkafka purges them)
            tx.abort_transaction(60)
        else:
            tx.commit_transaction(60)


def caught_up(cluster: InProcessCluster, table: Table) -> Callable[[], bool]:
    def done() -> bool:
        ends = end_offsets(cluster.bootstrap_servers, TOPIC, PARTITIONS)
        return table.offsets() == ends

    return done


def alter_lag(cluster: InProcessCluster, lag_ms: int) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    entry = ConfigEntry(
        "iceberg.target.lag.ms", str(lag_ms), incremental_operation=AlterConfigOpType.SET
    )
    resource = ConfigResource("topic", TOPIC, incremental_configs=[entry])
    admin.incremental_alter_configs([resource])[resource].result(60)
    # every leader's translator runs with the new lag (a changed setting restarts it)
    wait_until(lambda: translating(cluster, lambda _, t: t.target_lag_ms == lag_ms))


def settled(cluster: InProcessCluster, condition: Callable[[Any], bool]) -> Callable[[], bool]:
    """Every partition has a leader, and ``condition`` holds for each partition's metadata."""

    def holds() -> bool:
        parts = cluster.image.topics[TOPIC].partitions
        return all(p.leader >= 0 and condition(p) for p in parts)

    return holds


def assert_table_is_the_topic(cluster: InProcessCluster, table: Table) -> dict[int, int]:
    """The table = the topic's committed records; the offsets are the ends; every partition's
    commits are contiguous from 0. Returns the ends."""
    ends = end_offsets(cluster.bootstrap_servers, TOPIC, PARTITIONS)
    expected = topic_rows(cluster.bootstrap_servers, TOPIC, PARTITIONS)
    got = table.rows()
    assert len(got) == len(set((r[0], r[1]) for r in got))  # nothing twice
    assert got == expected
    loaded = table.load()
    assert offsets_of_table(loaded) == ends
    assert_contiguous(ranges(loaded), ends)
    return ends


def test_a_cluster_writes_one_table_on_s3_through_leader_changes(
    props: dict[str, str],
    store: S3Store,
    warehouse: S3Warehouse,
    rest_server: IcebergRestCatalog,
) -> None:
    # leadership moves when the test says (no rebalance of the controller's own in between)
    with InProcessCluster(3, config={**props, "auto.leader.rebalance.enable": "false"}) as cluster:
        create_table_topic(
            cluster.bootstrap_servers,
            TOPIC,
            PARTITIONS,
            replication=3,
            **{"iceberg.compaction.min.input.files": "0"},  # the history stays one commit each
        )
        wait_until(settled(cluster, lambda p: len(p.isr) == 3))
        table = Table(props)

        # 1. every leader writes its own partition
        transactions(cluster.bootstrap_servers, "a")
        produce(cluster.bootstrap_servers, 150, "a")
        wait_until(caught_up(cluster, table))
        first = assert_table_is_the_topic(cluster, table)
        assert sum(first.values()) == 150 + 4 * 6 + 4 * PARTITIONS  # the markers take offsets
        assert len(topic_rows(cluster.bootstrap_servers, TOPIC, PARTITIONS)) == 150 + 2 * 6
        running = assert_leaders_translate(cluster)
        assert all(t.commits >= 1 for t in running.values())
        loaded = table.load()
        assert loaded.location() == f"{warehouse.location}/{props['iceberg.namespace']}/{TOPIC}"
        files = [t.file.file_path for t in loaded.scan().plan_files()]
        bucket = warehouse.location.removeprefix("s3://").split("/")[0]
        keys = set(store.keys(bucket))
        assert files and all(f.startswith(f"{loaded.location()}/data/") for f in files)
        assert set(files) <= keys
        # the server wrote the metadata files into the same bucket
        assert loaded.metadata_location in keys

        # 2. a graceful stop of partition 0's leader (the table's maintainer too)
        victim = leaders(cluster)[0]
        moved = {p for p, node in leaders(cluster).items() if node == victim}
        cluster.stop(victim)
        wait_until(settled(cluster, lambda p: p.leader != victim))
        produce(cluster.bootstrap_servers, 90, "b")
        wait_until(caught_up(cluster, table))
        second = assert_table_is_the_topic(cluster, table)
        assert all(second[p] == first[p] + 30 for p in range(PARTITIONS))
        running = assert_leaders_translate(cluster)
        history = ranges(table.load())
        for p in moved:  # the new leader went on from the snapshot's offset, in one commit or more
            assert running[p].commits >= 1
            assert any(start == first[p] for start, _ in history[p]), history[p]

        # 3. records in the leaders' buffers, not in the table, when leadership moves back
        alter_lag(cluster, HELD_LAG_MS)
        cluster.restart(victim)
        wait_until(settled(cluster, lambda p: len(p.isr) == 3))
        transactions(cluster.bootstrap_servers, "c")
        produce(cluster.bootstrap_servers, 60, "c")
        ends = end_offsets(cluster.bootstrap_servers, TOPIC, PARTITIONS)
        # every leader has read its partition to the end, and holds it
        wait_until(lambda: translating(cluster, lambda p, t: t.position == ends[p]))
        assert table.offsets() == second
        back = [
            TopicPartition(TOPIC, p.partition)
            for p in cluster.image.topics[TOPIC].partitions
            if p.replicas[0] != p.leader
        ]
        assert back  # the victim's partitions are led elsewhere since step 2
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        elected = admin.elect_leaders(ElectionType.PREFERRED, back).result(60)
        assert list(elected.values()) == [None] * len(back)
        wait_until(settled(cluster, lambda p: p.leader == p.replicas[0]))
        wait_until(lambda: translating(cluster, lambda p, t: t.position == ends[p]))
        assert table.offsets() == second  # the old leaders' buffers went with their leadership
        alter_lag(cluster, 50)
        wait_until(caught_up(cluster, table))
        third = assert_table_is_the_topic(cluster, table)
        assert third == ends
        history = ranges(table.load())
        for p in range(PARTITIONS):  # the held records, committed once, from the snapshot's end
            assert any(start == second[p] for start, _ in history[p]), history[p]

        # 4. readers: pyiceberg's RestCatalog (above, throughout), DuckDB and polars
        duck_and_polars(table, third)
    # the server logged no secret (it logs its catalog properties at start: not at this level)
    assert warehouse.secret_access_key not in rest_server.read_log()


def duck_and_polars(table: Table, ends: dict[int, int]) -> None:
    import duckdb
    import polars as pl

    arrow = table.load().scan().to_arrow()
    con = duckdb.connect()
    con.register("orders", arrow)
    counted = con.execute(
        'SELECT "partition", count(*), count(DISTINCT "offset"), max("offset") '
        'FROM orders GROUP BY "partition" ORDER BY "partition"'
    ).fetchall()
    rows = {p: n for p, n, _, _ in counted}
    assert all(n == distinct for _, n, distinct, _ in counted)
    assert all(top < ends[p] for p, _, _, top in counted)
    frame = pl.from_arrow(arrow)
    assert isinstance(frame, pl.DataFrame)
    by_polars = frame.group_by("partition").len().sort("partition")
    assert dict(zip(by_polars["partition"], by_polars["len"], strict=True)) == rows
    assert sum(rows.values()) == len(table.rows())
