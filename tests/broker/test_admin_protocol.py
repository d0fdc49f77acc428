"""Admin APIs at every version the broker advertises, over a raw socket.

The real clients (test_admin_topics.py, test_admin_configs.py, test_admin_cluster.py) each speak
one version per API; these tests send each API at each version with the project's codecs and
check the exact fields that version carries, plus the corner cases clients never send
(duplicate names, a name together with an id, a cursor outside the topic list).
"""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from gregor.broker.config.topic_configs import TOPIC_CONFIGS
from gregor.protocol.connection import ClientConnection
from gregor.protocol.messages.alter_configs import AlterConfigsRequest
from gregor.protocol.messages.api_versions import ApiVersionsRequest
from gregor.protocol.messages.create_partitions import CreatePartitionsRequest
from gregor.protocol.messages.create_topics import CreateTopicsRequest
from gregor.protocol.messages.delete_records import DeleteRecordsRequest
from gregor.protocol.messages.delete_topics import DeleteTopicsRequest
from gregor.protocol.messages.describe_cluster import DescribeClusterRequest
from gregor.protocol.messages.describe_configs import DescribeConfigsRequest
from gregor.protocol.messages.describe_log_dirs import DescribeLogDirsRequest
from gregor.protocol.messages.describe_topic_partitions import DescribeTopicPartitionsRequest
from gregor.protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from gregor.protocol.messages.metadata import MetadataRequest
from gregor.testing import InProcessBroker

pytestmark = pytest.mark.timeout(120)

ZERO = uuid.UUID(int=0)
CT = CreateTopicsRequest.Topics
DC = DescribeConfigsRequest.Resources


@pytest.fixture(scope="module")
def broker() -> Iterator[InProcessBroker]:
    with InProcessBroker({"num.partitions": "3", "log.retention.minutes": "30"}) as b:
        yield b


def roundtrip(broker: InProcessBroker, request: Any, version: int) -> Any:
    """Send one request on a fresh connection and return the decoded response."""
    conn = ClientConnection(client_id="admin-protocol-test")
    with socket.create_connection((broker.host, broker.port), timeout=10) as sock:
        _, data = conn.send_request(request, version)
        sock.sendall(data)
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                raise AssertionError("broker closed the connection")
            responses = conn.receive_data(chunk)
            if responses:
                return responses[0].response


def create(broker: InProcessBroker, name: str, partitions: int = 1, **configs: str) -> uuid.UUID:
    resp = roundtrip(
        broker,
        CreateTopicsRequest(
            topics=[
                CT(
                    name=name,
                    num_partitions=partitions,
                    replication_factor=1,
                    assignments=[],
                    configs=[
                        CT.Configs(name=k.replace("_", "."), value=v) for k, v in configs.items()
                    ],
                )
            ],
            timeout_ms=5000,
            validate_only=False,
        ),
        7,
    )
    (t,) = resp.topics
    assert t.error_code == 0, t.error_message
    return t.topic_id


def metadata_topic_id(broker: InProcessBroker, name: str) -> uuid.UUID | None:
    resp = roundtrip(
        broker,
        MetadataRequest(
            topics=[MetadataRequest.Topics(name=name, topic_id=ZERO)],
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        ),
        12,
    )
    (t,) = resp.topics
    return t.topic_id if t.error_code == 0 else None


def test_api_versions_advertises_admin_apis(broker: InProcessBroker) -> None:
    resp = roundtrip(
        broker, ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3
    )
    ranges = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert {key: ranges.get(key) for key in (19, 20, 21, 32, 33, 35, 37, 44, 60, 75)} == {
        19: (0, 7),
        20: (0, 6),
        21: (0, 2),
        32: (0, 4),
        33: (0, 2),
        35: (0, 4),
        37: (0, 3),
        44: (0, 1),
        60: (0, 1),
        75: (0, 0),
    }


# --- CreateTopics ---


