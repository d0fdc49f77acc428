"""Suite-wide settings: folder markers and Hypothesis settings that hold on a busy machine.

Markers (registered in pyproject.toml): everything under ``tests/interop/`` is ``interop``
(third-party clients and tools against a broker), everything under ``tests/spark/`` is
``spark`` (a JVM per session); ``slow`` is set by hand on tests that take seconds.
``bash scripts/test.sh --fast`` deselects all three.

JVM peers: tests marked ``jvm`` use Apache Kafka or the Java harness (``gregor.testing.kafka``);
the session fixtures ``java_harness`` and ``kafka_broker`` start each once per test session, and
every ``jvm`` test carries ``xdist_group("jvm")`` so that ``--dist loadgroup`` (the whole run of
``scripts/test.sh``) keeps them on one worker, one JVM each.

Hypothesis: no test here is about how long one example takes, so examples have no deadline
(the default 200 ms fails at random when both cores are busy: a fuzzed zstd header that claims
a 64 MiB frame costs ~0.2 s on a quiet machine and over 1 s on a loaded one), and the
``too_slow`` health check, which times data generation, is off for the same reason.

Spark: a run that takes in the whole ``tests/spark/`` folder builds a class-data-sharing archive
of Spark's classes in the background (``gregor.testing.jvm_archive``); the Spark tests' JVMs use
it once it is there (``tests/spark/conftest.py``). ``GREGOR_TEST_JVM_ARCHIVE=off`` turns it off.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("gregor", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("gregor")

TESTS = Path(__file__).parent
FOLDER_MARKS = {"interop": pytest.mark.interop, "spark": pytest.mark.spark}


@pytest.hookimpl(tryfirst=True)  # before pytest's own hook applies -m
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        try:
            folder = item.path.relative_to(TESTS).parts[0]
        except ValueError:
            continue
        mark = FOLDER_MARKS.get(folder)
        if mark is not None:
            item.add_marker(mark)
    for item in items:
        if item.get_closest_marker("jvm") is not None:
            item.add_marker(pytest.mark.xdist_group("jvm"))


@pytest.fixture(scope="session")
def java_harness() -> Iterator[object]:
    """The Java harness (``gregor.testing.kafka.JavaHarness``): Java client roles and Kafka's
    tools in one JVM, started once per session."""
    from gregor.testing.kafka import JavaHarness

    with JavaHarness() as harness:
        yield harness


@pytest.fixture(scope="session")
def kafka_broker(java_harness) -> Iterator[object]:  # noqa: ANN001
    """An Apache Kafka broker (one KRaft node in combined mode), once per session."""
    from gregor.testing.kafka import QUICK_JVM_OPTIONS, KafkaBroker

    with KafkaBroker(jvm_options=(*QUICK_JVM_OPTIONS, "-Xmx512m"), harness=java_harness) as kafka:
        yield kafka


_BUILD: list[tuple[subprocess.Popen[bytes], Path]] = []


def _runs_all_spark_tests(config: pytest.Config) -> bool:
    if "not spark" in (config.option.markexpr or ""):
        return False
    spark = (TESTS / "spark").resolve()
    for arg in config.args:
        path = Path(arg.split("::")[0]).resolve()
        if path == spark or path in spark.parents:
            return True
    return False


def pytest_configure(config: pytest.Config) -> None:
    # the controller only (xdist workers have workerinput): the workers, started after this,
    # inherit the variable that names the archive's directory
    if hasattr(config, "workerinput") or "GREGOR_TEST_JVM_ARCHIVE" in os.environ:
        return
    if not _runs_all_spark_tests(config):
        return
    from gregor.testing import jvm_archive

    directory = Path(tempfile.mkdtemp(prefix="gregor-jvm-archive-"))
    builder = jvm_archive.start_build(directory)
    if builder is None:
        directory.rmdir()
        return
    os.environ["GREGOR_TEST_JVM_ARCHIVE"] = str(directory)
    _BUILD.append((builder, directory))


def pytest_unconfigure(config: pytest.Config) -> None:
    from gregor.testing import jvm_archive

    while _BUILD:
        jvm_archive.stop_build(*_BUILD.pop())
