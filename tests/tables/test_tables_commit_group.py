"""A topic's partitions committed together (``gregor.tables.commit_group``): one snapshot, one
data file, every partition's range in its summary; a range whose partition moved is left out
and the others committed; the table still equals the topic record by record."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from tables_support import (
    create_table_topic,
    end_offsets,
    open_table,
    table_rows,
    topic_rows,
    wait_until,
)
from test_tables_concurrent_commits import rows, writer
from test_tables_translate import caught_up, produce

from gregor.tables.catalog import HOUR_US, CommitRange, OffsetsMoved, one_hour
from gregor.tables.offsets import offsets_snapshot, ranges_of_summary, table_offsets
from gregor.tables.schema import ARROW_SCHEMA
from gregor.testing import InProcessBroker


@pytest.fixture
def broker() -> Iterator[InProcessBroker]:
    with InProcessBroker() as b:
        yield b


def commits(table: Any) -> list[dict[int, tuple[int, int]]]:
    """What each commit of the current snapshot's ancestry covered, oldest first."""
    out: list[dict[int, tuple[int, int]]] = []
    snapshot = offsets_snapshot(table)
    while snapshot is not None:
        covered = ranges_of_summary(snapshot.summary.additional_properties)
        if covered:
            out.insert(0, covered)
        parent = snapshot.parent_snapshot_id
        snapshot = None if parent is None else table.snapshot_by_id(parent)
    return out


def test_ranges_of_several_partitions_make_one_snapshot_and_one_file(tmp_path: Path) -> None:
    table = writer(tmp_path)
    table.commit(2, None, 0, 4, rows(2, 0, 4))
    answers = table.commit_ranges(
        [
            CommitRange(0, None, 0, 10, rows(0, 0, 10)),
            CommitRange(1, None, 0, 5, rows(1, 0, 5)),
            CommitRange(2, 4, 4, 7, rows(2, 4, 3)),
        ]
    )
    snapshot_id = table.table.current_snapshot().snapshot_id
    assert answers == [snapshot_id] * 3
    assert table_offsets(table.table) == {0: 10, 1: 5, 2: 7}
    assert commits(table.table) == [{2: (0, 4)}, {0: (0, 10), 1: (0, 5), 2: (4, 7)}]
    added = table.table.current_snapshot().summary.additional_properties
    assert added["added-data-files"] == "1"
    got = table.table.scan().to_arrow()
    keys = sorted(zip(got["partition"].to_pylist(), got["offset"].to_pylist(), strict=True))
    assert keys == [(0, o) for o in range(10)] + [(1, o) for o in range(5)] + [
        (2, o) for o in range(7)
    ]


def test_a_range_whose_partition_moved_is_left_out_and_the_others_commit(
    tmp_path: Path,
) -> None:
    table, other = writer(tmp_path), writer(tmp_path)
    other.commit(1, None, 0, 8, rows(1, 0, 8))  # another broker moved partition 1 on
    answers = table.commit_ranges(
        [CommitRange(0, None, 0, 3, rows(0, 0, 3)), CommitRange(1, None, 0, 5, rows(1, 0, 5))]
    )
    assert answers[0] == table.table.current_snapshot().snapshot_id
    assert isinstance(answers[1], OffsetsMoved) and answers[1].found == 8
    assert table_offsets(table.table) == {0: 3, 1: 8}
    assert commits(table.table) == [{1: (0, 8)}, {0: (0, 3)}]
    got = table.table.scan().to_arrow()
    assert sorted(zip(got["partition"].to_pylist(), got["offset"].to_pylist(), strict=True)) == [
        (0, o) for o in range(3)
    ] + [(1, o) for o in range(8)]
    assert got.filter(pa.compute.equal(got["partition"], 1))["value"].to_pylist() == [
        f"1-{o}".encode() for o in range(8)
    ]


def test_one_range_per_partition(tmp_path: Path) -> None:
    table = writer(tmp_path)
    with pytest.raises(ValueError, match="one range per partition"):
        table.commit_ranges(
            [CommitRange(0, None, 0, 3, rows(0, 0, 3)), CommitRange(0, 3, 3, 5, rows(0, 3, 2))]
        )
    assert table_offsets(table.table) == {}


