"""Table maintenance on a real in-process broker and pyiceberg's SQL catalog: retention deletes
exactly the rows older than ``iceberg.retention.ms``; snapshot expiry (the table's own
``history.expire.*`` properties) drops old snapshots but never the one whose summary carries
the offsets; compaction rewrites an hour partition's small files into one with the same rows;
a translator restarted after any of these resumes with no record lost or duplicated; and
``gregor tables snapshots|compact`` say what the table holds."""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from pyiceberg.exceptions import CommitFailedException
from tables_support import (
    by_partition,
    committed_offsets,
    create_table_topic,
    end_offsets,
    open_table,
    table_exists,
    table_rows,
    topic_rows,
    wait_until,
)

from gregor.tables import maintenance
from gregor.tables.maintenance import delete_files
from gregor.tables.offsets import OFFSETS, offsets_of_summary, table_offsets
from gregor.tables.schema import ARROW_SCHEMA
from gregor.testing import InProcessBroker
from gregor.testing.cli import run_command

DAY_MS = 86_400_000


@pytest.fixture
def broker() -> Iterator[InProcessBroker]:
    with InProcessBroker() as b:
        yield b


def logs(broker: InProcessBroker) -> Path:
    return broker.data_dir / "logs"


def caught_up(broker: InProcessBroker, topic: str, partitions: int) -> bool:
    ends = end_offsets(broker.bootstrap_servers, topic, partitions)
    table = committed_offsets(logs(broker), topic)
    return all(table.get(p) == end for p, end in ends.items() if end > 0)


def produce(
    bootstrap: str, topic: str, n: int, partitions: int, timestamp_ms: int, tag: str
) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(n):
        headers = [("h", f"{i}".encode())] if i % 3 == 0 else None
        p.produce(
            topic,
            f"{tag}{i}".encode(),
            f"k{i}".encode(),
            partition=i % partitions,
            headers=headers,
            timestamp=timestamp_ms,
        )
    assert p.flush(30) == 0


def rounds(broker: InProcessBroker, topic: str, partitions: int, n: int, timestamp_ms: int) -> None:
    """``n`` rounds of records, each waited into the table (a commit and a file at least: the
    partitions' rows together or apart, ``gregor.tables.commit_group``)."""
    for r in range(n):
        produce(broker.bootstrap_servers, topic, 4 * partitions, partitions, timestamp_ms, f"r{r}-")
        wait_until(lambda: caught_up(broker, topic, partitions))


def data_files(table: Any) -> int:
    return len(list(table.scan().plan_files()))


def retried(change: Callable[[Any], None], data_dir: Path, topic: str) -> None:
    """A change to the table from outside the broker, against its concurrent commits."""
    while True:
        try:
            change(open_table(data_dir, topic))
            return
        except CommitFailedException:
            continue


def maintainers(broker: InProcessBroker) -> list[str]:
    async def get() -> list[str]:
        assert broker.broker is not None and broker.broker.tables is not None
        return sorted(broker.broker.tables.maintainers)

    return broker.call(get)  # type: ignore[no-any-return]


def assert_topic_equals_table_and_offsets(broker: InProcessBroker, topic: str, n: int) -> None:
    expected = topic_rows(broker.bootstrap_servers, topic, n)
    assert table_rows(logs(broker), topic) == expected
    assert committed_offsets(logs(broker), topic) == end_offsets(broker.bootstrap_servers, topic, n)