@pytest.mark.parametrize("version", range(8))
def test_create_topics_every_version(broker: InProcessBroker, version: int) -> None:
    name = f"ct-v{version}"
    resp = roundtrip(
        broker,
        CreateTopicsRequest(
            topics=[
                CT(
                    name=name,
                    num_partitions=2,
                    replication_factor=1,
                    assignments=[],
                    configs=[CT.Configs(name="retention.ms", value="1000")],
                )
            ],
            timeout_ms=5000,
            validate_only=False,
        ),
        version,
    )
    (t,) = resp.topics
    assert (t.name, t.error_code) == (name, 0)
    if version >= 1:
        assert t.error_message is None
    if version >= 5:
        assert (t.num_partitions, t.replication_factor) == (2, 1)
        configs = {
            c.name: (c.value, c.config_source, c.read_only, c.is_sensitive) for c in t.configs
        }
        assert configs["retention.ms"] == ("1000", 1, False, False)
        assert configs["segment.ms"] == ("604800000", 5, False, False)
    else:
        assert t.configs == []
    if version >= 7:
        assert t.topic_id != ZERO
        assert t.topic_id == metadata_topic_id(broker, name)
    else:
        assert t.topic_id == ZERO


@pytest.mark.parametrize("version", range(8))
def test_create_topics_broker_defaults_from_v4(broker: InProcessBroker, version: int) -> None:
    name = f"ct-defaults-v{version}"
    resp = roundtrip(
        broker,
        CreateTopicsRequest(
            topics=[
                CT(name=name, num_partitions=-1, replication_factor=-1, assignments=[], configs=[])
            ],
            timeout_ms=5000,
            validate_only=False,
        ),
        version,
    )
    (t,) = resp.topics
    if version >= 4:
        assert t.error_code == 0
        assert metadata_topic_id(broker, name) is not None
        if version >= 5:
            assert (t.num_partitions, t.replication_factor) == (3, 1)  # num.partitions=3
    else:
        assert t.error_code == 37  # INVALID_PARTITIONS: -1 is not a count before v4
        assert metadata_topic_id(broker, name) is None


def test_create_topics_duplicate_names(broker: InProcessBroker) -> None:
    resp = roundtrip(
        broker,
        CreateTopicsRequest(
            topics=[
                CT(name="dup", num_partitions=1, replication_factor=1, assignments=[], configs=[]),
                CT(
                    name="single",
                    num_partitions=1,
                    replication_factor=1,
                    assignments=[],
                    configs=[],
                ),
                CT(name="dup", num_partitions=2, replication_factor=1, assignments=[], configs=[]),
            ],
            timeout_ms=5000,
            validate_only=False,
        ),
        7,
    )
    assert [(t.name, t.error_code) for t in resp.topics] == [("dup", 42), ("single", 0)]
    assert metadata_topic_id(broker, "dup") is None
    assert metadata_topic_id(broker, "single") is not None


def test_create_topics_validate_only_reports_configs(broker: InProcessBroker) -> None:
    resp = roundtrip(
        broker,
        CreateTopicsRequest(
            topics=[
                CT(
                    name="ct-dry",
                    num_partitions=-1,
                    replication_factor=-1,
                    assignments=[],
                    configs=[CT.Configs(name="cleanup.policy", value="compact")],
                )
            ],
            timeout_ms=5000,
            validate_only=True,
        ),
        7,
    )
    (t,) = resp.topics
    assert (t.error_code, t.topic_id, t.num_partitions, t.replication_factor) == (0, ZERO, 3, 1)
    configs = {c.name: (c.value, c.config_source) for c in t.configs}
    assert configs["cleanup.policy"] == ("compact", 1)
    assert configs["retention.ms"] == ("1800000", 4)  # log.retention.minutes=30
    assert metadata_topic_id(broker, "ct-dry") is None


# --- DeleteTopics ---


