"""Real clients against TLS and SASL listeners of a real broker process.

One broker serves five listeners: PLAINTEXT (setup), SSL (client certificate requested),
MTLS (SSL, client certificate required), SASL_PLAINTEXT (PLAIN, SCRAM-SHA-256) and SASL_SSL
(PLAIN, SCRAM-SHA-256, SCRAM-SHA-512). SCRAM users are created through
AlterUserScramCredentials by confluent-kafka's admin client. Rejections (wrong password,
unknown user, untrusted or missing certificate, garbage) close only that connection: every
test that provokes one then checks the broker still serves a good client.
"""

from __future__ import annotations

import os
import socket
import ssl
import struct
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from certs import Pki
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from sasl_clients import authentication_error

from gregor.protocol.connection import ClientConnection
from gregor.protocol.errors import ErrorCode
from gregor.protocol.messages.api_versions import ApiVersionsRequest
from gregor.protocol.messages.metadata import MetadataRequest
from gregor.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from gregor.protocol.messages.sasl_handshake import SaslHandshakeRequest
from gregor.testing import BrokerProcess

pytestmark = pytest.mark.interop


PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";'
)
SCRAM_USERS = {"scram256": ("SCRAM-SHA-256", "pw-256"), "scram512": ("SCRAM-SHA-512", "pw-512")}


@pytest.fixture(scope="module")
def broker(pki: Pki) -> Iterator[BrokerProcess]:
    config = {
        "listeners": ",".join(
            f"{n}://127.0.0.1:0" for n in ("PLAINTEXT", "SSL", "MTLS", "SASL_PLAINTEXT", "SASL_SSL")
        ),
        "listener.security.protocol.map": (
            "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"
        ),
        "num.partitions": 1,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pki.server.combined),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(pki.ca.ca_path),
        "ssl.client.auth": "requested",
        "listener.name.mtls.ssl.client.auth": "required",
        "ssl.principal.mapping.rules": "RULE:^CN=([^,]*),.*$/$1/,DEFAULT",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
    }
    with BrokerProcess(config=config, log_level="DEBUG") as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap("PLAINTEXT")})
        futures = admin.alter_user_scram_credentials(
            [
                UserScramCredentialUpsertion(
                    user,
                    ScramCredentialInfo(getattr(ScramMechanism, mech.replace("-", "_")), 4096),
                    pw.encode(),
                )
                for user, (mech, pw) in SCRAM_USERS.items()
            ]
        )
        for f in futures.values():
            assert f.result(timeout=30) is None
        yield b
        assert b.running, f"broker died:\n{b.read_log()[-4000:]}"
        log = b.read_log()
        assert "event=request.failed" not in log, log[-4000:]
        for secret in ("alice-secret", "pw-256", "pw-512", "wrong-password"):
            assert secret not in log  # credentials never reach a log line


# --- client settings ---


def tls(pki: Pki, cert: Any = None) -> dict[str, str]:
    out = {"ssl.ca.location": str(pki.ca.ca_path)}
    if cert is not None:
        out |= {"ssl.certificate.location": str(cert.cert), "ssl.key.location": str(cert.key)}
    return out


def sasl(mechanism: str, user: str, password: str) -> dict[str, str]:
    return {"sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password}


def confluent_round_trip(bootstrap: str, settings: dict[str, str], n: int = 5) -> None:
    """Produce ``n`` records to a new topic and consume exactly them back."""
    topic = f"sec-{uuid.uuid4().hex[:8]}"
    base = {"bootstrap.servers": bootstrap, **settings}
    p = Producer({**base, "acks": "all"})
    for i in range(n):
        p.produce(topic, key=b"k%d" % i, value=b"v%d" % i)
    assert p.flush(60) == 0
    c = Consumer(
        {**base, "group.id": topic, "auto.offset.reset": "earliest", "enable.auto.commit": False}
    )
    c.subscribe([topic])
    got: list[tuple[bytes | None, bytes | None, int]] = []
    try:
        while len(got) < n:
            m = c.poll(1.0)
            if m is None:
                continue
            assert m.error() is None, m.error()
            got.append((m.key(), m.value(), m.offset()))
    finally:
        c.close()
    assert got == [(b"k%d" % i, b"v%d" % i, i) for i in range(n)]


def kafka_python_round_trip(bootstrap: str, settings: dict[str, Any], n: int = 5) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    topic = f"sec-kp-{uuid.uuid4().hex[:8]}"
    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", **settings)
    for i in range(n):
        p.send(topic, key=b"k%d" % i, value=b"v%d" % i)
    p.flush()
    p.close()
    c = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        group_id=topic,
        enable_auto_commit=False,
        **settings,
    )
    got: list[tuple[bytes, bytes, int]] = []
    try:
        while len(got) < n:
            for records in c.poll(timeout_ms=1000).values():
                got += [(r.key, r.value, r.offset) for r in records]
    finally:
        c.close()
    assert got == [(b"k%d" % i, b"v%d" % i, i) for i in range(n)]