def test_retention_deletes_exactly_the_rows_older_than_it(broker: InProcessBroker) -> None:
    topic = "retained"
    create_table_topic(
        broker.bootstrap_servers,
        topic,
        2,
        **{
            "iceberg.retention.ms": str(DAY_MS),
            "iceberg.maintenance.interval.ms": "100",
            "iceberg.compaction.min.input.files": "0",
        },
    )
    now = int(time.time() * 1000)
    produce(broker.bootstrap_servers, topic, 20, 2, now - 3 * DAY_MS, "old-")
    produce(broker.bootstrap_servers, topic, 10, 2, now - 2 * DAY_MS, "older-than-a-day-")
    produce(broker.bootstrap_servers, topic, 20, 2, now, "new-")
    wait_until(lambda: caught_up(broker, topic, 2))
    everything = topic_rows(broker.bootstrap_servers, topic, 2)
    assert len(everything) == 50
    recent = [r for r in everything if r[5] >= now - DAY_MS]
    assert len(recent) == 20 and all(r[3].startswith(b"new-") for r in recent)  # type: ignore[union-attr]
    # each partition keeps a suffix of its records: offsets 15 to 24
    assert {p: [r[1] for r in rows] for p, rows in by_partition(recent).items()} == {
        p: list(range(15, 25)) for p in range(2)
    }
    wait_until(lambda: table_rows(logs(broker), topic) == recent)
    assert maintainers(broker) == [topic]  # one writer per table: partition 0's leader

    table = open_table(logs(broker), topic)
    deletes = [s for s in table.snapshots() if s.summary.operation.value == "delete"]
    assert deletes, "retention made no delete snapshot"
    ends = end_offsets(broker.bootstrap_servers, topic, 2)
    assert ends == {0: 25, 1: 25}
    # the resume offsets did not move: each delete carries its parent's offsets unchanged
    # (retention may run between two partitions' commits: the parent's, whatever they are)
    assert table_offsets(table) == ends
    for s in deletes:
        parent = table.snapshot_by_id(s.parent_snapshot_id)
        assert OFFSETS in s.summary.additional_properties
        assert offsets_of_summary(s.summary.additional_properties) == offsets_of_summary(
            parent.summary.additional_properties
        )

    # a restart resumes from those offsets: no deleted row comes back, no row twice
    broker.restart()
    produce(broker.bootstrap_servers, topic, 10, 2, int(time.time() * 1000), "after-")
    wait_until(lambda: caught_up(broker, topic, 2))
    after = topic_rows(broker.bootstrap_servers, topic, 2)
    cutoff = now - DAY_MS
    assert table_rows(logs(broker), topic) == [r for r in after if r[5] >= cutoff]
    assert committed_offsets(logs(broker), topic) == {0: 30, 1: 30}


def test_expiry_keeps_the_snapshot_carrying_the_offsets(broker: InProcessBroker) -> None:
    topic = "expiring"
    create_table_topic(
        broker.bootstrap_servers,
        topic,
        2,
        **{"iceberg.maintenance.interval.ms": "100", "iceberg.compaction.min.input.files": "0"},
    )
    now = int(time.time() * 1000)
    rounds(broker, topic, 2, 3, now)
    table = open_table(logs(broker), topic)
    with_offsets = table.current_snapshot()
    assert len(table.snapshots()) >= 3  # a commit per round at least (both partitions in one,
    # or one each: gregor.tables.commit_group)
    ends = end_offsets(broker.bootstrap_servers, topic, 2)
    assert offsets_of_summary(with_offsets.summary.additional_properties) == ends == {0: 12, 1: 12}

    # two snapshots another Iceberg writer made (empty appends: no rows, no offsets map)
    def foreign_append(t: Any) -> None:
        t.append(ARROW_SCHEMA.empty_table())

    retried(foreign_append, logs(broker), topic)
    retried(foreign_append, logs(broker), topic)

    def expire_everything_old(t: Any) -> None:
        with t.transaction() as tx:
            tx.set_properties({"history.expire.max-snapshot-age-ms": "0"})

    retried(expire_everything_old, logs(broker), topic)

    def expired() -> bool:
        return len(open_table(logs(broker), topic).snapshots()) <= 3

    wait_until(expired)
    table = open_table(logs(broker), topic)
    assert len(table.snapshots()) == 3
    current = table.current_snapshot()
    kept = {s.snapshot_id: s for s in table.snapshots()}
    # kept: the current (foreign) snapshot, its foreign parent, and the one with the offsets
    assert with_offsets.snapshot_id in kept
    assert OFFSETS not in current.summary.additional_properties
    assert kept[current.parent_snapshot_id].parent_snapshot_id == with_offsets.snapshot_id
    assert table_offsets(table) == ends
    assert table_rows(logs(broker), topic) == topic_rows(broker.bootstrap_servers, topic, 2)

    # a restarted translator resumes at those offsets: no record lost or twice
    broker.restart()
    rounds(broker, topic, 2, 1, int(time.time() * 1000))
    assert_topic_equals_table_and_offsets(broker, topic, 2)
    assert committed_offsets(logs(broker), topic) == {0: 16, 1: 16}


