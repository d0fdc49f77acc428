"""KIP-430 authorized operations by API and version (issue 12), and the computation itself."""

from __future__ import annotations

import pytest
from handler_wire import Wire

from gregor.broker.access.authorized_ops import (
    OPERATIONS_NOT_REQUESTED,
    AclOperation,
    ResourceType,
    authorized_operations,
    bitfield,
)
from gregor.protocol.messages.create_topics import CreateTopicsRequest
from gregor.protocol.messages.describe_topic_partitions import DescribeTopicPartitionsRequest
from gregor.protocol.messages.metadata import MetadataRequest

# Kafka's codes: READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8, DESCRIBE_CONFIGS 10,
# ALTER_CONFIGS 11; cluster: CREATE 5, ALTER 7, DESCRIBE 8, CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10,
# ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12.
TOPIC_BITS = sum(1 << c for c in (3, 4, 5, 6, 7, 8, 10, 11))
CLUSTER_BITS = sum(1 << c for c in (5, 7, 8, 9, 10, 11, 12))


def test_every_supported_operation_without_an_authorizer() -> None:
    assert authorized_operations(ResourceType.TOPIC, "t") == TOPIC_BITS == 3576
    assert authorized_operations(ResourceType.CLUSTER) == CLUSTER_BITS == 8096
    assert authorized_operations(ResourceType.GROUP, "g") == (1 << 3) | (1 << 6) | (1 << 8)
    assert OPERATIONS_NOT_REQUESTED == -(2**31)


def test_an_authorizer_narrows_the_set() -> None:
    def only_reads(rtype: ResourceType, name: str, op: AclOperation) -> bool:
        return name == "mine" and op in (AclOperation.READ, AclOperation.DESCRIBE)

    assert authorized_operations(ResourceType.TOPIC, "mine", only_reads) == bitfield(
        [AclOperation.READ, AclOperation.DESCRIBE]
    )
    assert authorized_operations(ResourceType.TOPIC, "other", only_reads) == 0


def _create(wire: Wire, name: str) -> None:
    req = CreateTopicsRequest(
        topics=[
            CreateTopicsRequest.Topics(
                name=name, num_partitions=1, replication_factor=1, assignments=[], configs=[]
            )
        ],
        timeout_ms=5000,
        validate_only=False,
    )
    assert wire.request(req, 5).topics[0].error_code == 0


@pytest.mark.parametrize(
    ("version", "topic_ops", "cluster_ops"),
    [
        (8, TOPIC_BITS, CLUSTER_BITS),
        (10, TOPIC_BITS, CLUSTER_BITS),
        # v11 dropped the cluster's field; the topics' stays.
        (11, TOPIC_BITS, OPERATIONS_NOT_REQUESTED),
        (12, TOPIC_BITS, OPERATIONS_NOT_REQUESTED),
    ],
)
def test_metadata_reports_what_was_asked(
    wire: Wire, version: int, topic_ops: int, cluster_ops: int
) -> None:
    _create(wire, "ops")
    asked = MetadataRequest(
        topics=[MetadataRequest.Topics(name="ops")],
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=True,
        include_topic_authorized_operations=True,
    )
    resp = wire.request(asked, version)
    assert (resp.topics[0].topic_authorized_operations, resp.cluster_authorized_operations) == (
        topic_ops,
        cluster_ops,
    )
    plain = MetadataRequest(topics=None, allow_auto_topic_creation=False)
    resp = wire.request(plain, version)
    got = {t.name: t.topic_authorized_operations for t in resp.topics}
    assert (got["ops"], resp.cluster_authorized_operations) == (
        OPERATIONS_NOT_REQUESTED,
        OPERATIONS_NOT_REQUESTED,
    )


def test_describe_topic_partitions_reports_topic_operations(wire: Wire) -> None:
    _create(wire, "dtp")
    req = DescribeTopicPartitionsRequest(
        topics=[DescribeTopicPartitionsRequest.Topics(name="dtp")],
        response_partition_limit=10,
        cursor=None,
    )
    resp = wire.request(req, 0)
    assert [(t.name, t.topic_authorized_operations) for t in resp.topics] == [("dtp", TOPIC_BITS)]
