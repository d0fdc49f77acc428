"""The registry's HTTP basic auth against the cluster's own SASL users (``--auth sasl``): the
user and password of each request are checked by logging in to the cluster, PLAIN or SCRAM;
confluent-kafka's ``SchemaRegistryClient`` with ``basic.auth.user.info`` works, anything else
gets Confluent's 401; failed logins are throttled per address; a login is remembered for the
cache's TTL and no longer; passwords never reach the log; https with a PEM certificate."""

from __future__ import annotations

import base64
import json
import logging
import os
import ssl
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism
from confluent_kafka.admin import UserScramCredentialUpsertion as Upsertion
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from gregor.cli.main import main as cli
from gregor.schema_registry.auth import SaslBasicAuth
from gregor.schema_registry.server import SchemaRegistryServer
from gregor.security.pem_files import pem_server_context
from gregor.testing import InProcessBroker

from .conftest import Registry, avro_record

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "security"))
from certs import Authority  # noqa: E402

USERS = {"admin": "admin-secret", "alice": "alice-secret"}
PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" '
    + " ".join(f'user_{u}="{p}"' for u, p in USERS.items())
    + ";"
)
SCHEMA = avro_record("Reading", ("sensor", "string"), ("value", "double"))


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def cluster() -> Iterator[InProcessBroker]:
    """PLAIN and SCRAM-SHA-256 on one SASL listener; the SCRAM user bob is made through the
    admin API, as ``kafka-configs --add-config SCRAM-SHA-256=...`` makes one."""
    config = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "num.partitions": 1,
    }
    with InProcessBroker(config) as b:
        set_scram(b, "bob", "bob-secret")
        yield b


def admin(broker: InProcessBroker) -> AdminClient:
    return AdminClient(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "admin",
            "sasl.password": "admin-secret",
        }
    )


def set_scram(broker: InProcessBroker, user: str, password: str) -> None:
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
    client = admin(broker)  # kept until the answer: a destroyed handle fails its futures
    futures = client.alter_user_scram_credentials([Upsertion(user, info, password.encode())])
    for f in futures.values():
        f.result(60)


def serve(
    broker: InProcessBroker,
    topic: str,
    mechanism: str = "PLAIN",
    user: str = "admin",
    password: str = "admin-secret",
    **auth_options: object,
) -> tuple[Registry, SaslBasicAuth]:
    cfg = {
        "bootstrap.servers": broker.bootstrap_servers,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }
    auth = SaslBasicAuth(cfg, **auth_options)  # type: ignore[arg-type]
    server = SchemaRegistryServer(cfg, "http://127.0.0.1:0", topic=topic, auth=auth)

    async def go() -> SchemaRegistryServer:
        return await server.start()

    return Registry(broker, topic, broker.call(go)), auth


def basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def sr_client(url: str, user_info: str | None) -> SchemaRegistryClient:
    conf = {"url": url}
    if user_info is not None:
        conf["basic.auth.user.info"] = user_info
    return SchemaRegistryClient(conf)


def test_confluent_clients_log_in_as_the_clusters_users(
    cluster: InProcessBroker, caplog: pytest.LogCaptureFixture
) -> None:
    reg, _ = serve(cluster, "_schemas_auth_plain")
    try:
        alice = sr_client(reg.url, "alice:alice-secret")
        schema_id = alice.register_schema("readings-value", Schema(SCHEMA, "AVRO"))
        assert json.loads(alice.get_schema(schema_id).schema_str) == json.loads(SCHEMA)
        assert sr_client(reg.url, "admin:admin-secret").get_subjects() == ["readings-value"]
        caplog.set_level(logging.WARNING, logger="gregor.schema_registry")
        for user_info in ("alice:wrong-password", "nobody:alice-secret"):
            with pytest.raises(SchemaRegistryError) as err:
                sr_client(reg.url, user_info).get_subjects()
            assert err.value.http_status_code == 401
            assert err.value.error_code == 401
        with pytest.raises(SchemaRegistryError) as err:
            sr_client(reg.url, None).register_schema("x-value", Schema(SCHEMA, "AVRO"))
        assert err.value.http_status_code == 401
        assert sr_client(reg.url, "admin:admin-secret").get_subjects() == ["readings-value"]
        logged = caplog.text
        assert "login failed for user alice" in logged and "login failed for user nobody" in logged
        assert "wrong-password" not in logged and "alice-secret" not in logged
    finally:
        reg.stop()


def test_scram_users_when_the_registry_speaks_scram(cluster: InProcessBroker) -> None:
    reg, _ = serve(cluster, "_schemas_auth_scram", "SCRAM-SHA-256", "bob", "bob-secret")
    try:
        bob = sr_client(reg.url, "bob:bob-secret")
        assert bob.register_schema("s-value", Schema(SCHEMA, "AVRO")) >= 1
        with pytest.raises(SchemaRegistryError) as err:
            sr_client(reg.url, "bob:bob-wrong").get_subjects()
        assert err.value.http_status_code == 401
        with pytest.raises(SchemaRegistryError) as err:  # a PLAIN-only user has no SCRAM login
            sr_client(reg.url, "alice:alice-secret").get_subjects()
        assert err.value.http_status_code == 401
    finally:
        reg.stop()


