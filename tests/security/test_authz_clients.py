"""ACL enforcement seen by a real client (confluent-kafka) on a SASL_PLAINTEXT listener.

One broker with Kafka's authorizer settings (``authorizer.class.name``, ``super.users``):
``admin`` is a super user and grants ACLs; ``alice`` and ``bob`` are ordinary users. For each
API family a principal without the ACL gets Kafka's error and no data, and with the ACL the
same call works; a DENY beats an ALLOW; PREFIXED patterns match by prefix.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from gregor.testing import BrokerProcess

pytestmark = pytest.mark.interop

BUDGET_S = 30.0
USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" '
    + " ".join(f'user_{u}="{p}"' for u, p in USERS.items())
    + ";"
)


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    config = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
        "num.partitions": 1,
        "offsets.topic.num.partitions": 1,
        "transaction.state.log.num.partitions": 1,
    }
    with BrokerProcess(config=config) as b:
        yield b


def conf(broker: BrokerProcess, user: str, **extra: Any) -> dict[str, Any]:
    return {
        "bootstrap.servers": broker.bootstrap("SASL_PLAINTEXT"),
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": USERS[user],
        **extra,
    }


_ADMINS: dict[tuple[str, str], AdminClient] = {}


def admin(broker: BrokerProcess, user: str = "admin") -> AdminClient:
    """One admin client per user, kept (a client dropped early fails its pending futures)."""
    key = (broker.bootstrap("SASL_PLAINTEXT"), user)
    if key not in _ADMINS:
        _ADMINS[key] = AdminClient(conf(broker, user))
    return _ADMINS[key]


def grant(broker: BrokerProcess, *bindings: AclBinding) -> None:
    for f in admin(broker).create_acls(list(bindings)).values():
        f.result(BUDGET_S)


def acl(
    rtype: ResourceType,
    name: str,
    principal: str,
    op: AclOperation,
    perm: AclPermissionType = AclPermissionType.ALLOW,
    pattern: ResourcePatternType = ResourcePatternType.LITERAL,
) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, "*", op, perm)


def new_topic(broker: BrokerProcess, prefix: str = "authz") -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    admin(broker).create_topics([NewTopic(name, 1, 1)])[name].result(BUDGET_S)
    return name


def produce(broker: BrokerProcess, user: str, topic: str, values: list[bytes]) -> list[int | None]:
    """Each record's delivery error code (None when delivered)."""
    results: list[int | None] = []
    p = Producer(
        conf(broker, user, **{"enable.idempotence": False, "acks": 1, "message.timeout.ms": 20000})
    )
    for v in values:
        p.produce(
            topic, v, on_delivery=lambda err, _msg: results.append(err.code() if err else None)
        )
    while len(results) < len(values):
        p.poll(0.2)
    return results


def consume_assigned(
    broker: BrokerProcess, user: str, topic: str, group: str, count: int
) -> tuple[list[bytes], int | None]:
    """Up to ``count`` values read from partition 0, or the error the consumer reported."""
    c = Consumer(
        conf(
            broker,
            user,
            **{"group.id": group, "enable.auto.commit": False, "auto.offset.reset": "earliest"},
        )
    )
    values: list[bytes] = []
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        while len(values) < count:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    continue
                return values, m.error().code()
            values.append(m.value())
        return values, None
    finally:
        c.close()


def test_produce_needs_write_on_the_topic(broker: BrokerProcess) -> None:
    topic = new_topic(broker)
    assert produce(broker, "alice", topic, [b"a"]) == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    grant(broker, acl(ResourceType.TOPIC, topic, "User:alice", AclOperation.WRITE))
    assert produce(broker, "alice", topic, [b"a", b"b"]) == [None, None]
    # bob still may not; nothing of his was appended.
    assert produce(broker, "bob", topic, [b"c"]) == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    values, err = consume_assigned(broker, "admin", topic, f"g-{uuid.uuid4().hex[:6]}", 2)
    assert (values, err) == ([b"a", b"b"], None)
    # Listing offsets needs DESCRIBE on the topic (WRITE implies it); to bob the topic is
    # hidden, so his client knows no such partition.
    c = Consumer(conf(broker, "bob", **{"group.id": "wm"}))
    try:
        with pytest.raises(KafkaException) as e:
            c.get_watermark_offsets(TopicPartition(topic, 0), timeout=BUDGET_S)
        assert e.value.args[0].code() == KafkaError._UNKNOWN_PARTITION
    finally:
        c.close()
    c = Consumer(conf(broker, "alice", **{"group.id": "wm"}))
    try:
        assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=BUDGET_S) == (0, 2)
    finally:
        c.close()


