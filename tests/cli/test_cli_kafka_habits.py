"""The commands as someone used to Kafka's tools types them, and the errors that used to lose
their meaning or hang (issue 42), against a real broker (in this process)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer as CkConsumer

from gregor.client import AdminClient, Consumer, NewTopic, Producer, TopicPartition
from gregor.testing import InProcessBroker
from gregor.testing.cli import run_command

pytestmark = pytest.mark.timeout(120)  # a command that hangs fails here instead of waiting forever


@pytest.fixture(scope="module")
def broker() -> Iterator[InProcessBroker]:
    with InProcessBroker(config={"group.min.session.timeout.ms": "1000"}) as b:
        yield b


def gregor(b: InProcessBroker, *args: str, input: str | None = None) -> tuple[int, str, str]:  # noqa: A002
    return run_command(b.bootstrap_servers, *args, input=input)


@pytest.fixture
def topic(broker: InProcessBroker) -> str:
    """A 3-partition topic holding k0:v0..k2:v2 in partition 1 (timestamps 1000, 1001, 1002)."""
    name = f"habits-{uuid.uuid4().hex[:8]}"
    with AdminClient({"bootstrap.servers": broker.bootstrap_servers}) as admin:
        assert admin.create_topics([NewTopic(name, 3, 1)]) == {name: None}
    with Producer({"bootstrap.servers": broker.bootstrap_servers}) as p:
        for i in range(3):
            p.send(name, f"v{i}".encode(), key=f"k{i}".encode(), partition=1, timestamp_ms=1000 + i)
        p.flush()
    return name


# --- errors that lost their meaning ---


def test_describing_a_misspelt_topic_names_it_and_suggests_the_close_ones(
    broker: InProcessBroker, topic: str
) -> None:
    # two neighbouring letters swapped (the last pair that differs: the random suffix may end
    # in a doubled letter, which swapped would give the topic's own name)
    i = max(j for j in range(len(topic) - 1) if topic[j] != topic[j + 1])
    typo = topic[:i] + topic[i + 1] + topic[i] + topic[i + 2 :]
    code, out, err = gregor(broker, "topics", "describe", typo)
    assert (code, out) == (1, "")
    # the closest name first (the module's other topics look alike and may follow)
    assert err.startswith(
        f"Error: topic '{typo}' does not exist (did you mean '{topic}'"
    ) and err.endswith("?)\n")
    code, _, err = gregor(broker, "topics", "describe", "zzzz-nothing-like-it")
    assert (code, err) == (1, "Error: topic 'zzzz-nothing-like-it' does not exist\n")


def test_a_group_that_does_not_exist_is_not_dead_with_exit_0(broker: InProcessBroker) -> None:
    code, out, err = gregor(broker, "groups", "describe", "no-such-group")
    assert (code, out, err) == (1, "", "Error: Consumer group 'no-such-group' does not exist.\n")
    code, out, err = gregor(
        broker, "groups", "describe", "--group", "no-such-group", "--output", "json"
    )
    assert (code, out, err) == (1, "", "Error: Consumer group 'no-such-group' does not exist.\n")


def test_delete_in_json_says_error_when_anything_failed(
    broker: InProcessBroker, topic: str
) -> None:
    code, out, err = gregor(broker, "topics", "delete", topic, "no-such-topic", "--output", "json")
    assert code == 1
    assert json.loads(out) == {
        "result": "error",
        "deleted": [topic],
        "errors": {"no-such-topic": "topic 'no-such-topic' does not exist"},
    }
    assert err == "Error: topic 'no-such-topic' does not exist\n"
    code, out, err = gregor(broker, "groups", "delete", "no-such-group", "--output", "json")
    assert code == 1 and json.loads(out)["result"] == "error"
    assert err == "Error: Consumer group 'no-such-group' does not exist.\n"


def test_reset_offsets_of_a_group_with_members_says_it_must_be_inactive(
    broker: InProcessBroker, topic: str
) -> None:
    group = f"active-{uuid.uuid4().hex[:6]}"
    member = CkConsumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
        }
    )
    try:
        member.subscribe([topic])
        while not member.assignment():  # joined and assigned: the group is Stable
            member.poll(0.2)
        code, out, err = gregor(
            broker, "groups", "reset-offsets", group, "-t", topic, "--to-earliest", "--execute"
        )
        assert (code, out) == (1, "")
        assert err == (
            f"Error: Assignments can only be reset if the group '{group}' is inactive, but the current "
            "state is Stable.\n"
        )
        # a dry run still shows the plan, with a warning
        code, out, err = gregor(
            broker, "groups", "reset-offsets", group, "-t", f"{topic}:1", "--to-latest"
        )
        assert code == 0 and out.splitlines() == ["TOPIC\tPARTITION\tNEW-OFFSET", f"{topic}\t1\t3"]
        assert "is inactive, but the current state is Stable" in err and "Dry run" in err
    finally:
        member.close()
    # once the member has left, the same command works
    code, _, err = gregor(
        broker,
        "groups",
        "reset-offsets",
        "--group",
        group,
        "--topic",
        f"{topic}:1",
        "--to-offset",
        "2",
        "--execute",
    )
    assert code == 0, err
    code, out, _ = gregor(broker, "groups", "describe", group)
    assert [ln.split("\t")[:4] for ln in out.splitlines()[2:]] == [[topic, "1", "2", "3"]]


# --- commands that hung ---


def test_consume_from_a_partition_the_topic_lacks_fails_at_once(
    broker: InProcessBroker, topic: str
) -> None:
    code, out, err = gregor(broker, "consume", topic, "-p", "7", "--timeout-ms", "1000")
    assert (code, out, err) == (
        1,
        "",
        f"Error: topic '{topic}' has no partition 7 (it has 3: 0-2)\n",
    )


def test_an_offset_without_a_partition_is_refused_as_kafkas_tool_refuses_it(
    broker: InProcessBroker, topic: str
) -> None:
    code, out, err = gregor(broker, "consume", topic, "-o", "1")
    assert code == 2 and out == ""
    assert err.startswith("Error: an --offset number needs --partition")


def test_an_offset_outside_the_log_is_refused(broker: InProcessBroker, topic: str) -> None:
    code, _, err = gregor(broker, "consume", topic, "-p", "1", "-o", "9")
    assert (code, err) == (
        1,
        f"Error: offset 9 is outside {topic}-1, whose log holds offsets 0 to 2; give 0 to 3, "
        "beginning or end\n",
    )
    code, _, err = gregor(broker, "consume", topic, "-p", "0", "-o", "1")
    assert (code, err) == (
        1,
        f"Error: offset 1 is outside {topic}-0, whose log is empty (next offset 0); give 0 to 0, "
        "beginning or end\n",
    )


def test_consuming_a_topic_that_does_not_exist_fails_at_once(
    broker: InProcessBroker, topic: str
) -> None:
    code, _, err = gregor(broker, "consume", topic + "x", "--timeout-ms", "1000")
    assert code == 1 and err.startswith(
        f"Error: topic '{topic}x' does not exist (did you mean '{topic}'"
    )


def test_timeout_ends_a_consumer_that_reads_nothing(broker: InProcessBroker, topic: str) -> None:
    code, out, err = gregor(broker, "consume", topic, "-p", "2", "--timeout-ms", "300")
    assert (code, out, err) == (0, "", "Processed 0 records.\n")


def test_poll_returns_within_its_timeout_when_a_partition_has_no_leader(
    broker: InProcessBroker, topic: str
) -> None:
    # the consumer's offset look-up for a partition nobody leads used to take
    # default.api.timeout.ms (60 s) inside one poll(300) and then raise
    with Consumer(
        {"bootstrap.servers": broker.bootstrap_servers, "default.api.timeout.ms": 3_600_000}
    ) as c:
        c.assign([TopicPartition(topic, 7)])
        assert c.poll(300) == []
        assert c.poll(0) == []


# --- Kafka's habits ---


def test_topic_as_option_or_argument_everywhere(broker: InProcessBroker) -> None:
    name = f"habits-{uuid.uuid4().hex[:8]}"
    assert gregor(broker, "topics", "create", "--topic", name, "-p", "2")[:2] == (
        0,
        f"Created topic {name}.\n",
    )
    assert gregor(broker, "topics", "alter", "-t", name, "-p", "3")[:2] == (
        0,
        f"Topic {name} now has 3 partitions.\n",
    )
    code, out, _ = gregor(broker, "topics", "describe", "--topic", name)
    assert code == 0 and "PartitionCount: 3" in out.splitlines()[0]
    assert gregor(broker, "produce", "--topic", name, "-p", "0", input="a\nb\n")[0] == 0
    assert gregor(broker, "produce", "-t", name, "-p", "0", input="c\n")[0] == 0
    code, out, _ = gregor(
        broker, "consume", "--topic", name, "-p", "0", "-o", "beginning", "-n", "3"
    )
    assert (code, out) == (0, "a\nb\nc\n")
    assert gregor(broker, "offsets", name, "--partitions", "0")[:2] == (0, f"{name}:0:3\n")
    assert gregor(broker, "offsets", "--topic", name, "--partitions", "0")[:2] == (
        0,
        f"{name}:0:3\n",
    )
    code, out, err = gregor(
        broker,
        "perf",
        "produce",
        name,
        "--num-records",
        "5",
        "--record-size",
        "10",
        "--throughput",
        "-1",
        "--output",
        "json",
    )
    assert code == 0 and json.loads(out)["records"] == 5, err
    code, out, err = gregor(
        broker, "perf", "consume", "--topic", name, "--messages", "8", "--output", "json"
    )
    assert code == 0 and json.loads(out)["data.consumed.in.nMsg"] == 8, err
    group = f"g-{uuid.uuid4().hex[:6]}"
    code, out, _ = gregor(
        broker, "groups", "reset-offsets", group, f"{name}:0", "--to-offset", "1", "--execute"
    )
    assert code == 0 and out.splitlines()[1:] == [f"{name}\t0\t1"]
    code, out, _ = gregor(
        broker,
        "groups",
        "reset-offsets",
        "--group",
        group,
        "--topic",
        f"{name}:0",
        "--shift-by",
        "1",
        "--execute",
    )
    assert code == 0 and out.splitlines()[1:] == [f"{name}\t0\t2"]
    assert gregor(broker, "topics", "delete", "--topic", name)[:2] == (
        0,
        f"Deleted topic {name}.\n",
    )
    code, _, err = gregor(broker, "topics", "create", name, "--topic", "other")
    assert code == 2 and err.startswith("Error: name one topic, not 2")


def test_offset_beginning_and_end(broker: InProcessBroker, topic: str) -> None:
    code, out, _ = gregor(broker, "consume", topic, "-o", "beginning", "-n", "3")  # every partition
    assert (code, out) == (0, "v0\nv1\nv2\n")
    code, out, _ = gregor(broker, "consume", topic, "-p", "1", "-o", "earliest", "-n", "1")
    assert (code, out) == (0, "v0\n")
    code, out, _ = gregor(broker, "consume", topic, "-p", "1", "-o", "end", "--timeout-ms", "300")
    assert (code, out) == (0, "")
    code, out, _ = gregor(broker, "consume", topic, "-p", "1", "-o", "2", "-n", "1")
    assert (code, out) == (0, "v2\n")


def test_consumer_properties_as_kafka_console_consumer_means_them(
    broker: InProcessBroker, topic: str
) -> None:
    code, out, _ = gregor(
        broker,
        "consume",
        topic,
        "--from-beginning",
        "-n",
        "2",
        "--property",
        "print.key=true",
        "--property",
        "print.timestamp=true",
        "--property",
        "key.separator=:",
    )
    assert (code, out) == (0, "CreateTime:1000:k0:v0\nCreateTime:1001:k1:v1\n")
    code, out, _ = gregor(
        broker,
        "consume",
        topic,
        "-p",
        "1",
        "-o",
        "2",
        "-n",
        "1",
        "--property",
        "print.partition=true",
        "--property",
        "print.offset=true",
        "--property",
        "print.value=false",
        "--property",
        "print.headers=true",
    )
    assert (code, out) == (0, "Partition:1\tOffset:2\tNO_HEADERS\n")
    code, _, err = gregor(broker, "consume", topic, "--property", "print.keys=true")
    assert code == 2 and "'print.keys' is not a formatter property" in err


def test_producer_properties_as_kafka_console_producer_means_them(
    broker: InProcessBroker, topic: str
) -> None:
    code, _, err = gregor(
        broker,
        "produce",
        topic,
        "-p",
        "2",
        "--property",
        "parse.key=true",
        "--property",
        "key.separator=:",
        input="a:1\nb:2:3\n",
    )
    assert (code, err) == (0, f"Produced 2 records to {topic}.\n")
    code, _, _ = gregor(
        broker, "produce", topic, "-p", "2", "--property", "parse.key=true", input="c\t4\n"
    )
    assert code == 0
    code, out, _ = gregor(
        broker, "consume", topic, "-p", "2", "-o", "beginning", "-n", "3", "--print-key"
    )
    assert (code, out) == (0, "a\t1\nb\t2:3\nc\t4\n")
    code, _, err = gregor(
        broker, "produce", topic, "--property", "parse.key=true", input="no-separator\n"
    )
    assert code == 1 and err == "Error: line 1: no key separator '\\t'\n"
    code, _, err = gregor(
        broker, "produce", topic, "--property", "compression.type=lz4", input="x\n"
    )
    assert code == 2 and "client settings go to -X / --producer-property" in err
