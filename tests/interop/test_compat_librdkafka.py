"""Issue 12, broker side: what librdkafka's own regression suite found, with confluent-kafka.

Each test is the client-visible outcome of one broker bug: offset reset and topic deletion
reaching the consumer (Fetch error partitions carry an empty record set, not null), KIP-467
per-record produce errors, a transactional batch without a transactional id, and KIP-430
authorized operations.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from confluent_kafka import KafkaError, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import AclOperation, AdminClient
from interop_clients import ck_consumer
from interop_helpers import RawClient, create_topic, topic_name

from gregor.protocol.errors import ErrorCode
from gregor.protocol.messages.fetch import FetchRequest
from gregor.protocol.messages.metadata import MetadataRequest
from gregor.protocol.messages.produce import ProduceRequest
from gregor.protocol.records.batch import build_batch

TOPIC_OPERATIONS = {
    AclOperation.READ,
    AclOperation.WRITE,
    AclOperation.CREATE,
    AclOperation.DELETE,
    AclOperation.ALTER,
    AclOperation.DESCRIBE,
    AclOperation.DESCRIBE_CONFIGS,
    AclOperation.ALTER_CONFIGS,
}
CLUSTER_OPERATIONS = {
    AclOperation.CREATE,
    AclOperation.ALTER,
    AclOperation.DESCRIBE,
    AclOperation.CLUSTER_ACTION,
    AclOperation.DESCRIBE_CONFIGS,
    AclOperation.ALTER_CONFIGS,
    AclOperation.IDEMPOTENT_WRITE,
}


def _produce_values(bootstrap: str, topic: str, values: list[bytes], partition: int = 0) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for v in values:
        p.produce(topic, value=v, partition=partition)
    assert p.flush(30) == 0


# --- Fetch: error partitions carry an empty record set ---


def test_out_of_range_offset_is_reset_and_the_records_read(broker) -> None:  # noqa: ANN001
    """0034_offset_reset: a fetch at an offset past the log end gets OFFSET_OUT_OF_RANGE;
    the client must be able to parse that answer to reset to the earliest offset."""
    topic = topic_name("reset")
    create_topic(broker.bootstrap_servers, topic, 1)
    values = [b"r%d" % i for i in range(10)]
    _produce_values(broker.bootstrap_servers, topic, values)
    c = ck_consumer(broker.bootstrap_servers, **{"auto.offset.reset": "earliest"})
    try:
        c.assign([TopicPartition(topic, 0, 1000)])
        got: list[tuple[int, bytes]] = []
        while len(got) < len(values):
            msg = c.poll(1.0)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            got.append((msg.offset(), msg.value()))
        assert got == list(enumerate(values))
    finally:
        c.close()


# The consumer side of test_consuming_a_deleted_topic_reports_the_error, run in a child process:
# librdkafka can hang for ever in close() after its subscribed topic was deleted (librdkafka
# issue #4362, a leaked partition reference), so the child prints its result first and the
# test then ends the child whatever close() does.
_DELETED_TOPIC_CHILD = """
import json, sys
from confluent_kafka import Consumer, KafkaError
from confluent_kafka.admin import AdminClient
bootstrap, topic = sys.argv[1], sys.argv[2]
c = Consumer({"bootstrap.servers": bootstrap, "group.id": topic, "enable.auto.commit": False,
              "auto.offset.reset": "earliest", "topic.metadata.refresh.interval.ms": 1000})
c.subscribe([topic])
got = []
while len(got) < 2:
    msg = c.poll(1.0)
    if msg is not None and msg.error() is None:
        got.append(msg.value().decode())
admin = AdminClient({"bootstrap.servers": bootstrap})
admin.delete_topics([topic])[topic].result()
error = None
while error is None:
    msg = c.poll(1.0)
    if msg is not None and msg.error() is not None and msg.error().code() != KafkaError._PARTITION_EOF:
        error = msg.error()