def _translators(broker: InProcessBroker, topic: str) -> Any:
    async def get() -> dict[int, Any]:
        assert broker.broker is not None and broker.broker.tables is not None
        return {p: t for (name, p), t in broker.broker.tables.translators.items() if name == topic}

    return broker.call(get)


def test_the_partitions_a_broker_leads_commit_together(broker: InProcessBroker) -> None:
    """Four partitions' translators hold rows, their lag far off; one falls due: the group
    calls the other three, and one snapshot with one data file takes all four ranges."""
    topic = "clicks"
    create_table_topic(broker.bootstrap_servers, topic, 4, lag_ms=600_000)
    produce(broker.bootstrap_servers, topic, 400, 4)
    ends = end_offsets(broker.bootstrap_servers, topic, 4)
    assert ends == {p: 100 for p in range(4)}

    def holding() -> bool:
        now = _translators(broker, topic)
        return len(now) == 4 and all(t.position == 100 and t.holds_rows() for t in now.values())

    wait_until(holding)
    translators = _translators(broker, topic)

    async def fall_due() -> None:
        translators[2].target_lag_ms = 0
        translators[2].wake()

    broker.call(fall_due)
    wait_until(lambda: caught_up(broker, topic, 4))
    table = open_table(broker.data_dir / "logs", topic)
    assert commits(table) == [{p: (0, 100) for p in range(4)}]
    assert table.current_snapshot().summary.additional_properties["added-data-files"] == "1"
    assert table_rows(broker.data_dir / "logs", topic) == topic_rows(
        broker.bootstrap_servers, topic, 4
    )
    assert [t.commits for _, t in sorted(translators.items())] == [1, 1, 1, 1]


def files_by_partition(table: Any) -> list[tuple[Any, int]]:
    return sorted((t.file.partition[0], t.file.record_count) for t in table.scan().plan_files())


def test_rows_of_one_hour_are_written_as_pyiceberg_writes_them(tmp_path: Path) -> None:
    """The one-hour write (no split by partition) gives the file the partition value
    pyiceberg's own append gives it; a filter on the timestamp prunes it the same way; rows of
    two hours go through pyiceberg's split, a file per hour."""
    ours, theirs = writer(tmp_path / "ours"), writer(tmp_path / "theirs")
    hour_rows = pa.concat_tables([rows(0, 0, 6), rows(1, 0, 4)])
    assert one_hour(hour_rows) == 1_795_000_000_000_000 // HOUR_US
    ours.commit_ranges(
        [CommitRange(0, None, 0, 6, rows(0, 0, 6)), CommitRange(1, None, 0, 4, rows(1, 0, 4))]
    )
    theirs.table.append(hour_rows)
    expected = [(1_795_000_000_000_000 // HOUR_US, 10)]
    assert files_by_partition(ours.table) == files_by_partition(theirs.table) == expected
    assert (
        ours.table.scan()
        .to_arrow()
        .sort_by("value")
        .equals(theirs.table.scan().to_arrow().sort_by("value"))
    )
    # 1_795_000_000 s is 2026-11-18 11:06:40 UTC
    after = "timestamp > '2026-11-18T12:00:00+00:00'"
    assert list(ours.table.scan(row_filter=after).plan_files()) == []
    before = "timestamp < '2026-11-18T12:00:00+00:00'"
    assert len(list(ours.table.scan(row_filter=before).plan_files())) == 1

    later = rows(0, 6, 3).set_column(
        3,
        "timestamp",
        pa.array([1_795_000_000_000_000 + 2 * HOUR_US] * 3, ARROW_SCHEMA.field(3).type),
    )
    assert one_hour(pa.concat_tables([rows(0, 6, 2), later])) is None
    ours.commit(0, 6, 6, 11, pa.concat_tables([rows(0, 6, 2), later.slice(0, 3)]))
    hour = 1_795_000_000_000_000 // HOUR_US
    assert files_by_partition(ours.table) == [(hour, 2), (hour, 10), (hour + 2, 3)]
    assert table_offsets(ours.table) == {0: 11, 1: 4}