# --- a raw client, for what real clients never send ---


class Raw:
    def __init__(self, bootstrap: str, context: ssl.SSLContext | None = None) -> None:
        host, port = bootstrap.rsplit(":", 1)
        sock = socket.create_connection((host, int(port)), timeout=30)
        self.sock = context.wrap_socket(sock, server_hostname="localhost") if context else sock
        self.conn = ClientConnection(client_id="raw")

    def request(self, message: Any, version: int) -> Any:
        _, data = self.conn.send_request(message, version)
        self.sock.sendall(data)
        while True:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise ConnectionError("closed")
            done = self.conn.receive_data(chunk)
            if done:
                return done[0].response

    def frame(self) -> bytes | None:
        head = self._exact(4)
        return None if head is None else self._exact(struct.unpack(">i", head)[0])

    def _exact(self, n: int) -> bytes | None:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                return None
            buf += chunk
        return buf

    def closed_by_broker(self) -> bool:
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, ssl.SSLError):
            return True

    def close(self) -> None:
        self.sock.close()


def handshake(raw: Raw, mechanism: str, version: int = 1) -> Any:
    return raw.request(SaslHandshakeRequest(mechanism=mechanism), version)


def authenticate(raw: Raw, token: bytes, version: int = 2) -> Any:
    return raw.request(SaslAuthenticateRequest(auth_bytes=token), version)


def logged_principal(broker: BrokerProcess, event: str, principal: str) -> bool:
    return any(
        f"event={event}" in line and f"principal={principal}" in line
        for line in broker.read_log().splitlines()
    )


# --- SSL ---


def test_ssl_without_a_client_certificate(broker: BrokerProcess, pki: Pki) -> None:
    confluent_round_trip(broker.bootstrap("SSL"), {"security.protocol": "SSL", **tls(pki)})


def test_ssl_with_a_client_certificate_maps_the_principal(broker: BrokerProcess, pki: Pki) -> None:
    confluent_round_trip(
        broker.bootstrap("MTLS"), {"security.protocol": "SSL", **tls(pki, pki.alice)}
    )
    assert logged_principal(broker, "ssl.authenticated", "User:alice")


def test_kafka_python_over_ssl(broker: BrokerProcess, pki: Pki) -> None:
    kafka_python_round_trip(
        broker.bootstrap("MTLS"),
        {
            "security_protocol": "SSL",
            "ssl_cafile": str(pki.ca.ca_path),
            "ssl_certfile": str(pki.alice.cert),
            "ssl_keyfile": str(pki.alice.key),
        },
    )


def _tls_client(pki: Pki, cert: Any = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(pki.ca.ca_path))
    if cert is not None:
        ctx.load_cert_chain(str(cert.cert), str(cert.key))
    return ctx


def _refused(bootstrap: str, ctx: ssl.SSLContext) -> bool:
    """True when the broker refuses the TLS session (during or right after the handshake)."""
    try:
        raw = Raw(bootstrap, ctx)
    except (ssl.SSLError, ConnectionResetError):
        return True
    try:
        raw.request(ApiVersionsRequest(), 0)
    except (ssl.SSLError, ConnectionError):
        return True
    finally:
        raw.close()
    return False


def test_required_client_auth_refuses_a_client_without_a_certificate(
    broker: BrokerProcess, pki: Pki
) -> None:
    assert _refused(broker.bootstrap("MTLS"), _tls_client(pki))
    assert not _refused(broker.bootstrap("MTLS"), _tls_client(pki, pki.alice))