@pytest.mark.parametrize("version", range(7))
def test_delete_topics_every_version(broker: InProcessBroker, version: int) -> None:
    name = f"dt-v{version}"
    topic_id = create(broker, name)
    if version >= 6:
        req = DeleteTopicsRequest(
            topics=[
                DeleteTopicsRequest.Topics(name=name, topic_id=ZERO),
                DeleteTopicsRequest.Topics(name="dt-missing", topic_id=ZERO),
            ],
            timeout_ms=5000,
        )
    else:
        req = DeleteTopicsRequest(topic_names=[name, "dt-missing"], timeout_ms=5000)
    resp = roundtrip(broker, req, version)
    got = [(r.name, r.error_code) for r in resp.responses]
    assert got == [(name, 0), ("dt-missing", 3)]
    if version >= 5:
        assert resp.responses[0].error_message is None
        assert resp.responses[1].error_message == "This server does not host this topic."
    if version >= 6:
        assert resp.responses[0].topic_id == topic_id
    assert metadata_topic_id(broker, name) is None


def test_delete_topics_by_id_and_bad_combinations(broker: InProcessBroker) -> None:
    topic_id = create(broker, "dt-id")
    keep_id = create(broker, "dt-keep")
    unknown = uuid.uuid4()
    T = DeleteTopicsRequest.Topics
    resp = roundtrip(
        broker,
        DeleteTopicsRequest(
            topics=[
                T(name=None, topic_id=topic_id),
                T(name=None, topic_id=unknown),
                T(name="dt-keep", topic_id=keep_id),  # both name and id: refused
                T(name="dt-twice", topic_id=ZERO),
                T(name="dt-twice", topic_id=ZERO),
            ],
            timeout_ms=5000,
        ),
        6,
    )
    got = [(r.name, r.topic_id, r.error_code) for r in resp.responses]
    assert got == [
        ("dt-id", topic_id, 0),
        (None, unknown, 100),  # UNKNOWN_TOPIC_ID
        ("dt-keep", keep_id, 42),
        ("dt-twice", ZERO, 42),
    ]
    assert metadata_topic_id(broker, "dt-id") is None
    assert metadata_topic_id(broker, "dt-keep") == keep_id


# --- CreatePartitions ---


@pytest.mark.parametrize("version", range(4))
def test_create_partitions_every_version(broker: InProcessBroker, version: int) -> None:
    name = f"cp-v{version}"
    create(broker, name, 1)
    T = CreatePartitionsRequest.Topics
    resp = roundtrip(
        broker,
        CreatePartitionsRequest(
            topics=[
                T(name=name, count=3, assignments=None),
                T(name="cp-missing", count=3, assignments=None),
            ],
            timeout_ms=5000,
            validate_only=False,
        ),
        version,
    )
    got = [(r.name, r.error_code, r.error_message) for r in resp.results]
    assert got == [(name, 0, None), ("cp-missing", 3, "Topic 'cp-missing' does not exist.")]
    md = roundtrip(
        broker,
        MetadataRequest(
            topics=[MetadataRequest.Topics(name=name, topic_id=ZERO)],
            allow_auto_topic_creation=False,
        ),
        12,
    )
    assert [p.partition_index for p in md.topics[0].partitions] == [0, 1, 2]


def test_create_partitions_duplicates_and_bad_assignment(broker: InProcessBroker) -> None:
    create(broker, "cp-x", 1)
    T = CreatePartitionsRequest.Topics
    A = CreatePartitionsRequest.Topics.Assignments
    resp = roundtrip(
        broker,
        CreatePartitionsRequest(
            topics=[
                T(name="cp-x", count=2, assignments=None),
                T(name="cp-x", count=3, assignments=None),
            ],
            timeout_ms=5000,
            validate_only=False,
        ),
        3,
    )
    assert [(r.name, r.error_code) for r in resp.results] == [("cp-x", 42)]
    resp = roundtrip(
        broker,
        CreatePartitionsRequest(
            topics=[
                T(name="cp-x", count=3, assignments=[A(broker_ids=[1])])
            ],  # one list for two new
            timeout_ms=5000,
            validate_only=False,
        ),
        3,
    )
    assert [(r.name, r.error_code) for r in resp.results] == [("cp-x", 39)]


# --- DescribeConfigs ---


