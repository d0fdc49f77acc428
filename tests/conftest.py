"""Suite-wide settings: folder markers and Hypothesis settings that hold on a busy machine.

Markers (registered in pyproject.toml): everything under ``tests/interop/`` is ``interop``
(third-party clients and tools against a broker), everything under ``tests/spark/`` is
``spark`` (a JVM per session); ``slow`` is set by hand on tests that take seconds.
``bash scripts/test.sh --fast`` deselects all three.

Hypothesis: no test here is about how long one example takes, so examples have no deadline
(the default 200 ms fails at random when both cores are busy: a fuzzed zstd header that claims
a 64 MiB frame costs ~0.2 s on a quiet machine and over 1 s on a loaded one), and the
``too_slow`` health check, which times data generation, is off for the same reason.
"""

from __future__ import annotations

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