print(json.dumps({"got": got, "code": error.code(), "str": error.str()}), flush=True)
c.close()
"""


def test_consuming_a_deleted_topic_reports_the_error(broker) -> None:  # noqa: ANN001
    """Once the topic is deleted the consumer's fetches fail (with an empty record set it can
    parse); librdkafka reports a subscribed topic that vanished at its next metadata refresh
    (set short here) instead of refetching in a loop."""
    topic = topic_name("gone")
    create_topic(broker.bootstrap_servers, topic, 1)
    _produce_values(broker.bootstrap_servers, topic, [b"a", b"b"])
    child = subprocess.Popen(
        [sys.executable, "-c", _DELETED_TOPIC_CHILD, broker.bootstrap_servers, topic],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
    finally:
        child.kill()
        child.wait()
    result = json.loads(line)
    assert (result["got"], result["code"]) == (["a", "b"], KafkaError.UNKNOWN_TOPIC_OR_PART)
    assert topic in result["str"]


@pytest.mark.parametrize("version", [4, 11, 12, 16])
def test_fetch_error_partition_has_an_empty_record_set(broker, version: int) -> None:  # noqa: ANN001
    """On the wire: OFFSET_OUT_OF_RANGE and an unknown partition answer records of length 0,
    never null (-1), in the classic (v4, v11) and flexible (v12+) encodings."""
    topic = topic_name("wire")
    create_topic(broker.bootstrap_servers, topic, 1)
    _produce_values(broker.bootstrap_servers, topic, [b"x"])
    with RawClient(broker.bootstrap_servers) as c:
        md = c.request(MetadataRequest(topics=[MetadataRequest.Topics(name=topic)]), 12)
        topic_id = md.topics[0].topic_id

        def part(index: int, offset: int) -> FetchRequest.Topics.Partitions:
            return FetchRequest.Topics.Partitions(
                partition=index,
                fetch_offset=offset,
                partition_max_bytes=1 << 20,
                current_leader_epoch=-1,
                log_start_offset=-1,
            )

        req = FetchRequest(
            replica_id=-1,
            max_wait_ms=0,
            min_bytes=0,
            max_bytes=1 << 20,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=[
                FetchRequest.Topics(
                    topic=topic, topic_id=topic_id, partitions=[part(0, 1000), part(7, 0)]
                )
            ],
            forgotten_topics_data=[],
            rack_id="",
        )
        resp = c.request(req, version)
    parts = {p.partition_index: p for p in resp.responses[0].partitions}
    out_of_range, unknown = parts[0], parts[7]
    assert out_of_range.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    # A known topic's partition that does not exist is UNKNOWN_TOPIC_OR_PARTITION at every
    # version, as Kafka answers it (UNKNOWN_TOPIC_ID, from v13, is for a topic id it does not
    # know: tests/broker/handlers/test_fetch_sessions.py).
    assert unknown.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    for p in (out_of_range, unknown):
        assert p.records is not None and bytes(p.records) == b""


# --- Produce: KIP-467 record errors, transactional batches ---


def _produce_mixed_keys(bootstrap: str, topic: str, **conf: object) -> dict[str, int]:
    """0011_produce_batch's record-fail case: 100 records, every tenth without a key."""
    outcome: dict[str, int] = {}

    def report(err: KafkaError | None, _msg: object) -> None:
        name = "ok" if err is None else err.name()
        outcome[name] = outcome.get(name, 0) + 1

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 500, **conf})
    for i in range(100):
        value = b"record #%d" % i
        p.produce(
            topic, value=value, key=None if i % 10 == 0 else value, partition=0, on_delivery=report
        )
    assert p.flush(30) == 0
    return outcome


def test_keyless_records_in_a_compacted_batch_are_named(broker) -> None:  # noqa: ANN001
    topic = topic_name("compact-batch")
    create_topic(broker.bootstrap_servers, topic, 1, {"cleanup.policy": "compact"})
    outcome = _produce_mixed_keys(broker.bootstrap_servers, topic)
    # One batch: the ten keyless records fail with INVALID_RECORD, the others as innocent
    # bystanders of the refused batch.
    assert outcome == {"INVALID_RECORD": 10, "_INVALID_DIFFERENT_RECORD": 90}


def test_keyless_records_one_per_batch_fail_alone(broker) -> None:  # noqa: ANN001
    topic = topic_name("compact-single")
    create_topic(broker.bootstrap_servers, topic, 1, {"cleanup.policy": "compact"})
    outcome = _produce_mixed_keys(broker.bootstrap_servers, topic, **{"batch.size": 1})
    assert outcome == {"INVALID_RECORD": 10, "ok": 90}


def test_transactional_batch_without_transactional_id_is_refused(broker) -> None:  # noqa: ANN001
    topic = topic_name("txn-no-id")
    create_topic(broker.bootstrap_servers, topic, 1)
    batch = build_batch(
        [(1, b"k", b"v")], producer_id=5, producer_epoch=0, base_sequence=0, is_transactional=True
    )
    req = ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=10_000,
        topic_data=[
            ProduceRequest.TopicData(
                name=topic,
                partition_data=[ProduceRequest.TopicData.PartitionData(index=0, records=batch)],
            )
        ],
    )
    with RawClient(broker.bootstrap_servers) as c:
        resp = c.request(req, 9)
    part = resp.responses[0].partition_responses[0]
    assert (part.error_code, part.base_offset) == (
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        -1,
    )
    # Nothing was written.
    c2 = ck_consumer(broker.bootstrap_servers)
    try:
        low, high = c2.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        assert (low, high) == (0, 0)
    finally:
        c2.close()


# --- KIP-430 authorized operations ---


def test_describe_topics_with_authorized_operations(broker) -> None:  # noqa: ANN001
    topic = topic_name("ops")
    create_topic(broker.bootstrap_servers, topic, 2)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    desc = admin.describe_topics(TopicCollection([topic]), include_authorized_operations=True)[
        topic
    ].result()
    assert (desc.name, len(desc.partitions)) == (topic, 2)
    assert set(desc.authorized_operations) == TOPIC_OPERATIONS
    plain = admin.describe_topics(TopicCollection([topic]))[topic].result()
    assert plain.authorized_operations is None


def test_describe_cluster_with_authorized_operations(broker) -> None:  # noqa: ANN001
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    desc = admin.describe_cluster(include_authorized_operations=True).result()
    assert [n.id for n in desc.nodes] == [1]
    assert set(desc.authorized_operations) == CLUSTER_OPERATIONS
    assert admin.describe_cluster().result().authorized_operations is None
