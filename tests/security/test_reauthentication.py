"""KIP-368: session lifetime and re-authentication on SASL listeners (real broker, raw and
confluent-kafka clients)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from test_security_clients import PLAIN_JAAS, Raw, authenticate, handshake

from gregor.protocol.errors import ErrorCode
from gregor.protocol.messages.metadata import MetadataRequest
from gregor.testing import BrokerProcess

pytestmark = pytest.mark.interop

PLAIN_LIFETIME_MS = 600_000
SCRAM_LIFETIME_MS = 1_000


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    config = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "connections.max.reauth.ms": PLAIN_LIFETIME_MS,
        "listener.name.sasl_plaintext.scram-sha-256.connections.max.reauth.ms": SCRAM_LIFETIME_MS,
    }
    with BrokerProcess(config=config, log_level="DEBUG") as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap("PLAINTEXT")})
        info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
        for f in admin.alter_user_scram_credentials(
            [UserScramCredentialUpsertion("carol", info, b"carol-pw")]
        ).values():
            assert f.result(timeout=30) is None
        yield b
        assert "event=request.failed" not in b.read_log()


def login(raw: Raw, user: str = "alice", password: str = "alice-secret") -> int:
    assert handshake(raw, "PLAIN").error_code == 0
    resp = authenticate(raw, f"\0{user}\0{password}".encode())
    assert resp.error_code == 0, resp.error_message
    return int(resp.session_lifetime_ms)


def test_the_login_answers_the_session_lifetime_and_can_be_renewed(broker: BrokerProcess) -> None:
    raw = Raw(broker.bootstrap("SASL_PLAINTEXT"))
    try:
        assert login(raw) == PLAIN_LIFETIME_MS
        assert raw.request(MetadataRequest(topics=None), 1).brokers
        assert login(raw) == PLAIN_LIFETIME_MS  # re-authentication on the same connection
        assert raw.request(MetadataRequest(topics=None), 1).brokers
    finally:
        raw.close()
    assert "event=sasl.reauthenticated" in broker.read_log()


def test_re_authentication_may_not_change_the_principal(broker: BrokerProcess) -> None:
    raw = Raw(broker.bootstrap("SASL_PLAINTEXT"))
    try:
        login(raw)
        assert handshake(raw, "PLAIN").error_code == 0
        resp = authenticate(raw, b"\0admin\0admin-secret")
        assert resp.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert (
            resp.error_message
            == "Cannot change principals during re-authentication from User:alice: User:admin"
        )
        assert raw.closed_by_broker()
    finally:
        raw.close()


def test_re_authentication_may_not_change_the_mechanism(broker: BrokerProcess) -> None:
    raw = Raw(broker.bootstrap("SASL_PLAINTEXT"))
    try:
        login(raw)
        assert handshake(raw, "SCRAM-SHA-256").error_code == ErrorCode.ILLEGAL_SASL_STATE
        assert raw.closed_by_broker()
    finally:
        raw.close()


def test_an_expired_session_is_closed_at_its_next_request(broker: BrokerProcess) -> None:

    from gregor.security.scram import ScramCredential  # noqa: F401  (the client side is below)

    raw = Raw(broker.bootstrap("SASL_PLAINTEXT"))
    try:
        assert handshake(raw, "SCRAM-SHA-256").error_code == 0
        first = bytes(authenticate(raw, b"n,,n=carol,r=clientnonce").auth_bytes).decode()
        attrs = dict(a.split("=", 1) for a in first.split(","))
        salted = hashlib.pbkdf2_hmac(
            "sha256", b"carol-pw", base64.b64decode(attrs["s"]), int(attrs["i"])
        )
        client_key = hmac.new(salted, b"Client Key", "sha256").digest()
        without_proof = f"c=biws,r={attrs['r']}"
        auth = f"n=carol,r=clientnonce,{first},{without_proof}".encode()
        signature = hmac.new(hashlib.sha256(client_key).digest(), auth, "sha256").digest()
        proof = base64.b64encode(
            bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        ).decode()
        final = authenticate(raw, f"{without_proof},p={proof}".encode())
        assert final.error_code == 0 and final.session_lifetime_ms == SCRAM_LIFETIME_MS
        server_key = hmac.new(salted, b"Server Key", "sha256").digest()
        assert bytes(final.auth_bytes) == b"v=" + base64.b64encode(
            hmac.new(server_key, auth, "sha256").digest()
        )
        answered = 0
        while True:  # served until the session ends, then closed without an answer
            try:
                raw.request(MetadataRequest(topics=None), 1)
            except ConnectionError:
                break
            answered += 1
        assert answered >= 1
    finally:
        raw.close()
    assert "event=sasl.session_expired" in broker.read_log()


def test_librdkafka_re_authenticates_before_its_session_ends(broker: BrokerProcess) -> None:
    seen = broker.read_log().count("event=sasl.reauthenticated")
    p = Producer(
        {
            "bootstrap.servers": broker.bootstrap("SASL_PLAINTEXT"),
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": "carol",
            "sasl.password": "carol-pw",
        }
    )
    topic = f"reauth-{uuid.uuid4().hex[:8]}"
    delivered: list[int] = []
    sent = 0
    # Keep producing until the broker has seen this client log in again twice, then once more.
    while broker.read_log().count("event=sasl.reauthenticated") < seen + 2:
        p.produce(
            topic,
            b"x",
            on_delivery=lambda err, msg: delivered.append(msg.offset()) if err is None else None,
        )
        sent += 1
        p.flush(30)
    p.produce(
        topic,
        b"last",
        on_delivery=lambda err, msg: delivered.append(msg.offset()) if err is None else None,
    )
    sent += 1
    assert p.flush(30) == 0
    assert delivered == list(range(sent))


def test_a_client_that_stalls_mid_login_is_closed_when_idle() -> None:
    with BrokerProcess(
        config={
            "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
            "sasl.enabled.mechanisms": "SCRAM-SHA-256",
            "connections.max.idle.ms": 300,
        }
    ) as idle:
        stalled = Raw(idle.bootstrap_servers)
        try:
            assert handshake(stalled, "SCRAM-SHA-256").error_code == 0
            # A handshake, then nothing: the idle check closes this connection.
            assert stalled.frame() is None
        finally:
            stalled.close()
        assert "event=connection.idle_closed" in idle.read_log()
