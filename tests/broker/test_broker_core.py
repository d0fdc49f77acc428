"""The broker core's own rules, on a broker built in this process (real sockets, no child
process): fail-closed configuration, idle connections, a long poll whose client hung up,
internal topics, the partition layer's acks=all and min.insync.replicas checks, and the
metadata image and listeners it advertises."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from gregor.broker.broker import Broker
from gregor.broker.config.broker_config import BrokerConfig, ConfigError
from gregor.protocol.connection import ClientConnection
from gregor.protocol.errors import ErrorCode
from gregor.protocol.messages.create_partitions import CreatePartitionsRequest
from gregor.protocol.messages.create_topics import CreateTopicsRequest
from gregor.protocol.messages.delete_topics import DeleteTopicsRequest
from gregor.protocol.messages.fetch import FetchRequest
from gregor.protocol.messages.find_coordinator import FindCoordinatorRequest
from gregor.protocol.messages.metadata import MetadataRequest
from gregor.protocol.messages.produce import ProduceRequest
from gregor.protocol.records.batch import RecordBatchBuilder

pytestmark = pytest.mark.timeout(120)


# --- helpers ---


@asynccontextmanager
async def running_broker(**props: str) -> AsyncIterator[Broker]:
    with tempfile.TemporaryDirectory(prefix="gregor-core-") as d:
        config = BrokerConfig(
            {
                "listeners": "PLAINTEXT://127.0.0.1:0",
                "log.dirs": f"{d}/logs",
                "group.initial.rebalance.delay.ms": "0",
                **props,
            }
        )
        broker = Broker(config)
        await broker.start()
        try:
            yield broker
        finally:
            await broker.stop()


class Client:
    """One connection speaking the protocol with the project's sans-IO client connection."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.conn = ClientConnection(client_id="core-test")

    @classmethod
    async def connect(cls, broker: Broker, listener: int = 0) -> Client:
        _, host, port = broker.bound_listeners[listener]
        reader, writer = await asyncio.open_connection(host, port)
        return cls(reader, writer)

    def send(self, request: Any, version: int) -> None:
        _, data = self.conn.send_request(request, version)
        self.writer.write(data)

    async def call(self, request: Any, version: int) -> Any:
        self.send(request, version)
        while True:
            chunk = await self.reader.read(65536)
            assert chunk, "broker closed the connection"
            responses = self.conn.receive_data(chunk)
            if responses:
                return responses[0].response

    def close(self) -> None:
        self.writer.close()


async def wait_until(condition: Callable[[], bool], what: str) -> None:
    """Wait for ``condition`` (event-loop turns, no fixed sleep); the test timeout bounds it."""
    while not condition():
        await asyncio.sleep(0.01)


