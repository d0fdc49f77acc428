"""ElectLeaders at the handler, one node, every version: the only replica is already the
preferred leader (ELECTION_NOT_NEEDED, also for an unclean election of a live leader), an
unknown partition is UNKNOWN_TOPIC_OR_PARTITION, a null list covers every partition, and
ApiVersions advertises v0-2. (Elections that move leaders: tests/cluster/test_replication.py.)"""

from __future__ import annotations

import pytest
from handler_wire import Wire

from gregor.protocol.errors import ErrorCode
from gregor.protocol.messages.api_versions import ApiVersionsRequest
from gregor.protocol.messages.create_topics import CreateTopicsRequest
from gregor.protocol.messages.elect_leaders import ElectLeadersRequest

pytestmark = pytest.mark.timeout(60)


def results(resp: object) -> dict[tuple[str, int], int]:
    return {
        (r.topic, p.partition_id): p.error_code
        for r in resp.replica_election_results  # type: ignore[attr-defined]
        for p in r.partition_result
    }


def create(wire: Wire, name: str, partitions: int) -> None:
    wire.request(
        CreateTopicsRequest(
            topics=[
                CreateTopicsRequest.Topics(
                    name=name,
                    num_partitions=partitions,
                    replication_factor=1,
                    assignments=[],
                    configs=[],
                )
            ],
            timeout_ms=10000,
        ),
        5,
    )


def test_advertised_versions(wire: Wire) -> None:
    av = wire.request(ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3)
    assert [
        (k.min_version, k.max_version)
        for k in av.api_keys
        if k.api_key == ElectLeadersRequest.API_KEY
    ] == [(0, 2)]


@pytest.mark.parametrize("version", range(3))
def test_nothing_to_elect_on_one_node(wire: Wire, version: int) -> None:
    create(wire, "t", 2)
    asked = [
        ElectLeadersRequest.TopicPartitions(topic="t", partitions=[0, 1]),
        ElectLeadersRequest.TopicPartitions(topic="missing", partitions=[0]),
    ]
    for election_type in [0] if version == 0 else [0, 1]:
        resp = wire.request(
            ElectLeadersRequest(
                election_type=election_type, topic_partitions=asked, timeout_ms=5000
            ),
            version,
        )
        assert resp.error_code == 0
        assert results(resp) == {
            ("t", 0): ErrorCode.ELECTION_NOT_NEEDED,
            ("t", 1): ErrorCode.ELECTION_NOT_NEEDED,
            ("missing", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        }


def test_a_null_list_means_every_partition(wire: Wire) -> None:
    create(wire, "a", 1)
    create(wire, "b", 2)
    resp = wire.request(
        ElectLeadersRequest(election_type=0, topic_partitions=None, timeout_ms=5000), 2
    )
    assert results(resp) == {
        (t, i): ErrorCode.ELECTION_NOT_NEEDED for t, i in [("a", 0), ("b", 0), ("b", 1)]
    }


def test_an_unknown_election_type_is_an_invalid_request(wire: Wire) -> None:
    create(wire, "t", 1)
    asked = [ElectLeadersRequest.TopicPartitions(topic="t", partitions=[0])]
    resp = wire.request(
        ElectLeadersRequest(election_type=7, topic_partitions=asked, timeout_ms=5000), 2
    )
    assert resp.error_code == ErrorCode.INVALID_REQUEST
    assert results(resp) == {("t", 0): ErrorCode.INVALID_REQUEST}