def files_on_disk(table: Any, sub: str, suffix: str) -> set[str]:
    """The files under the table's ``sub`` directory (data, metadata), as paths."""
    root = Path(_path(table.location())) / sub
    return {str(p) for p in root.rglob(f"*{suffix}")} if root.exists() else set()


def reachable(table: Any) -> tuple[set[str], set[str]]:
    """The data files live in any snapshot of ``table``, and its manifest lists and manifests."""
    data: set[str] = set()
    avro: set[str] = set()
    for snapshot in table.snapshots():
        avro.add(snapshot.manifest_list)
        for manifest in snapshot.manifests(table.io):
            avro.add(manifest.manifest_path)
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
                data.add(entry.data_file.file_path)
    return {_path(p) for p in data}, {_path(p) for p in avro}


def _path(location: str) -> str:
    return urllib.parse.unquote(urllib.parse.urlparse(location).path)


def alter_topic(broker: InProcessBroker, topic: str, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    entries = [
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()
    ]
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=entries)
    for f in admin.incremental_alter_configs([resource]).values():
        f.result(30)


def test_expiry_deletes_the_files_only_expired_snapshots_reached(broker: InProcessBroker) -> None:
    """Retention's deleted rows and compaction's replaced files leave the storage once the
    snapshots that held them expire: what remains on disk is exactly what the kept snapshots
    reach, and the table keeps only its newest metadata files."""
    topic = "freed"
    create_table_topic(
        broker.bootstrap_servers,
        topic,
        2,
        **{"iceberg.maintenance.interval.ms": "100", "iceberg.compaction.min.input.files": "0"},
    )
    wait_until(lambda: table_exists(logs(broker), topic))

    def expire_at_once(t: Any) -> None:
        with t.transaction() as tx:
            tx.set_properties(
                {
                    "history.expire.max-snapshot-age-ms": "0",
                    "write.metadata.previous-versions-max": "3",
                }
            )

    retried(expire_at_once, logs(broker), topic)
    table = open_table(logs(broker), topic)
    assert table.properties["write.metadata.delete-after-commit.enabled"] == "true"

    now = int(time.time() * 1000)
    for r in range(2):  # two rounds of old rows, then two of new: a commit a round at least
        produce(broker.bootstrap_servers, topic, 8, 2, now - 3 * DAY_MS, f"old{r}-")
        wait_until(lambda: caught_up(broker, topic, 2))
    for r in range(2):
        produce(broker.bootstrap_servers, topic, 4, 2, now, f"new{r}-")
        wait_until(lambda: caught_up(broker, topic, 2))
    everything = topic_rows(broker.bootstrap_servers, topic, 2)
    recent = [r for r in everything if r[5] >= now - DAY_MS]
    assert len(everything) == 24 and len(recent) == 8
    data = files_on_disk(open_table(logs(broker), topic), "data", ".parquet")
    old = {
        f
        for f in data
        if pq.read_table(f)["timestamp"].to_pylist()[0].timestamp() * 1000 < now - DAY_MS
    }
    # a file per commit: the two partitions' rows in one, or in one each
    assert 2 <= len(old) <= 4 and 2 <= len(data - old) <= 4

    alter_topic(
        broker,
        topic,
        **{"iceberg.retention.ms": str(DAY_MS), "iceberg.compaction.min.input.files": "2"},
    )

    def settled() -> bool:
        try:
            return files_match()
        except FileNotFoundError:  # a snapshot read here expired meanwhile (at age 0)
            return False

    def files_match() -> bool:
        table = open_table(logs(broker), topic)
        live, avro = reachable(table)
        return (
            table_rows(logs(broker), topic) == recent
            and data_files(table) == 1
            and files_on_disk(table, "data", ".parquet") == live
            and files_on_disk(table, "metadata", ".avro") == avro
            and len(table.snapshots()) == 1
        )

    wait_until(settled)
    table = open_table(logs(broker), topic)
    assert not old & files_on_disk(table, "data", ".parquet")
    assert len(files_on_disk(table, "data", ".parquet")) == 1  # compacted, the rest deleted
    # the current metadata file and at most three before it
    assert 1 < len(files_on_disk(table, "metadata", ".metadata.json")) <= 4
    assert table_offsets(table) == end_offsets(broker.bootstrap_servers, topic, 2)

    # a restarted translator resumes from the kept snapshot's offsets: nothing lost or twice
    broker.restart()
    produce(broker.bootstrap_servers, topic, 4, 2, int(time.time() * 1000), "after-")
    wait_until(lambda: caught_up(broker, topic, 2))
    after = [r for r in topic_rows(broker.bootstrap_servers, topic, 2) if r[5] >= now - DAY_MS]
    assert len(after) == 12

    def table_is_after() -> bool:
        try:  # compaction and expiry at age 0 go on beside this read
            return bool(table_rows(logs(broker), topic) == after)
        except FileNotFoundError:
            return False

    wait_until(table_is_after)

    # a file another catalog writer added from elsewhere is never swept, even with a path
    # that starts under the table and climbs out of it
    outside = logs(broker) / "not-the-tables.bin"
    outside.write_bytes(b"broker data")
    table = open_table(logs(broker), topic)
    climbing = table.location().rstrip("/") + "/../../../../" + outside.name
    assert delete_files(table, [outside.as_uri(), str(outside), climbing]) == 0
    assert outside.read_bytes() == b"broker data"


