"""Every version of every group API on the wire, against a real broker process.

Requests are encoded with Gregor's sans-IO codec and sent over a socket; the broker decodes,
runs the coordinator and answers. These pin the version-dependent behaviour (batched keys,
MEMBER_ID_REQUIRED from JoinGroup v4, batched LeaveGroup from v3, leader epochs in offsets
from v6/v5, batched OffsetFetch from v8, ConsumerGroupHeartbeat v1) that the client tests
only exercise at whatever version each client picks.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from conftest import INTEROP_BROKER, gregor_only
from interop_helpers import RawClient, create_topic

from gregor.protocol.errors import ErrorCode as E
from gregor.protocol.messages.api_versions import ApiVersionsRequest
from gregor.protocol.messages.consumer_group_describe import ConsumerGroupDescribeRequest
from gregor.protocol.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from gregor.protocol.messages.delete_groups import DeleteGroupsRequest
from gregor.protocol.messages.describe_groups import DescribeGroupsRequest
from gregor.protocol.messages.find_coordinator import FindCoordinatorRequest
from gregor.protocol.messages.heartbeat import HeartbeatRequest
from gregor.protocol.messages.join_group import JoinGroupRequest
from gregor.protocol.messages.leave_group import LeaveGroupRequest
from gregor.protocol.messages.list_groups import ListGroupsRequest
from gregor.protocol.messages.metadata import MetadataRequest
from gregor.protocol.messages.offset_commit import OffsetCommitRequest
from gregor.protocol.messages.offset_delete import OffsetDeleteRequest
from gregor.protocol.messages.offset_fetch import OffsetFetchRequest
from gregor.protocol.messages.sync_group import SyncGroupRequest
from gregor.testing import BrokerProcess

TOPIC = "wire-groups"


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    with BrokerProcess(config={"group.min.session.timeout.ms": 1000}) as b:
        create_topic(b.bootstrap_servers, TOPIC, 4)
        if INTEROP_BROKER == "kafka":
            _wait_for_coordinators(b)
        yield b
        assert "event=request.failed" not in b.read_log(), b.read_log()[-4000:]


def _wait_for_coordinators(broker: BrokerProcess) -> None:
    """Kafka makes ``__consumer_offsets`` and ``__transaction_state`` at the first
    FindCoordinator and answers COORDINATOR_NOT_AVAILABLE until they are ready, where Gregor
    answers at once (README, compatibility): wait for both, as clients do, before the tests."""
    with RawClient(broker.bootstrap_servers) as c:
        for key_type in (0, 1):
            request = FindCoordinatorRequest(key="warm-up", key_type=key_type)
            while c.request(request, 1).error_code == E.COORDINATOR_NOT_AVAILABLE:
                time.sleep(0.1)


@pytest.fixture
def client(broker: BrokerProcess) -> Iterator[RawClient]:
    with RawClient(broker.bootstrap_servers) as c:
        yield c


def gid(tag: str) -> str:
    return f"{tag}-{uuid.uuid4().hex[:8]}"


@gregor_only("Kafka 4 serves none of the versions KIP-896 removed (README, compatibility)")
def test_api_versions_advertise_the_group_apis(client: RawClient) -> None:
    resp = client.request(
        ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3
    )
    ranges = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert {k: ranges[k] for k in (8, 9, 10, 11, 12, 13, 14, 15, 16, 42, 47, 68, 69)} == {
        8: (0, 9),
        9: (0, 9),
        10: (0, 6),
        11: (0, 9),
        12: (0, 4),
        13: (0, 5),
        14: (0, 5),
        15: (0, 5),
        16: (0, 5),
        42: (0, 2),
        47: (0, 0),
        68: (0, 1),
        69: (0, 1),
    }


@pytest.mark.parametrize("version", range(7))
def test_find_coordinator(broker: BrokerProcess, client: RawClient, version: int) -> None:
    port = broker.port
    if version >= 4:
        resp = client.request(
            FindCoordinatorRequest(key_type=0, coordinator_keys=["a", "b"]), version
        )
        assert [(c.key, c.node_id, c.host, c.port, c.error_code) for c in resp.coordinators] == [
            ("a", 1, "127.0.0.1", port, 0),
            ("b", 1, "127.0.0.1", port, 0),
        ]
        txn = client.request(FindCoordinatorRequest(key_type=1, coordinator_keys=["tx"]), version)
        assert [(c.key, c.node_id, c.error_code) for c in txn.coordinators] == [("tx", 1, 0)]
        bad = client.request(FindCoordinatorRequest(key_type=9, coordinator_keys=["x"]), version)
        assert bad.coordinators[0].error_code == E.INVALID_REQUEST
        return
    resp = client.request(FindCoordinatorRequest(key="g", key_type=0), version)
    assert (resp.error_code, resp.node_id, resp.host, resp.port) == (0, 1, "127.0.0.1", port)
    if version >= 1:
        txn = client.request(FindCoordinatorRequest(key="tx", key_type=1), version)
        assert (txn.error_code, txn.node_id) == (0, 1)
        bad = client.request(FindCoordinatorRequest(key="x", key_type=9), version)
        assert (bad.error_code, bad.node_id) == (E.INVALID_REQUEST, -1)


def test_offsets_topic_is_internal_and_compacted(client: RawClient) -> None:
    client.request(FindCoordinatorRequest(key="any", key_type=0), 3)
    md = client.request(
        MetadataRequest(topics=[MetadataRequest.Topics(name="__consumer_offsets")]), 9
    )
    t = md.topics[0]
    assert (t.error_code, t.is_internal, len(t.partitions)) == (0, True, 50)


def _join(client: RawClient, group: str, version: int, member_id: str = "") -> object:
    req = JoinGroupRequest(
        group_id=group,
        session_timeout_ms=10000,
        rebalance_timeout_ms=10000,
        member_id=member_id,
        protocol_type="consumer",
        protocols=[JoinGroupRequest.Protocols(name="range", metadata=b"\x00\x01")],
    )
    # As clients do: Kafka answers COORDINATOR_LOAD_IN_PROGRESS while it loads the group's
    # partition of __consumer_offsets (Gregor has loaded it before it answers).
    while (r := client.request(req, version)).error_code == E.COORDINATOR_LOAD_IN_PROGRESS:
        time.sleep(0.05)
    return r


@pytest.mark.parametrize("version", range(10))
def test_classic_group_lifecycle(client: RawClient, version: int) -> None:
    group = gid(f"join-v{version}")
    r = _join(client, group, version)
    if version >= 4:
        assert (r.error_code, r.generation_id) == (E.MEMBER_ID_REQUIRED, -1)
        r = _join(client, group, version, r.member_id)
    member = r.member_id
    assert (r.error_code, r.generation_id, r.leader, [m.member_id for m in r.members]) == (
        0,
        1,
        member,
        [member],
    )
    assert bytes(r.members[0].metadata) == b"\x00\x01"
    assert r.protocol_name == "range"
    sv = min(version, 5)
    s = client.request(
        SyncGroupRequest(
            group_id=group,
            generation_id=1,
            member_id=member,
            protocol_type="consumer",
            protocol_name="range",
            assignments=[SyncGroupRequest.Assignments(member_id=member, assignment=b"ASSIGNED")],
        ),
        sv,
    )
    assert (s.error_code, bytes(s.assignment)) == (0, b"ASSIGNED")
    hv = min(version, 4)
    assert (
        client.request(
            HeartbeatRequest(group_id=group, generation_id=1, member_id=member), hv
        ).error_code
        == 0
    )
    assert (
        client.request(
            HeartbeatRequest(group_id=group, generation_id=2, member_id=member), hv
        ).error_code
        == E.ILLEGAL_GENERATION
    )
    lv = min(version, 5)
    if lv >= 3:
        leave = client.request(
            LeaveGroupRequest(
                group_id=group, members=[LeaveGroupRequest.Members(member_id=member)]
            ),
            lv,
        )
        assert (leave.error_code, [(m.member_id, m.error_code) for m in leave.members]) == (
            0,
            [(member, 0)],
        )
    else:
        assert (
            client.request(LeaveGroupRequest(group_id=group, member_id=member), lv).error_code == 0
        )
    d = client.request(DescribeGroupsRequest(groups=[group]), 0)
    assert (d.groups[0].group_state, d.groups[0].members) == ("Empty", [])


@pytest.mark.parametrize("version", range(10))
def test_offset_commit_and_fetch(client: RawClient, version: int) -> None:
    if version < 2 and INTEROP_BROKER == "kafka":
        pytest.skip(
            "Gregor's own behaviour: Kafka 4 removed OffsetCommit v0-1 (KIP-896; README, compatibility)"
        )
    group = gid(f"offsets-v{version}")
    P = OffsetCommitRequest.Topics.Partitions
    req = OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        topics=[
            OffsetCommitRequest.Topics(
                name=TOPIC,
                partitions=[
                    P(
                        partition_index=0,
                        committed_offset=11,
                        committed_leader_epoch=4,
                        committed_metadata="meta",
                        commit_timestamp=-1,
                    ),
                    P(partition_index=9, committed_offset=12, committed_metadata=None),
                ],
            )
        ],
    )
    resp = client.request(req, version)
    # (Kafka lists the refused partition first; the order carries no meaning)
    assert sorted((p.partition_index, p.error_code) for p in resp.topics[0].partitions) == [
        (0, 0),
        (9, E.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    epoch = 4 if version >= 6 else -1
    if version >= 8:
        f = client.request(
            OffsetFetchRequest(
                groups=[
                    OffsetFetchRequest.Groups(
                        group_id=group,
                        topics=[
                            OffsetFetchRequest.Groups.Topics(name=TOPIC, partition_indexes=[0, 1])
                        ],
                    )
                ]
            ),
            version,
        )
        g = f.groups[0]
        got = [
            (
                p.partition_index,
                p.committed_offset,
                p.committed_leader_epoch,
                p.metadata,
                p.error_code,
            )
            for p in g.topics[0].partitions
        ]
        assert (g.group_id, g.error_code) == (group, 0)
    else:
        f = client.request(
            OffsetFetchRequest(
                group_id=group,
                topics=[OffsetFetchRequest.Topics(name=TOPIC, partition_indexes=[0, 1])],
            ),
            version,
        )
        got = [
            (
                p.partition_index,
                p.committed_offset,
                p.committed_leader_epoch,
                p.metadata,
                p.error_code,
            )
            for p in f.topics[0].partitions
        ]
        assert f.error_code == 0
    fetched_epoch = epoch if version >= 5 else -1
    assert got == [(0, 11, fetched_epoch, "meta", 0), (1, -1, -1, "", 0)]


def test_offset_fetch_batched_groups_and_all_topics(client: RawClient) -> None:
    a, b = gid("batch-a"), gid("batch-b")
    for group, off in ((a, 5), (b, 6)):
        client.request(
            OffsetCommitRequest(
                group_id=group,
                generation_id_or_member_epoch=-1,
                topics=[
                    OffsetCommitRequest.Topics(
                        name=TOPIC,
                        partitions=[
                            OffsetCommitRequest.Topics.Partitions(
                                partition_index=2, committed_offset=off
                            )
                        ],
                    )
                ],
            ),
            8,
        )
    f = client.request(
        OffsetFetchRequest(
            require_stable=True,
            groups=[
                OffsetFetchRequest.Groups(group_id=a, topics=None),
                OffsetFetchRequest.Groups(group_id=b, topics=None),
            ],
        ),
        8,
    )
    assert [
        (
            g.group_id,
            [
                (t.name, [(p.partition_index, p.committed_offset) for p in t.partitions])
                for t in g.topics
            ],
        )
        for g in f.groups
    ] == [(a, [(TOPIC, [(2, 5)])]), (b, [(TOPIC, [(2, 6)])])]


@pytest.mark.parametrize("version", range(6))
def test_describe_and_list_groups(client: RawClient, version: int) -> None:
    group = gid(f"describe-v{version}")
    r = _join(client, group, 3)
    assert r.error_code == 0
    client.request(
        SyncGroupRequest(
            group_id=group,
            generation_id=1,
            member_id=r.member_id,
            assignments=[SyncGroupRequest.Assignments(member_id=r.member_id, assignment=b"A")],
        ),
        3,
    )
    d = client.request(
        DescribeGroupsRequest(groups=[group, "no-such-group"], include_authorized_operations=True),
        version,
    )
    # (Kafka may list the missing group first; the order carries no meaning)
    g, missing = sorted(d.groups, key=lambda x: x.group_id != group)
    assert (g.error_code, g.group_state, g.protocol_type, g.protocol_data) == (
        0,
        "Stable",
        "consumer",
        "range",
    )
    assert [
        (m.member_id, m.client_id, bytes(m.member_metadata), bytes(m.member_assignment))
        for m in g.members
    ] == [(r.member_id, "interop-raw", b"\x00\x01", b"A")]
    assert (missing.error_code, missing.group_state) == (0, "Dead")
    listed = client.request(
        ListGroupsRequest(states_filter=["Stable"], types_filter=["classic"]), version
    )
    rows = {x.group_id: (x.protocol_type, x.group_state, x.group_type) for x in listed.groups}
    expected_state = "Stable" if version >= 4 else ""
    expected_type = "classic" if version >= 5 else ""
    assert rows[group] == ("consumer", expected_state, expected_type)


@pytest.mark.parametrize("version", range(3))
def test_delete_groups_and_offset_delete(client: RawClient, version: int) -> None:
    group = gid(f"delete-v{version}")
    client.request(
        OffsetCommitRequest(
            group_id=group,
            generation_id_or_member_epoch=-1,
            topics=[
                OffsetCommitRequest.Topics(
                    name=TOPIC,
                    partitions=[
                        OffsetCommitRequest.Topics.Partitions(partition_index=p, committed_offset=1)
                        for p in (0, 1)
                    ],
                )
            ],
        ),
        8,
    )
    od = client.request(
        OffsetDeleteRequest(
            group_id=group,
            topics=[
                OffsetDeleteRequest.Topics(
                    name=TOPIC,
                    partitions=[OffsetDeleteRequest.Topics.Partitions(partition_index=0)],
                )
            ],
        ),
        0,
    )
    assert (
        od.error_code,
        [(p.partition_index, p.error_code) for p in od.topics[0].partitions],
    ) == (0, [(0, 0)])
    r = client.request(DeleteGroupsRequest(groups_names=[group, group + "-none"]), version)
    # (Kafka lists the missing group first; the order carries no meaning)
    assert sorted((x.group_id, x.error_code) for x in r.results) == [
        (group, 0),
        (group + "-none", E.GROUP_ID_NOT_FOUND),
    ]
    f = client.request(
        OffsetFetchRequest(
            group_id=group, topics=[OffsetFetchRequest.Topics(name=TOPIC, partition_indexes=[1])]
        ),
        7,
    )
    assert f.topics[0].partitions[0].committed_offset == -1


def _cgh(
    client: RawClient, req: ConsumerGroupHeartbeatRequest, version: int
) -> ConsumerGroupHeartbeatResponse:
    return client.request(req, version)


@pytest.mark.parametrize("version", [0, 1])
def test_consumer_group_heartbeat_and_describe(client: RawClient, version: int) -> None:
    group = gid(f"cgh-v{version}")
    member_id = "" if version == 0 else f"member-{uuid.uuid4().hex[:6]}"
    req = ConsumerGroupHeartbeatRequest(
        group_id=group,
        member_id=member_id,
        member_epoch=0,
        rebalance_timeout_ms=30000,
        subscribed_topic_names=[TOPIC],
        topic_partitions=[],
    )
    r = _cgh(client, req, version)
    assert (r.error_code, r.member_epoch) == (0, 1)
    if version == 1:
        assert r.member_id == member_id
    md = client.request(MetadataRequest(topics=[MetadataRequest.Topics(name=TOPIC)]), 12)
    topic_id = md.topics[0].topic_id
    assert [(tp.topic_id, sorted(tp.partitions)) for tp in r.assignment.topic_partitions] == [
        (topic_id, [0, 1, 2, 3])
    ]
    d = client.request(ConsumerGroupDescribeRequest(group_ids=[group]), version)
    g = d.groups[0]
    assert (g.error_code, g.group_state, g.group_epoch, g.assignor_name) == (
        0,
        "Stable",
        1,
        "uniform",
    )
    # member_type is on the wire from v1 (a KIP-848 member: 1); v0 decodes to the default -1.
    assert [m.member_type for m in g.members] == [1 if version == 1 else -1]
    assert [
        (
            m.member_id,
            m.member_epoch,
            [(tp.topic_name, tp.partitions) for tp in m.assignment.topic_partitions],
        )
        for m in g.members
    ] == [(r.member_id, 1, [(TOPIC, [0, 1, 2, 3])])]
    leave = ConsumerGroupHeartbeatRequest(group_id=group, member_id=r.member_id, member_epoch=-1)
    left = _cgh(client, leave, version)
    # Kafka's answer to a leave: the member id echoed, epoch -1, no interval, no assignment.
    assert (
        left.error_code,
        left.member_id,
        left.member_epoch,
        left.heartbeat_interval_ms,
        left.assignment,
    ) == (0, r.member_id, -1, 0, None)
    # The member that left joins again with the same id and epoch 0 (librdkafka does this after
    # unsubscribe + subscribe): a new epoch past the group's and the whole assignment again.
    again = _cgh(
        client,
        ConsumerGroupHeartbeatRequest(
            group_id=group,
            member_id=r.member_id,
            member_epoch=0,
            rebalance_timeout_ms=30000,
            subscribed_topic_names=[TOPIC],
            topic_partitions=[],
        ),
        version,
    )
    assert (again.error_code, again.member_id, again.member_epoch) == (0, r.member_id, 3)
    assert [(tp.topic_id, sorted(tp.partitions)) for tp in again.assignment.topic_partitions] == [
        (topic_id, [0, 1, 2, 3])
    ]
    _cgh(
        client,
        ConsumerGroupHeartbeatRequest(group_id=group, member_id=r.member_id, member_epoch=-1),
        version,
    )


def test_consumer_group_heartbeat_v1_regex(client: RawClient) -> None:
    group = gid("cgh-regex")
    req = ConsumerGroupHeartbeatRequest(
        group_id=group,
        member_id="regex-member",
        member_epoch=0,
        rebalance_timeout_ms=30000,
        subscribed_topic_names=[],
        subscribed_topic_regex="wire-gro.*",
        topic_partitions=[],
    )
    r = _cgh(client, req, 1)
    assert (r.error_code, r.member_epoch) == (0, 1)
    # As in Kafka, a regex new to the group is resolved asynchronously: the matches come
    # with a later heartbeat, in the next group epoch.
    assert r.assignment is not None and r.assignment.topic_partitions == []
    hb = ConsumerGroupHeartbeatRequest(group_id=group, member_id="regex-member", member_epoch=1)
    while r.member_epoch == 1:
        r = _cgh(client, hb, 1)
        assert r.error_code == 0
    assert r.member_epoch == 2
    assert [sorted(tp.partitions) for tp in r.assignment.topic_partitions] == [[0, 1, 2, 3]]
    bad = ConsumerGroupHeartbeatRequest(
        group_id=group + "-bad",
        member_id="x",
        member_epoch=0,
        rebalance_timeout_ms=30000,
        subscribed_topic_names=None,
        subscribed_topic_regex="(",
        topic_partitions=[],
    )
    r = _cgh(client, bad, 1)
    assert r.error_code == E.INVALID_REGULAR_EXPRESSION
    assert r.error_message.startswith(
        "SubscribedTopicRegex `(` is not a valid regular expression: "
    )


@gregor_only(
    "Kafka closes the connections of JoinGroup requests it holds when it stops, unanswered"
)
def test_held_join_is_answered_when_the_broker_stops(broker: BrokerProcess) -> None:
    """A graceful stop answers JoinGroup requests the coordinator holds (NOT_COORDINATOR)
    rather than leaving them hanging until the shutdown timeout."""
    group = gid("stopping")
    with (
        RawClient(broker.bootstrap_servers) as first,
        RawClient(broker.bootstrap_servers) as second,
    ):
        r = _join(first, group, 3)
        first.request(
            SyncGroupRequest(
                group_id=group, generation_id=1, member_id=r.member_id, assignments=[]
            ),
            3,
        )
        req = JoinGroupRequest(
            group_id=group,
            session_timeout_ms=10000,
            rebalance_timeout_ms=60000,
            member_id="",
            protocol_type="consumer",
            protocols=[JoinGroupRequest.Protocols(name="range", metadata=b"")],
        )
        _, data = second.conn.send_request(req, 3)
        second.sock.sendall(data)  # held: the first member has not rejoined
        broker.restart()
        while True:
            chunk = second.sock.recv(1 << 16)
            assert chunk, "the broker closed the connection without answering"
            done = second.conn.receive_data(chunk)
            if done:
                break
        assert done[0].response.error_code == E.NOT_COORDINATOR
