"""Interop tests: a real Gregor broker process driven by real third-party clients.

One switch points them at Apache Kafka instead: ``GREGOR_INTEROP_BROKER=kafka`` makes every
``BrokerProcess`` these tests start (the fixtures here and the modules' own) a
``gregor.testing.kafka.KafkaBrokerProcess``, a Kafka KRaft node behind the same interface (its
log directory at ``data_dir/logs``, same segment layout). The JVM peers come from
``scripts/kafka.sh fetch``. README's "Running the tests against Apache Kafka" lists where the two
answer differently.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest

import gregor.testing
from gregor.testing import BrokerProcess

sys.path.insert(0, os.path.dirname(__file__))

#: ``gregor`` (the default) or ``kafka``: which broker the interop tests run against.
INTEROP_BROKER = os.environ.get("GREGOR_INTEROP_BROKER", "gregor")
if INTEROP_BROKER == "kafka":
    from gregor.testing.kafka import KafkaBrokerProcess

    # Before the test modules import it: ``from gregor.testing import BrokerProcess`` then
    # gives them Kafka.
    gregor.testing.BrokerProcess = KafkaBrokerProcess  # type: ignore[misc]
    BrokerProcess = KafkaBrokerProcess  # type: ignore[misc]
elif INTEROP_BROKER != "gregor":
    raise pytest.UsageError(f"GREGOR_INTEROP_BROKER={INTEROP_BROKER!r}: gregor or kafka")


def gregor_only(reason: str) -> pytest.MarkDecorator:
    """Mark a test of Gregor's own answer where Kafka's differs by design (README's
    compatibility section lists each): skipped against Kafka, with ``reason``."""
    return pytest.mark.skipif(INTEROP_BROKER == "kafka", reason=f"Gregor's own behaviour: {reason}")


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
