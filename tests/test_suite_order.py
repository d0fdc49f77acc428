"""The whole run's order (tests/conftest.py): the modules handed out first still exist, and
collection puts their tests before every other test."""

from __future__ import annotations

import pytest
from suite_order import GROUPS, LONG_FIRST, TESTS, GroupScheduling, group_of, make_scheduler


def test_every_long_first_module_exists() -> None:
    missing = [m for m in LONG_FIRST if not (TESTS / m).is_file()]
    assert missing == []


def test_the_long_modules_are_collected_first(request: pytest.FixtureRequest) -> None:
    modules = [i.path.relative_to(TESTS).as_posix() for i in request.session.items]
    if not set(modules) & set(LONG_FIRST):
        pytest.skip("this run collected none of the long modules")
    first_other = next(n for n, m in enumerate(modules) if m not in LONG_FIRST)
    assert all(m not in LONG_FIRST for m in modules[first_other:])
    long_ones = modules[:first_other]
    assert long_ones == sorted(long_ones, key=LONG_FIRST.index)


def test_every_group_module_exists() -> None:
    missing = [m for modules in GROUPS.values() for m in modules if not (TESTS / m).is_file()]
    assert missing == []


def test_every_spark_module_and_every_jvm_test_is_in_its_group(
    request: pytest.FixtureRequest,
) -> None:
    # a Spark module left out would run on every worker, starting its brokers on each; a jvm
    # test outside the jvm group would start its own Kafka broker and Java harness
    spark = sorted(p.relative_to(TESTS).as_posix() for p in (TESTS / "spark").glob("test_*.py"))
    assert [m for m in spark if group_of(f"tests/{m}::t") is None] == []
    stray = [
        i.nodeid
        for i in request.session.items
        if i.get_closest_marker("jvm") is not None and group_of(i.nodeid) != "jvm"
    ]
    assert stray == []


def test_the_scheduler_puts_a_group_on_one_unit() -> None:
    class Config:
        def __init__(self, dist: str) -> None:
            self.dist = dist

        def getvalue(self, name: str) -> object:
            return self.dist if name == "dist" else None

    assert make_scheduler(Config("load"), None) is None  # type: ignore[arg-type]
    split = GroupScheduling._split_scope  # reads no state of the scheduler
    sched = object.__new__(GroupScheduling)
    assert split(sched, "tests/spark/test_write.py::test_streaming_write[tansu]") == "spark-c"
    assert split(sched, "tests/test_testing_kafka.py::test_x") == "jvm"
    assert split(sched, "tests/broker/test_a.py::test_b") == "tests/broker/test_a.py::test_b"