def test_an_untrusted_client_certificate_is_refused(broker: BrokerProcess, pki: Pki) -> None:
    for listener in ("SSL", "MTLS"):
        assert _refused(broker.bootstrap(listener), _tls_client(pki, pki.stranger))
    confluent_round_trip(
        broker.bootstrap("MTLS"), {"security.protocol": "SSL", **tls(pki, pki.alice)}, n=1
    )


def _refusal_reason(bootstrap: str, ctx: ssl.SSLContext) -> str:
    """Why the client's TLS session was refused, as OpenSSL on the client side reports it (the
    alert it received), or the kind of error it saw instead."""
    try:
        raw = Raw(bootstrap, ctx)
        try:
            raw.request(ApiVersionsRequest(), 0)
        finally:
            raw.close()
    except ssl.SSLError as e:
        return str(e.reason)
    except OSError as e:
        return type(e).__name__
    return "accepted"


@pytest.mark.parametrize(
    ("version", "no_certificate"),
    [
        (ssl.TLSVersion.TLSv1_2, "SSLV3_ALERT_HANDSHAKE_FAILURE"),
        (ssl.TLSVersion.TLSv1_3, "TLSV13_ALERT_CERTIFICATE_REQUIRED"),
    ],
)
def test_a_refused_tls_handshake_sends_the_alert(
    broker: BrokerProcess, pki: Pki, version: ssl.TLSVersion, no_certificate: str
) -> None:
    """As from Kafka, the client hears why its TLS session was refused (OpenSSL's alert) rather
    than seeing the connection dropped mid-handshake, which the Java client takes for a
    network failure and retries until its timeout instead of failing with
    SslAuthenticationException (tests/interop/test_java_security.py)."""
    no_cert, stranger = _tls_client(pki), _tls_client(pki, pki.stranger)
    for ctx in (no_cert, stranger):
        ctx.minimum_version = ctx.maximum_version = version
    assert _refusal_reason(broker.bootstrap("MTLS"), no_cert) == no_certificate
    assert _refusal_reason(broker.bootstrap("MTLS"), stranger) == "TLSV1_ALERT_UNKNOWN_CA"
    # The listener serves the next client as before.
    confluent_round_trip(
        broker.bootstrap("MTLS"), {"security.protocol": "SSL", **tls(pki, pki.alice)}, n=1
    )


def test_garbage_instead_of_a_tls_handshake_closes_that_connection_only(
    broker: BrokerProcess, pki: Pki
) -> None:
    with socket.create_connection(("127.0.0.1", broker.listener_ports["SSL"]), timeout=30) as s:
        s.sendall(os.urandom(64) + b"\x00\x00\x00\x10garbage-garbage!")
        try:
            while s.recv(4096):
                pass
        except ConnectionResetError:
            pass
    confluent_round_trip(broker.bootstrap("SSL"), {"security.protocol": "SSL", **tls(pki)}, n=1)


def _log_line(broker: BrokerProcess, *parts: str) -> str:
    """The first log line holding every one of ``parts``; waits for it to be written (no
    deadline: pytest-timeout ends a wait for a line that never comes)."""
    while True:
        for line in broker.read_log().splitlines():
            if all(p in line for p in parts):
                return line
        time.sleep(0.05)


def test_refused_tls_handshakes_are_logged_with_the_peer_and_the_reason(
    broker: BrokerProcess, pki: Pki
) -> None:
    with socket.create_connection(("127.0.0.1", broker.listener_ports["SSL"]), timeout=30) as s:
        plain_port = s.getsockname()[1]
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")  # plain text on a TLS port
        try:
            while s.recv(4096):
                pass
        except ConnectionResetError:
            pass
    line = _log_line(broker, "event=ssl.handshake_failed", f"peer=127.0.0.1:{plain_port} ")
    assert "listener=SSL" in line and "reason=" in line and "level=INFO" in line
    # A client certificate from a CA the broker does not trust, where one is required.
    sock = socket.create_connection(("127.0.0.1", broker.listener_ports["MTLS"]), timeout=30)
    stranger_port = sock.getsockname()[1]
    try:
        tls_sock = _tls_client(pki, pki.stranger).wrap_socket(sock, server_hostname="localhost")
        tls_sock.sendall(b"\0\0\0\0")
        tls_sock.recv(1)
    except (ssl.SSLError, ConnectionError):
        pass
    finally:
        sock.close()
    line = _log_line(broker, "event=ssl.handshake_failed", f"peer=127.0.0.1:{stranger_port} ")
    assert "listener=MTLS" in line and "CERTIFICATE_VERIFY_FAILED" in line.upper().replace(" ", "_")


