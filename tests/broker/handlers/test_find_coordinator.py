"""FindCoordinator at the handler, every version: this one node coordinates every group and
transactional id, at its advertised address; the internal topics appear on first use."""

from __future__ import annotations

import pytest
from handler_wire import Wire

from gregor.protocol.errors import ErrorCode
from gregor.protocol.messages.api_versions import ApiVersionsRequest
from gregor.protocol.messages.find_coordinator import FindCoordinatorRequest
from gregor.protocol.messages.metadata import MetadataRequest

pytestmark = pytest.mark.timeout(60)

GROUP, TRANSACTION, SHARE = 0, 1, 2
#: One partition per internal topic: creating (and at stop, closing) Kafka's default 50 logs
#: would be most of these tests' time.
SMALL = {"offsets.topic.num.partitions": "1", "transaction.state.log.num.partitions": "1"}


@pytest.fixture
def broker_config() -> dict[str, str]:
    return dict(SMALL)


def internal_topics(wire: Wire) -> list[tuple[str, bool, int]]:
    md = wire.request(MetadataRequest(topics=None), 9)
    return sorted((t.name, t.is_internal, len(t.partitions)) for t in md.topics)


def test_advertised_versions(wire: Wire) -> None:
    av = wire.request(ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3)
    assert [
        (k.min_version, k.max_version)
        for k in av.api_keys
        if k.api_key == FindCoordinatorRequest.API_KEY
    ] == [(0, 6)]


@pytest.mark.parametrize("version", range(4))
def test_single_key_versions(wire: Wire, version: int) -> None:
    key_types = [GROUP] if version == 0 else [GROUP, TRANSACTION]
    for key_type in key_types:
        r = wire.request(FindCoordinatorRequest(key="some-key", key_type=key_type), version)
        assert (r.error_code, r.node_id, r.host, r.port) == (0, 1, "127.0.0.1", wire.broker.port)
        assert r.error_message is None


@pytest.mark.parametrize("version", [4, 5, 6])
def test_batched_keys_versions(wire: Wire, version: int) -> None:
    for key_type in (GROUP, TRANSACTION):
        r = wire.request(
            FindCoordinatorRequest(key_type=key_type, coordinator_keys=["a", "b", "c"]), version
        )
        assert [
            (c.key, c.error_code, c.node_id, c.host, c.port, c.error_message)
            for c in r.coordinators
        ] == [(k, 0, 1, "127.0.0.1", wire.broker.port, None) for k in "abc"]


@pytest.mark.parametrize("version", range(1, 7))
def test_unsupported_key_type(wire: Wire, version: int) -> None:
    message = "unsupported coordinator key type 2"
    if version >= 4:
        r = wire.request(FindCoordinatorRequest(key_type=SHARE, coordinator_keys=["s"]), version)
        assert [
            (c.key, c.error_code, c.node_id, c.host, c.port, c.error_message)
            for c in r.coordinators
        ] == [("s", ErrorCode.INVALID_REQUEST, -1, "", -1, message)]
    else:
        r = wire.request(FindCoordinatorRequest(key="s", key_type=SHARE), version)
        assert (r.error_code, r.node_id, r.host, r.port, r.error_message) == (
            ErrorCode.INVALID_REQUEST,
            -1,
            "",
            -1,
            message,
        )


@pytest.mark.parametrize(
    "broker_config",
    [
        {
            "offsets.topic.num.partitions": "5",
            "transaction.state.log.num.partitions": "3",
        }
    ],
)
def test_internal_topics_are_created_on_first_use(wire: Wire) -> None:
    assert internal_topics(wire) == []
    assert wire.request(FindCoordinatorRequest(key="g", key_type=GROUP), 3).error_code == 0
    assert internal_topics(wire) == [("__consumer_offsets", True, 5)]
    assert wire.request(FindCoordinatorRequest(key="t", key_type=TRANSACTION), 3).error_code == 0
    assert internal_topics(wire) == [
        ("__consumer_offsets", True, 5),
        ("__transaction_state", True, 3),
    ]


@pytest.mark.parametrize(
    "broker_config",
    [
        {
            **SMALL,
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "advertised.listeners": "PLAINTEXT://kafka.example:19092",
        }
    ],
)
def test_answers_the_advertised_address(wire: Wire) -> None:
    r = wire.request(FindCoordinatorRequest(key="g", key_type=GROUP), 3)
    assert (r.error_code, r.node_id, r.host, r.port) == (0, 1, "kafka.example", 19092)
    r = wire.request(FindCoordinatorRequest(key_type=TRANSACTION, coordinator_keys=["t"]), 6)
    assert [(c.node_id, c.host, c.port) for c in r.coordinators] == [(1, "kafka.example", 19092)]