def test_consume_needs_read_on_topic_and_group(broker: BrokerProcess) -> None:
    topic = new_topic(broker)
    assert produce(broker, "admin", topic, [b"x", b"y", b"z"]) == [None, None, None]
    group = f"g-{uuid.uuid4().hex[:6]}"
    # DESCRIBE shows alice the topic; fetching from it needs READ.
    grant(
        broker,
        acl(ResourceType.GROUP, group, "User:alice", AclOperation.READ),
        acl(ResourceType.TOPIC, topic, "User:alice", AclOperation.DESCRIBE),
    )
    values, err = consume_assigned(broker, "alice", topic, group, 3)
    assert (values, err) == ([], KafkaError.TOPIC_AUTHORIZATION_FAILED)
    grant(broker, acl(ResourceType.TOPIC, topic, "User:alice", AclOperation.READ))
    values, err = consume_assigned(broker, "alice", topic, group, 3)
    assert (values, err) == ([b"x", b"y", b"z"], None)
    # Committing needs READ on the group: refused for another group that alice may only
    # describe (finding its coordinator needs that), then granted.
    other = f"g-{uuid.uuid4().hex[:6]}"
    grant(broker, acl(ResourceType.GROUP, other, "User:alice", AclOperation.DESCRIBE))
    c = Consumer(conf(broker, "alice", **{"group.id": other, "enable.auto.commit": False}))
    try:
        with pytest.raises(KafkaException) as e:
            c.commit(offsets=[TopicPartition(topic, 0, 3)], asynchronous=False)
        assert e.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    finally:
        c.close()
    grant(broker, acl(ResourceType.GROUP, other, "User:alice", AclOperation.READ))
    c = Consumer(conf(broker, "alice", **{"group.id": other, "enable.auto.commit": False}))
    try:
        done = c.commit(offsets=[TopicPartition(topic, 0, 3)], asynchronous=False)
        assert [(tp.offset, tp.error) for tp in done] == [(3, None)]
        assert [tp.offset for tp in c.committed([TopicPartition(topic, 0)], timeout=BUDGET_S)] == [
            3
        ]
    finally:
        c.close()


