"""AddPartitionsToTxn v4 and later are for brokers only (KIP-890): a partition leader verifies
with them that a batch's transaction holds the partition. Kafka answers a principal without
CLUSTER_ACTION on the cluster with the top-level CLUSTER_AUTHORIZATION_FAILED, whatever
rights it holds on the transactional id and the topics, which still do for v3 and below
(``KafkaApis.handleAddPartitionsToTxnRequest``; issue 35). Before, any client allowed to
write the transactional id could use them.
"""

from __future__ import annotations

import pytest
from handler_requests import create_topic
from handler_wire import Wire

from gregor.protocol.errors import ErrorCode
from gregor.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest
from gregor.protocol.messages.init_producer_id import InitProducerIdRequest
from gregor.security.acls import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from gregor.security.authorizer import AclAuthorizer

pytestmark = pytest.mark.timeout(60)

ME = "User:ANONYMOUS"


def allow(rtype: ResourceType, name: str, op: AclOperation) -> AclBinding:
    return AclBinding(rtype, name, PatternType.LITERAL, ME, "*", op, AclPermissionType.ALLOW)


def test_v4_and_later_need_cluster_action(wire: Wire) -> None:
    create_topic(wire, "t", 2)
    init = wire.request(
        InitProducerIdRequest(
            transactional_id="tx", transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1
        ),
        4,
    )
    assert init.error_code == 0
    pid, epoch = init.producer_id, init.producer_epoch
    acls = {
        "now": [
            allow(ResourceType.TRANSACTIONAL_ID, "tx", AclOperation.WRITE),
            allow(ResourceType.TOPIC, "t", AclOperation.WRITE),
        ]
    }
    broker = wire.broker.broker
    assert broker is not None
    broker.authorizer = AclAuthorizer(lambda: acls["now"])

    v3 = AddPartitionsToTxnRequest(
        v3_and_below_transactional_id="tx",
        v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[AddPartitionsToTxnRequest.V3AndBelowTopics(name="t", partitions=[0])],
    )
    r = wire.request(v3, 3)
    assert [
        (p.partition_index, p.partition_error_code)
        for t in r.results_by_topic_v3_and_below
        for p in t.results_by_partition
    ] == [(0, 0)]

    T = AddPartitionsToTxnRequest.Transactions

    def batched(verify_only: bool) -> AddPartitionsToTxnRequest:
        return AddPartitionsToTxnRequest(
            transactions=[
                T(
                    transactional_id="tx",
                    producer_id=pid,
                    producer_epoch=epoch,
                    verify_only=verify_only,
                    topics=[T.Topics(name="t", partitions=[0, 1])],
                )
            ]
        )

    for version in (4, 5):
        for verify_only in (True, False):
            r = wire.request(batched(verify_only), version)
            assert (r.error_code, r.results_by_transaction) == (
                ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                [],
            )

    # A broker's principal has CLUSTER_ACTION: it verifies, and partition 1 is not in the
    # transaction.
    acls["now"] = [
        *acls["now"],
        allow(ResourceType.CLUSTER, "kafka-cluster", AclOperation.CLUSTER_ACTION),
    ]
    r = wire.request(batched(True), 4)
    assert r.error_code == 0
    assert {
        (p.partition_index, p.partition_error_code)
        for x in r.results_by_transaction
        for t in x.topic_results
        for p in t.results_by_partition
    } == {(0, 0), (1, ErrorCode.TRANSACTION_ABORTABLE)}
