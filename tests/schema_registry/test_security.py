"""The registry as a client of a secured cluster: its client settings (SASL here) reach every
connection it makes, and a user the cluster does not allow to use the topic stops it with the
cluster's own error."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gregor.client import KafkaError
from gregor.schema_registry.server import SchemaRegistryServer
from gregor.testing import InProcessBroker

from .conftest import Registry, avro_record

USERS = {"admin": "admin-secret", "alice": "alice-secret"}
PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" '
    + " ".join(f'user_{u}="{p}"' for u, p in USERS.items())
    + ";"
)


@pytest.fixture(scope="module")
def secured() -> Iterator[InProcessBroker]:
    config = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
    }
    with InProcessBroker(config) as b:
        yield b


def client_config(broker: InProcessBroker, user: str, password: str) -> dict[str, str]:
    return {
        "bootstrap.servers": broker.bootstrap_servers,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": password,
    }


def start(broker: InProcessBroker, cfg: dict[str, str], topic: str) -> SchemaRegistryServer:
    server = SchemaRegistryServer(cfg, "http://127.0.0.1:0", topic=topic)

    async def go() -> SchemaRegistryServer:
        return await server.start()

    return broker.call(go)


def test_a_registry_on_a_sasl_cluster(secured: InProcessBroker) -> None:
    server = start(secured, client_config(secured, "admin", "admin-secret"), "_schemas_sasl")
    reg = Registry(secured, "_schemas_sasl", server)
    try:
        assert reg.post(
            "/subjects/s/versions", {"schema": avro_record("R", ("a", "int"))}
        ).body == {
            "id": 1,
            "version": 1,
        }
    finally:
        reg.stop()


def test_a_user_without_rights_on_the_topic_is_refused(secured: InProcessBroker) -> None:
    with pytest.raises(KafkaError) as err:
        start(secured, client_config(secured, "alice", "alice-secret"), "_schemas_sasl_alice")
    assert getattr(err.value, "name", "") == "TOPIC_AUTHORIZATION_FAILED", err.value


def test_a_wrong_password_is_refused(secured: InProcessBroker) -> None:
    with pytest.raises(KafkaError) as err:
        start(secured, client_config(secured, "admin", "wrong"), "_schemas_sasl_wrong")
    assert "authentication" in str(err.value).lower() or "SASL" in str(err.value), err.value
    assert "wrong" not in str(err.value)  # the password is not in the error
