"""Topics as tables through a REST catalog (``iceberg.catalog.type=rest``): a real in-process
broker writes its topics' tables through Apache Iceberg's own REST catalog server
(``RESTCatalogServer``, the ``apache/iceberg-rest-fixture`` image's server, a JVM;
``gregor.testing.iceberg_rest``), and everything is read back through the same server with
pyiceberg's ``RestCatalog``: the table equals the topic's committed records, record by record
(aborted transactions never reach it); a restarted broker resumes from the offsets the server
keeps in the snapshot's properties; two writers racing on one table never lose or duplicate
(the server answers the loser's commit 409); the server going away stops the commits and they
resume, exactly, when it is back; ``gregor tables describe`` gives what ``load_catalog``
opens it with, and the Spark reader's planning finds it by the broker's configs;
``gregor tables compact`` and snapshot expiry work through it.

The server runs once for the module, its warehouse a ``file://`` directory that pyiceberg
writes the data files into (the server writes the metadata files there too); each test has a
namespace of its own (made by the broker through the server)."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import Producer
from pyiceberg.catalog import load_catalog
from pyiceberg.exceptions import CommitFailedException
from tables_support import (
    CommittedOffsets,
    create_table_topic,
    end_offsets,
    table_rows,
    topic_rows,
    wait_until,
)

from gregor.tables import catalog as tables_catalog
from gregor.tables.catalog import TableCatalog, TopicTable
from gregor.tables.offsets import table_offsets
from gregor.tables.schema import ARROW_SCHEMA
from gregor.tables.settings import catalog_settings
from gregor.testing import InProcessBroker
from gregor.testing.cli import run_command
from gregor.testing.iceberg_rest import IcebergRestCatalog

pytestmark = [pytest.mark.jvm, pytest.mark.slow]


@pytest.fixture(scope="module")
def rest_server() -> Iterator[IcebergRestCatalog]:
    with IcebergRestCatalog() as server:
        yield server


@pytest.fixture
def props(rest_server: IcebergRestCatalog) -> dict[str, str]:
    """The broker's settings: the REST catalog, a namespace of the test's own."""
    return {
        "iceberg.catalog.type": "rest",
        "iceberg.catalog.uri": rest_server.uri,
        "iceberg.namespace": f"t{uuid.uuid4().hex[:12]}",
    }


@pytest.fixture
def broker(props: dict[str, str]) -> Iterator[InProcessBroker]:
    with InProcessBroker(config=props) as b:
        yield b


def rest_catalog(props: dict[str, str]) -> Any:
    """pyiceberg's RestCatalog on the same server, as a reader opens it."""
    return load_catalog("reader", type="rest", uri=props["iceberg.catalog.uri"])


def produce(bootstrap: str, topic: str, n: int, partitions: int, tag: str = "") -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(n):
        key = None if i % 7 == 0 else f"k{i}".encode()
        headers = [("h", f"{i}".encode()), ("empty", None)] if i % 3 == 0 else None
        p.produce(topic, f"{tag}v{i}".encode(), key, partition=i % partitions, headers=headers)
    assert p.flush(30) == 0


def caught_up(
    broker: InProcessBroker, offsets: Callable[[], dict[int, int]], topic: str, partitions: int
) -> Callable[[], bool]:
    def done() -> bool:
        ends = end_offsets(broker.bootstrap_servers, topic, partitions)
        table = offsets()
        return all(table.get(p) == end for p, end in ends.items() if end > 0)

    return done


def rows_of(broker: InProcessBroker, topic: str, props: dict[str, str]) -> list[Any]:
    return table_rows(broker.data_dir / "logs", topic, props)


