"""Every version of every transaction API on the wire, against a real broker process.

Requests are encoded with Gregor's sans-IO codec and sent over a socket. These pin what the
client tests only see at the versions each client picks: PRODUCER_FENCED versus
INVALID_PRODUCER_EPOCH by version (KIP-588), the batched and verify-only AddPartitionsToTxn
(v4, v5), produce and TxnOffsetCommit verification (KIP-890), WriteTxnMarkers, the admin
APIs, and the coordinator's state across a broker restart.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import INTEROP_BROKER, gregor_only
from interop_helpers import RawClient, create_topic

from gregor.protocol.errors import ErrorCode as E
from gregor.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest
from gregor.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest
from gregor.protocol.messages.api_versions import ApiVersionsRequest
from gregor.protocol.messages.describe_producers import DescribeProducersRequest
from gregor.protocol.messages.describe_transactions import DescribeTransactionsRequest
from gregor.protocol.messages.end_txn import EndTxnRequest
from gregor.protocol.messages.fetch import FetchRequest
from gregor.protocol.messages.find_coordinator import FindCoordinatorRequest
from gregor.protocol.messages.init_producer_id import InitProducerIdRequest
from gregor.protocol.messages.list_transactions import ListTransactionsRequest
from gregor.protocol.messages.metadata import MetadataRequest
from gregor.protocol.messages.offset_fetch import OffsetFetchRequest
from gregor.protocol.messages.produce import ProduceRequest
from gregor.protocol.messages.txn_offset_commit import TxnOffsetCommitRequest
from gregor.protocol.messages.write_txn_markers import WriteTxnMarkersRequest
from gregor.protocol.records.batch import RecordBatchBuilder, decode_batch
from gregor.protocol.records.control import ControlRecordType, parse_control_record
from gregor.protocol.records.header import iter_batches
from gregor.testing import BrokerProcess

TOPIC = "wire-txn"
READ_COMMITTED = 1
APIS = {
    22: (0, 5),
    24: (0, 5),
    25: (0, 4),
    26: (0, 5),
    27: (0, 1),
    28: (0, 5),
    61: (0, 0),
    65: (0, 0),
    66: (0, 1),
}


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    with BrokerProcess(config={"transaction.state.log.num.partitions": 5}) as b:
        create_topic(b.bootstrap_servers, TOPIC, 3)
        if INTEROP_BROKER == "kafka":
            # Kafka makes __consumer_offsets and __transaction_state at the first
            # FindCoordinator and answers COORDINATOR_NOT_AVAILABLE until they are ready, where
            # Gregor answers at once (README, compatibility): wait for both, as clients do.
            with RawClient(b.bootstrap_servers) as c:
                for key_type in (0, 1):
                    request = FindCoordinatorRequest(key="warm-up", key_type=key_type)
                    while c.request(request, 1).error_code == E.COORDINATOR_NOT_AVAILABLE:
                        time.sleep(0.1)
        yield b
        assert "event=request.failed" not in b.read_log(), b.read_log()[-4000:]


@pytest.fixture
def client(broker: BrokerProcess) -> Iterator[RawClient]:
    with RawClient(broker.bootstrap_servers) as c:
        yield c


def tid(tag: str) -> str:
    return f"{tag}-{uuid.uuid4().hex[:8]}"


# --- helpers -----------------------------------------------------------------------------


def init(
    c: RawClient,
    txn_id: str,
    version: int = 4,
    timeout: int = 60000,
    pid: int = -1,
    epoch: int = -1,
) -> Any:
    r = c.request(
        InitProducerIdRequest(
            transactional_id=txn_id,
            transaction_timeout_ms=timeout,
            producer_id=pid,
            producer_epoch=epoch,
        ),
        version,
    )
    return r


def init_ok(c: RawClient, txn_id: str, **kw: Any) -> tuple[int, int]:
    while True:
        r = init(c, txn_id, **kw)
        if r.error_code in (E.NOT_COORDINATOR, E.COORDINATOR_NOT_AVAILABLE):
            # As clients do: find the coordinator (Kafka makes __transaction_state only then,
            # and answers these until it has loaded it; Gregor makes it for InitProducerId too).
            c.request(FindCoordinatorRequest(key=txn_id, key_type=1), 1)
        elif r.error_code not in (E.CONCURRENT_TRANSACTIONS, E.COORDINATOR_LOAD_IN_PROGRESS):
            assert r.error_code == 0, E(r.error_code).name
            return r.producer_id, r.producer_epoch
        time.sleep(0.05)


def add_partitions(
    c: RawClient, txn_id: str, pid: int, epoch: int, parts: dict[str, list[int]], version: int = 3
) -> dict[tuple[str, int], int]:
    if version <= 3:
        req = AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=txn_id,
            v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=[
                AddPartitionsToTxnRequest.V3AndBelowTopics(name=t, partitions=ps)
                for t, ps in parts.items()
            ],
        )
        r = c.request(req, version)
        return {
            (t.name, p.partition_index): p.partition_error_code
            for t in r.results_by_topic_v3_and_below
            for p in t.results_by_partition
        }
    T = AddPartitionsToTxnRequest.Transactions
    req = AddPartitionsToTxnRequest(
        transactions=[
            T(
                transactional_id=txn_id,
                producer_id=pid,
                producer_epoch=epoch,
                verify_only=False,
                topics=[T.Topics(name=t, partitions=ps) for t, ps in parts.items()],
            )
        ]
    )
    r = c.request(req, version)
    assert r.error_code == 0
    return {
        (t.name, p.partition_index): p.partition_error_code
        for x in r.results_by_transaction
        for t in x.topic_results
        for p in t.results_by_partition
    }


def produce(
    c: RawClient,
    topic: str,
    partition: int,
    pid: int,
    epoch: int,
    seq: int,
    values: list[bytes],
    txn_id: str | None,
    version: int = 9,
) -> Any:
    b = RecordBatchBuilder(
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=txn_id is not None,
    )
    now = int(time.time() * 1000)
    for v in values:
        b.append(now, None, v)
    req = ProduceRequest(
        transactional_id=txn_id,
        acks=-1,
        timeout_ms=5000,
        topic_data=[
            ProduceRequest.TopicData(
                name=topic,
                partition_data=[
                    ProduceRequest.TopicData.PartitionData(index=partition, records=b.build())
                ],
            )
        ],
    )
    return c.request(req, version).responses[0].partition_responses[0]


def end(c: RawClient, txn_id: str, pid: int, epoch: int, commit: bool, version: int = 3) -> int:
    return c.request(
        EndTxnRequest(
            transactional_id=txn_id, producer_id=pid, producer_epoch=epoch, committed=commit
        ),
        version,
    ).error_code


def fetch_settled(
    c: RawClient, topic: str, partition: int, isolation: int, offset: int = 0
) -> tuple[int, int, list[tuple[int, int]], list[Any]]:
    """``fetch`` once no transaction is open on the partition: Kafka writes a transaction's
    markers after it has answered EndTxn, Gregor before it answers."""
    while True:
        got = fetch(c, topic, partition, isolation, offset)
        if got[0] == got[1]:
            return got
        time.sleep(0.05)


def fetch(
    c: RawClient, topic: str, partition: int, isolation: int, offset: int = 0
) -> tuple[int, int, list[tuple[int, int]], list[Any]]:
    """(high watermark, last stable offset, aborted (pid, first offset), batches)."""
    req = FetchRequest(
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=1 << 20,
        isolation_level=isolation,
        topics=[
            FetchRequest.Topics(
                topic=topic,
                partitions=[
                    FetchRequest.Topics.Partitions(
                        partition=partition, fetch_offset=offset, partition_max_bytes=1 << 20
                    )
                ],
            )
        ],
    )
    p = c.request(req, 11).responses[0].partitions[0]
    assert p.error_code == 0
    data = bytes(p.records or b"")
    batches = [decode_batch(data, pos) for pos, _ in iter_batches(data)]
    aborted = [(a.producer_id, a.first_offset) for a in (p.aborted_transactions or [])]
    return p.high_watermark, p.last_stable_offset, aborted, batches


def values_of(batches: list[Any]) -> list[bytes]:
    return [r.value for b in batches if not b.is_control for r in b.records]


def describe(c: RawClient, *ids: str) -> list[Any]:
    return c.request(DescribeTransactionsRequest(transactional_ids=list(ids)), 0).transaction_states


# --- tests -------------------------------------------------------------------------------


@gregor_only(
    "Kafka 4 serves ListTransactions v2 and none of the versions KIP-896 removed (README, compatibility)"
)
def test_api_versions_advertise_the_transaction_apis(client: RawClient) -> None:
    resp = client.request(
        ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3
    )
    have = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert {k: have.get(k) for k in APIS} == APIS


def test_find_coordinator_creates_the_state_topic(client: RawClient, broker: BrokerProcess) -> None:
    r = client.request(FindCoordinatorRequest(key_type=1, coordinator_keys=["x"]), 4)
    assert [(c.key, c.node_id, c.port, c.error_code) for c in r.coordinators] == [
        ("x", 1, broker.port, 0)
    ]
    md = client.request(
        MetadataRequest(topics=[MetadataRequest.Topics(name="__transaction_state")]), 9
    )
    t = md.topics[0]
    assert (t.error_code, t.is_internal, len(t.partitions)) == (0, True, 5)


@pytest.mark.parametrize("version", range(6))
def test_commit_at_every_version(client: RawClient, version: int) -> None:
    """InitProducerId v0-5, AddPartitionsToTxn v0-3 (v4+ is batched: below), EndTxn v0-4."""
    txn = tid(f"v{version}")
    pid, epoch = init_ok(client, txn, version=version)
    assert epoch == 0
    part = version % 3
    assert add_partitions(client, txn, pid, epoch, {TOPIC: [part]}, min(version, 3)) == {
        (TOPIC, part): 0
    }
    r = produce(client, TOPIC, part, pid, epoch, 0, [b"a%d" % version, b"b%d" % version], txn)
    assert r.error_code == 0
    hw, lso, _, _ = fetch(client, TOPIC, part, READ_COMMITTED)
    assert lso == r.base_offset < hw
    assert end(client, txn, pid, epoch, True, min(version, 4)) == 0
    hw, lso, aborted, batches = fetch_settled(client, TOPIC, part, READ_COMMITTED, r.base_offset)
    assert (lso, hw, aborted) == (r.base_offset + 3, r.base_offset + 3, [])
    assert values_of(batches) == [b"a%d" % version, b"b%d" % version]
    marker = batches[-1]
    assert (marker.is_control, marker.producer_id, marker.producer_epoch) == (True, pid, 0)
    assert parse_control_record(marker.records[0]).type == ControlRecordType.COMMIT


def test_abort_lists_the_aborted_transaction(client: RawClient) -> None:
    txn = tid("abort")
    pid, epoch = init_ok(client, txn)
    add_partitions(client, txn, pid, epoch, {TOPIC: [1]})
    r = produce(client, TOPIC, 1, pid, epoch, 0, [b"x", b"y"], txn)
    assert end(client, txn, pid, epoch, False) == 0
    hw, lso, aborted, batches = fetch_settled(client, TOPIC, 1, READ_COMMITTED, r.base_offset)
    assert (hw, lso) == (r.base_offset + 3, r.base_offset + 3)
    assert aborted == [(pid, r.base_offset)]
    assert parse_control_record(batches[-1].records[0]).type == ControlRecordType.ABORT


@pytest.mark.parametrize("version", [1, 2])
def test_fenced_producer_errors_by_version(client: RawClient, version: int) -> None:
    txn = tid("fence")
    pid, old = init_ok(client, txn)
    add_partitions(client, txn, pid, old, {TOPIC: [0]})
    r = produce(client, TOPIC, 0, pid, old, 0, [b"zombie"], txn)
    assert r.error_code == 0
    # A new producer: its first call aborts the zombie's transaction with the fence epoch (a
    # version 1 client's transaction: no abort bump of its own, on a transaction.version 2
    # cluster too, as Kafka 4.1.1 answers it), the retry bumps again.
    assert init(client, txn).error_code == E.CONCURRENT_TRANSACTIONS
    _, new = init_ok(client, txn)
    assert new == old + 2
    fenced = E.PRODUCER_FENCED if version >= 2 else E.INVALID_PRODUCER_EPOCH
    assert add_partitions(client, txn, pid, old, {TOPIC: [1]}, version) == {(TOPIC, 1): fenced}
    assert end(client, txn, pid, old, True, version) == fenced
    assert (
        client.request(
            AddOffsetsToTxnRequest(
                transactional_id=txn, producer_id=pid, producer_epoch=old, group_id="g"
            ),
            version,
        ).error_code
        == fenced
    )
    # KIP-360 recovery with a stale epoch: fenced, as INVALID_PRODUCER_EPOCH before v4.
    assert init(client, txn, version=3, pid=pid, epoch=old).error_code == E.INVALID_PRODUCER_EPOCH
    assert init(client, txn, version=4, pid=pid, epoch=old).error_code == E.PRODUCER_FENCED
    # The partition refuses the zombie's writes: the abort marker carried the bumped epoch.
    assert (
        produce(client, TOPIC, 0, pid, old, 1, [b"late"], txn).error_code
        == E.INVALID_PRODUCER_EPOCH
    )


@pytest.mark.parametrize("version", [4, 5])
def test_batched_and_verify_only_add_partitions(client: RawClient, version: int) -> None:
    a, b = tid("ba"), tid("bb")
    pa, ea = init_ok(client, a)
    pb, eb = init_ok(client, b)
    T = AddPartitionsToTxnRequest.Transactions
    req = AddPartitionsToTxnRequest(
        transactions=[
            T(
                transactional_id=a,
                producer_id=pa,
                producer_epoch=ea,
                verify_only=False,
                topics=[T.Topics(name=TOPIC, partitions=[0, 1])],
            ),
            T(
                transactional_id=b,
                producer_id=pb,
                producer_epoch=eb,
                verify_only=False,
                topics=[
                    T.Topics(name=TOPIC, partitions=[2]),
                    T.Topics(name="no-such-topic", partitions=[0]),
                ],
            ),
        ]
    )
    r = client.request(req, version)

    def results(resp: Any) -> dict[str, dict[tuple[str, int], int]]:
        return {
            x.transactional_id: {
                (t.name, p.partition_index): p.partition_error_code
                for t in x.topic_results
                for p in t.results_by_partition
            }
            for x in resp.results_by_transaction
        }

    assert r.error_code == 0
    assert results(r) == {
        a: {(TOPIC, 0): 0, (TOPIC, 1): 0},
        b: {
            (TOPIC, 2): E.OPERATION_NOT_ATTEMPTED,
            ("no-such-topic", 0): E.UNKNOWN_TOPIC_OR_PARTITION,
        },
    }
    verify = AddPartitionsToTxnRequest(
        transactions=[
            T(
                transactional_id=a,
                producer_id=pa,
                producer_epoch=ea,
                verify_only=True,
                topics=[T.Topics(name=TOPIC, partitions=[0, 2])],
            ),
            T(
                transactional_id=b,
                producer_id=pb,
                producer_epoch=eb + 1,
                verify_only=True,
                topics=[T.Topics(name=TOPIC, partitions=[2])],
            ),
        ]
    )
    # Kafka 4.1.1 answers a partition missing from the transaction so at v4 as well as v5.
    assert results(client.request(verify, version)) == {
        a: {(TOPIC, 0): 0, (TOPIC, 2): E.TRANSACTION_ABORTABLE},
        b: {(TOPIC, 2): E.PRODUCER_FENCED},
    }
    assert describe(client, a)[0].transaction_state == "Ongoing"
    assert describe(client, b)[0].transaction_state == "Empty"


def test_produce_verification(client: RawClient) -> None:
    txn = tid("verify")
    pid, epoch = init_ok(client, txn)
    # Not added to the transaction: refused, and no transaction is opened on the partition
    # (v11 clients know TRANSACTION_ABORTABLE, KIP-890).
    if INTEROP_BROKER == "gregor":  # Kafka 4.1.1's answer varies (README, compatibility)
        assert (
            produce(client, TOPIC, 2, pid, epoch, 0, [b"early"], txn).error_code
            == E.INVALID_TXN_STATE
        )
        assert (
            produce(client, TOPIC, 2, pid, epoch, 0, [b"early"], txn, 11).error_code
            == E.TRANSACTION_ABORTABLE
        )
    add_partitions(client, txn, pid, epoch, {TOPIC: [2]})
    assert produce(client, TOPIC, 2, pid, epoch, 0, [b"ok"], txn).error_code == 0
    assert produce(client, TOPIC, 2, pid, epoch, 1, [b"ok2"], txn).error_code == 0
    assert end(client, txn, pid, epoch, True) == 0
    # A late write after the transaction ended would open a transaction nobody ends.
    assert (
        produce(client, TOPIC, 2, pid, epoch, 2, [b"late"], txn).error_code == E.INVALID_TXN_STATE
    )
    hw, lso, _, _ = fetch(client, TOPIC, 2, READ_COMMITTED)
    assert lso == hw


@pytest.mark.parametrize("version", range(5))
def test_txn_offset_commit_every_version(client: RawClient, version: int) -> None:
    txn, group = tid(f"to{version}"), tid("group")
    pid, epoch = init_ok(client, txn)
    P = TxnOffsetCommitRequest.Topics.Partitions
    req = TxnOffsetCommitRequest(
        transactional_id=txn,
        group_id=group,
        producer_id=pid,
        producer_epoch=epoch,
        topics=[
            TxnOffsetCommitRequest.Topics(
                name=TOPIC,
                partitions=[
                    P(
                        partition_index=0,
                        committed_offset=7,
                        committed_leader_epoch=0,
                        committed_metadata="m",
                    )
                ],
            )
        ],
    )

    def commit_codes() -> list[int]:
        return [p.error_code for t in client.request(req, version).topics for p in t.partitions]

    # Without AddOffsetsToTxn the group's partition is not in the transaction (v4 knows
    # TRANSACTION_ABORTABLE, KIP-890; v5 is transaction version 2's, which adds it: see
    # test_transactions_version2.py).
    assert commit_codes() == [E.TRANSACTION_ABORTABLE if version >= 4 else E.INVALID_TXN_STATE]
    add = client.request(
        AddOffsetsToTxnRequest(
            transactional_id=txn, producer_id=pid, producer_epoch=epoch, group_id=group
        ),
        min(version, 4),
    )
    assert add.error_code == 0
    assert commit_codes() == [0]

    def fetched(stable: bool) -> tuple[int, int]:
        r = client.request(
            OffsetFetchRequest(
                group_id=group,
                require_stable=stable,
                topics=[OffsetFetchRequest.Topics(name=TOPIC, partition_indexes=[0])],
            ),
            7,
        )
        p = r.topics[0].partitions[0]
        return p.committed_offset, p.error_code

    assert fetched(True) == (-1, E.UNSTABLE_OFFSET_COMMIT)
    assert fetched(False) == (-1, 0)
    assert end(client, txn, pid, epoch, True) == 0
    # Kafka writes the offsets' markers after it has answered EndTxn, Gregor before: until
    # then Kafka's require_stable fetch answers UNSTABLE_OFFSET_COMMIT (retriable).
    while (got := fetched(True)) == (-1, E.UNSTABLE_OFFSET_COMMIT):
        time.sleep(0.05)
    assert got == (7, 0)


def test_write_txn_markers(client: RawClient) -> None:
    txn = tid("markers")
    pid, epoch = init_ok(client, txn)
    add_partitions(client, txn, pid, epoch, {TOPIC: [0]})
    r = produce(client, TOPIC, 0, pid, epoch, 0, [b"m"], txn)
    M = WriteTxnMarkersRequest.Markers
    # (Kafka 4 removed v0, KIP-896; README, compatibility)
    versions = (0, 1) if INTEROP_BROKER == "gregor" else (1,)
    for version in versions:
        req = WriteTxnMarkersRequest(
            markers=[
                M(
                    producer_id=pid,
                    producer_epoch=epoch,
                    transaction_result=True,
                    coordinator_epoch=0,
                    topics=[
                        M.Topics(name=TOPIC, partition_indexes=[0]),
                        M.Topics(name="no-such-topic", partition_indexes=[3]),
                    ],
                )
            ]
        )
        resp = client.request(req, version)
        got = {
            (t.name, p.partition_index): p.error_code
            for m in resp.markers
            for t in m.topics
            for p in t.partitions
        }
        assert got == {(TOPIC, 0): 0, ("no-such-topic", 3): E.UNKNOWN_TOPIC_OR_PARTITION}
    hw, lso, _, batches = fetch(client, TOPIC, 0, READ_COMMITTED, r.base_offset)
    assert lso == hw == r.base_offset + 1 + len(versions)
    assert [b.is_control for b in batches] == [False] + [True] * len(versions)
    stale = WriteTxnMarkersRequest(
        markers=[
            M(
                producer_id=pid,
                producer_epoch=epoch - 1,
                transaction_result=False,
                coordinator_epoch=0,
                topics=[M.Topics(name=TOPIC, partition_indexes=[0])],
            )
        ]
    )
    code = client.request(stale, 1).markers[0].topics[0].partitions[0].error_code
    # The API's documented error; Kafka 4.1.1 answers UNKNOWN_SERVER_ERROR (README, compatibility).
    if INTEROP_BROKER == "gregor":
        assert code == E.INVALID_PRODUCER_EPOCH


def test_describe_list_and_producers(client: RawClient) -> None:
    txn = tid("admin")
    pid, epoch = init_ok(client, txn)
    add_partitions(client, txn, pid, epoch, {TOPIC: [1, 0]})
    r = produce(client, TOPIC, 1, pid, epoch, 0, [b"p1", b"p2"], txn)
    d = describe(client, txn, "never-seen")
    assert [
        (
            s.error_code,
            s.transactional_id,
            s.transaction_state,
            s.producer_id,
            s.producer_epoch,
            s.transaction_timeout_ms,
        )
        for s in d
    ] == [
        (0, txn, "Ongoing", pid, 0, 60000),
        (E.TRANSACTIONAL_ID_NOT_FOUND, "never-seen", "", 0, 0, 0),
    ]
    assert [(t.topic, sorted(t.partitions)) for t in d[0].topics] == [(TOPIC, [0, 1])]
    assert d[0].transaction_start_time_ms > 0
    lst = client.request(
        ListTransactionsRequest(state_filters=["Ongoing", "Nope"], producer_id_filters=[pid]), 1
    )
    assert (lst.error_code, lst.unknown_state_filters) == (0, ["Nope"])
    assert [
        (s.transactional_id, s.producer_id, s.transaction_state) for s in lst.transaction_states
    ] == [(txn, pid, "Ongoing")]
    long_running = client.request(
        ListTransactionsRequest(producer_id_filters=[pid], duration_filter=3_600_000), 1
    )
    assert long_running.transaction_states == []
    dp = client.request(
        DescribeProducersRequest(
            topics=[
                DescribeProducersRequest.Topics(name=TOPIC, partition_indexes=[1]),
                DescribeProducersRequest.Topics(name="no-such-topic", partition_indexes=[0]),
            ]
        ),
        0,
    )
    part = dp.topics[0].partitions[0]
    mine = [a for a in part.active_producers if a.producer_id == pid]
    assert [(a.producer_epoch, a.last_sequence, a.current_txn_start_offset) for a in mine] == [
        (0, 1, r.base_offset)
    ]
    assert dp.topics[1].partitions[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION
    assert end(client, txn, pid, epoch, False) == 0

    def producers() -> list[tuple[int, int]]:
        dp = client.request(
            DescribeProducersRequest(
                topics=[DescribeProducersRequest.Topics(name=TOPIC, partition_indexes=[1])]
            ),
            0,
        )
        mine = [a for a in dp.topics[0].partitions[0].active_producers if a.producer_id == pid]
        return [(a.current_txn_start_offset, a.coordinator_epoch) for a in mine]

    # Kafka writes the abort marker after it has answered EndTxn, Gregor before.
    while (got := producers()) != [(-1, 0)] and INTEROP_BROKER == "kafka":
        time.sleep(0.05)
    assert got == [(-1, 0)]
    while (
        state := describe(client, txn)[0].transaction_state
    ) == "PrepareAbort" and INTEROP_BROKER == "kafka":
        time.sleep(0.05)
    assert state == "CompleteAbort"


def test_state_survives_a_broker_kill() -> None:
    """SIGKILL the broker mid-transaction: after the restart the coordinator knows the
    transaction, the producer can commit it, and one abandoned meanwhile is aborted when its
    timeout passes."""
    with BrokerProcess(config={"transaction.state.log.num.partitions": 3}) as b:
        create_topic(b.bootstrap_servers, "k", 1)
        with RawClient(b.bootstrap_servers) as c:
            keep, drop = tid("keep"), tid("drop")
            pk, ek = init_ok(c, keep)
            pd, ed = init_ok(c, drop, timeout=3000)
            add_partitions(c, keep, pk, ek, {"k": [0]})
            add_partitions(c, drop, pd, ed, {"k": [0]})
            assert produce(c, "k", 0, pk, ek, 0, [b"k1"], keep).error_code == 0
            assert produce(c, "k", 0, pd, ed, 0, [b"d1"], drop).error_code == 0
        b.restart(hard=True)
        with RawClient(b.bootstrap_servers) as c:
            # (Kafka answers NOT_COORDINATOR until it has taken its state topic up again; a
            # client then finds the coordinator again)
            while describe(c, keep)[0].error_code in (
                E.COORDINATOR_LOAD_IN_PROGRESS,
                E.NOT_COORDINATOR,
                E.COORDINATOR_NOT_AVAILABLE,
            ):
                c.request(FindCoordinatorRequest(key=keep, key_type=1), 1)
                time.sleep(0.05)
            assert describe(c, keep)[0].transaction_state == "Ongoing"
            # Both records survived and "keep" holds the LSO at 0. "drop" (3 s timeout) may
            # already have been aborted while the broker restarted on a busy machine: then its
            # abort marker, and only that, follows the two records.
            hw, lso, _, batches = fetch(c, "k", 0, 0)
            markers = [(bt.base_offset, bt.producer_id) for bt in batches if bt.is_control]
            assert lso == 0
            assert markers in ([], [(2, pd)])
            assert hw == 2 + len(markers)
            assert produce(c, "k", 0, pk, ek, 1, [b"k2"], keep).error_code == 0
            assert end(c, keep, pk, ek, True) == 0
            # "drop" still holds the LSO back until its timeout aborts it.
            while describe(c, drop)[0].transaction_state != "CompleteAbort":
                time.sleep(0.1)
            assert describe(c, drop)[0].producer_epoch == ed + 1  # the fence (a version 1 client)
            hw, lso, aborted, batches = fetch(c, "k", 0, READ_COMMITTED)
            assert lso == hw == 5
            assert aborted == [(pd, 1)]
            data = [
                (bt.producer_id, r.value) for bt in batches if not bt.is_control for r in bt.records
            ]
            assert data == [(pk, b"k1"), (pd, b"d1"), (pk, b"k2")]
        if INTEROP_BROKER == "gregor":  # Gregor's own log line (Kafka's differ)
            assert "event=txn.timed_out" in b.read_log()


def test_idempotent_sequences_on_the_wire(client: RawClient) -> None:
    """Duplicates get their original offsets; gaps, stale epochs and unknown producers get
    the errors clients act on."""
    r = client.request(
        InitProducerIdRequest(
            transactional_id=None, transaction_timeout_ms=0, producer_id=-1, producer_epoch=-1
        ),
        4,
    )
    pid = r.producer_id
    assert (r.error_code, r.producer_epoch) == (0, 0)
    first = produce(client, TOPIC, 2, pid, 0, 0, [b"i0", b"i1"], None)
    second = produce(client, TOPIC, 2, pid, 0, 2, [b"i2"], None)
    assert (first.error_code, second.error_code) == (0, 0)
    assert second.base_offset == first.base_offset + 2
    # a retry of either batch is answered with its original offset and not written again
    assert (
        produce(client, TOPIC, 2, pid, 0, 0, [b"i0", b"i1"], None).base_offset == first.base_offset
    )
    assert produce(client, TOPIC, 2, pid, 0, 2, [b"i2"], None).base_offset == second.base_offset
    hw, _, _, batches = fetch(client, TOPIC, 2, 0, first.base_offset)
    assert hw == first.base_offset + 3
    assert values_of(batches) == [b"i0", b"i1", b"i2"]
    assert (
        produce(client, TOPIC, 2, pid, 0, 5, [b"gap"], None).error_code
        == E.OUT_OF_ORDER_SEQUENCE_NUMBER
    )
    # a new epoch starts at sequence 0; the old epoch is fenced from then on
    assert produce(client, TOPIC, 2, pid, 1, 0, [b"e1"], None).error_code == 0
    assert (
        produce(client, TOPIC, 2, pid, 0, 3, [b"old"], None).error_code == E.INVALID_PRODUCER_EPOCH
    )
    # a producer id without state here may start at any sequence (Kafka since KIP-360)
    assert produce(client, TOPIC, 2, pid + 12345, 0, 7, [b"who"], None).error_code == 0
