"""Logins from the Java client against a real Gregor broker: SASL/SCRAM, SSL with a client
certificate (mTLS), OAUTHBEARER (Kafka's unsecured JWT login) and a delegation token (a SCRAM
login with ``tokenauth``, which neither librdkafka nor the Python clients can make), the token
made and described with Kafka's ``kafka-delegation-tokens``.

Each login is checked by who the broker took it for: the broker runs the ACL authorizer with no
access by default, each principal may use one topic only, and a record goes there and back; a
wrong secret is refused at login. The PLAINTEXT listener is the operators' (``User:ANONYMOUS`` is
a super user there) and sets up users and ACLs."""

from __future__ import annotations

import os
import re
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gregor.testing import BrokerProcess
from gregor.testing.kafka import JavaError

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "security"))
from certs import Authority, Pem  # noqa: E402

pytestmark = pytest.mark.jvm

SECRET = "token-signing-secret"
OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


class Env:
    def __init__(self, broker: BrokerProcess, ca: Authority, alice_cert: Pem, tmp: Path) -> None:
        self.broker = broker
        self.ca = ca
        self.alice_cert = alice_cert
        self.tmp = tmp

    def admin(self) -> dict[str, str]:
        return {"bootstrap.servers": self.broker.bootstrap("PLAINTEXT")}

    def scram(self, user: str, password: str, **extra: str) -> dict[str, str]:
        jaas = f'{SCRAM_MODULE} required username="{user}" password="{password}"'
        jaas += "".join(f' {k}="{v}"' for k, v in extra.items()) + ";"
        return {
            "bootstrap.servers": self.broker.bootstrap("SASL_PLAINTEXT"),
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.jaas.config": jaas,
        }

    def mtls(self, cert: Pem | None) -> dict[str, str]:
        props = {
            "bootstrap.servers": self.broker.bootstrap("SSL"),
            "security.protocol": "SSL",
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.ca.ca_path),
        }
        if cert is not None:
            props |= {
                "ssl.keystore.type": "PEM",
                "ssl.keystore.certificate.chain": cert.cert_text,
                "ssl.keystore.key": cert.key_text,
            }
        return props

    def oauth(self, subject: str) -> dict[str, str]:
        return {
            "bootstrap.servers": self.broker.bootstrap("SASL_PLAINTEXT"),
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.jaas.config": f'{OAUTH_MODULE} required unsecuredLoginStringClaim_sub="{subject}";',
        }


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, java_harness) -> Iterator[Env]:  # noqa: ANN001
    d = tmp_path_factory.mktemp("java-pki")
    ca = Authority(d / "ca")
    server, alice = ca.server(), ca.client("alice", CN="alice", OU="eng", O="Gregor")
    config = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SSL:SSL",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,OAUTHBEARER",
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": f"{OAUTH_MODULE} required;",
        "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": f"{SCRAM_MODULE} required;",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(server.combined),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(ca.ca_path),
        "ssl.client.auth": "required",
        "ssl.principal.mapping.rules": "RULE:^CN=([^,]*),.*$/$1/,DEFAULT",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS",
        "delegation.token.secret.key": SECRET,
        "num.partitions": 1,
    }
    with BrokerProcess(config=config) as b:
        e = Env(b, ca, alice, d)
        plain = b.bootstrap("PLAINTEXT")
        for user, password in (("alice", "alice-pw"), ("bob", "bob-pw")):
            java_harness.tool(
                "kafka-configs",
                "--bootstrap-server",
                plain,
                "--alter",
                "--entity-type",
                "users",
                "--entity-name",
                user,
                "--add-config",
                f"SCRAM-SHA-256=[iterations=4096,password={password}]",
            ).check()
        yield e
        assert b.running, b.read_log()[-4000:]
        log = b.read_log()
        assert "alice-pw" not in log and SECRET not in log


def own_topic(java_harness, env: Env, principal: str) -> str:  # noqa: ANN001
    """A topic only ``principal`` may write, read and describe (and its consumers' groups)."""
    topic = f"sec-{uuid.uuid4().hex[:8]}"
    plain = env.broker.bootstrap("PLAINTEXT")
    java_harness.tool(
        "kafka-topics", "--bootstrap-server", plain, "--create", "--topic", topic
    ).check()
    for resource, operations in (
        (["--topic", topic], ["Write", "Read", "Describe"]),
        (["--group", "*"], ["Read"]),
    ):
        args = [x for op in operations for x in ("--operation", op)]
        java_harness.tool(
            "kafka-acls",
            "--bootstrap-server",
            plain,
            "--add",
            "--allow-principal",
            principal,
            *args,
            *resource,
        ).check()
    return topic


