"""Suite-wide settings: folder markers and Hypothesis settings that hold on a busy machine.

Markers (registered in pyproject.toml): everything under ``tests/interop/`` is ``interop``
(third-party clients and tools against a broker), everything under ``tests/spark/`` is
``spark`` (a JVM per session); ``slow`` is set by hand on tests that take seconds, ``process``
on tests that start a child process (a broker or cluster process, etcd, the command line as a
process). ``bash scripts/test.sh --fast`` deselects all of them, and ``jvm``.

The process guard: a run whose marker expression says ``not process`` (the fast run) starts no
child process. While each test runs (its fixtures included), ``gregor.testing.process_guard``
refuses every process start with ``ProcessStartRefused``, and a test that tried one fails, even
if it swallowed the error, with a message that says to mark it ``process`` or move its broker
into the test's process (``InProcessBroker``, ``InProcessCluster``). ``PROCESS_GUARD_ALLOWED``
lists the modules whose process starts go through, each with its reason.

JVM peers: tests marked ``jvm`` use Apache Kafka or the Java harness (``gregor.testing.kafka``),
or Apache Iceberg's REST catalog server (``gregor.testing.iceberg_rest``, once for its module);
the session fixtures ``java_harness`` and ``kafka_broker`` start each once per test session, and
the ``jvm`` modules form one group of ``tests/suite_order.py`` (``--dist loadgroup``, the whole run
of ``scripts/test.sh``), so they run on one worker, one JVM each.

Hypothesis: no test here is about how long one example takes, so examples have no deadline
(the default 200 ms fails at random when both cores are busy: a fuzzed zstd header that claims
a 64 MiB frame costs ~0.2 s on a quiet machine and over 1 s on a loaded one), and the
``too_slow`` health check, which times data generation, is off for the same reason. Two
profiles: ``gregor`` for the whole run (every test's own ``max_examples``, 100 where it sets
none) and ``gregor-fast`` for the fast run (a fifth of each count, ``tests/hypothesis_budget.py``;
20 where a test sets none), loaded by ``pytest_configure`` from the run's marker expression
before any test module is imported.

Spark: a run that takes in the whole ``tests/spark/`` folder builds a class-data-sharing archive
of Spark's classes in the background (``gregor.testing.jvm_archive``); the Spark tests' JVMs use
it once it is there (``tests/spark/conftest.py``). ``GREGOR_TEST_JVM_ARCHIVE=off`` turns it off.
Every process the run starts has ``tests/pythonpath`` first on ``PYTHONPATH``: its
``sitecustomize`` has Spark's planning and stream-source processes import the installed pyspark
rather than compile Spark's zip of it again (about a CPU-second each).

Broker processes: outside the fast run, every ``BrokerProcess`` of a worker starts as a fork of
one template process that has imported the broker already (``gregor.launch.forkserver``), about
half a CPU-second less a start; tests that start ``gregor serve`` themselves (the command line,
the README) still start it as a fresh interpreter.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis_budget import FAST_PROFILE
from suite_order import long_first, make_scheduler

settings.register_profile("gregor", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile(FAST_PROFILE, settings.get_profile("gregor"), max_examples=20)
settings.load_profile("gregor")

TESTS = Path(__file__).parent
_PATH = os.environ.get("PYTHONPATH", "")
if str(TESTS / "pythonpath") not in _PATH.split(os.pathsep):
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(TESTS / "pythonpath"), _PATH) if p)
FOLDER_MARKS = {"interop": pytest.mark.interop, "spark": pytest.mark.spark}


#: Tests that start a process, marked ``process`` here rather than in their modules (a node id
#: matching one of these patterns): brokers as processes (a second process on one directory,
#: start-up errors as the process prints them, a restart), ``gregor`` as a command, etcd, the
#: compiled twins' build and import checks (a fresh interpreter), protoc (the schema registry's
#: Protobuf descriptors), the JVM archive's build group. Found by the process guard.
PROCESS_TESTS = re.compile(
    "|".join(
        [
            r"tests/broker/test_broker_core\.py::test_gregor_serve_refuses_a_sasl_listener",
            r"tests/broker/test_broker_log_dir_lock\.py::test_a_(second_broker_process|directory_of_another_node|data_directory_from_before)",
            r"tests/broker/test_broker_startup_errors\.py::",
            r"tests/broker/test_alter_replica_log_dirs\.py::test_a_partition_moves_between_log_dirs_while_written",
            r"tests/cli/test_cli_one_line_errors\.py::",
            r"tests/contract/test_metadata_store\.py::.*\[etcd",
            r"tests/pipelines/test_pipeline_output_dir\.py::",
            r"tests/protocol/records/test_records_scan\.py::test_(no_extensions_forces_the_reference|compiled_walk_is_built)",
            r"tests/protocol/test_codec_messages\.py::test_message_modules_load_on_first_use",
            r"tests/schema_registry/test_compatibility\.py::",
            r"tests/schema_registry/test_http_api\.py::test_json_schema_and_protobuf_register",
            r"tests/schema_registry/test_protobuf_text\.py::",
            r"tests/schema_registry/test_typed_columns_encode\.py::test_(protobuf_|keys_and_values_of_a_batch|the_sink_checks_struct)",
            r"tests/schema_registry/test_store\.py::test_a_restarted_registry_rebuilds_everything",
            r"tests/security/test_acl_apis\.py::test_without_an_authorizer_the_acl_apis_answer_security_disabled",
            r"tests/security/test_delegation_tokens\.py::",
            r"tests/security/test_storage_format\.py::test_a_formatted_directory_is_not_formatted_again",
            r"tests/security/test_jwt\.py::test_signed_jwt_validation_gets_no_unsecured_warning",
            r"tests/security/test_oauthbearer\.py::test_a_listener_with_the_unsecured_validator_is_warned_about",
            r"tests/storage/test_storage_crash\.py::test_kill_minus_nine",
            r"tests/storage/test_storage_fast_append\.py::test_compiled_and_reference_fast_paths_agree",
            r"tests/test_testing_jvm_archive\.py::test_stop_build_kills_the_group",
            r"tests/test_testing_ports\.py::test_a_broker_",
        ]
    )
)


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
        if PROCESS_TESTS.match(item.nodeid):
            item.add_marker(pytest.mark.process)
    items.sort(key=long_first)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadgroup`` (the whole run): the groups of ``tests/suite_order.py``."""
    return make_scheduler(config, log)