def run(coro: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(coro())


def batch(*values: bytes) -> bytes:
    b = RecordBatchBuilder()
    for v in values:
        b.append(0, None, v)
    return bytes(b.build())


async def create_topic(client: Client, name: str, partitions: int = 1, **configs: str) -> None:
    ct = CreateTopicsRequest.Topics
    resp = await client.call(
        CreateTopicsRequest(
            topics=[
                ct(
                    name=name,
                    num_partitions=partitions,
                    replication_factor=1,
                    assignments=[],
                    configs=[ct.Configs(name=k, value=v) for k, v in configs.items()],
                )
            ],
            timeout_ms=5000,
            validate_only=False,
        ),
        7,
    )
    assert resp.topics[0].error_code == 0, resp.topics[0].error_message


def produce_request(topic: str, records: bytes, acks: int = -1) -> ProduceRequest:
    td = ProduceRequest.TopicData
    return ProduceRequest(
        transactional_id=None,
        acks=acks,
        timeout_ms=5000,
        topic_data=[td(name=topic, partition_data=[td.PartitionData(index=0, records=records)])],
    )


# --- fail closed ---


@pytest.mark.parametrize(
    "props, says",
    [
        ({"listeners": "SASL_PLAINTEXT://127.0.0.1:9092"}, "SASL_PLAINTEXT"),
        ({"listeners": "SSL://127.0.0.1:9093"}, "SSL"),
        ({"listeners": "SASL_SSL://127.0.0.1:9093"}, "SASL_SSL"),
        (
            {
                "listeners": "INTERNAL://127.0.0.1:9093",
                "listener.security.protocol.map": "INTERNAL:SASL_PLAINTEXT",
            },
            "SASL_PLAINTEXT",
        ),
        ({"listeners": "INTERNAL://127.0.0.1:9093"}, "listener.security.protocol.map"),
        ({"listener.security.protocol.map": "PLAINTEXT:KERBEROS"}, "NAME:PROTOCOL"),
        ({"security.inter.broker.protocol": "SSL"}, "security.inter.broker.protocol"),
        ({"authorizer.class.name": "com.example.CustomAuthorizer"}, "authorizer"),
        ({"metadata.store": "etcd://127.0.0.1:2379/a b"}, "metadata.store"),
        ({"metadata.store": "zookeeper://127.0.0.1:2181"}, "metadata.store"),
        ({"inter.broker.listener.name": "REPLICATION"}, "inter.broker.listener.name"),
        (  # Kafka's default inter-broker mechanism, GSSAPI: brokers could not log in to each other
            {
                "metadata.store": "etcd://127.0.0.1:2379",
                "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
                "sasl.enabled.mechanisms": "SCRAM-SHA-256",
            },
            "sasl.mechanism.inter.broker.protocol=GSSAPI",
        ),
        (
            {
                "metadata.store": "etcd://127.0.0.1:2379",
                "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
                "sasl.enabled.mechanisms": "SCRAM-SHA-256",
                "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256",
            },
            "scram-sha-256.sasl.jaas.config is not set",
        ),
        (
            {
                "metadata.store": "etcd://127.0.0.1:2379",
                "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
                "sasl.enabled.mechanisms": "PLAIN",
                "sasl.mechanism.inter.broker.protocol": "PLAIN",
                "listener.name.sasl_plaintext.plain.sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="b";',
            },
            "needs username and password",
        ),
        ({"replica.selector.class": "com.example.NearestReplica"}, "replica.selector.class"),
        ({"log.cleanup.policy": "archive"}, "cleanup.policy"),
        ({"log.cleaner.min.cleanable.ratio": "7"}, "min.cleanable.dirty.ratio"),
        ({"advertised.listeners": "OTHER://example.com:9092"}, "names no listener"),
        (
            {"listeners": "PLAINTEXT://127.0.0.1:9092,PLAINTEXT://127.0.0.1:9093"},
            "more than once",
        ),
    ],
)
def test_settings_the_broker_cannot_honour_stop_it(props: dict[str, str], says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        BrokerConfig(props)


@pytest.mark.parametrize(
    ("props", "says"),
    [
        # Kafka's GroupCoordinatorConfig and ShareGroupConfig, checked in Kafka's order and words.
        (
            {"group.consumer.heartbeat.interval.ms": "300"},
            "group.consumer.heartbeat.interval.ms must be greater than or equal to group.consumer.min.heartbeat.interval.ms",
        ),
        (
            {"group.consumer.heartbeat.interval.ms": "20000"},
            "group.consumer.heartbeat.interval.ms must be less than or equal to group.consumer.max.heartbeat.interval.ms",
        ),
        (
            {"group.consumer.min.heartbeat.interval.ms": "20000"},
            "group.consumer.max.heartbeat.interval.ms must be greater than or equal to group.consumer.min.heartbeat.interval.ms",
        ),
        (
            {
                "group.consumer.session.timeout.ms": "3000",
                "group.consumer.min.heartbeat.interval.ms": "100",
                "group.consumer.heartbeat.interval.ms": "300",
            },
            "group.consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms",
        ),
        (
            {"group.consumer.session.timeout.ms": "120000"},
            "group.consumer.session.timeout.ms must be less than or equal to group.consumer.max.session.timeout.ms",
        ),
        (
            {"group.consumer.max.session.timeout.ms": "40000"},
            "group.consumer.max.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms",
        ),
        (
            {
                "group.consumer.min.session.timeout.ms": "1000",
                "group.consumer.session.timeout.ms": "5000",
            },
            "group.consumer.heartbeat.interval.ms must be less than group.consumer.session.timeout.ms",
        ),
        (
            {"group.share.heartbeat.interval.ms": "1000"},
            "group.share.heartbeat.interval.ms must be greater than or equal to group.share.min.heartbeat.interval.ms",
        ),
        (
            {"group.share.session.timeout.ms": "61000"},
            "group.share.session.timeout.ms must be less than or equal to group.share.max.session.timeout.ms",
        ),
        (
            {"group.share.record.lock.duration.ms": "1000"},
            "group.share.record.lock.duration.ms must be greater than or equal to group.share.min.record.lock.duration.ms",
        ),
        (
            {"group.share.record.lock.duration.ms": "90000"},
            "group.share.max.record.lock.duration.ms must be greater than or equal to group.share.record.lock.duration.ms",
        ),
        (
            {"group.consumer.session.timeout.ms": "0"},
            "group.consumer.session.timeout.ms=0 is below the minimum 1",
        ),
    ],
)
def test_group_timeouts_outside_their_bounds_stop_the_broker(
    props: dict[str, str], says: str
) -> None:
    with pytest.raises(ConfigError) as e:
        BrokerConfig(props)
    assert str(e.value) == says


def test_group_timeouts_within_bounds_moved_together_start() -> None:
    """The group tests' short sessions: allowed once the bounds are lowered with them."""
    config = BrokerConfig(
        {
            "group.consumer.session.timeout.ms": "3000",
            "group.consumer.min.session.timeout.ms": "1000",
            "group.consumer.heartbeat.interval.ms": "300",
            "group.consumer.min.heartbeat.interval.ms": "100",
        }
    )
    assert (
        config["group.consumer.session.timeout.ms"],
        config["group.consumer.heartbeat.interval.ms"],
    ) == (3000, 300)


def test_a_plaintext_listener_under_its_own_name_is_served() -> None:
    config = BrokerConfig(
        {
            "listeners": "CLIENTS://127.0.0.1:0",
            "listener.security.protocol.map": "CLIENTS:PLAINTEXT",
        }
    )
    assert config.security_protocol("CLIENTS") == "PLAINTEXT"


def test_gregor_serve_refuses_a_sasl_listener_with_a_clear_error(tmp_path: Any) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "gregor",
            "serve",
            "--override",
            "listeners=SASL_PLAINTEXT://127.0.0.1:0",
            "--override",
            f"log.dirs={tmp_path}/logs",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode != 0
    assert "SASL_PLAINTEXT" in proc.stderr and "plain text" in proc.stderr
    assert not (tmp_path / "logs").exists()  # nothing was started


# --- connections ---


def test_idle_connections_are_closed_after_connections_max_idle_ms() -> None:
    async def main() -> None:
        async with running_broker(**{"connections.max.idle.ms": "200"}) as broker:
            client = await Client.connect(broker)
            await client.call(MetadataRequest(topics=[]), 1)
            assert len(broker.connections) == 1
            # The broker closes it: the read sees the end of the stream.
            assert await client.reader.read(1) == b""
            await wait_until(lambda: not broker.connections, "the idle connection to go")

    run(main)


def test_a_long_poll_whose_client_hung_up_is_released_at_once() -> None:
    async def main() -> None:
        async with running_broker() as broker:
            admin = await Client.connect(broker)
            await create_topic(admin, "quiet")
            partition = broker.replicas.get_partition("quiet", 0)
            assert partition is not None
            poller = await Client.connect(broker)
            ft = FetchRequest.Topics
            poller.send(
                FetchRequest(
                    replica_id=-1,
                    max_wait_ms=600_000,
                    min_bytes=1,
                    max_bytes=1 << 20,
                    isolation_level=0,
                    session_id=0,
                    session_epoch=-1,
                    topics=[
                        ft(
                            topic="quiet",
                            partitions=[
                                ft.Partitions(
                                    partition=0,
                                    current_leader_epoch=-1,
                                    fetch_offset=0,
                                    log_start_offset=-1,
                                    partition_max_bytes=1 << 20,
                                )
                            ],
                        )
                    ],
                    forgotten_topics_data=[],
                    rack_id="",
                ),
                11,
            )
            await wait_until(lambda: bool(partition._data_waiters), "the fetch to wait")
            busy = [c for c in broker.connections if c.busy]
            assert len(busy) == 1
            poller.close()
            await wait_until(lambda: not partition._data_waiters, "the waiter to be released")
            await wait_until(lambda: not busy[0].busy, "the request to end")
            # The broker still serves others.
            resp = await admin.call(MetadataRequest(topics=None), 4)
            assert [t.name for t in resp.topics] == ["quiet"]

    run(main)


# --- internal topics ---


def test_internal_topics_cannot_be_deleted_or_grown() -> None:
    async def main() -> None:
        async with running_broker(**{"offsets.topic.num.partitions": "3"}) as broker:
            client = await Client.connect(broker)
            found = await client.call(FindCoordinatorRequest(key="g", key_type=0), 1)
            assert found.error_code == 0 and found.node_id == broker.node_id
            resp = await client.call(
                DeleteTopicsRequest(topic_names=["__consumer_offsets"], timeout_ms=5000), 5
            )
            (result,) = resp.responses
            assert result.error_code == ErrorCode.INVALID_REQUEST
            assert "internal topic" in result.error_message
            cp = CreatePartitionsRequest.Topics
            resp = await client.call(
                CreatePartitionsRequest(
                    topics=[cp(name="__consumer_offsets", count=10, assignments=None)],
                    timeout_ms=5000,
                    validate_only=False,
                ),
                1,
            )
            (result,) = resp.results
            assert result.error_code == ErrorCode.INVALID_REQUEST
            topic = broker.image.topic("__consumer_offsets")
            assert topic is not None and len(topic.partitions) == 3

    run(main)


# --- the partition layer ---


def test_acks_all_append_moves_the_high_watermark_and_wakes_a_waiting_fetch() -> None:
    async def main() -> None:
        async with running_broker() as broker:
            client = await Client.connect(broker)
            await create_topic(client, "t")
            partition = broker.replicas.get_partition("t", 0)
            assert partition is not None and partition.is_leader
            assert partition.isr == (broker.node_id,)
            poller = await Client.connect(broker)
            ft = FetchRequest.Topics
            poller.send(
                FetchRequest(
                    replica_id=-1,
                    max_wait_ms=600_000,
                    min_bytes=1,
                    max_bytes=1 << 20,
                    isolation_level=0,
                    session_id=0,
                    session_epoch=-1,
                    topics=[
                        ft(
                            topic="t",
                            partitions=[
                                ft.Partitions(
                                    partition=0,
                                    current_leader_epoch=0,
                                    fetch_offset=0,
                                    log_start_offset=-1,
                                    partition_max_bytes=1 << 20,
                                )
                            ],
                        )
                    ],
                    forgotten_topics_data=[],
                    rack_id="",
                ),
                11,
            )
            await wait_until(lambda: bool(partition._data_waiters), "the fetch to wait")
            resp = await client.call(produce_request("t", batch(b"a", b"b", b"c")), 7)
            part = resp.responses[0].partition_responses[0]
            assert (part.error_code, part.base_offset) == (0, 0)
            assert partition.log.high_watermark == 3
            while True:
                chunk = await poller.reader.read(1 << 20)
                assert chunk
                responses = poller.conn.receive_data(chunk)
                if responses:
                    break
            fetched = responses[0].response.responses[0].partitions[0]
            assert (fetched.error_code, fetched.high_watermark) == (0, 3)
            assert fetched.records

    run(main)


def test_acks_all_needs_min_insync_replicas() -> None:
    async def main() -> None:
        async with running_broker() as broker:
            client = await Client.connect(broker)
            await create_topic(client, "strict", **{"min.insync.replicas": "2"})
            resp = await client.call(produce_request("strict", batch(b"x"), acks=-1), 7)
            part = resp.responses[0].partition_responses[0]
            assert part.error_code == ErrorCode.NOT_ENOUGH_REPLICAS
            resp = await client.call(produce_request("strict", batch(b"x"), acks=1), 7)
            part = resp.responses[0].partition_responses[0]
            assert (part.error_code, part.base_offset) == (0, 0)
            partition = broker.replicas.get_partition("strict", 0)
            assert partition is not None and partition.log.log_end_offset == 1

    run(main)


# --- metadata ---


def test_each_listener_advertises_its_own_address() -> None:
    async def main() -> None:
        async with running_broker(
            **{
                "listeners": "PLAINTEXT://127.0.0.1:0,CLIENTS://127.0.0.1:0",
                "advertised.listeners": "PLAINTEXT://127.0.0.1:0,CLIENTS://localhost:0",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CLIENTS:PLAINTEXT",
            }
        ) as broker:
            ports = {name: port for name, _, port in broker.bound_listeners}
            seen = {}
            for i, name in enumerate(("PLAINTEXT", "CLIENTS")):
                client = await Client.connect(broker, i)
                resp = await client.call(MetadataRequest(topics=[]), 1)
                seen[name] = [(b.node_id, b.host, b.port) for b in resp.brokers]
                found = await client.call(FindCoordinatorRequest(key="g", key_type=0), 1)
                assert (found.host, found.port) == (seen[name][0][1], seen[name][0][2])
            assert seen == {
                "PLAINTEXT": [(broker.node_id, "127.0.0.1", ports["PLAINTEXT"])],
                "CLIENTS": [(broker.node_id, "localhost", ports["CLIENTS"])],
            }

    run(main)


def test_metadata_image_is_replaced_whole_and_survives_a_restart() -> None:
    async def main() -> None:
        with tempfile.TemporaryDirectory(prefix="gregor-core-") as d:
            props = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": f"{d}/logs"}
            broker = Broker(BrokerConfig(props))
            await broker.start()
            before = broker.image
            client = await Client.connect(broker)
            await create_topic(client, "kept", partitions=2, **{"retention.ms": "60000"})
            after = broker.image
            assert before.topic("kept") is None  # the old image is untouched
            assert after.version > before.version
            topic = after.topic("kept")
            assert topic is not None and len(topic.partitions) == 2
            await client.call(produce_request("kept", batch(b"1", b"2")), 7)
            client.close()
            await broker.stop()

            again = Broker(BrokerConfig(props))
            await again.start()
            try:
                topic2 = again.image.topic("kept")
                assert topic2 is not None and topic2.topic_id == topic.topic_id
                assert dict(topic2.configs) == {"retention.ms": "60000"}
                p0 = again.replicas.get_partition("kept", 0)
                assert p0 is not None and p0.log.high_watermark == 2
            finally:
                await again.stop()

    run(main)
