"""The order in which the whole run hands out its tests (``tests/conftest.py`` sorts the
collected items by :func:`long_first`; a stable sort, so everything else keeps its order)."""

from __future__ import annotations

from pathlib import Path

import pytest

TESTS = Path(__file__).parent

#: Modules whose tests take minutes (a crash test of many broker restarts, chaos runs, the
#: README's snippets, the pipeline's output-directory tests), in the order they are handed out
#: first: the two xdist workers start on them rather than finding them in the last minutes of a
#: run, where one worker would run them alone while the other has nothing left. Whole modules
#: move (their module fixtures are set up once); the order of everything else stays as
#: collected. The Spark modules are not here: their JVMs use the class-data-sharing archive
#: built in the background at the start of the run (pytest_configure), not there yet at first.
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
