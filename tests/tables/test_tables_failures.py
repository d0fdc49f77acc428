"""A table whose warehouse fails while the broker runs: the translator retries as before, the
log carries the failure's traceback once and then a line now and then (not a traceback every
second), and once the warehouse is back the table catches up exactly."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from confluent_kafka import Producer
from tables_support import (
    committed_offsets,
    create_table_topic,
    end_offsets,
    table_rows,
    topic_rows,
    wait_until,
)

from gregor.tables.failures import RepeatedFailure
from gregor.testing import InProcessBroker

NAME = "gregor.tables.test"


def records(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str, bool]]:
    return [
        (r.levelname, r.getMessage(), r.exc_info is not None)
        for r in caplog.records
        if r.name == NAME
    ]


def test_one_traceback_per_kind_then_lines_at_powers_of_two(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, NAME)
    failures = RepeatedFailure(logging.getLogger(NAME), "writing t-0", every=8)
    for i in range(1, 18):  # one kind of error, a new message (a new file's name) each time
        failures.failed(FileNotFoundError(f"/wh/t/data/{i}.parquet"))
    failures.failed(PermissionError("/wh/t/metadata"))
    failures.failed(PermissionError("/wh/t/metadata"))
    failures.succeeded()
    failures.succeeded()  # nothing to say: it had not failed since
    assert records(caplog) == [
        ("ERROR", "writing t-0 failed; trying again", True),
        *(
            (
                "WARNING",
                f"writing t-0 failed again ({n} times in a row): FileNotFoundError: "
                f"/wh/t/data/{n}.parquet; trying again",
                False,
            )
            for n in (2, 4, 8, 16)
        ),
        ("ERROR", "writing t-0 failed; trying again", True),
        (
            "WARNING",
            "writing t-0 failed again (2 times in a row): PermissionError: /wh/t/metadata; "
            "trying again",
            False,
        ),
        ("WARNING", "writing t-0 works again after 19 failed attempts", False),
    ]
    assert failures.failures == 0


def caught_up(broker: InProcessBroker, topic: str) -> bool:
    ends = end_offsets(broker.bootstrap_servers, topic, 1)
    return committed_offsets(broker.data_dir / "logs", topic).get(0) == ends[0]


def produce(bootstrap: str, topic: str, first: int, n: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(first, first + n):
        p.produce(topic, f"v{i}".encode(), f"k{i}".encode(), partition=0)
    assert p.flush(30) == 0


def test_a_warehouse_failing_at_run_time_is_logged_once_and_the_table_catches_up(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    warehouse, away = tmp_path / "warehouse", tmp_path / "warehouse-away"
    topic = "clicks"
    with InProcessBroker(config={"iceberg.warehouse": str(warehouse)}) as broker:
        create_table_topic(broker.bootstrap_servers, topic, 1)
        produce(broker.bootstrap_servers, topic, 0, 20)
        wait_until(lambda: caught_up(broker, topic))
        caplog.set_level(logging.INFO, "gregor.tables")
        # the warehouse goes: a file where its directory was, so every write under it fails
        warehouse.rename(away)
        warehouse.write_text("not a directory")
        produce(broker.bootstrap_servers, topic, 20, 20)

        def translator_log() -> list[logging.LogRecord]:
            return [
                r
                for r in caplog.records
                if r.name == "gregor.tables" and r.getMessage().startswith(f"translating {topic}-0")
            ]

        # four failed commits: one traceback, then the lines of the 2nd and 4th attempts
        wait_until(lambda: any("(4 times in a row)" in r.getMessage() for r in translator_log()))
        warehouse.unlink()
        away.rename(warehouse)
        wait_until(lambda: caught_up(broker, topic))
        log = translator_log()
        assert [r.levelname for r in log if r.exc_info is not None] == ["ERROR"]
        assert log[0].exc_info is not None and log[0].getMessage() == (
            f"translating {topic}-0 failed; trying again"
        )
        again = [r.getMessage() for r in log if "failed again" in r.getMessage()]
        assert [m.split("(")[1].split(" ")[0] for m in again][:2] == ["2", "4"]
        assert f"translating {topic}-0 works again after" in log[-1].getMessage()
        expected = topic_rows(broker.bootstrap_servers, topic, 1)
        assert len(expected) == 40
        assert table_rows(broker.data_dir / "logs", topic) == expected