@pytest.mark.parametrize("version", range(5))
def test_describe_configs_every_version(broker: InProcessBroker, version: int) -> None:
    name = f"dc-v{version}"
    create(broker, name, retention_ms="4000")
    resp = roundtrip(
        broker,
        DescribeConfigsRequest(
            resources=[
                DC(
                    resource_type=2,
                    resource_name=name,
                    configuration_keys=["retention.ms", "segment.ms"],
                )
            ],
            include_synonyms=True,
            include_documentation=True,
        ),
        version,
    )
    (result,) = resp.results
    assert (result.error_code, result.resource_type, result.resource_name) == (0, 2, name)
    configs = {c.name: c for c in result.configs}
    assert sorted(configs) == ["retention.ms", "segment.ms"]
    retention, segment = configs["retention.ms"], configs["segment.ms"]
    assert (retention.value, segment.value) == ("4000", "604800000")
    if version == 0:
        assert (retention.is_default, segment.is_default) == (False, True)
    else:
        assert (retention.config_source, segment.config_source) == (1, 5)
        assert [(s.name, s.value, s.source) for s in retention.synonyms] == [
            ("retention.ms", "4000", 1),
            ("log.retention.minutes", "30", 4),
            ("log.retention.hours", "168", 5),
        ]
    if version >= 3:
        assert (retention.config_type, segment.config_type) == (5, 5)  # LONG
        assert retention.documentation and "kept" in retention.documentation


def test_describe_configs_without_synonyms_or_documentation(broker: InProcessBroker) -> None:
    create(broker, "dc-plain")
    resp = roundtrip(
        broker,
        DescribeConfigsRequest(
            resources=[DC(resource_type=2, resource_name="dc-plain", configuration_keys=None)],
            include_synonyms=False,
            include_documentation=False,
        ),
        4,
    )
    (result,) = resp.results
    assert [c.name for c in result.configs] == sorted(d.name for d in TOPIC_CONFIGS)
    assert all(c.synonyms == [] and c.documentation is None for c in result.configs)


def test_describe_configs_resources(broker: InProcessBroker) -> None:
    resp = roundtrip(
        broker,
        DescribeConfigsRequest(
            resources=[
                DC(
                    resource_type=4,
                    resource_name="1",
                    configuration_keys=["log.retention.minutes", "node.id"],
                ),
                DC(resource_type=4, resource_name="", configuration_keys=None),
                DC(resource_type=4, resource_name="2", configuration_keys=None),
                DC(resource_type=4, resource_name="one", configuration_keys=None),
                DC(resource_type=8, resource_name="1", configuration_keys=["root"]),
                DC(resource_type=2, resource_name="bad name", configuration_keys=None),
                DC(resource_type=2, resource_name="dc-ghost", configuration_keys=None),
                DC(resource_type=99, resource_name="x", configuration_keys=None),
            ],
            include_synonyms=True,
            include_documentation=False,
        ),
        4,
    )
    r = resp.results
    assert [(x.resource_type, x.resource_name, x.error_code) for x in r] == [
        (4, "1", 0),
        (4, "", 0),
        (4, "2", 42),
        (4, "one", 42),
        (8, "1", 0),
        (2, "bad name", 17),
        (2, "dc-ghost", 3),
        (99, "x", 42),
    ]
    broker_configs = {
        c.name: (c.value, c.config_source, c.read_only, c.config_type) for c in r[0].configs
    }
    assert broker_configs == {
        "log.retention.minutes": ("30", 4, True, 3),
        "node.id": ("1", 5, True, 3),
    }
    assert [(s.name, s.value, s.source) for s in r[0].configs[0].synonyms] == [
        ("log.retention.minutes", "30", 4)
    ]
    assert r[1].configs == []  # no dynamic cluster-wide defaults
    assert r[2].error_message == "Unexpected broker id, expected 1 or empty string, but received 2"
    assert [(c.name, c.value, c.config_source) for c in r[4].configs] == [("root", "INFO", 6)]


# --- AlterConfigs / IncrementalAlterConfigs ---


def _topic_value(broker: InProcessBroker, name: str, key: str) -> tuple[str | None, int]:
    resp = roundtrip(
        broker,
        DescribeConfigsRequest(
            resources=[DC(resource_type=2, resource_name=name, configuration_keys=[key])],
            include_synonyms=False,
            include_documentation=False,
        ),
        4,
    )
    (c,) = resp.results[0].configs
    return c.value, c.config_source