def test_subscribe_needs_read_on_the_group(broker: BrokerProcess) -> None:
    topic = new_topic(broker)
    grant(broker, acl(ResourceType.TOPIC, topic, "User:bob", AclOperation.READ))
    c = Consumer(
        conf(
            broker, "bob", **{"group.id": f"g-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False}
        )
    )
    try:
        c.subscribe([topic])
        while True:
            m = c.poll(0.5)
            if m is not None and m.error():
                assert m.error().code() == KafkaError.GROUP_AUTHORIZATION_FAILED
                break
        assert c.assignment() == []
    finally:
        c.close()


def test_metadata_lists_only_describable_topics_and_prefixed_acls_match(
    broker: BrokerProcess,
) -> None:
    tag = uuid.uuid4().hex[:6]
    mine = [new_topic(broker, f"pay-{tag}") for _ in range(2)]
    other = new_topic(broker, f"hr-{tag}")
    assert not {*mine, other} & set(admin(broker, "bob").list_topics(timeout=BUDGET_S).topics)
    grant(
        broker,
        acl(
            ResourceType.TOPIC,
            f"pay-{tag}",
            "User:bob",
            AclOperation.DESCRIBE,
            pattern=ResourcePatternType.PREFIXED,
        ),
    )
    visible = set(admin(broker, "bob").list_topics(timeout=BUDGET_S).topics)
    assert {*mine, other} & visible == set(mine)
    # A topic named explicitly that bob may not describe is refused, existing or not.
    md = admin(broker, "bob").list_topics(other, timeout=BUDGET_S)
    assert md.topics[other].error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_deny_beats_allow(broker: BrokerProcess) -> None:
    topic = new_topic(broker)
    grant(
        broker,
        acl(ResourceType.TOPIC, topic, "User:*", AclOperation.WRITE),
        acl(ResourceType.TOPIC, topic, "User:alice", AclOperation.WRITE, AclPermissionType.DENY),
    )
    assert produce(broker, "bob", topic, [b"b"]) == [None]
    assert produce(broker, "alice", topic, [b"a"]) == [KafkaError.TOPIC_AUTHORIZATION_FAILED]


def test_admin_operations_need_their_acls(broker: BrokerProcess) -> None:
    name = f"authz-admin-{uuid.uuid4().hex[:8]}"
    with pytest.raises(KafkaException) as e:
        admin(broker, "alice").create_topics([NewTopic(name, 1, 1)])[name].result(BUDGET_S)
    assert e.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert name not in admin(broker).list_topics(timeout=BUDGET_S).topics
    grant(broker, acl(ResourceType.TOPIC, name, "User:alice", AclOperation.CREATE))
    admin(broker, "alice").create_topics([NewTopic(name, 1, 1)])[name].result(BUDGET_S)
    assert name in admin(broker).list_topics(timeout=BUDGET_S).topics
    resource = ConfigResource(ConfigResource.Type.TOPIC, name)
    with pytest.raises(KafkaException) as e:
        admin(broker, "alice").describe_configs([resource])[resource].result(BUDGET_S)
    assert e.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # ALTER_CONFIGS implies DESCRIBE_CONFIGS.
    grant(broker, acl(ResourceType.TOPIC, name, "User:alice", AclOperation.ALTER_CONFIGS))
    configs = admin(broker, "alice").describe_configs([resource])[resource].result(BUDGET_S)
    assert configs["cleanup.policy"].value == "delete"
    with pytest.raises(KafkaException) as e:
        admin(broker, "alice").delete_topics([name])[name].result(BUDGET_S)
    assert e.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert name in admin(broker).list_topics(timeout=BUDGET_S).topics


def test_transactional_id_needs_write(broker: BrokerProcess) -> None:
    txn = f"txn-{uuid.uuid4().hex[:6]}"
    p = Producer(conf(broker, "alice", **{"transactional.id": txn}))
    with pytest.raises(KafkaException) as e:
        p.init_transactions(BUDGET_S)
    assert e.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    topic = new_topic(broker)
    grant(
        broker,
        acl(ResourceType.TRANSACTIONAL_ID, txn, "User:alice", AclOperation.WRITE),
        acl(ResourceType.TOPIC, topic, "User:alice", AclOperation.WRITE),
    )
    p = Producer(conf(broker, "alice", **{"transactional.id": txn}))
    p.init_transactions(BUDGET_S)
    p.begin_transaction()
    p.produce(topic, b"in-txn")
    p.commit_transaction(BUDGET_S)
    values, err = consume_assigned(broker, "admin", topic, f"g-{uuid.uuid4().hex[:6]}", 1)
    assert (values, err) == ([b"in-txn"], None)


def test_kafka_python_sees_the_same_refusals(broker: BrokerProcess) -> None:
    """kafka-python (SASL/PLAIN): a refused produce raises TopicAuthorizationFailedError; once
    granted, the records are written and read back exactly."""
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.errors import TopicAuthorizationFailedError

    def kp_conf(user: str) -> dict[str, Any]:
        return {
            "bootstrap_servers": broker.bootstrap("SASL_PLAINTEXT"),
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "PLAIN",
            "sasl_plain_username": user,
            "sasl_plain_password": USERS[user],
        }

    topic = new_topic(broker)
    # DESCRIBE lets bob see the topic; writing needs WRITE.
    grant(broker, acl(ResourceType.TOPIC, topic, "User:bob", AclOperation.DESCRIBE))
    p = KafkaProducer(**kp_conf("bob"), acks=1, retries=0, max_block_ms=20000)
    try:
        with pytest.raises(TopicAuthorizationFailedError):
            p.send(topic, b"refused").get(timeout=BUDGET_S)
        grant(broker, acl(ResourceType.TOPIC, topic, "User:bob", AclOperation.WRITE))
        assert [p.send(topic, v).get(timeout=BUDGET_S).offset for v in (b"k1", b"k2")] == [0, 1]
    finally:
        p.close()
    grant(broker, acl(ResourceType.TOPIC, topic, "User:bob", AclOperation.READ))
    c = KafkaConsumer(
        **kp_conf("bob"), auto_offset_reset="earliest", consumer_timeout_ms=int(BUDGET_S * 1000)
    )
    try:
        from kafka import TopicPartition as KTP

        c.assign([KTP(topic, 0)])
        got = []
        for m in c:
            got.append(m.value)
            if len(got) == 2:
                break
        assert got == [b"k1", b"k2"]
    finally:
        c.close()
