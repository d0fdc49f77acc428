"""The quotas beyond byte rates, enforced by a real broker: ``request_percentage`` (request
handling time), ``controller_mutation_rate`` (KIP-599: partitions created or deleted) and
``connection_creation_rate`` (KIP-612: new connections per IP).

Third-party clients drive them where they can: a confluent-kafka producer under a request
quota gets throttle callbacks and still delivers every record; kafka-python's admin client
(CreateTopics v7, the strict versions) gets THROTTLING_QUOTA_EXCEEDED once its client's
bucket is spent, while an older CreateTopics version (sent raw) is never refused, only
throttled. New connections from one IP beyond its rate get no answer and are closed; another
IP is unaffected.
"""

from __future__ import annotations

import socket
import struct
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import NodeNotReadyError, ThrottlingQuotaExceededError

from gregor.client import AdminClient
from gregor.protocol.messages import ApiVersionsRequest, CreateTopicsRequest
from gregor.testing import BrokerProcess

pytestmark = pytest.mark.interop

BUDGET_S = 60.0


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    with BrokerProcess(config={"num.partitions": 1}) as b:
        yield b


def set_quota(
    b: BrokerProcess, entity: tuple[tuple[str, str | None], ...], **values: float | None
) -> None:
    with AdminClient({"bootstrap.servers": b.bootstrap_servers}) as a:
        a.alter_client_quotas({entity: values}, raise_on_error=True)


def test_a_request_quota_throttles_a_busy_client_and_loses_nothing() -> None:
    with BrokerProcess(config={"quota.window.num": 2}) as broker:  # throttles of 2 s at most
        _request_quota(broker)


def _request_quota(broker: BrokerProcess) -> None:
    busy, idle = f"busy-{uuid.uuid4().hex[:6]}", f"idle-{uuid.uuid4().hex[:6]}"
    topic = f"rq-{uuid.uuid4().hex[:6]}"
    # 0.01 % of a thread: 0.1 ms of handling a second, measured over at least one second.
    set_quota(broker, (("client-id", busy),), request_percentage=0.01)

    def produce(client_id: str, count: int) -> tuple[list[int], int, int]:
        """(throttle times seen, records produced, records delivered); stops at a throttle."""
        throttles: list[int] = []
        delivered: list[int] = []
        produced = 0
        p = Producer(
            {
                "bootstrap.servers": broker.bootstrap_servers,
                "client.id": client_id,
                "acks": 1,
                "linger.ms": 0,
                "max.in.flight": 1,  # one request per record: many small requests
                "throttle_cb": lambda ev: throttles.append(ev.throttle_time),
            }
        )
        for i in range(count):
            p.produce(
                topic,
                b"%d" % i,
                on_delivery=lambda err, msg: err or delivered.append(int(msg.value())),
            )
            produced += 1
            p.poll(0)
            if throttles:
                break
        assert p.flush(BUDGET_S) == 0
        return throttles, produced, len(delivered)

    throttles, produced, delivered = produce(busy, 20_000)
    assert throttles and max(throttles) > 0, "never throttled"
    assert delivered == produced  # throttled, not dropped
    idle_throttles, produced, delivered = produce(idle, 300)
    assert idle_throttles == [] and produced == delivered == 300


def _create_raw(
    b: BrokerProcess, version: int, client_id: str, name: str, partitions: int
) -> tuple[int, int]:
    """(error code, throttle_time_ms) of one CreateTopics at ``version`` from ``client_id``."""
    from gregor.client.admin import AIOAdminClient
    from gregor.client.sync import LoopThread

    async def go() -> tuple[int, int]:
        admin = AIOAdminClient({"bootstrap.servers": b.bootstrap_servers, "client.id": client_id})
        try:
            conn = await admin._controller()
            req = CreateTopicsRequest(
                topics=[
                    CreateTopicsRequest.Topics(
                        name=name,
                        num_partitions=partitions,
                        replication_factor=1,
                        assignments=[],
                        configs=[],
                    )
                ],
                timeout_ms=30000,
                validate_only=False,
            )
            resp = await conn.send(req, version)
            return resp.topics[0].error_code, resp.throttle_time_ms
        finally:
            await admin.close()

    return LoopThread.get().run(go())