def test_compaction_rewrites_small_files_into_one_with_the_same_rows(
    broker: InProcessBroker,
) -> None:
    topic = "compacted"
    # one maintenance pass when the translators start, then none for an hour
    create_table_topic(
        broker.bootstrap_servers,
        topic,
        3,
        **{"iceberg.maintenance.interval.ms": "3600000", "iceberg.compaction.min.input.files": "4"},
    )
    hour = int(time.time() * 1000)
    rounds(broker, topic, 3, 4, hour)  # all in one hour partition
    before = open_table(logs(broker), topic)
    assert data_files(before) >= 4  # a commit per round at least, and no pass since
    expected = topic_rows(broker.bootstrap_servers, topic, 3)
    assert len(expected) == 48

    broker.restart()  # the new translator of partition 0 runs a pass at once
    wait_until(lambda: data_files(open_table(logs(broker), topic)) == 1)
    table = open_table(logs(broker), topic)
    assert table_rows(logs(broker), topic) == expected  # record by record, each once
    scanned = table.scan().to_arrow()
    keys = list(zip(scanned["partition"].to_pylist(), scanned["offset"].to_pylist(), strict=True))
    assert keys == sorted(keys)  # the file is in (partition, offset) order
    current = table.current_snapshot()
    assert current.summary.operation.value == "overwrite"
    assert current.summary.additional_properties["gregor.maintenance"] == "compaction"
    assert offsets_of_summary(current.summary.additional_properties) == {0: 16, 1: 16, 2: 16}
    assert table_offsets(table) == {0: 16, 1: 16, 2: 16}

    rounds(broker, topic, 3, 1, hour)
    broker.restart()
    rounds(broker, topic, 3, 1, hour)
    assert_topic_equals_table_and_offsets(broker, topic, 3)
    assert committed_offsets(logs(broker), topic) == {0: 24, 1: 24, 2: 24}