#: Modules allowed to start a process in the fast run (a caller's stack holding one goes
#: through), each with its reason. Empty: no test of the fast run needs one.
PROCESS_GUARD_ALLOWED: dict[str, str] = {}
_REFUSED = pytest.StashKey[list[str]]()
_GUARD_HINT = (
    " (scripts/test.sh --fast, -m 'not process'): mark the test @pytest.mark.process, or run its"
    " brokers in the test's process (gregor.testing.InProcessBroker, InProcessCluster)"
)


def _guards_processes(config: pytest.Config) -> bool:
    return "not process" in (config.option.markexpr or "")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """In the fast run, the process guard is on while the test (setup, call, teardown) runs.
    Only where tests run: an xdist controller starts its workers as processes."""
    if not _guards_processes(item.config):
        yield
        return
    from gregor.testing.process_guard import no_processes

    with no_processes(PROCESS_GUARD_ALLOWED, _GUARD_HINT) as refused:
        item.stash[_REFUSED] = refused
        yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A test that tried to start a process fails, even if it went on without one."""
    outcome = yield
    refused = item.stash.get(_REFUSED, None)
    if not refused:
        return
    report = outcome.get_result()
    if report.passed and not getattr(report, "wasxfail", None):
        report.outcome = "failed"
        report.longrepr = "started a process in the fast run: " + "; ".join(refused) + _GUARD_HINT
    refused.clear()  # reported once


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
    # the fast run (and only it) searches with fewer examples; workers decide it for themselves
    settings.load_profile(FAST_PROFILE if _guards_processes(config) else "gregor")
    if not _guards_processes(config):
        # broker processes start as forks of a template that has imported the broker (started
        # on the first one; the controller starts none)
        from gregor.launch import process
        from gregor.launch.forkserver import ForkServer

        process.use_fork_server(ForkServer(process.BROKER_PRELOAD, process.BROKER_START_TIME_ENV))
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
    from gregor.launch import process
    from gregor.testing import jvm_archive

    server = process.use_fork_server(None)
    if server is not None:
        server.close()

    while _BUILD:
        jvm_archive.stop_build(*_BUILD.pop())