# --- SASL ---


def test_sasl_plaintext_plain_with_confluent_and_kafka_python(broker: BrokerProcess) -> None:
    bootstrap = broker.bootstrap("SASL_PLAINTEXT")
    confluent_round_trip(
        bootstrap, {"security.protocol": "SASL_PLAINTEXT", **sasl("PLAIN", "alice", "alice-secret")}
    )
    kafka_python_round_trip(
        bootstrap,
        {
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "PLAIN",
            "sasl_plain_username": "alice",
            "sasl_plain_password": "alice-secret",
        },
    )
    assert logged_principal(broker, "sasl.authenticated", "User:alice")


@pytest.mark.parametrize("user", sorted(SCRAM_USERS))
def test_sasl_ssl_scram_with_confluent_and_kafka_python(
    broker: BrokerProcess, pki: Pki, user: str
) -> None:
    mechanism, password = SCRAM_USERS[user]
    bootstrap = broker.bootstrap("SASL_SSL")
    confluent_round_trip(
        bootstrap, {"security.protocol": "SASL_SSL", **tls(pki), **sasl(mechanism, user, password)}
    )
    kafka_python_round_trip(
        bootstrap,
        {
            "security_protocol": "SASL_SSL",
            "ssl_cafile": str(pki.ca.ca_path),
            "sasl_mechanism": mechanism,
            "sasl_plain_username": user,
            "sasl_plain_password": password,
        },
    )
    assert logged_principal(broker, "sasl.authenticated", f"User:{user}")


def test_scram_over_sasl_plaintext(broker: BrokerProcess) -> None:
    confluent_round_trip(
        broker.bootstrap("SASL_PLAINTEXT"),
        {"security.protocol": "SASL_PLAINTEXT", **sasl("SCRAM-SHA-256", "scram256", "pw-256")},
        n=2,
    )


def test_describe_alter_and_delete_scram_credentials_with_confluent_admin(
    broker: BrokerProcess, pki: Pki
) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap("PLAINTEXT")})
    futures = admin.describe_user_scram_credentials(["scram256", "scram512"])
    described = {u: f.result(timeout=30) for u, f in futures.items()}
    assert {
        u: [(i.mechanism, i.iterations) for i in d.scram_credential_infos]
        for u, d in described.items()
    } == {
        "scram256": [(ScramMechanism.SCRAM_SHA_256, 4096)],
        "scram512": [(ScramMechanism.SCRAM_SHA_512, 4096)],
    }
    with pytest.raises(Exception, match="does not exist"):
        admin.describe_user_scram_credentials(["nobody"])["nobody"].result(timeout=30)
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192)
    upsert = admin.alter_user_scram_credentials(
        [UserScramCredentialUpsertion("temp", info, b"temp-pw")]
    )
    assert upsert["temp"].result(timeout=30) is None
    settings = {
        "security.protocol": "SASL_SSL",
        **tls(pki),
        **sasl("SCRAM-SHA-512", "temp", "temp-pw"),
    }
    confluent_round_trip(broker.bootstrap("SASL_SSL"), settings, n=1)
    delete = admin.alter_user_scram_credentials(
        [UserScramCredentialDeletion("temp", ScramMechanism.SCRAM_SHA_512)]
    )
    assert delete["temp"].result(timeout=30) is None
    err = authentication_error({"bootstrap.servers": broker.bootstrap("SASL_SSL"), **settings})
    assert "invalid credentials with SASL mechanism SCRAM-SHA-512" in err.str()


@pytest.mark.parametrize(
    "mechanism, user, password, says",
    [
        ("PLAIN", "alice", "wrong-password", "Invalid username or password"),
        ("PLAIN", "mallory", "alice-secret", "Invalid username or password"),
        (
            "SCRAM-SHA-256",
            "scram256",
            "wrong-password",
            "invalid credentials with SASL mechanism SCRAM-SHA-256",
        ),
        (
            "SCRAM-SHA-512",
            "mallory",
            "pw-512",
            "invalid credentials with SASL mechanism SCRAM-SHA-512",
        ),
    ],
)
def test_wrong_password_and_unknown_user_are_refused(
    broker: BrokerProcess, pki: Pki, mechanism: str, user: str, password: str, says: str
) -> None:
    bootstrap = broker.bootstrap("SASL_SSL")
    err = authentication_error(
        {
            "bootstrap.servers": bootstrap,
            "security.protocol": "SASL_SSL",
            **tls(pki),
            **sasl(mechanism, user, password),
        }
    )
    assert says in err.str()
    confluent_round_trip(
        bootstrap,
        {"security.protocol": "SASL_SSL", **tls(pki), **sasl("PLAIN", "alice", "alice-secret")},
        n=1,
    )