def round_trip(java_harness, props: dict[str, Any], topic: str) -> list[str]:  # noqa: ANN001
    values = [f"{topic}-{i}" for i in range(3)]
    java_harness.call(
        "produce",
        props={**props, "enable.idempotence": "false"},
        topic=topic,
        records=[{"value": v} for v in values],
    )
    got = java_harness.call(
        "consume", props={**props, "group.id": f"g-{topic}"}, topics=[topic], count=3
    )
    return [r["value"] for r in got["records"]]


def refused(java_harness, props: dict[str, Any], topic: str, wait_ms: int = 20000) -> str:  # noqa: ANN001
    """The exception a produce with ``props`` fails with."""
    with pytest.raises(JavaError) as e:
        java_harness.call(
            "produce",
            props={
                **props,
                "enable.idempotence": "false",
                "max.block.ms": str(wait_ms),
                "delivery.timeout.ms": "20000",
                "request.timeout.ms": "10000",
            },
            topic=topic,
            records=[{"value": "x"}],
        )
    return str(e.value).splitlines()[0]


def test_scram_login(java_harness, env: Env) -> None:  # noqa: ANN001
    topic = own_topic(java_harness, env, "User:alice")
    assert round_trip(java_harness, env.scram("alice", "alice-pw"), topic) == [
        f"{topic}-{i}" for i in range(3)
    ]
    assert "TopicAuthorizationException" in refused(java_harness, env.scram("bob", "bob-pw"), topic)
    assert "SaslAuthenticationException" in refused(
        java_harness, env.scram("alice", "wrong"), topic
    )


def test_mtls_login(java_harness, env: Env) -> None:  # noqa: ANN001
    topic = own_topic(java_harness, env, "User:alice")  # the certificate's CN, by the mapping rule
    assert round_trip(java_harness, env.mtls(env.alice_cert), topic) == [
        f"{topic}-{i}" for i in range(3)
    ]


def test_mtls_without_a_certificate_fails_authentication(java_harness, env: Env) -> None:  # noqa: ANN001
    topic = own_topic(java_harness, env, "User:alice")
    # Refused at once with the TLS alert; a dropped connection instead would have the client
    # retry until max.block.ms ends it with a TimeoutException.
    assert "SslAuthenticationException" in refused(java_harness, env.mtls(None), topic)


def test_oauthbearer_login(java_harness, env: Env) -> None:  # noqa: ANN001
    topic = own_topic(java_harness, env, "User:carol")
    assert round_trip(java_harness, env.oauth("carol"), topic) == [f"{topic}-{i}" for i in range(3)]
    assert "TopicAuthorizationException" in refused(java_harness, env.oauth("dave"), topic)


def test_delegation_token_login(java_harness, env: Env) -> None:  # noqa: ANN001
    topic = own_topic(java_harness, env, "User:alice")
    config = env.tmp / "alice.properties"
    config.write_text(
        "".join(
            f"{k}={v}\n"
            for k, v in env.scram("alice", "alice-pw").items()
            if k != "bootstrap.servers"
        )
    )
    sasl = env.broker.bootstrap("SASL_PLAINTEXT")
    out = (
        java_harness.tool(
            "kafka-delegation-tokens",
            "--bootstrap-server",
            sasl,
            "--command-config",
            str(config),
            "--create",
            "--max-life-time-period",
            "-1",
        )
        .check()
        .stdout
    )
    created = re.search(r"^(\S+) (\S+) +User:alice +User:alice ", out, re.M)
    assert created, out
    token_id, hmac = created.group(1), created.group(2)
    out = (
        java_harness.tool(
            "kafka-delegation-tokens",
            "--bootstrap-server",
            sasl,
            "--command-config",
            str(config),
            "--describe",
            "--owner-principal",
            "User:alice",
        )
        .check()
        .stdout
    )
    assert token_id in out and "User:alice" in out
    # The token logs in as its owner, alice: her topic works, with no password of hers.
    token = env.scram(token_id, hmac, tokenauth="true")
    assert round_trip(java_harness, token, topic) == [f"{topic}-{i}" for i in range(3)]
    assert "SaslAuthenticationException" in refused(
        java_harness, env.scram(token_id, "not-the-hmac", tokenauth="true"), topic
    )
    # Expired (expire now): the token no longer logs in.
    java_harness.tool(
        "kafka-delegation-tokens",
        "--bootstrap-server",
        sasl,
        "--command-config",
        str(config),
        "--expire",
        "--expiry-time-period",
        "-1",
        "--hmac",
        hmac,
    ).check()
    assert "SaslAuthenticationException" in refused(java_harness, token, topic)
