"""Interop tests: a real Gregor broker process driven by real third-party clients."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest

from gregor.testing import BrokerProcess

sys.path.insert(0, os.path.dirname(__file__))

#: Partitions of auto-created topics in the shared broker (tests that need another count
#: create their topic explicitly or start their own broker).
DEFAULT_PARTITIONS = 3


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    """One broker per test module (starting a process per test would dominate the run)."""
    with BrokerProcess(config={"num.partitions": DEFAULT_PARTITIONS}) as b:
        yield b
        assert b.running, f"broker died:\n{b.read_log()[-4000:]}"
        # No handler may have crashed while the module ran.
        assert "event=request.failed" not in b.read_log(), b.read_log()[-4000:]