def test_controller_mutations_spend_a_token_bucket(broker: BrokerProcess) -> None:
    strict, old = f"mut-{uuid.uuid4().hex[:6]}", f"mut-old-{uuid.uuid4().hex[:6]}"
    # 1 partition a second: a bucket of 11 (11 one-second windows)
    for client_id in (strict, old):
        set_quota(broker, (("client-id", client_id),), controller_mutation_rate=1.0)
    prefix = uuid.uuid4().hex[:6]

    def kafka_python() -> KafkaAdminClient:
        return KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, client_id=strict)

    first, second, third = kafka_python(), kafka_python(), kafka_python()
    try:
        first.create_topics([NewTopic(f"{prefix}-a", 10, 1)])  # 11 -> 1 token
        first.create_topics([NewTopic(f"{prefix}-b", 60, 1)])  # allowed while not negative: -> -59
        # kafka-python honours the throttle time (KIP-219): its connection waits about a minute
        with pytest.raises(NodeNotReadyError, match="throttle"):
            first.create_topics([NewTopic(f"{prefix}-c", 1, 1)])
        # another connection of the same client id shares the bucket: refused per topic
        with pytest.raises(ThrottlingQuotaExceededError):
            second.create_topics([NewTopic(f"{prefix}-c", 1, 1)])
        with pytest.raises(ThrottlingQuotaExceededError):
            third.delete_topics([f"{prefix}-a"])
    finally:
        for c in (first, second, third):
            c.close()
    with AdminClient({"bootstrap.servers": broker.bootstrap_servers}) as a:
        topics = set(a.list_topics())
    assert {f"{prefix}-a", f"{prefix}-b"} <= topics and f"{prefix}-c" not in topics
    # the same, strict, from a raw v7 request: the throttle time is the bucket's deficit
    code, throttle = _create_raw(broker, 7, strict, f"{prefix}-d", 1)
    assert code == 89 and 0 < throttle <= 60_000  # what is left of the ~59 s deficit
    # an old CreateTopics (v5, before KIP-599) is never refused, only throttled
    code, throttle = _create_raw(broker, 5, old, f"{prefix}-e", 70)  # 11 -> -59
    assert code == 0 and 0 < throttle <= 59_000
    code, throttle = _create_raw(broker, 5, old, f"{prefix}-f", 1)
    assert code == 0 and 0 < throttle <= 60_000
    # another client is not touched
    assert _create_raw(broker, 7, f"free-{prefix}", f"{prefix}-g", 20) == (0, 0)


def _api_versions_answered(port: int, source: str = "127.0.0.1") -> bool:
    """Connect from ``source``, send ApiVersions v0: True if answered, False if closed."""
    with socket.create_connection(
        ("127.0.0.1", port), timeout=BUDGET_S, source_address=(source, 0)
    ) as s:
        body = struct.pack(">hhih", ApiVersionsRequest.API_KEY, 0, 7, 4) + b"test"
        s.sendall(struct.pack(">i", len(body)) + body)
        data = s.recv(4)
        return len(data) == 4


def test_new_connections_over_an_ips_rate_are_closed_unanswered() -> None:
    with BrokerProcess(config={}) as b:
        port = int(b.bootstrap_servers.rsplit(":", 1)[1])
        set_quota(b, (("ip", "127.0.0.1"),), connection_creation_rate=2.0)
        start = time.monotonic()
        answered = [_api_versions_answered(port) for _ in range(24)]
        elapsed = time.monotonic() - start
        # 2 a second over the 10 s the rate spans: the first 20 are taken, then none
        if elapsed < 9.0:
            assert answered == [True] * 20 + [False] * 4
        else:  # a very slow machine: older windows have begun to age out
            assert answered[:20] == [True] * 20 and False in answered
        # another address (127.0.0.2 is loopback too) has no quota
        assert all(_api_versions_answered(port, "127.0.0.2") for _ in range(5))
        assert "connection.throttled" in b.read_log()
