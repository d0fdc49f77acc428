"""DescribeClientQuotas / AlterClientQuotas on a real broker, and the byte-rate quotas enforced
(the other quota kinds: test_quota_kinds.py).

The APIs: set, describe with Kafka's filters, remove, validate_only, Kafka's refusals, the
authorizer's cluster checks, and quotas surviving a restart. Enforcement: a confluent-kafka
producer under a producer_byte_rate quota for its client id gets throttle times (its
throttle_cb) and over 10 s delivers about quota x 10 s, not more; a consumer under a
consumer_byte_rate quota is throttled too; a client the quota does not name is not.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from gregor.client import AdminClient
from gregor.protocol.errors import ClusterAuthorizationFailedError, InvalidRequestError
from gregor.testing import BrokerProcess

pytestmark = pytest.mark.interop

BUDGET_S = 60.0


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    with BrokerProcess(config={"num.partitions": 1}) as b:
        yield b


def admin(b: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": b.bootstrap_servers})


def test_set_describe_filter_remove_and_refusals(broker: BrokerProcess) -> None:
    app, alice = f"app-{uuid.uuid4().hex[:6]}", f"alice-{uuid.uuid4().hex[:6]}"
    e_app = (("client-id", app),)
    e_alice_app = (("client-id", app), ("user", alice))
    e_default_user = (("user", None),)
    with admin(broker) as a:
        assert a.alter_client_quotas(
            {
                e_app: {"producer_byte_rate": 1024.0, "consumer_byte_rate": 2048.0},
                e_alice_app: {"producer_byte_rate": 4096.0},
                e_default_user: {"consumer_byte_rate": 8192.0},
            }
        ) == {e_app: None, e_alice_app: None, e_default_user: None}
        everything = a.describe_client_quotas()
        assert everything[e_app] == {"producer_byte_rate": 1024.0, "consumer_byte_rate": 2048.0}
        assert everything[e_alice_app] == {"producer_byte_rate": 4096.0}
        assert everything[e_default_user] == {"consumer_byte_rate": 8192.0}
        assert a.describe_client_quotas([("client-id", 0, app)]) == {
            e_app: everything[e_app],
            e_alice_app: everything[e_alice_app],
        }
        assert a.describe_client_quotas([("client-id", 0, app)], strict=True) == {
            e_app: everything[e_app]
        }
        assert a.describe_client_quotas([("user", 1, None)], strict=True) == {
            e_default_user: everything[e_default_user]
        }
        assert e_default_user not in a.describe_client_quotas([("user", 2, None)])

        # remove one key; validate_only changes nothing
        assert a.alter_client_quotas({e_app: {"consumer_byte_rate": None}}) == {e_app: None}
        assert a.alter_client_quotas({e_app: {"producer_byte_rate": 1.0}}, validate_only=True) == {
            e_app: None
        }
        assert a.describe_client_quotas([("client-id", 0, app)], strict=True) == {
            e_app: {"producer_byte_rate": 1024.0}
        }

        refused = a.alter_client_quotas(
            {
                (("client-id", app),): {"producer_byte_rate": -5.0},
                (("ip", "10.0.0.1"), ("user", alice)): {"connection_creation_rate": 5.0},
                (("ip", "10.0.0.2"),): {"request_percentage": 50.0},
                (("group", "g"),): {"producer_byte_rate": 5.0},
            }
        )
        messages = {e: str(err) for e, err in refused.items()}
        assert all(isinstance(err, InvalidRequestError) for err in refused.values())
        assert "must be greater than 0" in messages[(("client-id", app),)]
        assert "should not be combined" in messages[(("ip", "10.0.0.1"), ("user", alice))]
        assert "Invalid configuration key request_percentage" in messages[(("ip", "10.0.0.2"),)]
        assert "Unhandled client quota entity type: group" in messages[(("group", "g"),)]
        with pytest.raises(InvalidRequestError, match="Duplicate user filter"):
            a.describe_client_quotas([("user", 1, None), ("user", 2, None)])
        # clean up for the other tests
        a.alter_client_quotas(
            {
                e_app: {"producer_byte_rate": None},
                e_alice_app: {"producer_byte_rate": None},
                e_default_user: {"consumer_byte_rate": None},
            },
            raise_on_error=True,
        )
        assert not {e_app, e_alice_app, e_default_user} & set(a.describe_client_quotas())


def test_quotas_survive_a_restart(tmp_path: Any) -> None:
    with BrokerProcess(config={}, data_dir=tmp_path) as b:
        with admin(b) as a:
            a.alter_client_quotas(
                {(("user", "bob"),): {"consumer_byte_rate": 123456.0}}, raise_on_error=True
            )
        b.stop()
        b.start()
        with admin(b) as a:
            assert a.describe_client_quotas() == {
                (("user", "bob"),): {"consumer_byte_rate": 123456.0}
            }


def test_the_apis_need_cluster_permissions() -> None:
    config = {
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:nobody",
    }
    with BrokerProcess(config=config) as b, admin(b) as a:
        with pytest.raises(ClusterAuthorizationFailedError):
            a.describe_client_quotas()
        result = a.alter_client_quotas({(("user", "x"),): {"producer_byte_rate": 10.0}})
        assert isinstance(result[(("user", "x"),)], ClusterAuthorizationFailedError)


def test_a_producer_over_its_quota_is_throttled_to_it(broker: BrokerProcess) -> None:
    client_id, topic = f"slow-{uuid.uuid4().hex[:6]}", f"quota-{uuid.uuid4().hex[:6]}"
    quota = 100_000  # bytes/s
    with admin(broker) as a:
        a.alter_client_quotas(
            {(("client-id", client_id),): {"producer_byte_rate": float(quota)}}, raise_on_error=True
        )
    throttles: list[int] = []
    acked: list[tuple[float, int]] = []
    p = Producer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "client.id": client_id,
            "acks": "all",
            "linger.ms": 5,
            "batch.size": 16384,
            "queue.buffering.max.messages": 1000,
            "throttle_cb": lambda ev: throttles.append(ev.throttle_time),
        }
    )
    value = b"x" * 1000
    start = time.monotonic()
    while time.monotonic() - start < 10.0:
        try:
            p.produce(
                topic,
                value,
                on_delivery=lambda err, msg: (
                    err or acked.append((time.monotonic(), len(msg.value())))
                ),
            )
        except BufferError:
            p.poll(0.05)
        p.poll(0)
    sent_in_10s = sum(n for t, n in acked if t - start <= 10.0)
    p.purge()  # what is still queued would take its time at the quota's pace
    p.flush(BUDGET_S)
    assert throttles and max(throttles) > 0
    # Over 10 s the broker lets through about quota x 10 s (one 16 KB batch per request over);
    # the client could send far more without the quota (it was only held back by throttling).
    assert 0.8 * quota * 10 <= sent_in_10s <= 1.2 * quota * 10, sent_in_10s


def test_a_consumer_over_its_quota_gets_empty_throttled_answers_and_loses_nothing() -> None:
    """A throttled fetch answers with no data (as Kafka's does) and leaves the fetch session as
    it was: the consumer still reads every record exactly once and in order. A consumer the
    quota does not name is never throttled. (Windows of 1 s x 2 keep the test short.)"""
    topic = f"cq-{uuid.uuid4().hex[:6]}"
    with BrokerProcess(config={"num.partitions": 1, "quota.window.num": 2}) as b:
        # small batches: a fetch answer holds at least one whole batch, and one bigger than the
        # quota's window allowance could never be served under the quota
        p = Producer(
            {"bootstrap.servers": b.bootstrap_servers, "linger.ms": 5, "batch.size": 16384}
        )
        values = [b"%06d" % i + b"y" * 994 for i in range(1000)]
        for v in values:
            p.produce(topic, v)
        assert p.flush(BUDGET_S) == 0
        limited = f"lim-{uuid.uuid4().hex[:6]}"
        with admin(b) as a:
            a.alter_client_quotas(
                {(("client-id", limited),): {"consumer_byte_rate": 300_000.0}}, raise_on_error=True
            )

        def consume_all(client_id: str) -> list[int]:
            throttles: list[int] = []
            c = Consumer(
                {
                    "bootstrap.servers": b.bootstrap_servers,
                    "group.id": f"g-{client_id}",
                    "client.id": client_id,
                    "auto.offset.reset": "earliest",
                    "fetch.max.bytes": 100_000,
                    "max.partition.fetch.bytes": 100_000,
                    "message.max.bytes": 100_000,
                    "throttle_cb": lambda ev: throttles.append(ev.throttle_time),
                }
            )
            c.subscribe([topic])
            got: list[bytes] = []
            while len(got) < len(values):
                msg = c.poll(1.0)
                if msg is not None and msg.error() is None:
                    got.append(msg.value())
            c.close()
            assert got == values  # every record once, in order, throttled or not
            return throttles

        assert [t for t in consume_all(f"free-{uuid.uuid4().hex[:6]}") if t > 0] == []
        assert max(consume_all(limited)) > 0


def test_gregor_quotas_alter_and_describe(broker: BrokerProcess) -> None:
    from click.testing import CliRunner

    from gregor.cli.main import main

    def gregor(*args: str) -> tuple[int, str, str]:
        r = CliRunner().invoke(main, [*args, "-b", broker.bootstrap_servers])
        if r.exception and not isinstance(r.exception, SystemExit):
            raise r.exception
        return r.exit_code, r.stdout, r.stderr

    user = f"dana-{uuid.uuid4().hex[:6]}"
    assert gregor(
        "quotas",
        "alter",
        "--user",
        user,
        "--client-defaults",
        "--add-config",
        "producer_byte_rate=1048576,consumer_byte_rate=2097152",
    ) == (0, f"Completed updating config for user-principal '{user}', the default client-id.\n", "")
    with admin(broker) as a:
        assert a.describe_client_quotas([("user", 0, user)]) == {
            (("client-id", None), ("user", user)): {
                "producer_byte_rate": 1048576.0,
                "consumer_byte_rate": 2097152.0,
            }
        }
    code, out, _ = gregor("quotas", "describe", "--user", user, "--client-defaults")
    assert (code, out) == (
        0,
        f"Quota configs for user-principal '{user}', the default client-id are "
        "consumer_byte_rate=2097152.0, producer_byte_rate=1048576.0\n",
    )
    code, out, _ = gregor(
        "quotas", "describe", "--user", user, "--client-defaults", "--output", "json"
    )
    assert (code, json.loads(out)) == (
        0,
        [
            {
                "entity": [{"type": "client-id", "name": None}, {"type": "user", "name": user}],
                "quotas": {"consumer_byte_rate": 2097152.0, "producer_byte_rate": 1048576.0},
            }
        ],
    )
    assert (
        gregor(
            "quotas",
            "alter",
            "--user",
            user,
            "--client-defaults",
            "--delete-config",
            "consumer_byte_rate",
        )[0]
        == 0
    )
    code, out, _ = gregor("quotas", "describe", "--user", user, "--client-defaults")
    assert out.endswith("are producer_byte_rate=1048576.0\n")
    code, _, err = gregor(
        "quotas", "alter", "--ip", "10.0.0.9", "--add-config", "request_percentage=50"
    )
    assert code == 1 and "Invalid configuration key request_percentage" in err
    code, _, err = gregor("quotas", "alter", "--add-config", "producer_byte_rate=1")
    assert code == 2 and "name the entity" in err
    assert (
        gregor(
            "quotas",
            "alter",
            "--user",
            user,
            "--client-defaults",
            "--delete-config",
            "producer_byte_rate",
        )[0]
        == 0
    )
    assert gregor("quotas", "describe", "--user", user, "--client-defaults")[1] == ""


def test_an_acks_0_producer_over_its_quota_is_held_back_too(broker: BrokerProcess) -> None:
    """acks=0 has no answer to carry a throttle time: the broker holds the connection all the
    same, so what reaches the log stays near the quota's window allowance."""
    client_id, topic = f"fire-{uuid.uuid4().hex[:6]}", f"q0-{uuid.uuid4().hex[:6]}"
    quota = 50_000
    with admin(broker) as a:
        a.alter_client_quotas(
            {(("client-id", client_id),): {"producer_byte_rate": float(quota)}}, raise_on_error=True
        )
    p = Producer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "client.id": client_id,
            "acks": 0,
            "linger.ms": 5,
            "batch.size": 16384,
        }
    )
    start = time.monotonic()
    sent = 0
    while time.monotonic() - start < 3.0:
        try:
            p.produce(topic, b"z" * 1000)
            sent += 1
        except BufferError:
            p.poll(0.05)
        p.poll(0)
    p.purge()
    p.flush(BUDGET_S)
    c = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "wm"})
    low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=BUDGET_S)
    c.close()
    # Without the quota every record would be there; with it, about the 11-window allowance
    # (10 s of quota) plus the requests already read when the hold began.
    assert sent * 1000 > 40 * quota
    assert 0 < high * 1000 <= 15 * quota, (high, sent)