@pytest.mark.parametrize("version", range(3))
def test_alter_configs_every_version(broker: InProcessBroker, version: int) -> None:
    name = f"ac-v{version}"
    create(broker, name, retention_ms="1000")
    R = AlterConfigsRequest.Resources
    resp = roundtrip(
        broker,
        AlterConfigsRequest(
            resources=[
                R(
                    resource_type=2,
                    resource_name=name,
                    configs=[R.Configs(name="segment.ms", value="60000")],
                )
            ],
            validate_only=False,
        ),
        version,
    )
    assert [(x.resource_name, x.error_code, x.error_message) for x in resp.responses] == [
        (name, 0, None)
    ]
    assert _topic_value(broker, name, "segment.ms") == ("60000", 1)
    assert _topic_value(broker, name, "retention.ms") == ("1800000", 4)  # replaced: override gone


def test_alter_configs_duplicates(broker: InProcessBroker) -> None:
    create(broker, "ac-dup")
    R = AlterConfigsRequest.Resources
    resp = roundtrip(
        broker,
        AlterConfigsRequest(
            resources=[
                R(
                    resource_type=2,
                    resource_name="ac-dup",
                    configs=[
                        R.Configs(name="segment.ms", value="1"),
                        R.Configs(name="segment.ms", value="2"),
                    ],
                ),
            ],
            validate_only=False,
        ),
        2,
    )
    assert [(x.error_code, x.error_message) for x in resp.responses] == [
        (42, "Error due to duplicate config keys: segment.ms")
    ]
    resp = roundtrip(
        broker,
        AlterConfigsRequest(
            resources=[
                R(
                    resource_type=2,
                    resource_name="ac-dup",
                    configs=[R.Configs(name="segment.ms", value="1")],
                ),
                R(
                    resource_type=2,
                    resource_name="ac-dup",
                    configs=[R.Configs(name="segment.ms", value="2")],
                ),
            ],
            validate_only=False,
        ),
        2,
    )
    assert [x.error_code for x in resp.responses] == [42, 42]
    assert _topic_value(broker, "ac-dup", "segment.ms") == ("604800000", 5)


@pytest.mark.parametrize("version", range(2))
def test_incremental_alter_configs_every_version(broker: InProcessBroker, version: int) -> None:
    name = f"iac-v{version}"
    create(broker, name, retention_ms="1000")
    R = IncrementalAlterConfigsRequest.Resources
    C = R.Configs
    resp = roundtrip(
        broker,
        IncrementalAlterConfigsRequest(
            resources=[
                R(
                    resource_type=2,
                    resource_name=name,
                    configs=[
                        C(name="segment.ms", config_operation=0, value="60000"),
                        C(name="retention.ms", config_operation=1, value=None),
                        C(name="cleanup.policy", config_operation=2, value="compact"),
                    ],
                )
            ],
            validate_only=False,
        ),
        version,
    )
    assert [(x.resource_name, x.error_code) for x in resp.responses] == [(name, 0)]
    assert _topic_value(broker, name, "segment.ms") == ("60000", 1)
    assert _topic_value(broker, name, "retention.ms") == ("1800000", 4)
    assert _topic_value(broker, name, "cleanup.policy") == ("delete,compact", 1)


def test_incremental_alter_configs_bad_requests(broker: InProcessBroker) -> None:
    create(broker, "iac-bad")
    R = IncrementalAlterConfigsRequest.Resources
    C = R.Configs
    resp = roundtrip(
        broker,
        IncrementalAlterConfigsRequest(
            resources=[
                R(
                    resource_type=2,
                    resource_name="iac-bad",
                    configs=[C(name="segment.ms", config_operation=7, value="1")],
                ),
                R(
                    resource_type=2,
                    resource_name="iac-bad",
                    configs=[C(name="segment.ms", config_operation=0, value=None)],
                ),
                R(
                    resource_type=8,
                    resource_name="1",
                    configs=[C(name="root", config_operation=0, value="DEBUG")],
                ),
            ],
            validate_only=False,
        ),
        1,
    )
    # The topic appears twice, so both of its entries are refused before anything else.
    assert [(x.resource_type, x.error_code) for x in resp.responses] == [(2, 42), (2, 42), (8, 42)]
    assert resp.responses[2].error_message == "dynamic broker logger configs are not supported"
    resp = roundtrip(
        broker,
        IncrementalAlterConfigsRequest(
            resources=[
                R(
                    resource_type=2,
                    resource_name="iac-bad",
                    configs=[C(name="segment.ms", config_operation=7, value="1")],
                )
            ],
            validate_only=False,
        ),
        1,
    )
    assert [(x.error_code, x.error_message) for x in resp.responses] == [
        (42, "Unknown config operation 7 for segment.ms")
    ]


