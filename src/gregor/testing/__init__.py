"""Real Gregor brokers for tests: context managers and pytest fixtures.

    from gregor.testing import BrokerProcess, InProcessBroker

    with BrokerProcess() as broker:          # a child process: restart, SIGKILL, recovery
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers})

    with InProcessBroker() as broker:        # this process, a background thread: milliseconds
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers})

    async with InProcessBroker() as broker:  # this process, the running event loop
        ...

``BrokerProcess`` runs the broker as a child process (``python -m gregor serve``) listening on
127.0.0.1, with its data in a temporary directory. Unless told a port, it takes a free one below
the kernel's ephemeral range (``gregor.launch.ports``), where no client connection can take it while
the broker is down, and tries another if a parallel test bound it first; the process reports the
port it bound in its ``broker.started`` log line. ``restart()`` keeps the data directory and the
port, so tests can check that acknowledged data survives a restart.

``InProcessBroker`` builds the same broker in the test's own process on the same defaults, with
real sockets; it starts in milliseconds and is the default for tests that do not need to kill
or restart a process.

Installed as a pytest plugin (entry point ``gregor``): any project that depends on Gregor gets
the ``gregor_broker`` and ``gregor_inprocess_broker`` fixtures (one broker per test) without
Docker.
"""

from __future__ import annotations

from collections.abc import Iterator

from gregor.launch.process import BrokerProcess, BrokerStartError
from gregor.testing.inprocess import InProcessBroker

__all__ = ["BrokerProcess", "BrokerStartError", "InProcessBroker"]

try:
    import pytest
except ImportError:  # pragma: no cover - pytest is optional for users of the context manager
    pytest = None  # type: ignore[assignment]

if pytest is not None:

    @pytest.fixture
    def gregor_broker() -> Iterator[BrokerProcess]:
        """A real Gregor broker on a free port in a temporary directory, one per test."""
        with BrokerProcess() as broker:
            yield broker

    @pytest.fixture(scope="module")
    def gregor_broker_module() -> Iterator[BrokerProcess]:
        """One broker shared by the tests of a module."""
        with BrokerProcess() as broker:
            yield broker

    @pytest.fixture
    def gregor_inprocess_broker() -> Iterator[InProcessBroker]:
        """A real Gregor broker in this process (its event loop on a background thread) on a
        free port in a temporary directory, one per test: milliseconds to start."""
        with InProcessBroker() as broker:
            yield broker

    @pytest.fixture(scope="module")
    def gregor_inprocess_broker_module() -> Iterator[InProcessBroker]:
        """One in-process broker shared by the tests of a module."""
        with InProcessBroker() as broker:
            yield broker
