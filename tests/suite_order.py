"""The order in which the whole run hands out its tests, and which of them go to one worker
together.

Order: ``tests/conftest.py`` sorts the collected items by :func:`long_first` (a stable sort, so
everything else keeps its order).

Groups: ``scripts/test.sh`` runs ``--dist loadgroup``, and ``tests/conftest.py`` hands xdist
:class:`GroupScheduling`, which sends every test of a module listed in :data:`GROUPS` to the
one worker that takes the group, as a unit. pytest-xdist's own grouping (the ``xdist_group``
marker) does nothing under pytest 9.2: it renames ``item._nodeid``, which pytest no longer reads,
so until now the JVM tests ran on every worker, each starting its own Kafka broker and Java
harness, and every Spark module's brokers started once per worker. The scheduler runs in the
controller, which knows tests only by node id, so groups are by module path. xdist hands out
the units with the most tests first: the groups start the run, one a worker, and the single
tests follow in the order above.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from xdist.scheduler import LoadGroupScheduling

TESTS = Path(__file__).parent

#: Modules whose tests take minutes (a crash test of many broker restarts, chaos runs, the
#: README's snippets, the pipeline's output-directory tests), in the order they are handed out
#: first: the two xdist workers start on them rather than finding them in the last minutes of a
#: run, where one worker would run them alone while the other has nothing left. Whole modules
#: move (their module fixtures are set up once); the order of everything else stays as
#: collected. The Spark and jvm modules are not here: they are in :data:`GROUPS`, which xdist
#: hands out before any single test (the Spark sessions then start before the class-data-sharing
#: archive built in the background is there: they start without it, with the quick compiler).
LONG_FIRST = (
    "tables/test_tables_crash.py",
    "chaos/test_chaos_run.py",
    # third: its two Spark snippets then find the JVM archive more often (test_readme.py)
    "test_readme.py",
    "pipelines/test_pipeline_output_dir.py",
    "cluster/test_append_checker.py",
    "chaos/test_hold_and_release.py",
)


def long_first(item: pytest.Item) -> int:
    """The sort key of the whole run's order: the index in LONG_FIRST, or after all of them."""
    try:
        module = item.path.relative_to(TESTS).as_posix()
    except ValueError:
        return len(LONG_FIRST)
    return LONG_FIRST.index(module) if module in LONG_FIRST else len(LONG_FIRST)


#: Modules whose tests run on one worker together. ``jvm``: the tests of Apache Kafka's broker and
#: Java harness (one of each for the run: the session fixtures in gregor.testing.kafka), and of
#: Apache Iceberg's REST catalog server (gregor.testing.iceberg_rest, once for its module). The
#: Spark modules in three groups of about the same time (a run's per-test timeline: ~380-410 s
#: each at three workers), so at most three Spark sessions run at once and each module's brokers
#: start once.
GROUPS: dict[str, tuple[str, ...]] = {
    "jvm": (
        "interop/test_java_clients.py",
        "interop/test_java_security.py",
        "interop/test_kafka_connect.py",
        "interop/test_kafka_streams.py",
        "interop/test_kafka_tools.py",
        "tables/test_tables_rest_catalog.py",
        "tables/test_tables_cluster_s3.py",
        "test_testing_kafka.py",
    ),
    "spark-a": (
        "spark/test_exactly_once.py",
        "spark/test_pipeline_on_a_cluster.py",
        "spark/test_batch_read.py",
        "spark/test_options_planning.py",
        "spark/test_admission.py",
    ),
    "spark-b": (
        "spark/test_pipeline.py",
        "spark/test_connect.py",
        "spark/test_streaming_read.py",
        "spark/test_worker_imports.py",
        "spark/test_typed_columns.py",
    ),
    "spark-c": (
        "spark/test_cluster.py",
        "spark/test_avro_columns.py",
        "spark/test_write.py",
        "spark/test_spark_kafka_connector.py",
        "spark/test_kafka_name.py",
        "spark/test_table_read.py",
    ),
}
_GROUP_OF = {f"tests/{m}": g for g, modules in GROUPS.items() for m in modules}


def group_of(nodeid: str) -> str | None:
    """The group of a test by its node id (``tests/spark/test_x.py::test_y[p]``), if any."""
    return _GROUP_OF.get(nodeid.split("::", 1)[0])


class GroupScheduling(LoadGroupScheduling):
    """xdist's loadgroup scheduling with the groups of :data:`GROUPS`."""

    def _split_scope(self, nodeid: str) -> str:
        group = group_of(nodeid)
        return nodeid if group is None else group


def make_scheduler(config: pytest.Config, log: Any) -> GroupScheduling | None:
    """The scheduler for ``--dist loadgroup`` (``pytest_xdist_make_scheduler``), else xdist's."""
    if config.getvalue("dist") != "loadgroup":
        return None
    return GroupScheduling(config, log)