def test_sasl_authentication_failed_is_answered_then_the_connection_closes(
    broker: BrokerProcess,
) -> None:
    raw = Raw(broker.bootstrap("SASL_PLAINTEXT"))
    try:
        assert handshake(raw, "PLAIN").error_code == 0
        resp = authenticate(raw, b"\0alice\0wrong-password")
        assert resp.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert resp.error_message == "Authentication failed: Invalid username or password"
        assert raw.closed_by_broker()
    finally:
        raw.close()


@pytest.mark.parametrize(
    "token", [b"", b"\xff" * 40, b"n,,n=scram256", b"n,,n=scram256,r=abc" + b"," * 1000]
)
def test_a_malformed_scram_token_closes_that_connection_only(
    broker: BrokerProcess, token: bytes
) -> None:
    raw = Raw(broker.bootstrap("SASL_PLAINTEXT"))
    try:
        assert handshake(raw, "SCRAM-SHA-256").error_code == 0
        resp = authenticate(raw, token)
        assert resp.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert raw.closed_by_broker()
    finally:
        raw.close()
    confluent_round_trip(
        broker.bootstrap("SASL_PLAINTEXT"),
        {"security.protocol": "SASL_PLAINTEXT", **sasl("SCRAM-SHA-256", "scram256", "pw-256")},
        n=1,
    )


def test_before_login_only_api_versions_and_sasl_are_served(broker: BrokerProcess) -> None:
    raw = Raw(broker.bootstrap("SASL_PLAINTEXT"))
    try:
        assert raw.request(ApiVersionsRequest(), 0).error_code == 0
        _, data = raw.conn.send_request(MetadataRequest(topics=None), 1)
        raw.sock.sendall(data)
        assert raw.frame() is None  # closed without an answer, as Kafka does
    finally:
        raw.close()
    raw = Raw(broker.bootstrap("SASL_PLAINTEXT"))
    try:  # after the handshake, before the login: ILLEGAL_SASL_STATE for a second handshake
        assert handshake(raw, "PLAIN").error_code == 0
        assert handshake(raw, "PLAIN").error_code == ErrorCode.ILLEGAL_SASL_STATE
        assert raw.closed_by_broker()
    finally:
        raw.close()


def test_an_unsupported_mechanism_is_answered_with_the_enabled_ones(broker: BrokerProcess) -> None:
    raw = Raw(broker.bootstrap("SASL_PLAINTEXT"))
    try:
        resp = handshake(raw, "GSSAPI")
        assert resp.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
        assert resp.mechanisms == ["PLAIN", "SCRAM-SHA-256"]
        assert raw.closed_by_broker()
    finally:
        raw.close()


@pytest.mark.parametrize("version", [0, 1])
def test_every_sasl_handshake_and_authenticate_version(broker: BrokerProcess, version: int) -> None:
    for auth_version in (0, 1, 2) if version == 1 else (None,):
        raw = Raw(broker.bootstrap("SASL_PLAINTEXT"))
        try:
            resp = handshake(raw, "PLAIN", version)
            assert (resp.error_code, resp.mechanisms) == (0, ["PLAIN", "SCRAM-SHA-256"])
            if auth_version is None:
                # v0: the token goes unframed (size-prefixed only), the reply likewise.
                token = b"\0alice\0alice-secret"
                raw.sock.sendall(struct.pack(">i", len(token)) + token)
                assert raw.frame() == b""
            else:
                resp = authenticate(raw, b"\0alice\0alice-secret", auth_version)
                assert (resp.error_code, resp.error_message, bytes(resp.auth_bytes)) == (
                    0,
                    None,
                    b"",
                )
            meta = raw.request(MetadataRequest(topics=None), 1)
            assert [b.port for b in meta.brokers] == [broker.listener_ports["SASL_PLAINTEXT"]]
            # Once logged in, more SASL requests are ILLEGAL_SASL_STATE.
            assert handshake(raw, "PLAIN").error_code == ErrorCode.ILLEGAL_SASL_STATE
        finally:
            raw.close()