def test_a_long_maintenance_pass_holds_up_no_commit(
    broker: InProcessBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A compaction reads and writes an hour's files, seconds of work for a large table: held
    at its start, the broker's translators still commit, its own table's and another topic's
    (only the pass's catalog calls share the catalog thread with them); released, it
    compacts."""
    held, release = threading.Event(), threading.Event()
    real_compact = maintenance.compact

    def held_compact(topic_table: Any, *args: Any) -> maintenance.Compaction:
        if topic_table.topic == "maintained" and not release.is_set():
            held.set()
            release.wait()
        return real_compact(topic_table, *args)

    monkeypatch.setattr(maintenance, "compact", held_compact)
    hour = int(time.time() * 1000)
    try:
        create_table_topic(
            broker.bootstrap_servers,
            "maintained",
            2,
            **{"iceberg.maintenance.interval.ms": "100", "iceberg.compaction.min.input.files": "2"},
        )
        wait_until(held.is_set)  # the first pass, as partition 0's translator starts
        rounds(broker, "maintained", 2, 3, hour)  # three commits at least, the pass held
        create_table_topic(broker.bootstrap_servers, "other", 2)
        rounds(broker, "other", 2, 2, hour)
        assert data_files(open_table(logs(broker), "maintained")) >= 3
    finally:
        release.set()
    wait_until(lambda: data_files(open_table(logs(broker), "maintained")) == 1)
    for topic in ("maintained", "other"):
        assert table_rows(logs(broker), topic) == topic_rows(broker.bootstrap_servers, topic, 2)


def test_a_compaction_swaps_its_files_in_after_the_translators_commits(
    broker: InProcessBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Held after writing its file, a compaction meets a translator's commit; its swap is
    built on the table as it is then: committed once, no file written twice, carrying the
    offsets the translator reached; the table equals the topic."""
    import pyiceberg.io.pyarrow as pyiceberg_arrow

    held, release = threading.Event(), threading.Event()
    writes = []
    real_write = pyiceberg_arrow._dataframe_to_data_files

    def held_write(*args: Any, **kwargs: Any) -> Any:
        files = list(real_write(*args, **kwargs))
        writes.append([f.file_path for f in files])
        if not release.is_set():
            held.set()
            release.wait()
        return iter(files)

    monkeypatch.setattr(pyiceberg_arrow, "_dataframe_to_data_files", held_write)
    topic, hour = "rebased", int(time.time() * 1000)
    try:
        create_table_topic(
            broker.bootstrap_servers,
            topic,
            2,
            **{"iceberg.maintenance.interval.ms": "100", "iceberg.compaction.min.input.files": "3"},
        )
        rounds(broker, topic, 2, 3, hour)  # three commits: three files to compact
        wait_until(held.is_set)
        rounds(broker, topic, 2, 1, hour)  # a translator commits meanwhile
        assert committed_offsets(logs(broker), topic) == {0: 16, 1: 16}
    finally:
        release.set()

    def compacted() -> Any:
        table = open_table(logs(broker), topic)
        summary = table.current_snapshot().summary.additional_properties
        return table if summary.get("gregor.maintenance") == "compaction" else None

    wait_until(lambda: compacted() is not None)
    table = compacted()
    assert len(writes) == 1  # written once, swapped in on the newer table
    files = {t.file.file_path for t in table.scan().plan_files()}
    assert set(writes[0]) <= files and len(files) == 2  # the compacted file and the new one
    assert table_offsets(table) == {0: 16, 1: 16}  # the translator's offsets, carried
    assert table_rows(logs(broker), topic) == topic_rows(broker.bootstrap_servers, topic, 2)


def test_tables_snapshots_and_compact_commands(broker: InProcessBroker) -> None:
    topic = "shown"
    create_table_topic(
        broker.bootstrap_servers,
        topic,
        2,
        **{"iceberg.maintenance.interval.ms": "3600000", "iceberg.compaction.min.input.files": "0"},
    )
    rounds(broker, topic, 2, 2, int(time.time() * 1000))
    table = open_table(logs(broker), topic)
    files = data_files(table)
    snapshots = sorted(table.snapshots(), key=lambda s: s.timestamp_ms)
    assert files == len(snapshots) >= 2  # each commit: a file, a snapshot; a round one at least

    code, out, err = run_command(
        broker.bootstrap_servers, "tables", "snapshots", topic, "--output", "json"
    )
    assert code == 0, err
    shown = json.loads(out)
    assert [s["id"] for s in shown] == [s.snapshot_id for s in snapshots]
    assert [s["timestamp_ms"] for s in shown] == [s.timestamp_ms for s in snapshots]
    assert [s["operation"] for s in shown] == ["append"] * files
    assert [s["current"] for s in shown] == [False] * (files - 1) + [True]
    assert [s["maintenance"] for s in shown] == [None] * files
    assert [s["offsets"] for s in shown] == [
        {str(p): o for p, o in offsets_of_summary(s.summary.additional_properties).items()}
        for s in snapshots
    ]
    assert shown[-1]["offsets"] == {"0": 8, "1": 8}
    # the first commit covers the first round, of one partition or both (commit_group)
    assert shown[0]["offsets"] and set(shown[0]["offsets"].values()) == {4}

    code, out, err = run_command(broker.bootstrap_servers, "tables", "compact", topic)
    assert code == 0, err
    assert out.splitlines() == [f"Topic: {topic}\tFilesBefore: {files}\tFilesAfter: 1"]
    assert data_files(open_table(logs(broker), topic)) == 1
    assert_topic_equals_table_and_offsets(broker, topic, 2)

    code, out, err = run_command(broker.bootstrap_servers, "tables", "compact", topic)
    assert code == 0, err
    assert out.splitlines() == [f"Topic: {topic}\tFilesBefore: 1\tFilesAfter: 1"]

    code, out, err = run_command(broker.bootstrap_servers, "tables", "snapshots", topic)
    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) == files + 1
    current = open_table(logs(broker), topic).current_snapshot()
    assert lines[-1].startswith(f"{current.snapshot_id}\t")
    assert lines[-1].endswith("\toverwrite (compaction)\tOffsets: 0:8,1:8\tcurrent")
    assert all("\tappend\tOffsets: " in line for line in lines[:-1])

    code, out, err = run_command(broker.bootstrap_servers, "tables", "snapshots", "nope")
    assert code != 0 and "nope" in err


def test_maintenance_topic_configs_are_validated(broker: InProcessBroker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    cases = {
        "bad-retention": ({"iceberg.retention.ms": "-2"}, "at least -1"),
        "one-file": ({"iceberg.compaction.min.input.files": "1"}, "at least 2"),
        "no-interval": ({"iceberg.maintenance.interval.ms": "0"}, "at least 1"),
    }
    futures = admin.create_topics([NewTopic(n, 1, 1, config=c) for n, (c, _) in cases.items()])
    for name, (_, why) in cases.items():
        with pytest.raises(KafkaException) as e:
            futures[name].result(30)
        assert e.value.args[0].code() == KafkaError.INVALID_CONFIG
        assert why in e.value.args[0].str(), e.value.args[0].str()


def test_compaction_from_another_writer_while_translators_commit(broker: InProcessBroker) -> None:
    """``gregor tables compact`` is a writer of its own (its own catalog connection, beside the
    broker's): its commits and the translators' race, the catalog takes one at a time, and
    the loser starts again from the winner's snapshot. Whatever the order, the table ends
    equal to the topic, record by record, with the offsets every commit carried."""
    topic = "raced"
    create_table_topic(
        broker.bootstrap_servers,
        topic,
        2,
        lag_ms=1,
        **{"iceberg.maintenance.interval.ms": "3600000", "iceberg.compaction.min.input.files": "0"},
    )
    wait_until(lambda: table_exists(logs(broker), topic))
    hour = int(time.time() * 1000)
    compactions = 0
    for r in range(6):
        produce(broker.bootstrap_servers, topic, 40, 2, hour, f"r{r}-")
        code, out, err = run_command(
            broker.bootstrap_servers, "tables", "compact", topic, "--output", "json"
        )
        assert code == 0, err
        done = json.loads(out)
        compactions += done["groups_rewritten"]
        assert done["files_after"] <= done["files_before"]
    wait_until(lambda: caught_up(broker, topic, 2))
    code, out, err = run_command(
        broker.bootstrap_servers, "tables", "compact", topic, "--output", "json"
    )
    assert code == 0, err
    done = json.loads(out)
    compactions += done["groups_rewritten"]
    assert done["files_after"] == 1  # all in one hour partition, now one file
    assert_topic_equals_table_and_offsets(broker, topic, 2)
    assert committed_offsets(logs(broker), topic) == {0: 120, 1: 120}
    snapshots = open_table(logs(broker), topic).snapshots()
    overwrites = [s for s in snapshots if s.summary.operation.value == "overwrite"]
    assert len(overwrites) == compactions  # each rewrite the command reported, one snapshot
