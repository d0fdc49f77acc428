"""Handler tests: the real broker in the test's process and event loop, one per test.

``broker_config`` (override it in a module or with ``pytest.mark.parametrize(indirect=...)``)
gives the broker's settings; ``wire`` is a connection to it (see ``handler_wire``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from handler_wire import Wire

from gregor.testing import InProcessBroker


def _loop_factory() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a pinned dependency
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


@pytest.fixture
def broker_config() -> dict[str, str]:
    return {}


@pytest.fixture
def runner() -> Iterator[asyncio.Runner]:
    with asyncio.Runner(loop_factory=_loop_factory) as r:
        yield r


@pytest.fixture
def inprocess(runner: asyncio.Runner, broker_config: dict[str, str]) -> Iterator[InProcessBroker]:
    broker = InProcessBroker(broker_config)
    runner.run(broker.start_async())
    try:
        yield broker
    finally:
        runner.run(broker.stop_async())
        broker.close()


@pytest.fixture
def wire(runner: asyncio.Runner, inprocess: InProcessBroker) -> Iterator[Wire]:
    w = Wire(runner, inprocess)
    yield w
    w.close()
