"""Share groups (KIP-932) with a real share consumer: librdkafka's, through confluent-kafka's
``ShareConsumer``, against a broker process. Each record goes to one member at a time;
RELEASE redelivers it with a higher delivery count, REJECT never; records a killed consumer
held come back to another (its connection closed); a record whose lock expires comes back; the
delivery count limit archives a record;
acknowledged state and delivery counts survive a broker restart."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer

from gregor.client import AdminClient
from gregor.testing import BrokerProcess

pytestmark = [pytest.mark.interop, pytest.mark.timeout(240)]

SHARE_CONFIG = {
    "num.partitions": 1,
    # Locks last the default 30 s, so a slow machine does not see them expire between polls;
    # the lock-expiry test gives its group 1 s (a group config, which may go down to this).
    "group.share.min.record.lock.duration.ms": 1000,
    "group.share.delivery.count.limit": 3,
}


@pytest.fixture
def broker() -> Iterator[BrokerProcess]:
    with BrokerProcess(config=SHARE_CONFIG) as b:
        yield b


def new_group(b: BrokerProcess, lock_ms: int | None = None) -> str:
    """A share group that starts at the earliest offset (with ``lock_ms`` record locks)."""
    group = f"sg-{uuid.uuid4().hex[:8]}"
    configs = [("share.auto.offset.reset", 0, "earliest")]
    if lock_ms is not None:
        configs.append(("share.record.lock.duration.ms", 0, str(lock_ms)))
    with AdminClient({"bootstrap.servers": b.bootstrap_servers}) as admin:
        assert admin.incremental_alter_configs({("group", group): configs}) == {(32, group): None}
    return group


def produce(b: BrokerProcess, topic: str, values: list[bytes]) -> None:
    p = Producer({"bootstrap.servers": b.bootstrap_servers})
    for v in values:
        p.produce(topic, v)
    assert p.flush(30) == 0


def consumer(b: BrokerProcess, group: str, topic: str, explicit: bool = False) -> ShareConsumer:
    c = ShareConsumer(
        {
            "bootstrap.servers": b.bootstrap_servers,
            "group.id": group,
            "share.acknowledgement.mode": "explicit" if explicit else "implicit",
        }
    )
    c.subscribe([topic])
    return c


def values(n: int, prefix: str = "v") -> list[bytes]:
    return [f"{prefix}-{i:04d}".encode() for i in range(n)]


def test_members_sharing_a_partition_get_each_record_once(broker: BrokerProcess) -> None:
    topic, group = f"t-{uuid.uuid4().hex[:6]}", new_group(broker)
    expected = values(300)
    produce(broker, topic, expected)
    members = [consumer(broker, group, topic) for _ in range(3)]
    seen: list[bytes] = []
    try:
        while len(seen) < len(expected):
            for c in members:
                seen.extend(m.value() for m in c.poll(0.5) if m.error() is None)
        for c in members:
            c.commit_sync(30)  # the last poll's records are accepted
    finally:
        for c in members:
            c.close()
    assert sorted(seen) == expected  # every record, none twice


def test_release_redelivers_reject_does_not(broker: BrokerProcess) -> None:
    topic, group = f"t-{uuid.uuid4().hex[:6]}", new_group(broker)
    expected = values(20)
    produce(broker, topic, expected)
    c = consumer(broker, group, topic, explicit=True)
    first: dict[bytes, int] = {}
    again: dict[bytes, int] = {}
    try:
        while len(first) < 20:
            for m in c.poll(0.5):
                if m.error() is not None:
                    continue
                first[m.value()] = m.delivery_count()
                index = int(m.value().split(b"-")[1])
                c.acknowledge(
                    m, AcknowledgeType.RELEASE if index % 2 == 0 else AcknowledgeType.REJECT
                )
            c.commit_sync(30)
        while len(again) < 10:
            for m in c.poll(0.5):
                if m.error() is None:
                    again[m.value()] = m.delivery_count()
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
            c.commit_sync(30)
        produce(broker, topic, [b"sentinel"])  # delivered after anything still available
        while b"sentinel" not in again:
            for m in c.poll(0.5):
                if m.error() is None:
                    again[m.value()] = m.delivery_count()
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
            c.commit_sync(30)
    finally:
        c.close()
    assert first == dict.fromkeys(expected, 1)
    assert again == {
        **{v: 2 for v in expected[0::2]},
        b"sentinel": 1,
    }  # the rejected never came back


def test_records_of_a_killed_consumer_go_to_another(broker: BrokerProcess) -> None:
    # 30 s locks: the records come back because the killed process's connection closed, which
    # ends its share session on the leader (the lock expiry is the fallback; see the next test).
    topic, group = f"t-{uuid.uuid4().hex[:6]}", new_group(broker)
    expected = values(30)
    produce(broker, topic, expected)
    script = textwrap.dedent(f"""
        from confluent_kafka import ShareConsumer
        c = ShareConsumer({{"bootstrap.servers": "{broker.bootstrap_servers}", "group.id": "{group}",
                           "share.acknowledgement.mode": "explicit"}})
        c.subscribe(["{topic}"])
        while True:
            got = [m for m in c.poll(0.5) if m.error() is None]
            if got:
                print(len(got), flush=True)
                break
        import time
        while True:
            time.sleep(60)  # holds its records, unacknowledged, until killed
    """)
    holder = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None
        held = int(holder.stdout.readline())
        assert held > 0
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
        c = consumer(broker, group, topic, explicit=True)
        got: dict[bytes, int] = {}
        try:
            while len(got) < len(expected):
                for m in c.poll(0.5):
                    if m.error() is None:
                        got[m.value()] = m.delivery_count()
                        c.acknowledge(m, AcknowledgeType.ACCEPT)
                c.commit_sync(30)
        finally:
            c.close()
    finally:
        if holder.poll() is None:
            holder.kill()
    assert sorted(got) == expected
    assert sorted(got.values()).count(2) == held  # the killed consumer's records: second delivery


def test_the_delivery_limit_archives_a_record(broker: BrokerProcess) -> None:
    topic, group = f"t-{uuid.uuid4().hex[:6]}", new_group(broker)
    produce(broker, topic, [b"poison"])
    c = consumer(broker, group, topic, explicit=True)
    counts: list[int] = []
    try:
        while len(counts) < 3:  # group.share.delivery.count.limit = 3
            for m in c.poll(0.5):
                if m.error() is None:
                    counts.append(m.delivery_count())
                    c.acknowledge(m, AcknowledgeType.RELEASE)
            c.commit_sync(30)
        produce(broker, topic, [b"after"])
        later: list[bytes] = []
        while b"after" not in later:
            for m in c.poll(0.5):
                if m.error() is None:
                    later.append(m.value())
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
            c.commit_sync(30)
    finally:
        c.close()
    assert counts == [1, 2, 3]
    assert later == [b"after"]  # archived after its third delivery


def test_acknowledged_state_survives_a_broker_restart(broker: BrokerProcess) -> None:
    topic, group = f"t-{uuid.uuid4().hex[:6]}", new_group(broker)
    expected = values(40)
    produce(broker, topic, expected)
    c = consumer(broker, group, topic, explicit=True)
    seen = 0
    try:
        while seen < 40:
            for m in c.poll(0.5):
                if m.error() is None:
                    seen += 1
                    keep = int(m.value().split(b"-")[1]) < 25
                    c.acknowledge(m, AcknowledgeType.ACCEPT if keep else AcknowledgeType.RELEASE)
            c.commit_sync(30)
    finally:
        c.close()
    broker.stop()
    broker.start()
    c = consumer(broker, group, topic, explicit=True)
    got: dict[bytes, int] = {}
    try:
        while len(got) < 15:
            for m in c.poll(0.5):
                if m.error() is None:
                    got[m.value()] = m.delivery_count()
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
            c.commit_sync(30)
    finally:
        c.close()
    assert got == {v: 2 for v in expected[25:]}  # acknowledged stayed done; counts were kept


def test_gregor_share_consumer_beside_librdkafkas_and_the_share_groups_command(
    broker: BrokerProcess,
) -> None:
    """Gregor's own ``ShareConsumer`` and librdkafka's in one share group: each record to one of
    them, once; ``gregor share-groups`` lists and describes the group while both are in it."""
    import json

    from gregor.client import ShareConsumer as GregorShareConsumer
    from gregor.testing.cli import run_command

    topic, group = f"t-{uuid.uuid4().hex[:6]}", new_group(broker)
    expected = values(120)
    produce(broker, topic, expected)
    ours = GregorShareConsumer(
        {"bootstrap.servers": broker.bootstrap_servers, "group.id": group, "client.id": "ours"}
    )
    ours.subscribe([topic])
    theirs = consumer(broker, group, topic)
    seen: list[bytes] = []
    try:
        while len(seen) < len(expected):
            seen.extend(r.value for r in ours.poll(0.5))
            seen.extend(m.value() for m in theirs.poll(0.5) if m.error() is None)
        ours.commit_sync()
        theirs.commit_sync(30)
        code, out, _ = run_command(
            broker.bootstrap_servers, "share-groups", "list", "--output", "json"
        )
        assert code == 0 and {"group": group, "state": "Stable"} in json.loads(out)
        code, out, _ = run_command(
            broker.bootstrap_servers, "share-groups", "describe", group, "--output", "json"
        )
        doc = json.loads(out)
        assert code == 0 and doc["group"] == group and doc["state"] == "Stable"
        assert sorted(m["client_id"] for m in doc["members"]) == sorted(["ours", "rdkafka"])
        assert all(
            m["assignment"] == [f"{topic}:0"] for m in doc["members"]
        )  # one partition, shared
    finally:
        ours.close()
        theirs.close()
    assert sorted(seen) == expected  # every record once, whichever member got it
    code, _, err = run_command(
        broker.bootstrap_servers, "share-groups", "describe", "no-such-group"
    )
    assert code == 1 and "GROUP_ID_NOT_FOUND" in err


def test_gregor_share_consumer_release_and_accept(broker: BrokerProcess) -> None:
    """Gregor's ``ShareConsumer`` alone, explicit mode over two partitions: each record released
    once comes back with delivery count 2 and is then accepted; nothing comes a third time."""
    from gregor.client import ShareConsumer as GregorShareConsumer
    from gregor.client.consumer.share_consumer import ACCEPT, RELEASE

    topic, group = f"t-{uuid.uuid4().hex[:6]}", new_group(broker)
    with AdminClient({"bootstrap.servers": broker.bootstrap_servers}) as admin:
        from gregor.client import NewTopic

        admin.create_topics([NewTopic(topic, 2, 1)])
    expected = values(40)
    p = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i, v in enumerate(expected):
        p.produce(topic, v, partition=i % 2)
    assert p.flush(30) == 0
    c = GregorShareConsumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": group,
            "share.acknowledgement.mode": "explicit",
        }
    )
    c.subscribe([topic])
    counts: dict[bytes, list[int]] = {}
    try:
        while len(counts) < 40 or any(len(v) < 2 for v in counts.values()):
            for r in c.poll(0.5):
                counts.setdefault(r.value, []).append(r.delivery_count)
                c.acknowledge(r, RELEASE if r.delivery_count == 1 else ACCEPT)
            assert all(err is None for err in c.commit_sync().values())
        produce(broker, topic, [b"sentinel"])
        tail: list[bytes] = []
        while b"sentinel" not in tail:
            for r in c.poll(0.5):
                tail.append(r.value)
                c.acknowledge(r, ACCEPT)
            c.commit_sync()
    finally:
        c.close()
    assert counts == {v: [1, 2] for v in expected}
    assert tail == [b"sentinel"]


def test_share_group_offsets_commands(broker: BrokerProcess) -> None:
    """``gregor share-groups offsets|reset-offsets|delete-offsets`` on a group librdkafka's share
    consumer used: the start offset and lag after it, a dry run that changes nothing, a reset
    that a new consumer then starts from, and a refusal while the group has a member."""
    import json

    from gregor.testing.cli import run_command

    topic, group = f"t-{uuid.uuid4().hex[:6]}", new_group(broker)
    expected = values(10)
    produce(broker, topic, expected)

    def gregor(*args: str) -> tuple[int, str, str]:
        return run_command(broker.bootstrap_servers, "share-groups", *args)

    def drain(n: int) -> list[bytes]:
        c = consumer(broker, group, topic)
        got: list[bytes] = []
        try:
            while len(got) < n:
                got.extend(m.value() for m in c.poll(0.5) if m.error() is None)
            c.commit_sync(30)
        finally:
            c.close()
        return got

    assert sorted(drain(10)) == expected
    code, out, _ = gregor("offsets", group, "--output", "json")
    assert (code, json.loads(out)) == (
        0,
        [{"topic": topic, "partition": 0, "start_offset": 10, "lag": 0}],
    )
    code, out, _ = gregor(
        "reset-offsets", group, "--topic", topic, "--to-earliest", "--output", "json"
    )
    assert (code, json.loads(out)) == (
        0,
        {
            "executed": False,
            "partitions": [{"topic": topic, "partition": 0, "new_start_offset": 0, "error": None}],
        },
    )
    assert (
        json.loads(gregor("offsets", group, "--output", "json")[1])[0]["start_offset"] == 10
    )  # a dry run
    assert gregor("reset-offsets", group, "--topic", topic, "--to-offset", "5", "--execute")[0] == 0
    assert json.loads(gregor("offsets", group, "--output", "json")[1]) == [
        {"topic": topic, "partition": 0, "start_offset": 5, "lag": 5}
    ]
    assert sorted(drain(5)) == expected[5:]
    code, out, _ = gregor("delete-offsets", group, "--topic", topic)
    assert (code, out) == (0, f"Deleted the share group's offsets for {topic}.\n")
    assert json.loads(gregor("offsets", group, "--output", "json")[1]) == []
    member = consumer(broker, group, topic)
    try:
        while (
            not member.poll(0.5)
            and json.loads(gregor("describe", group, "--output", "json")[1])["state"] != "Stable"
        ):
            pass
        code, _, err = gregor("reset-offsets", group, "--topic", topic, "--to-latest", "--execute")
        assert code == 1 and "NON_EMPTY_GROUP" in err
    finally:
        member.close()
    code, _, err = gregor("reset-offsets", group, "--topic", topic)
    assert code == 2 and "exactly one of" in err


def test_an_expired_lock_redelivers_to_the_same_consumer(broker: BrokerProcess) -> None:
    """With 1 s locks (the group's ``share.record.lock.duration.ms``), records a live consumer
    neither acknowledges nor releases come back to it with delivery count 2. Gregor's own
    ``ShareConsumer`` keeps polling without acknowledging (librdkafka's explicit mode will not
    poll again before the last poll is acknowledged; its 0173 test sleeps instead)."""
    from gregor.client import ShareConsumer as GregorShareConsumer
    from gregor.client.consumer.share_consumer import ACCEPT

    topic, group = f"t-{uuid.uuid4().hex[:6]}", new_group(broker, lock_ms=1000)
    expected = values(5)
    produce(broker, topic, expected)
    c = GregorShareConsumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": group,
            "share.acknowledgement.mode": "explicit",
        }
    )
    c.subscribe([topic])
    deliveries: dict[bytes, list[int]] = {}
    try:
        while not deliveries or any(len(v) < 2 for v in deliveries.values()) or len(deliveries) < 5:
            for r in c.poll(0.5):
                deliveries.setdefault(r.value, []).append(r.delivery_count)
                if r.delivery_count >= 2:
                    c.acknowledge(r, ACCEPT)
            c.commit_sync()
    finally:
        c.close()
    # The first delivery's lock ran out, the second is accepted (a third only if the machine
    # stalled past the second lock before its acknowledgement went out).
    assert sorted(deliveries) == expected
    assert all(counts[:2] == [1, 2] for counts in deliveries.values())