def test_v0_flow_with_a_wrong_password_just_closes(broker: BrokerProcess) -> None:
    raw = Raw(broker.bootstrap("SASL_PLAINTEXT"))
    try:
        assert handshake(raw, "PLAIN", 0).error_code == 0
        token = b"\0alice\0wrong-password"
        raw.sock.sendall(struct.pack(">i", len(token)) + token)
        assert raw.frame() is None
    finally:
        raw.close()


def test_sasl_requests_on_a_plaintext_listener_are_illegal(broker: BrokerProcess) -> None:
    raw = Raw(broker.bootstrap("PLAINTEXT"))
    try:
        assert handshake(raw, "PLAIN").error_code == ErrorCode.ILLEGAL_SASL_STATE
        assert authenticate(raw, b"x").error_code == ErrorCode.ILLEGAL_SASL_STATE
    finally:
        raw.close()


def test_metadata_advertises_the_listener_the_client_came_in_on(
    broker: BrokerProcess, pki: Pki
) -> None:
    for listener in ("PLAINTEXT", "SSL"):
        ctx = _tls_client(pki) if listener == "SSL" else None
        raw = Raw(broker.bootstrap(listener), ctx)
        try:
            meta = raw.request(MetadataRequest(topics=None), 1)
            assert [(b.host, b.port) for b in meta.brokers] == [
                ("127.0.0.1", broker.listener_ports[listener])
            ]
        finally:
            raw.close()


def test_a_huge_frame_before_login_closes_the_connection(broker: BrokerProcess) -> None:
    raw = Raw(broker.bootstrap("SASL_PLAINTEXT"))
    try:
        assert handshake(raw, "PLAIN", 0).error_code == 0
        try:
            raw.sock.sendall(struct.pack(">i", 600_000) + b"\0" * 600_000)
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused at the size prefix: the rest of the frame is never read
        assert raw.closed_by_broker()
    finally:
        raw.close()


def test_aiokafka_over_sasl_ssl_scram_and_ssl(broker: BrokerProcess, pki: Pki) -> None:
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    async def round_trip(bootstrap: str, settings: dict[str, Any]) -> None:
        topic = f"sec-aio-{uuid.uuid4().hex[:8]}"
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", **settings)
        await p.start()
        try:
            for i in range(3):
                await p.send_and_wait(topic, b"v%d" % i)
        finally:
            await p.stop()
        c = AIOKafkaConsumer(
            topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", **settings
        )
        await c.start()
        got: list[bytes | None] = []
        try:
            while len(got) < 3:
                for records in (await c.getmany(timeout_ms=1000)).values():
                    got += [r.value for r in records]
        finally:
            await c.stop()
        assert got == [b"v0", b"v1", b"v2"]

    ctx = create_ssl_context(cafile=str(pki.ca.ca_path))
    asyncio.run(
        round_trip(
            broker.bootstrap("SASL_SSL"),
            {
                "security_protocol": "SASL_SSL",
                "ssl_context": ctx,
                "sasl_mechanism": "SCRAM-SHA-256",
                "sasl_plain_username": "scram256",
                "sasl_plain_password": "pw-256",
            },
        )
    )
    mtls = create_ssl_context(
        cafile=str(pki.ca.ca_path), certfile=str(pki.alice.cert), keyfile=str(pki.alice.key)
    )
    asyncio.run(
        round_trip(broker.bootstrap("MTLS"), {"security_protocol": "SSL", "ssl_context": mtls})
    )


def test_kcat_over_sasl_ssl_scram_sha_512(broker: BrokerProcess, pki: Pki) -> None:
    import shutil
    import subprocess

    kcat = shutil.which("kcat")
    if kcat is None:
        pytest.skip("kcat is not installed")
    topic = f"sec-kcat-{uuid.uuid4().hex[:8]}"
    common = [
        kcat,
        "-b",
        broker.bootstrap("SASL_SSL"),
        "-t",
        topic,
        "-X",
        "security.protocol=SASL_SSL",
        "-X",
        f"ssl.ca.location={pki.ca.ca_path}",
        "-X",
        "sasl.mechanisms=SCRAM-SHA-512",
        "-X",
        "sasl.username=scram512",
        "-X",
        "sasl.password=pw-512",
    ]
    subprocess.run([*common, "-P"], input=b"one\ntwo\nthree\n", check=True, timeout=120)
    out = subprocess.run(
        [*common, "-C", "-o", "beginning", "-c", "3", "-e"],
        capture_output=True,
        check=True,
        timeout=120,
    )
    assert out.stdout.split() == [b"one", b"two", b"three"]
    bad = [a.replace("pw-512", "wrong-password") for a in common]
    refused = subprocess.run([*bad, "-L"], capture_output=True, timeout=120)
    assert refused.returncode != 0
    assert b"invalid credentials with SASL mechanism SCRAM-SHA-512" in refused.stderr