def test_the_table_through_the_rest_server_is_the_committed_topic_exactly(
    broker: InProcessBroker, props: dict[str, str], rest_server: IcebergRestCatalog
) -> None:
    topic = "orders"
    namespace = props["iceberg.namespace"]
    catalog = rest_catalog(props)
    assert (namespace,) not in catalog.list_namespaces()
    create_table_topic(broker.bootstrap_servers, topic, 3)
    tx = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": "rest-tx"})
    tx.init_transactions(30)
    for txn in range(4):
        tx.begin_transaction()
        for i in range(9):
            tx.produce(topic, f"t{txn}-{i}".encode(), partition=i % 3)
        if txn % 2:
            assert tx.flush(30) == 0  # in the log before the abort (else librdkafka purges them)
            tx.abort_transaction(30)
        else:
            tx.commit_transaction(30)
    produce(broker.bootstrap_servers, topic, 300, 3)
    offsets = CommittedOffsets(broker.data_dir / "logs", topic, props)
    wait_until(caught_up(broker, offsets, topic, 3))

    expected = topic_rows(broker.bootstrap_servers, topic, 3)
    assert len(expected) == 318
    assert len(topic_rows(broker.bootstrap_servers, topic, 3, "read_uncommitted")) == 336
    assert not [r for r in expected if r[3] is not None and r[3].startswith((b"t1-", b"t3-"))]
    assert rows_of(broker, topic, props) == expected
    # the broker made the namespace and the table through the server, which placed it in its
    # own warehouse; pyiceberg wrote the data files there
    assert (namespace,) in catalog.list_namespaces()
    assert catalog.list_tables(namespace) == [(namespace, topic)]
    table = catalog.load_table((namespace, topic))
    assert table.location() == f"{rest_server.warehouse}/{namespace}/{topic}"
    assert table.properties["gregor.topic"] == topic
    assert table.properties["commit.retry.num-retries"] == "0"
    files = [t.file.file_path for t in table.scan().plan_files()]
    assert files and all(f.startswith(f"{table.location()}/data/") for f in files)
    local = Path(rest_server.directory, "warehouse", namespace, topic, "data")
    assert sorted(str(p.relative_to(local)) for p in local.rglob("*.parquet")) == sorted(
        f.removeprefix(f"{table.location()}/data/") for f in files
    )
    assert table_offsets(table) == end_offsets(broker.bootstrap_servers, topic, 3)


def test_a_restart_resumes_from_the_offsets_the_rest_server_keeps(
    broker: InProcessBroker, props: dict[str, str]
) -> None:
    topic = "events"
    create_table_topic(broker.bootstrap_servers, topic, 2)
    produce(broker.bootstrap_servers, topic, 100, 2, tag="a")
    offsets = CommittedOffsets(broker.data_dir / "logs", topic, props)
    wait_until(caught_up(broker, offsets, topic, 2))
    assert offsets() == {0: 50, 1: 50}
    broker.restart()
    produce(broker.bootstrap_servers, topic, 100, 2, tag="b")
    wait_until(caught_up(broker, offsets, topic, 2))
    expected = topic_rows(broker.bootstrap_servers, topic, 2)
    assert len(expected) == 200
    assert rows_of(broker, topic, props) == expected
    assert offsets() == {0: 100, 1: 100}


def test_commits_stop_while_the_rest_server_is_away_and_resume_exactly(
    broker: InProcessBroker,
    props: dict[str, str],
    rest_server: IcebergRestCatalog,
    caplog: pytest.LogCaptureFixture,
) -> None:
    topic = "away"
    create_table_topic(broker.bootstrap_servers, topic, 2)
    produce(broker.bootstrap_servers, topic, 40, 2, tag="a")
    offsets = CommittedOffsets(broker.data_dir / "logs", topic, props)
    wait_until(caught_up(broker, offsets, topic, 2))
    assert offsets() == {0: 20, 1: 20}
    rest_server.stop()
    try:
        produce(broker.bootstrap_servers, topic, 40, 2, tag="b")
        # each partition's translator fails to commit (connection refused) and tries again

        def both_failed() -> bool:
            said = {r.getMessage() for r in caplog.records if r.name == "gregor.tables"}
            return {f"translating {topic}-{p} failed; trying again" for p in (0, 1)} <= said

        wait_until(both_failed)
    finally:
        rest_server.start()  # the same port and catalog database
    wait_until(caught_up(broker, offsets, topic, 2))
    expected = topic_rows(broker.bootstrap_servers, topic, 2)
    assert len(expected) == 80
    assert rows_of(broker, topic, props) == expected
    assert offsets() == {0: 40, 1: 40}


