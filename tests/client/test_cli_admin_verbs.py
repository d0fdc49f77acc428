"""``gregor configs``, ``gregor offsets`` and ``gregor log-dirs`` against a real broker, their
effects read back with confluent-kafka (configs, SCRAM credentials, watermarks) and kafka-python
(log directories)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient as CkAdmin
from confluent_kafka.admin import ConfigResource, NewTopic

from gregor.testing import BrokerProcess
from gregor.testing.cli import run_command

pytestmark = pytest.mark.interop


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    with BrokerProcess(config={"num.partitions": 1}) as b:
        yield b


def gregor(b: BrokerProcess, *args: str) -> tuple[int, str, str]:
    return run_command(b.bootstrap_servers, *args)


def make_topic(b: BrokerProcess, partitions: int) -> str:
    name = f"verbs-{uuid.uuid4().hex[:8]}"
    admin = CkAdmin({"bootstrap.servers": b.bootstrap_servers})  # kept until its future is done
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    return name


def test_configs_alter_and_describe_a_topic(broker: BrokerProcess) -> None:
    topic = make_topic(broker, 1)
    code, out, _ = gregor(
        broker,
        "configs",
        "alter",
        "--entity-type",
        "topics",
        "--entity-name",
        topic,
        "--add-config",
        "retention.ms=3600000,cleanup.policy=[compact,delete]",
    )
    assert (code, out) == (0, f"Completed updating config for topic {topic}.\n")
    ck = CkAdmin({"bootstrap.servers": broker.bootstrap_servers})
    entries = next(
        iter(ck.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)]).values())
    ).result(30)
    assert entries["retention.ms"].value == "3600000"
    assert entries["cleanup.policy"].value == "compact,delete"

    code, out, _ = gregor(
        broker, "configs", "describe", "--entity-type", "topics", "--entity-name", topic
    )
    lines = out.splitlines()
    assert code == 0 and lines[0] == f"Dynamic configs for topic {topic} are:"
    assert sorted(ln.split()[0] for ln in lines[1:]) == [
        "cleanup.policy=compact,delete",
        "retention.ms=3600000",
    ]
    code, out, _ = gregor(
        broker,
        "configs",
        "describe",
        "--entity-type",
        "topics",
        "--entity-name",
        topic,
        "--all",
        "--output",
        "json",
    )
    [doc] = json.loads(out)
    by_name = {c["name"]: c for c in doc["configs"]}
    assert by_name["retention.ms"]["source"] == "DYNAMIC_TOPIC_CONFIG"
    assert by_name["segment.bytes"]["source"] in ("DEFAULT_CONFIG", "STATIC_BROKER_CONFIG")

    assert (
        gregor(
            broker,
            "configs",
            "alter",
            "--entity-type",
            "topics",
            "--entity-name",
            topic,
            "--delete-config",
            "retention.ms",
        )[0]
        == 0
    )
    entries = next(
        iter(ck.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)]).values())
    ).result(30)
    assert entries["retention.ms"].source != ConfigResource.Type.TOPIC  # back to its default
    code, out, _ = gregor(
        broker, "configs", "describe", "--entity-type", "topics", "--entity-name", topic
    )
    assert [ln.split()[0] for ln in out.splitlines()[1:]] == ["cleanup.policy=compact,delete"]

    # Kafka's refusals come back as one line and exit 1
    code, _, err = gregor(
        broker,
        "configs",
        "alter",
        "--entity-type",
        "topics",
        "--entity-name",
        topic,
        "--add-config",
        "retention.ms=soon",
    )
    assert code == 1 and err.count("\n") == 1 and "INVALID_CONFIG" in err


def test_configs_for_brokers_clients_and_users(broker: BrokerProcess) -> None:
    code, out, _ = gregor(
        broker,
        "configs",
        "alter",
        "--entity-type",
        "brokers",
        "--entity-default",
        "--add-config",
        "log.retention.ms=86400000",
    )
    assert (code, out) == (0, "Completed updating default config for brokers in the cluster.\n")
    code, out, _ = gregor(
        broker, "configs", "describe", "--entity-type", "brokers", "--entity-default"
    )
    assert out.splitlines()[0] == "Default configs for brokers in the cluster are:"
    assert any(ln.startswith("  log.retention.ms=86400000 ") for ln in out.splitlines())
    assert (
        gregor(
            broker,
            "configs",
            "alter",
            "--entity-type",
            "brokers",
            "--entity-default",
            "--delete-config",
            "log.retention.ms",
        )[0]
        == 0
    )

    app = f"app-{uuid.uuid4().hex[:6]}"
    assert (
        gregor(
            broker,
            "configs",
            "alter",
            "--entity-type",
            "clients",
            "--entity-name",
            app,
            "--add-config",
            "producer_byte_rate=1048576",
        )[0]
        == 0
    )
    code, out, _ = gregor(
        broker, "configs", "describe", "--entity-type", "clients", "--entity-name", app
    )
    assert out == f"Configs for client-id '{app}' are producer_byte_rate=1048576.0\n"

    user = f"carol-{uuid.uuid4().hex[:6]}"
    assert (
        gregor(
            broker,
            "configs",
            "alter",
            "--entity-type",
            "users",
            "--entity-name",
            user,
            "--add-config",
            "SCRAM-SHA-512=[iterations=8192,password=pw],consumer_byte_rate=2048",
        )[0]
        == 0
    )
    ck = CkAdmin({"bootstrap.servers": broker.bootstrap_servers})
    info = ck.describe_user_scram_credentials([user])[user].result(30)
    assert [(c.mechanism.name, c.iterations) for c in info.scram_credential_infos] == [
        ("SCRAM_SHA_512", 8192)
    ]
    code, out, _ = gregor(
        broker,
        "configs",
        "describe",
        "--entity-type",
        "users",
        "--entity-name",
        user,
        "--output",
        "json",
    )
    assert json.loads(out) == [
        {
            "entity_type": "users",
            "entity_name": user,
            "configs": {"SCRAM-SHA-512": "iterations=8192", "consumer_byte_rate": 2048.0},
        }
    ]
    # bad input: usage errors (exit 2)
    assert (
        gregor(broker, "configs", "alter", "--entity-type", "topics", "--entity-name", "x")[0] == 2
    )
    assert (
        gregor(broker, "configs", "describe", "--entity-type", "brokers", "--entity-name", "one")[0]
        == 2
    )
    assert gregor(broker, "configs", "describe", "--entity-type", "nonsense")[0] == 2
    assert (
        gregor(
            broker,
            "configs",
            "alter",
            "--entity-type",
            "clients",
            "--entity-default",
            "--add-config",
            "SCRAM-SHA-256=[password=x]",
        )[0]
        == 2
    )


def test_offsets_at_the_end_the_start_and_a_time(broker: BrokerProcess) -> None:
    topic = make_topic(broker, 2)
    p = Producer({"bootstrap.servers": broker.bootstrap_servers})
    base = int(time.time() * 1000) - 100_000
    for i in range(8):
        p.produce(topic, b"%d" % i, partition=0 if i < 5 else 1, timestamp=base + i * 1000)
    assert p.flush(30) == 0
    code, out, _ = gregor(broker, "offsets", "--topic", topic)
    assert (code, out) == (0, f"{topic}:0:5\n{topic}:1:3\n")
    c = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "unused"})
    try:
        assert c.get_watermark_offsets(CkTopicPartition(topic, 0), 30) == (0, 5)
    finally:
        c.close()
    assert (
        gregor(broker, "offsets", "--topic", topic, "--time", "-2")[1]
        == f"{topic}:0:0\n{topic}:1:0\n"
    )
    # the first offset at or after a time; a partition with none is left out
    code, out, _ = gregor(
        broker, "offsets", "--topic-partitions", f"{topic}:0-1", "--time", str(base + 3000)
    )
    assert out == f"{topic}:0:3\n{topic}:1:0\n"
    code, out, _ = gregor(
        broker, "offsets", "--topic-partitions", topic, "--time", str(base + 6000)
    )
    assert out == f"{topic}:1:1\n"  # partition 0's last record is older
    code, out, _ = gregor(
        broker, "offsets", "--topic", topic, "--partitions", "1", "--output", "json"
    )
    assert json.loads(out) == [{"topic": topic, "partition": 1, "offset": 3}]
    # bad input
    assert gregor(broker, "offsets", "--topic", topic, "--time", "yesterday")[0] == 2
    assert gregor(broker, "offsets", "--partitions", "0")[0] == 2
    code, _, err = gregor(broker, "offsets", "--topic", topic, "--partitions", "9")
    assert code == 1 and "no partition 9" in err


def test_log_dirs_describe(broker: BrokerProcess) -> None:
    topic = make_topic(broker, 2)
    p = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i in range(10):
        p.produce(topic, b"x" * 100, partition=i % 2)
    assert p.flush(30) == 0
    code, out, _ = gregor(broker, "log-dirs", "describe", "--topic-list", topic)
    assert code == 0
    doc = json.loads(out)
    [b] = doc["brokers"]
    [d] = b["logDirs"]
    assert d["error"] is None and d["totalBytes"] > 0
    sizes = {x["partition"]: x["size"] for x in d["partitions"]}
    assert set(sizes) == {f"{topic}-0", f"{topic}-1"} and all(s > 500 for s in sizes.values())
    # kafka-python's own DescribeLogDirs sees the same sizes
    from kafka.admin import KafkaAdminClient

    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        resp = kp.describe_log_dirs()
    finally:
        kp.close()
    text = repr(resp)
    assert all(str(s) in text for s in sizes.values())


def test_groups_reset_offsets_by_datetime_duration_and_all_topics(broker: BrokerProcess) -> None:
    topic = make_topic(broker, 1)
    group = f"reset-{uuid.uuid4().hex[:6]}"
    p = Producer({"bootstrap.servers": broker.bootstrap_servers})
    now = int(time.time() * 1000)
    stamps = [
        now - 3 * 3600_000,
        now - 2 * 3600_000,
        now - 1800_000,
        now - 60_000,
    ]  # 3 h, 2 h, 30 min, 1 min ago
    for i, ts in enumerate(stamps):
        p.produce(topic, b"%d" % i, partition=0, timestamp=ts)
    assert p.flush(30) == 0
    c = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": group,
            "enable.auto.commit": False,
        }
    )
    try:
        c.commit(offsets=[CkTopicPartition(topic, 0, 4)], asynchronous=False)
    finally:
        c.close()
    # 90 minutes back: the record of 30 minutes ago, offset 2
    code, out, err = gregor(
        broker, "groups", "reset-offsets", group, "-t", topic, "--by-duration", "PT1H30M"
    )
    assert (code, out.splitlines()[1:]) == (0, [f"{topic}\t0\t2"]) and "Dry run" in err
    iso = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime((stamps[1] - 1000) / 1000)) + ".000"
    code, out, _ = gregor(
        broker,
        "groups",
        "reset-offsets",
        group,
        "--all-topics",
        "--to-datetime",
        iso,
        "--execute",
        "--output",
        "json",
    )
    assert code == 0 and json.loads(out) == [
        {"group": group, "topic": topic, "partition": 0, "new_offset": 1}
    ]
    c = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group})
    try:
        [committed] = c.committed([CkTopicPartition(topic, 0)], timeout=30)
        assert committed.offset == 1
    finally:
        c.close()
    # bad input: usage errors, exit 2
    assert (
        gregor(broker, "groups", "reset-offsets", group, "-t", topic, "--by-duration", "an hour")[0]
        == 2
    )
    assert (
        gregor(broker, "groups", "reset-offsets", group, "-t", topic, "--to-datetime", "yesterday")[
            0
        ]
        == 2
    )
    assert gregor(broker, "groups", "reset-offsets", group, "--to-earliest")[0] == 2


def test_json_output_of_topics_and_groups(broker: BrokerProcess) -> None:
    topic = make_topic(broker, 2)
    group = f"json-{uuid.uuid4().hex[:6]}"
    c = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": group,
            "enable.auto.commit": False,
        }
    )
    try:
        p = Producer({"bootstrap.servers": broker.bootstrap_servers})
        for i in range(3):
            p.produce(topic, b"%d" % i, partition=1)
        assert p.flush(30) == 0
        c.commit(offsets=[CkTopicPartition(topic, 1, 1)], asynchronous=False)
    finally:
        c.close()
    code, out, _ = gregor(broker, "topics", "list", "--output", "json")
    assert code == 0 and topic in json.loads(out)
    code, out, _ = gregor(broker, "topics", "describe", topic, "--output", "json")
    [doc] = json.loads(out)
    assert [p["partition"] for p in doc["partitions"]] == [0, 1] and doc["partitions"][0][
        "replicas"
    ] == [1]
    code, out, _ = gregor(broker, "groups", "list", "--output", "json")
    assert any(g["group"] == group for g in json.loads(out))
    code, out, _ = gregor(broker, "groups", "describe", group, "--output", "json")
    doc = json.loads(out)
    assert doc["group"] == group and doc["partitions"] == [
        {
            "topic": topic,
            "partition": 1,
            "current_offset": 1,
            "log_end_offset": 3,
            "lag": 2,
            "consumer_id": None,
            "host": None,
            "client_id": None,
        }
    ]


def test_actions_report_in_json(broker: BrokerProcess) -> None:
    name = f"json-act-{uuid.uuid4().hex[:6]}"
    code, out, _ = gregor(broker, "topics", "create", name, "-p", "1", "--output", "json")
    assert (code, json.loads(out)) == (0, {"result": "ok", "topic": name, "created": True})
    code, out, _ = gregor(
        broker, "topics", "alter", name, "-p", "2", "-c", "retention.ms=1000", "--output", "json"
    )
    assert json.loads(out) == {
        "result": "ok",
        "topic": name,
        "partitions": 2,
        "configs": {"retention.ms": "1000"},
        "deleted_configs": [],
    }
    ck = CkAdmin({"bootstrap.servers": broker.bootstrap_servers})
    assert len(ck.list_topics(timeout=30).topics[name].partitions) == 2
    app = f"json-app-{uuid.uuid4().hex[:6]}"
    code, out, _ = gregor(
        broker,
        "quotas",
        "alter",
        "--client-id",
        app,
        "--add-config",
        "producer_byte_rate=4096",
        "--output",
        "json",
    )
    assert json.loads(out) == {
        "result": "ok",
        "entity": [{"type": "client-id", "name": app}],
        "quotas": {"producer_byte_rate": 4096.0},
    }
    code, out, _ = gregor(broker, "topics", "delete", name, "--output", "json")
    assert (code, json.loads(out)) == (0, {"result": "ok", "deleted": [name]})
    assert name not in ck.list_topics(timeout=30).topics
