"""Transaction version 2 (KIP-890 part 2) on the wire, against a real in-process broker.

A version 2 client sends Produce v12 and TxnOffsetCommit v5 without AddPartitionsToTxn or
AddOffsetsToTxn (the leaders add the partitions) and ends each transaction with EndTxn v5,
which bumps the epoch and answers it. A request of an ended transaction that arrives late
(held back by the network) carries the old epoch and is fenced: it neither ends nor joins the
next transaction. Version 1 clients (EndTxn v0-4, Produce v0-11) are served as before.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from interop_helpers import RawClient, create_topic

from gregor.protocol.errors import ErrorCode as E
from gregor.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest
from gregor.protocol.messages.api_versions import ApiVersionsRequest
from gregor.protocol.messages.describe_transactions import DescribeTransactionsRequest
from gregor.protocol.messages.end_txn import EndTxnRequest
from gregor.protocol.messages.fetch import FetchRequest
from gregor.protocol.messages.init_producer_id import InitProducerIdRequest
from gregor.protocol.messages.offset_fetch import OffsetFetchRequest
from gregor.protocol.messages.produce import ProduceRequest
from gregor.protocol.messages.txn_offset_commit import TxnOffsetCommitRequest
from gregor.protocol.messages.update_features import UpdateFeaturesRequest
from gregor.protocol.records.batch import RecordBatchBuilder, decode_batch
from gregor.protocol.records.control import ControlRecordType, parse_control_record
from gregor.protocol.records.header import iter_batches
from gregor.testing.inprocess import InProcessBroker

TOPIC = "tv2"


@pytest.fixture(scope="module")
def broker() -> Iterator[InProcessBroker]:
    with InProcessBroker(
        config={"transaction.state.log.num.partitions": 3, "offsets.topic.num.partitions": 3}
    ) as b:
        create_topic(b.bootstrap_servers, TOPIC, 3)
        yield b


@pytest.fixture
def client(broker: InProcessBroker) -> Iterator[RawClient]:
    c = RawClient(broker.bootstrap_servers)
    try:
        yield c
    finally:
        c.sock.close()


def tid(tag: str) -> str:
    return f"{tag}-{uuid.uuid4().hex[:8]}"


def init(c: RawClient, txn: str) -> tuple[int, int]:
    while True:
        r = c.request(
            InitProducerIdRequest(
                transactional_id=txn,
                transaction_timeout_ms=60000,
                producer_id=-1,
                producer_epoch=-1,
            ),
            5,
        )
        if r.error_code not in (E.CONCURRENT_TRANSACTIONS, E.COORDINATOR_LOAD_IN_PROGRESS):
            assert r.error_code == 0, E(r.error_code).name
            return r.producer_id, r.producer_epoch
        time.sleep(0.05)


def produce(
    c: RawClient,
    partition: int,
    pid: int,
    epoch: int,
    seq: int,
    value: bytes,
    txn: str,
    version: int = 12,
) -> int:
    b = RecordBatchBuilder(
        producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=True
    )
    b.append(int(time.time() * 1000), None, value)
    req = ProduceRequest(
        transactional_id=txn,
        acks=-1,
        timeout_ms=5000,
        topic_data=[
            ProduceRequest.TopicData(
                name=TOPIC,
                partition_data=[
                    ProduceRequest.TopicData.PartitionData(index=partition, records=b.build())
                ],
            )
        ],
    )
    return int(c.request(req, version).responses[0].partition_responses[0].error_code)


def end(c: RawClient, txn: str, pid: int, epoch: int, commit: bool, version: int = 5) -> Any:
    return c.request(
        EndTxnRequest(
            transactional_id=txn, producer_id=pid, producer_epoch=epoch, committed=commit
        ),
        version,
    )


def describe(c: RawClient, txn: str) -> Any:
    return c.request(DescribeTransactionsRequest(transactional_ids=[txn]), 0).transaction_states[0]


def read(c: RawClient, partition: int, isolation: int = 1) -> tuple[int, list[Any]]:
    """(last stable offset, batches) from the start of ``partition``."""
    req = FetchRequest(
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=1 << 20,
        isolation_level=isolation,
        topics=[
            FetchRequest.Topics(
                topic=TOPIC,
                partitions=[
                    FetchRequest.Topics.Partitions(
                        partition=partition, fetch_offset=0, partition_max_bytes=1 << 20
                    )
                ],
            )
        ],
    )
    p = c.request(req, 11).responses[0].partitions[0]
    data = bytes(p.records or b"")
    return p.last_stable_offset, [decode_batch(data, pos) for pos, _ in iter_batches(data)]


def txn_values(batches: list[Any], pid: int) -> list[bytes]:
    return [
        r.value for b in batches if not b.is_control and b.producer_id == pid for r in b.records
    ]


def markers(batches: list[Any], pid: int) -> list[tuple[int, str]]:
    return [
        (b.producer_epoch, ControlRecordType(parse_control_record(b.records[0]).type).name)
        for b in batches
        if b.is_control and b.producer_id == pid
    ]


def test_api_versions_advertise_version_2(client: RawClient) -> None:
    av = client.request(
        ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3
    )
    keys = {k.api_key: k.max_version for k in av.api_keys}
    assert (
        keys[ProduceRequest.API_KEY],
        keys[EndTxnRequest.API_KEY],
        keys[TxnOffsetCommitRequest.API_KEY],
    ) == (12, 5, 5)
    assert keys[AddPartitionsToTxnRequest.API_KEY] == 5
    assert {f.name: (f.min_version, f.max_version) for f in av.supported_features}[
        "transaction.version"
    ] == (0, 2)
    assert {f.name: f.max_version_level for f in av.finalized_features}["transaction.version"] == 2


def test_a_version_2_transaction_and_its_late_requests(client: RawClient) -> None:
    txn, group = tid("v2"), tid("v2-group")
    pid, e0 = init(client, txn)
    # T1: no AddPartitionsToTxn; the leader adds the partition. No AddOffsetsToTxn either.
    assert produce(client, 0, pid, e0, 0, b"t1-a", txn) == 0
    assert produce(client, 0, pid, e0, 1, b"t1-b", txn) == 0
    state = describe(client, txn)
    assert (state.transaction_state, [(t.topic, t.partitions) for t in state.topics]) == (
        "Ongoing",
        [(TOPIC, [0])],
    )
    P = TxnOffsetCommitRequest.Topics.Partitions
    offsets = TxnOffsetCommitRequest(
        transactional_id=txn,
        group_id=group,
        producer_id=pid,
        producer_epoch=e0,
        topics=[
            TxnOffsetCommitRequest.Topics(
                name=TOPIC,
                partitions=[
                    P(
                        partition_index=1,
                        committed_offset=9,
                        committed_leader_epoch=-1,
                        committed_metadata="",
                    )
                ],
            )
        ],
    )
    assert [p.error_code for t in client.request(offsets, 5).topics for p in t.partitions] == [0]
    r = end(client, txn, pid, e0, True)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (0, pid, e0 + 1)
    lso, batches = read(client, 0)
    assert txn_values(batches, pid) == [b"t1-a", b"t1-b"]
    assert markers(batches, pid) == [(e0 + 1, ControlRecordType.COMMIT.name)]
    fetched = client.request(
        OffsetFetchRequest(
            require_stable=True,
            groups=[
                OffsetFetchRequest.Groups(
                    group_id=group,
                    topics=[OffsetFetchRequest.Groups.Topics(name=TOPIC, partition_indexes=[1])],
                )
            ],
        ),
        8,
    )
    assert [(p.committed_offset, p.error_code) for p in fetched.groups[0].topics[0].partitions] == [
        (9, 0)
    ]

    # T2 at the bumped epoch, sequences from 0 again.
    e1 = e0 + 1
    assert produce(client, 1, pid, e1, 0, b"t2-a", txn) == 0
    # T1's first EndTxn, held back by the network, arrives now: fenced, T2 stays open.
    late = end(client, txn, pid, e0, True)
    assert (late.error_code, late.producer_id, late.producer_epoch) == (E.PRODUCER_FENCED, -1, -1)
    assert describe(client, txn).transaction_state == "Ongoing"
    lso, _ = read(client, 1)
    t2_start = next(b.base_offset for b in read(client, 1, 0)[1] if b.producer_id == pid)
    assert lso == t2_start  # T2 open: nothing of it is stable
    # T1's produce, held back, arrives now: fenced where T1 wrote and where it did not.
    assert produce(client, 0, pid, e0, 2, b"t1-late", txn) == E.INVALID_PRODUCER_EPOCH
    assert produce(client, 2, pid, e0, 0, b"t1-late", txn) == E.INVALID_PRODUCER_EPOCH
    assert [(t.topic, t.partitions) for t in describe(client, txn).topics] == [(TOPIC, [1])]
    r = end(client, txn, pid, e1, False)
    assert (r.error_code, r.producer_epoch) == (0, e1 + 1)
    assert txn_values(read(client, 0)[1], pid) == [b"t1-a", b"t1-b"]  # nothing late joined
    assert markers(read(client, 0)[1], pid) == [(e0 + 1, ControlRecordType.COMMIT.name)]
    assert markers(read(client, 1)[1], pid) == [(e1 + 1, ControlRecordType.ABORT.name)]
    assert txn_values(read(client, 2)[1], pid) == []


def test_a_version_1_client_is_served_as_before(client: RawClient) -> None:
    txn = tid("v1")
    pid, epoch = init(client, txn)
    # Not added: refused, as Kafka refuses a version 1 client's unverified write.
    assert produce(client, 2, pid, epoch, 0, b"early", txn, 11) == E.TRANSACTION_ABORTABLE
    add = AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=txn,
        v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[
            AddPartitionsToTxnRequest.V3AndBelowTopics(name=TOPIC, partitions=[2])
        ],
    )
    assert (
        client.request(add, 3)
        .results_by_topic_v3_and_below[0]
        .results_by_partition[0]
        .partition_error_code
        == 0
    )
    assert produce(client, 2, pid, epoch, 0, b"v1", txn, 11) == 0
    r = end(client, txn, pid, epoch, True, 4)
    assert r.error_code == 0
    # The epoch stays; the marker carries it; the next transaction continues the sequence.
    assert describe(client, txn).producer_epoch == epoch
    assert markers(read(client, 2)[1], pid) == [(epoch, ControlRecordType.COMMIT.name)]
    assert end(client, txn, pid, epoch, True, 4).error_code == 0  # a retried commit


def test_the_level_can_be_lowered_and_raised(broker: InProcessBroker, client: RawClient) -> None:
    def update(level: int, upgrade_type: int) -> int:
        r = client.request(
            UpdateFeaturesRequest(
                timeout_ms=10000,
                validate_only=False,
                feature_updates=[
                    UpdateFeaturesRequest.FeatureUpdates(
                        feature="transaction.version",
                        max_version_level=level,
                        upgrade_type=upgrade_type,
                        allow_downgrade=upgrade_type != 1,
                    )
                ],
            ),
            1,
        )
        return int(r.error_code)

    def finalized() -> int:
        av = client.request(
            ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3
        )
        return {f.name: f.max_version_level for f in av.finalized_features}.get(
            "transaction.version", 0
        )

    try:
        assert update(0, 2) == 0 and finalized() == 0
        # A fence on a version 1 cluster bumps once (the abort carries the fence epoch).
        txn = tid("fence")
        pid, epoch = init(client, txn)
        assert produce(client, 0, pid, epoch, 0, b"zombie", txn) == 0  # a version 2 client's write
        assert init(client, txn) == (pid, epoch + 2)
        assert markers(read(client, 0)[1], pid) == [(epoch + 1, ControlRecordType.ABORT.name)]
        assert update(1, 1) == 0 and finalized() == 1
    finally:
        assert update(2, 1) == 0
    assert finalized() == 2
