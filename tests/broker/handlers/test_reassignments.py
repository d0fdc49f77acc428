"""AlterPartitionReassignments and ListPartitionReassignments at the handler, on one node:
reassigning to the replicas a partition already has is NONE and changes nothing; an
unregistered or repeated broker is INVALID_REPLICA_ASSIGNMENT; cancelling with nothing in
progress is NO_REASSIGNMENT_IN_PROGRESS; an unknown partition UNKNOWN_TOPIC_OR_PARTITION;
nothing is listed as in progress. (Data moving between brokers:
tests/cluster/test_reassignment.py.)"""

from __future__ import annotations

import pytest
from handler_wire import Wire

from gregor.protocol.errors import ErrorCode
from gregor.protocol.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
)
from gregor.protocol.messages.api_versions import ApiVersionsRequest
from gregor.protocol.messages.create_topics import CreateTopicsRequest
from gregor.protocol.messages.list_partition_reassignments import ListPartitionReassignmentsRequest

pytestmark = pytest.mark.timeout(60)

Topic = AlterPartitionReassignmentsRequest.Topics
Part = AlterPartitionReassignmentsRequest.Topics.Partitions


def test_advertised_versions(wire: Wire) -> None:
    av = wire.request(ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3)
    served = {k.api_key: (k.min_version, k.max_version) for k in av.api_keys}
    assert served[AlterPartitionReassignmentsRequest.API_KEY] == (0, 0)
    assert served[ListPartitionReassignmentsRequest.API_KEY] == (0, 0)


def test_alter_answers_per_partition(wire: Wire) -> None:
    wire.request(
        CreateTopicsRequest(
            topics=[
                CreateTopicsRequest.Topics(
                    name="t",
                    num_partitions=2,
                    replication_factor=1,
                    assignments=[],
                    configs=[],
                )
            ],
            timeout_ms=10000,
        ),
        5,
    )
    broker = wire.broker.broker
    assert broker is not None
    node = broker.node_id
    before = broker.store.image.partition("t", 0)
    resp = wire.request(
        AlterPartitionReassignmentsRequest(
            topics=[
                Topic(
                    name="t",
                    partitions=[
                        Part(partition_index=0, replicas=[node]),
                        Part(partition_index=1, replicas=[node + 1]),
                        Part(partition_index=2, replicas=[node]),
                    ],
                ),
                Topic(name="u", partitions=[Part(partition_index=0, replicas=[node])]),
            ]
        ),
        0,
    )
    assert resp.error_code == 0
    codes = {
        (t.name, p.partition_index): p.error_code for t in resp.responses for p in t.partitions
    }
    assert codes == {
        ("t", 0): ErrorCode.NONE,
        ("t", 1): ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        ("t", 2): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ("u", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert broker.store.image.partition("t", 0) == before
    resp = wire.request(
        AlterPartitionReassignmentsRequest(
            topics=[
                Topic(
                    name="t",
                    partitions=[
                        Part(partition_index=0, replicas=None),
                        Part(partition_index=1, replicas=[node, node]),
                    ],
                ),
            ]
        ),
        0,
    )
    codes = {
        (t.name, p.partition_index): p.error_code for t in resp.responses for p in t.partitions
    }
    assert codes == {
        ("t", 0): ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
        ("t", 1): ErrorCode.INVALID_REPLICA_ASSIGNMENT,
    }
    for topics in (
        None,
        [ListPartitionReassignmentsRequest.Topics(name="t", partition_indexes=[0, 1, 5])],
    ):
        listed = wire.request(ListPartitionReassignmentsRequest(topics=topics), 0)
        assert (listed.error_code, listed.topics) == (0, [])