# --- Gregor's bulk reader (a blocking connection of its own) ---


BULK_LISTENERS = {
    "ssl": ("SSL", {}),
    "mtls": ("MTLS", {}),
    "sasl-plaintext-plain": ("SASL_PLAINTEXT", sasl("PLAIN", "alice", "alice-secret")),
    "sasl-ssl-scram-sha-512": ("SASL_SSL", sasl("SCRAM-SHA-512", "scram512", "pw-512")),
}


@pytest.mark.parametrize("listener", sorted(BULK_LISTENERS))
def test_gregor_bulk_reader_over_tls_and_sasl(
    broker: BrokerProcess, pki: Pki, listener: str
) -> None:
    """Megabyte fetches over each kind of listener: TLS hands the frame over record by record,
    SASL logs the blocking connection in first; the records come back exact."""
    from gregor.client.bulk import RangeReader, close_shared_clients, shared_client

    name, settings = BULK_LISTENERS[listener]
    protocol = {"SSL": "SSL", "MTLS": "SSL"}.get(name, name)
    settings = {"security.protocol": protocol, **settings}
    if "SSL" in protocol:
        settings |= tls(pki, pki.alice if name == "MTLS" else None)
    topic = f"sec-bulk-{listener}-{uuid.uuid4().hex[:6]}"
    values = [b"%06d" % i + bytes([i % 251]) * 1018 for i in range(3000)]
    p = Producer(
        {"bootstrap.servers": broker.bootstrap("PLAINTEXT"), "acks": "all", "linger.ms": 5}
    )
    for v in values:
        p.produce(topic, v, partition=0)
    assert p.flush(60) == 0
    client = shared_client({"bootstrap.servers": broker.bootstrap(name), **settings})
    try:
        got = list(RangeReader(client, topic, 0, 0, None, chunk_records=1000))
        assert [o for b in got for o in b.column("offset").to_pylist()] == list(range(3000))
        assert [v for b in got for v in b.column("value").to_pylist()] == values
    finally:
        close_shared_clients()


def test_gregor_blocking_connection_refuses_bad_credentials(
    broker: BrokerProcess, pki: Pki
) -> None:
    from gregor.client.blocking import BlockingConnection
    from gregor.client.errors import KafkaConnectionError
    from gregor.client.security import connection_security
    from gregor.protocol.errors import SaslAuthenticationFailedError

    def conn(listener: str, settings: dict[str, str]) -> BlockingConnection:
        context, login = connection_security(settings.get)
        host, port = broker.bootstrap(listener).rsplit(":", 1)
        return BlockingConnection(host, int(port), ssl_context=context, sasl=login)

    wrong = conn(
        "SASL_SSL",
        {
            "security.protocol": "SASL_SSL",
            **tls(pki),
            **sasl("SCRAM-SHA-512", "scram512", "wrong-password"),
        },
    )
    with pytest.raises(SaslAuthenticationFailedError):
        wrong.connect()
    assert not wrong.connected
    untrusted = conn(
        "SSL", {"security.protocol": "SSL", "ssl.ca.location": str(pki.other_ca.ca_path)}
    )
    with pytest.raises(KafkaConnectionError, match="certificate verify failed"):
        untrusted.connect()
    no_certificate = conn("MTLS", {"security.protocol": "SSL", **tls(pki)})
    with pytest.raises(KafkaConnectionError):
        no_certificate.connect()
    assert not no_certificate.connected
    good = conn(
        "SASL_PLAINTEXT",
        {"security.protocol": "SASL_PLAINTEXT", **sasl("PLAIN", "alice", "alice-secret")},
    ).connect()
    try:
        assert good.connected and good.api_versions
    finally:
        good.close()