@pytest.mark.parametrize(
    "header",
    [
        None,
        "Bearer abc",
        "Basic !!!not-base64",
        "Basic " + base64.b64encode(b"no-colon").decode(),
        "Basic " + base64.b64encode(b":empty-user").decode(),
        "Basic " + base64.b64encode(b"alice:").decode(),
        "Basic " + base64.b64encode(b"ali\x1bce:alice-secret").decode(),
        "Basic " + "A" * 6_000,  # over the login's bound (aiohttp refuses lines over 8190)
    ],
)
def test_anything_but_a_basic_login_is_401_with_a_challenge(
    cluster: InProcessBroker, header: str | None
) -> None:
    reg, auth = serve(cluster, "_schemas_auth_raw")
    try:
        reply = reg.call("GET", "/subjects", headers={"Authorization": header} if header else {})
        assert reply.status == 401
        assert reply.body == {"error_code": 401, "message": "Unauthorized"}
        assert reply.headers["WWW-Authenticate"].startswith('Basic realm="')
        assert auth.throttle.in_progress == 0 and not auth._cache  # nothing reached the cluster
        assert reg.call("GET", "/subjects", headers=basic("alice", "alice-secret")).status == 200
    finally:
        reg.stop()


def test_failed_logins_are_throttled_per_address(cluster: InProcessBroker) -> None:
    clock = Clock()
    reg, auth = serve(cluster, "_schemas_auth_throttle", attempts=2, window_s=60.0, clock=clock)
    try:
        wrong = basic("alice", "guess")
        assert [reg.call("GET", "/subjects", headers=wrong).status for _ in range(2)] == [401, 401]
        third = reg.call("GET", "/subjects", headers=wrong)
        assert third.status == 429 and int(third.headers["Retry-After"]) == 30
        # the right password too: the bucket is the address's, not the user's
        assert reg.call("GET", "/subjects", headers=basic("alice", "alice-secret")).status == 429
        clock.now += 30.0
        assert reg.call("GET", "/subjects", headers=basic("alice", "alice-secret")).status == 200
    finally:
        reg.stop()


def test_a_changed_password_is_seen_when_the_cached_login_expires(
    cluster: InProcessBroker,
) -> None:
    set_scram(cluster, "carol", "carol-1")
    clock = Clock()
    reg, auth = serve(
        cluster, "_schemas_auth_cache", "SCRAM-SHA-256", "bob", "bob-secret", clock=clock
    )
    try:
        old = basic("carol", "carol-1")
        assert reg.call("GET", "/subjects", headers=old).status == 200
        set_scram(cluster, "carol", "carol-2")
        clock.now += auth.cache_ttl_s - 1
        assert reg.call("GET", "/subjects", headers=old).status == 200  # remembered
        clock.now += 2
        assert reg.call("GET", "/subjects", headers=old).status == 401
        assert reg.call("GET", "/subjects", headers=basic("carol", "carol-2")).status == 200
    finally:
        reg.stop()


def test_https_with_a_pem_certificate(cluster: InProcessBroker, tmp_path: Path) -> None:
    ca = Authority(tmp_path / "ca")
    pem = ca.server()
    cfg = {
        "bootstrap.servers": cluster.bootstrap_servers,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "admin",
        "sasl.password": "admin-secret",
    }
    tls = pem_server_context(str(pem.cert), str(pem.key), None)
    server = SchemaRegistryServer(
        cfg, "https://127.0.0.1:0", topic="_schemas_https", auth=SaslBasicAuth(cfg), tls=tls
    )

    async def go() -> SchemaRegistryServer:
        return await server.start()

    cluster.call(go)
    try:
        assert server.url.startswith("https://127.0.0.1:")
        client = SchemaRegistryClient(
            {
                "url": server.url,
                "basic.auth.user.info": "alice:alice-secret",
                "ssl.ca.location": str(ca.ca_path),
            }
        )
        assert client.register_schema("t-value", Schema(SCHEMA, "AVRO")) >= 1
        assert client.get_subjects() == ["t-value"]
        untrusting = ssl.create_default_context()  # the test CA is not trusted: refused
        import http.client

        conn = http.client.HTTPSConnection("127.0.0.1", server.bound_port, context=untrusting)
        with pytest.raises(ssl.SSLCertVerificationError):
            conn.request("GET", "/subjects")
        conn.close()
    finally:
        cluster.call(server.stop)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--auth", "sasl"], "security.protocol=SASL_PLAINTEXT or SASL_SSL, not PLAINTEXT"),
        (
            ["--auth", "sasl", "-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanism=GSSAPI"],
            "not sasl.mechanism=GSSAPI",
        ),
        (["--listener", "http://0.0.0.0:0"], "--auth is none"),
        (
            [
                "--auth",
                "sasl",
                "-X",
                "security.protocol=SASL_PLAINTEXT",
                "-X",
                "sasl.mechanism=PLAIN",
                "--listener",
                "http://0.0.0.0:0",
            ],
            "passwords would cross the network in clear",
        ),
        (["--listener", "https://127.0.0.1:0"], "an https:// listener needs a certificate"),
        (["--tls-key", "k.pem"], "--tls-key needs --tls-cert"),
    ],
)
def test_the_command_refuses_settings_it_cannot_honour(args: list[str], message: str) -> None:
    result = CliRunner().invoke(cli, ["schema-registry", "-b", "127.0.0.1:1", *args])
    assert result.exit_code == 2, result.output
    assert message in result.output