def rows(partition: int, first: int, n: int) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {
                "key": None,
                "value": f"{partition}-{o}".encode(),
                "headers": None,
                "timestamp": 1_795_000_000_000_000,
                "partition": partition,
                "offset": o,
            }
            for o in range(first, first + n)
        ],
        schema=ARROW_SCHEMA,
    )


def writer(props: dict[str, str]) -> TopicTable:
    """A writer with a RestCatalog of its own (as another broker has)."""
    return TableCatalog(catalog_settings(props, "/nonexistent")).open_table("orders")


def keys_of(table: Any) -> list[tuple[int, int]]:
    got = table.scan().to_arrow()
    return sorted(zip(got["partition"].to_pylist(), got["offset"].to_pylist(), strict=True))


def test_a_commit_that_loses_the_race_at_the_rest_server_keeps_the_winners_offsets(
    props: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = writer(props), writer(props)
    first.commit(0, None, 0, 10, rows(0, 0, 10))
    raced = []

    def the_other_writer_commits_first(point: str) -> None:
        if point == "commit.staged" and not raced:
            raced.append(point)
            first.commit(0, 10, 10, 20, rows(0, 10, 10))

    monkeypatch.setattr(tables_catalog, "crash_point", the_other_writer_commits_first)
    # the server refuses the stale commit (409); the second writer starts again from the
    # winner's snapshot
    second.commit(1, None, 0, 5, rows(1, 0, 5))
    assert raced
    table = writer(props).table
    assert table_offsets(table) == {0: 20, 1: 5}
    assert keys_of(table) == [(0, o) for o in range(20)] + [(1, o) for o in range(5)]


def test_two_writers_committing_at_once_through_the_rest_server_lose_nothing(
    props: dict[str, str],
) -> None:
    """Two writers (threads, each with its own RestCatalog) commit partitions 0 and 1 of one
    table at the same time; whichever loses a race at the server starts again from the
    winner's snapshot."""
    commits, size = 12, 5
    errors: list[BaseException] = []

    def write(partition: int) -> None:
        try:
            table = writer(props)
            for c in range(commits):
                first = c * size
                table.commit(
                    partition, first or None, first, first + size, rows(partition, first, size)
                )
        except BaseException as e:  # noqa: BLE001 - reported by the test's thread
            errors.append(e)

    writer(props)  # the table, made once (two writers making it at once is another question)
    threads = [threading.Thread(target=write, args=(p,)) for p in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    table = writer(props).table
    n = commits * size
    assert table_offsets(table) == {0: n, 1: n}
    assert keys_of(table) == [(0, o) for o in range(n)] + [(1, o) for o in range(n)]
    appends = [s for s in table.snapshots() if s.summary.operation.value == "append"]
    assert len(appends) == 2 * commits  # each commit once, however often it was tried


def test_describe_and_the_spark_planner_open_the_rest_catalog(
    broker: InProcessBroker, props: dict[str, str], rest_server: IcebergRestCatalog
) -> None:
    from gregor.spark.tables import plan_table

    topic = "described"
    namespace = props["iceberg.namespace"]
    create_table_topic(broker.bootstrap_servers, topic, 2)
    produce(broker.bootstrap_servers, topic, 40, 2)
    offsets = CommittedOffsets(broker.data_dir / "logs", topic, props)
    wait_until(caught_up(broker, offsets, topic, 2))
    code, out, err = run_command(
        broker.bootstrap_servers, "tables", "describe", topic, "--output", "json"
    )
    assert code == 0, err
    d = json.loads(out)
    assert d["catalog_type"] == "rest"
    assert d["catalog_uri"] == rest_server.uri
    # nothing of the broker's own disk: the REST server is the catalog, its warehouse its own
    assert d["catalog_properties"] == {"type": "rest", "uri": rest_server.uri}
    assert d["table"] == [namespace, topic]
    # the two lines a user needs
    table = load_catalog(d["catalog_name"], **d["catalog_properties"]).load_table(tuple(d["table"]))
    assert table.scan().to_arrow().num_rows == 40
    assert [(r["partition"], r["table_offset"], r["lag"]) for r in d["partitions"]] == [
        (0, 20, 0),
        (1, 20, 0),
    ]
    # the Spark reader's planning asks the broker for the catalog (DescribeConfigs) and plans
    # with pyiceberg through the REST server
    plan = plan_table(topic, bootstrap_servers=broker.bootstrap_servers)
    assert sorted(plan.files) == sorted(t.file.file_path for t in table.scan().plan_files())
    assert plan.snapshot_id == table.current_snapshot().snapshot_id
    assert dict(plan.offsets) == {0: 20, 1: 20}


def test_compaction_and_snapshot_expiry_through_the_rest_server(
    broker: InProcessBroker, props: dict[str, str]
) -> None:
    topic = "kept"
    namespace = props["iceberg.namespace"]
    create_table_topic(
        broker.bootstrap_servers,
        topic,
        2,
        **{"iceberg.maintenance.interval.ms": "100", "iceberg.compaction.min.input.files": "0"},
    )
    offsets = CommittedOffsets(broker.data_dir / "logs", topic, props)
    for r in range(3):  # a commit, a file, per round at least
        produce(broker.bootstrap_servers, topic, 8, 2, tag=f"r{r}-")
        wait_until(caught_up(broker, offsets, topic, 2))
    catalog = rest_catalog(props)

    def table() -> Any:
        return catalog.load_table((namespace, topic))

    files = len(list(table().scan().plan_files()))
    assert files == len(table().snapshots()) >= 3

    code, out, err = run_command(broker.bootstrap_servers, "tables", "compact", topic)
    assert code == 0, err
    assert out.splitlines() == [f"Topic: {topic}\tFilesBefore: {files}\tFilesAfter: 1"]
    expected = topic_rows(broker.bootstrap_servers, topic, 2)
    assert len(expected) == 24
    assert rows_of(broker, topic, props) == expected

    while True:  # from outside the broker, against its maintenance's commits
        try:
            with table().transaction() as tx:
                tx.set_properties({"history.expire.max-snapshot-age-ms": "0"})
            break
        except CommitFailedException:
            continue
    wait_until(lambda: len(table().snapshots()) == 1)  # the compaction's, with the offsets
    current = table().current_snapshot()
    assert current.summary.additional_properties["gregor.maintenance"] == "compaction"
    assert table_offsets(table()) == {0: 12, 1: 12}
    assert rows_of(broker, topic, props) == expected

    broker.restart()  # resumes from the offsets of the one snapshot left
    produce(broker.bootstrap_servers, topic, 8, 2, tag="after-")
    wait_until(caught_up(broker, offsets, topic, 2))
    assert rows_of(broker, topic, props) == topic_rows(broker.bootstrap_servers, topic, 2)
    assert offsets() == {0: 16, 1: 16}


def open_at_once(settings: dict[str, str], writers: int) -> tuple[list[str], list[BaseException]]:
    """``writers`` threads, each with a catalog of its own, open topic ``orders``'s table at
    the same moment; the table UUIDs they opened, and what they raised."""
    barrier = threading.Barrier(writers)
    opened: list[str] = []
    errors: list[BaseException] = []

    def open_table() -> None:
        catalog = TableCatalog(catalog_settings(settings, "/nonexistent"))
        catalog.catalog  # noqa: B018 - connected before the race
        barrier.wait()
        try:
            opened.append(str(catalog.open_table("orders").table.metadata.table_uuid))
        except BaseException as e:  # noqa: BLE001 - reported by the test's thread
            errors.append(e)

    threads = [threading.Thread(target=open_table) for _ in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return opened, errors


def test_writers_making_one_table_at_once_through_the_rest_server_all_open_it(
    props: dict[str, str],
) -> None:
    """A cluster's leaders of one new topic's partitions make its namespace and table at the
    same moment. The REST server over its JDBC catalog answers the writers that lose the race
    500 (a unique key violated), not 409; each loser finds the namespace and the table made by
    the winner and opens that one, at once (no failed first attempt to wait out and log)."""
    writers = 6
    for r in range(3):
        settings = {**props, "iceberg.namespace": f"{props['iceberg.namespace']}r{r}"}
        opened, errors = open_at_once(settings, writers)
        assert errors == []
        assert len(opened) == writers and len(set(opened)) == 1  # one table, the same for all