# --- DeleteRecords ---


@pytest.mark.parametrize("version", range(3))
def test_delete_records_every_version(broker: InProcessBroker, version: int) -> None:
    from confluent_kafka import Producer

    name = f"dr-v{version}"
    create(broker, name, 1)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    for i in range(6):
        producer.produce(name, f"{i}".encode(), partition=0)
    assert producer.flush(10) == 0
    T = DeleteRecordsRequest.Topics
    P = T.Partitions
    resp = roundtrip(
        broker,
        DeleteRecordsRequest(
            topics=[
                T(
                    name=name,
                    partitions=[P(partition_index=0, offset=2), P(partition_index=5, offset=0)],
                ),
                T(name="dr-missing", partitions=[P(partition_index=0, offset=0)]),
            ],
            timeout_ms=5000,
        ),
        version,
    )
    got = [
        (t.name, [(p.partition_index, p.low_watermark, p.error_code) for p in t.partitions])
        for t in resp.topics
    ]
    assert got == [(name, [(0, 2, 0), (5, -1, 3)]), ("dr-missing", [(0, -1, 3)])]
    resp = roundtrip(
        broker,
        DeleteRecordsRequest(
            topics=[T(name=name, partitions=[P(partition_index=0, offset=7)])],
            timeout_ms=5000,
        ),
        version,
    )
    assert [(p.low_watermark, p.error_code) for p in resp.topics[0].partitions] == [(-1, 1)]
    resp = roundtrip(
        broker,
        DeleteRecordsRequest(
            topics=[T(name=name, partitions=[P(partition_index=0, offset=-1)])],
            timeout_ms=5000,
        ),
        version,
    )
    assert [(p.low_watermark, p.error_code) for p in resp.topics[0].partitions] == [(6, 0)]


# --- DescribeCluster ---


@pytest.mark.parametrize("version", range(2))
def test_describe_cluster_every_version(broker: InProcessBroker, version: int) -> None:
    resp = roundtrip(
        broker,
        DescribeClusterRequest(include_cluster_authorized_operations=False, endpoint_type=1),
        version,
    )
    assert (resp.error_code, resp.controller_id) == (0, 1)
    assert [(b.broker_id, b.host, b.port, b.rack) for b in resp.brokers] == [
        (1, "127.0.0.1", broker.port, None)
    ]
    assert resp.cluster_authorized_operations == -(1 << 31)
    md = roundtrip(broker, MetadataRequest(topics=[], allow_auto_topic_creation=False), 12)
    assert resp.cluster_id == md.cluster_id and resp.cluster_id
    if version >= 1:
        assert resp.endpoint_type == 1


def test_describe_cluster_controller_endpoints_unsupported(broker: InProcessBroker) -> None:
    resp = roundtrip(
        broker,
        DescribeClusterRequest(include_cluster_authorized_operations=True, endpoint_type=2),
        1,
    )
    assert (resp.error_code, resp.endpoint_type, resp.brokers) == (
        115,
        2,
        [],
    )  # UNSUPPORTED_ENDPOINT_TYPE


# --- DescribeLogDirs ---


@pytest.mark.parametrize("version", range(5))
def test_describe_log_dirs_every_version(broker: InProcessBroker, version: int) -> None:
    name = f"ld-v{version}"
    create(broker, name, 2)
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    producer.produce(name, b"x" * 100, partition=1)
    assert producer.flush(10) == 0
    T = DescribeLogDirsRequest.Topics
    resp = roundtrip(
        broker, DescribeLogDirsRequest(topics=[T(topic=name, partitions=[1, 0, 9])]), version
    )
    (result,) = resp.results
    assert result.error_code == 0
    assert result.log_dir == str(broker.data_dir / "logs")
    (topic,) = result.topics
    assert topic.name == name
    parts = [(p.partition_index, p.offset_lag, p.is_future_key) for p in topic.partitions]
    assert parts == [(0, 0, False), (1, 0, False)]
    sizes = {p.partition_index: p.partition_size for p in topic.partitions}
    assert sizes[0] == 0
    assert (
        sizes[1]
        == (broker.data_dir / "logs" / f"{name}-1" / "00000000000000000000.log").stat().st_size
        > 100
    )
    if version >= 4:
        assert result.total_bytes > 0 and 0 <= result.usable_bytes <= result.total_bytes
    # A null topic list means every partition.
    everything = roundtrip(broker, DescribeLogDirsRequest(topics=None), version)
    in_dirs = {
        (t.name, p.partition_index) for t in everything.results[0].topics for p in t.partitions
    }
    md = roundtrip(broker, MetadataRequest(topics=None, allow_auto_topic_creation=False), 12)
    assert in_dirs == {(t.name, p.partition_index) for t in md.topics for p in t.partitions}


# --- DescribeTopicPartitions ---


def test_describe_topic_partitions_paging(broker: InProcessBroker) -> None:
    ids = {
        "dtp-a": create(broker, "dtp-a", 3),
        "dtp-b": create(broker, "dtp-b", 1),
        "dtp-c": create(broker, "dtp-c", 4),
    }
    T = DescribeTopicPartitionsRequest.Topics
    C = DescribeTopicPartitionsRequest.Cursor
    wanted = [T(name=n) for n in ("dtp-c", "dtp-a", "dtp-missing", "dtp-b")]
    pages = []
    cursor = None
    for _ in range(10):
        resp = roundtrip(
            broker,
            DescribeTopicPartitionsRequest(
                topics=wanted,
                response_partition_limit=3,
                cursor=cursor,
            ),
            0,
        )
        pages.append(
            [(t.name, t.error_code, [p.partition_index for p in t.partitions]) for t in resp.topics]
        )
        if resp.next_cursor is None:
            break
        cursor = C(
            topic_name=resp.next_cursor.topic_name, partition_index=resp.next_cursor.partition_index
        )
    assert pages == [
        [("dtp-a", 0, [0, 1, 2])],
        [("dtp-b", 0, [0]), ("dtp-c", 0, [0, 1])],
        [("dtp-c", 0, [2, 3]), ("dtp-missing", 3, [])],
    ]
    resp = roundtrip(
        broker,
        DescribeTopicPartitionsRequest(
            topics=[T(name="dtp-a")], response_partition_limit=10, cursor=None
        ),
        0,
    )
    (a,) = resp.topics
    assert (a.topic_id, a.is_internal, resp.next_cursor) == (ids["dtp-a"], False, None)
    assert [(p.leader_id, p.leader_epoch, p.replica_nodes, p.isr_nodes) for p in a.partitions] == [
        (1, 0, [1], [1])
    ] * 3
    assert a.topic_authorized_operations == sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))
    # A cursor naming a topic that is not in the list is refused.
    resp = roundtrip(
        broker,
        DescribeTopicPartitionsRequest(
            topics=[T(name="dtp-a")],
            response_partition_limit=10,
            cursor=C(topic_name="dtp-b", partition_index=0),
        ),
        0,
    )
    assert [(t.name, t.error_code) for t in resp.topics] == [("dtp-b", 42)]


def test_describe_topic_partitions_all_topics(broker: InProcessBroker) -> None:
    create(broker, "dtp-all", 2)
    resp = roundtrip(
        broker,
        DescribeTopicPartitionsRequest(topics=[], response_partition_limit=2000, cursor=None),
        0,
    )
    names = [t.name for t in resp.topics]
    assert names == sorted(names)
    assert "dtp-all" in names
    assert all(t.error_code == 0 for t in resp.topics)
