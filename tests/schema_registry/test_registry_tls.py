"""TLS and logins of the broker's schema registry traffic (``config.schema_registry_security``).

Serving: ``schema.registry.listener=https://...`` serves the registry beside a real in-process
broker (the companion ``gregor serve`` runs, on the broker's loop) with the broker's own PEM
certificate; confluent-kafka's ``SchemaRegistryClient`` registers and reads schemas over it,
with a client certificate when the broker's ``ssl.client.auth=required``.

Asking: a broker whose topic has ``confluent.value.schema.validation=true`` asks an https
registry that wants basic auth (the cluster's SASL users) and a client certificate, with
``confluent.basic.auth.*`` and ``confluent.ssl.*``; without the login, with a wrong password or
without a certificate the produce is refused as for any registry that cannot be asked.

The settings that cannot be honoured stop the broker with their exact messages. The test PKI
is ``tests/security/certs.py``'s.
"""

from __future__ import annotations

import http.client
import os
import re
import ssl
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from gregor.broker.config.broker_config import BrokerConfig, ConfigError
from gregor.cli.schema_registry import beside_broker
from gregor.launch.ports import free_port
from gregor.protocol.errors import ErrorCode
from gregor.schema_registry.auth import SaslBasicAuth
from gregor.schema_registry.server import SchemaRegistryServer
from gregor.security.tls import server_context
from gregor.testing import InProcessBroker

from .conftest import avro_record
from .test_schema_validation import batch, end_offset, framed, raw_produce

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "security"))
from certs import Authority, Pem  # noqa: E402

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

SCHEMA = avro_record("tls.Reading", ("sensor", "string"), ("value", "double"))
PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret" '
    'user_alice="alice-secret";'
)


@dataclass
class Pki:
    ca: Authority
    server: Pem
    alice: Pem  # a client certificate the CA signed


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    ca = Authority(tmp_path_factory.mktemp("pki") / "ca")
    return Pki(ca, ca.server(), ca.client("alice", CN="alice", O="Gregor"))


def refused(settings: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        BrokerConfig.load(None, [f"{k}={v}" for k, v in settings.items()])
    assert str(info.value) == message


# --- serving https beside the broker ---


class Beside:
    """A broker with the registry of ``schema.registry.listener`` beside it."""

    def __init__(self, config: dict[str, str], port: int = 0) -> None:
        self.broker = InProcessBroker(
            {"schema.registry.listener": f"https://127.0.0.1:{port}", **config}
        ).start()
        urls: list[str] = []
        start = beside_broker("127.0.0.1", port, "_schemas_tls", urls.append)
        b = self.broker.broker
        assert b is not None
        self._stop: Callable[[], Any] = self.broker.call(lambda: start(b))
        [self.url] = urls
        self.port = int(self.url.rsplit(":", 1)[1])

    def close(self) -> None:
        try:
            self.broker.call(self._stop)
        finally:
            self.broker.close()


def test_https_with_the_brokers_pem_certificate(pki: Pki) -> None:
    s = Beside({"ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.server.combined)})
    try:
        assert re.fullmatch(r"https://127\.0\.0\.1:\d+", s.url), s.url
        client = SchemaRegistryClient({"url": s.url, "ssl.ca.location": str(pki.ca.ca_path)})
        schema_id = client.register_schema("readings-value", Schema(SCHEMA, "AVRO"))
        assert client.get_subjects() == ["readings-value"]
        latest = client.get_latest_version("readings-value")
        assert (latest.schema_id, latest.version) == (schema_id, 1)
        # a new client, no cache: read back over https
        fresh = SchemaRegistryClient({"url": s.url, "ssl.ca.location": str(pki.ca.ca_path)})
        assert fresh.get_schema(schema_id).schema_str == client.get_schema(schema_id).schema_str

        # plain http to the https port: no answer, the TLS layer drops it
        conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=60)
        try:
            with pytest.raises(http.client.RemoteDisconnected):
                conn.request("GET", "/subjects")
                conn.getresponse()
        finally:
            conn.close()
        # a client that does not trust the broker's CA is refused
        conn = http.client.HTTPSConnection(
            "127.0.0.1", s.port, context=ssl.create_default_context(), timeout=60
        )
        try:
            with pytest.raises(ssl.SSLCertVerificationError):
                conn.request("GET", "/subjects")
        finally:
            conn.close()
    finally:
        s.close()


def test_client_certificates_when_the_broker_requires_them(pki: Pki) -> None:
    s = Beside(
        {
            "ssl.keystore.location": str(pki.server.combined),
            "ssl.truststore.location": str(pki.ca.ca_path),
            "ssl.client.auth": "required",
        }
    )
    try:
        with_cert = SchemaRegistryClient(
            {
                "url": s.url,
                "ssl.ca.location": str(pki.ca.ca_path),
                "ssl.certificate.location": str(pki.alice.cert),
                "ssl.key.location": str(pki.alice.key),
            }
        )
        assert with_cert.register_schema("mtls-value", Schema(SCHEMA, "AVRO")) >= 1
        assert with_cert.get_subjects() == ["mtls-value"]
        ctx = ssl.create_default_context(cafile=str(pki.ca.ca_path))  # no certificate
        conn = http.client.HTTPSConnection("127.0.0.1", s.port, context=ctx, timeout=60)
        try:
            with pytest.raises((ssl.SSLError, ConnectionResetError)):
                conn.request("GET", "/subjects")
                conn.getresponse()
        finally:
            conn.close()
    finally:
        s.close()


def test_validation_asks_the_https_registry_beside_the_broker(pki: Pki) -> None:
    port = free_port()  # the broker's validation asks the port of its config
    s = Beside(
        {
            "ssl.keystore.location": str(pki.server.combined),
            "confluent.ssl.truststore.location": str(pki.ca.ca_path),
        },
        port,
    )
    try:
        assert s.url == f"https://127.0.0.1:{port}"
        client = SchemaRegistryClient({"url": s.url, "ssl.ca.location": str(pki.ca.ca_path)})
        schema_id = client.register_schema("beside-value", Schema(SCHEMA, "AVRO"))
        create(s.broker, "beside")
        bs = s.broker.bootstrap_servers
        assert raw_produce(bs, "beside", batch([framed(schema_id)])).error_code == 0
        p = raw_produce(bs, "beside", batch([framed(schema_id + 1000)]))
        assert p.error_code == ErrorCode.INVALID_RECORD
        assert [(e.batch_index, e.batch_index_error_message) for e in p.record_errors] == [
            (0, f"Schema id {schema_id + 1000} of the value is not registered")
        ]
        assert end_offset(bs, "beside") == 1
    finally:
        s.close()


def test_https_settings_it_cannot_honour(pki: Pki, tmp_path: Path) -> None:
    https = {"schema.registry.listener": "https://127.0.0.1:8081"}
    refused(
        https,
        "schema.registry.listener=https://127.0.0.1:8081: https serves the broker's own "
        "certificate, and this broker has none: set ssl.keystore.location (a PEM private key "
        "and certificate chain, ssl.keystore.type=PEM), or ssl.keystore.certificate.chain with "
        "ssl.keystore.key",
    )
    missing = tmp_path / "nope.pem"
    refused(
        {**https, "ssl.keystore.location": str(missing)},
        f"schema.registry.listener=https://127.0.0.1:8081: ssl.keystore.location={missing} "
        "cannot be read: No such file or directory",
    )
    refused(
        {**https, "ssl.keystore.type": "JKS", "ssl.keystore.location": "k.jks"},
        "schema.registry.listener=https://127.0.0.1:8081: ssl.keystore.type=JKS is not "
        "supported: Gregor reads PEM key and trust stores only (set ssl.keystore.type=PEM and "
        "give PEM files or inline PEM values)",
    )
    refused(
        {"schema.registry.listener": "http://0.0.0.0:8081"},
        "schema.registry.listener=http://0.0.0.0:8081: plain http is served on a loopback "
        "address only (127.0.0.1, ::1, localhost); serve https:// with the broker's PEM "
        "certificate (ssl.keystore.*)",
    )
    keystore = {"ssl.keystore.location": str(pki.server.combined)}
    refused(
        {"schema.registry.listener": "https://0.0.0.0:8081", **keystore},
        "schema.registry.listener=https://0.0.0.0:8081: beyond loopback the registry needs a "
        "login, or anyone who reaches it could change or delete schemas: set "
        "schema.registry.authentication.method=BASIC, or ssl.client.auth=required (client "
        "certificates), or serve on a loopback address",
    )
    refused(
        {"schema.registry.listener": "ftp://127.0.0.1:8081"},
        "schema.registry.listener=ftp://127.0.0.1:8081: use http://host:port or "
        "https://host:port (e.g. http://127.0.0.1:8081)",
    )
    # beyond loopback with client certificates, or with basic auth: served
    mtls = BrokerConfig(
        {
            "schema.registry.listener": "https://0.0.0.0:8081",
            **keystore,
            "ssl.truststore.location": str(pki.ca.ca_path),
            "ssl.client.auth": "required",
        }
    )
    assert mtls.schema_registry_tls is not None
    assert mtls.schema_registry_tls.verify_mode == ssl.CERT_REQUIRED
    basic = BrokerConfig(
        {
            "schema.registry.listener": "https://0.0.0.0:8081",
            "schema.registry.authentication.method": "BASIC",
            "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
            **keystore,
        }
    )
    assert basic.schema_registry_tls is not None
    assert basic.schema_registry_tls.verify_mode == ssl.CERT_NONE
    # the certificate of the broker's SSL listener serves when there is no broker-wide one
    listener = BrokerConfig(
        {
            "schema.registry.listener": "https://127.0.0.1:8081",
            "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL",
            "listener.name.ssl.ssl.keystore.location": str(pki.server.combined),
        }
    )
    assert listener.schema_registry_tls is not None
    assert listener.schema_registry_urls == ("https://127.0.0.1:8081",)


# --- asking an https registry with a login and a client certificate ---


class Guarded:
    """A registry that wants basic auth (the cluster's PLAIN users) and a client certificate
    over https, on a broker with a SASL listener for the logins, at a port known up front."""

    def __init__(self, pki: Pki) -> None:
        self.port = free_port()
        self.url = f"https://127.0.0.1:{self.port}"
        self.broker = InProcessBroker(
            {
                "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
                "listener.security.protocol.map": (
                    "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT"
                ),
                "inter.broker.listener.name": "PLAINTEXT",
                "sasl.enabled.mechanisms": "PLAIN",
                "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
            }
        ).start()
        logins = {
            "bootstrap.servers": self.broker.bootstrap("SASL_PLAINTEXT"),
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
        }
        tls = server_context(
            {
                "ssl.keystore.location": str(pki.server.combined),
                "ssl.truststore.location": str(pki.ca.ca_path),
                "ssl.client.auth": "required",
            }.get
        )
        server = SchemaRegistryServer(
            {"bootstrap.servers": self.broker.bootstrap_servers},
            self.url,
            topic="_schemas_guarded",
            auth=SaslBasicAuth(logins),
            tls=tls,
        )

        async def go() -> SchemaRegistryServer:
            return await server.start()

        self.server = self.broker.call(go)
        self.client = SchemaRegistryClient(
            {
                "url": self.url,
                "basic.auth.user.info": "admin:admin-secret",
                "ssl.ca.location": str(pki.ca.ca_path),
                "ssl.certificate.location": str(pki.alice.cert),
                "ssl.key.location": str(pki.alice.key),
            }
        )

    def close(self) -> None:
        try:
            self.broker.call(self.server.stop)
        finally:
            self.broker.close()


@pytest.fixture(scope="module")
def guarded(pki: Pki) -> Iterator[Guarded]:
    g = Guarded(pki)
    try:
        yield g
    finally:
        g.close()


def validating(guarded: Guarded, settings: dict[str, str]) -> InProcessBroker:
    """A broker whose schema ID validation asks the guarded registry."""
    return InProcessBroker({"confluent.schema.registry.url": guarded.url, **settings}).start()


def full_access(pki: Pki) -> dict[str, str]:
    return {
        "confluent.basic.auth.credentials.source": "USER_INFO",
        "confluent.basic.auth.user.info": "alice:alice-secret",
        "confluent.ssl.truststore.type": "PEM",
        "confluent.ssl.truststore.location": str(pki.ca.ca_path),
        "confluent.ssl.keystore.type": "PEM",
        "confluent.ssl.keystore.location": str(pki.alice.combined),
    }


def create(broker: InProcessBroker, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    new = NewTopic(topic, 1, 1, config={"confluent.value.schema.validation": "true"})
    admin.create_topics([new])[topic].result(60)


def test_validation_logs_in_and_trusts_the_registrys_ca(guarded: Guarded, pki: Pki) -> None:
    schema_id = guarded.client.register_schema("readings-value", Schema(SCHEMA, "AVRO"))
    broker = validating(guarded, full_access(pki))
    try:
        create(broker, "readings")
        errors: list[Any] = []
        producer = Producer(
            {"bootstrap.servers": broker.bootstrap_servers, "acks": "all", "retries": 0}
        )
        for value in (framed(schema_id), framed(987_654)):
            producer.produce("readings", value=value, on_delivery=lambda e, _m: errors.append(e))
            assert producer.flush(60) == 0
        assert errors[0] is None
        assert errors[1].code() == KafkaError.INVALID_RECORD
        p = raw_produce(broker.bootstrap_servers, "readings", batch([framed(987_654)]))
        assert (p.error_code, p.base_offset) == (ErrorCode.INVALID_RECORD, -1)
        assert [(e.batch_index, e.batch_index_error_message) for e in p.record_errors] == [
            (0, "Schema id 987654 of the value is not registered")
        ]
        assert end_offset(broker.bootstrap_servers, "readings") == 1

        # DescribeConfigs: the login is sensitive and has no value; the log never shows it
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        resource = ConfigResource(ConfigResource.Type.BROKER, "1")
        entries = admin.describe_configs([resource])[resource].result(60)
        info = entries["confluent.basic.auth.user.info"]
        assert (info.is_sensitive, info.value) == (True, None)
        location = entries["confluent.ssl.truststore.location"]
        assert (location.is_sensitive, location.value) == (False, str(pki.ca.ca_path))
        assert "alice-secret" not in broker.read_log()
    finally:
        broker.close()


@pytest.mark.parametrize(
    ("left_out", "changed", "why"),
    [
        (
            ("confluent.basic.auth.credentials.source", "confluent.basic.auth.user.info"),
            {},
            r"HTTP 401\)",
        ),
        ((), {"confluent.basic.auth.user.info": "alice:wrong"}, r"HTTP 401\)"),
        # TLS 1.3: the registry refuses the missing certificate once the client has sent its
        # request: it closes with the alert, or (the request unread) resets the connection
        (
            ("confluent.ssl.keystore.location",),
            {},
            r"(ServerDisconnectedError: Server disconnected|ClientOSError: .*reset by peer)\)",
        ),
        (
            ("confluent.ssl.truststore.location",),
            {},
            r"ClientConnectorCertificateError: .*certificate verify failed.*\)",
        ),
    ],
    ids=["no-login", "wrong-password", "no-client-certificate", "untrusted-ca"],
)
def test_a_registry_that_refuses_the_broker_is_a_retriable_refusal(
    guarded: Guarded, pki: Pki, left_out: tuple[str, ...], changed: dict[str, str], why: str
) -> None:
    schema_id = guarded.client.register_schema("refused-value", Schema(SCHEMA, "AVRO"))
    settings = {k: v for k, v in full_access(pki).items() if k not in left_out}
    broker = validating(guarded, {**settings, **changed})
    try:
        create(broker, "refused")
        p = raw_produce(broker.bootstrap_servers, "refused", batch([framed(schema_id)]))
        assert (p.error_code, p.base_offset) == (ErrorCode.REQUEST_TIMED_OUT, -1)
        prefix = (
            "Schema validation of refused could not complete: the schema registry cannot be "
            f"asked ({guarded.url}: "
        )
        assert re.fullmatch(re.escape(prefix) + why, p.error_message), p.error_message
        assert end_offset(broker.bootstrap_servers, "refused") == 0
        assert "alice-secret" not in broker.read_log()
    finally:
        broker.close()


def test_registry_login_and_tls_settings_it_cannot_honour(pki: Pki, tmp_path: Path) -> None:
    source = {"confluent.basic.auth.credentials.source": "USER_INFO"}
    refused(
        source,
        "confluent.basic.auth.credentials.source=USER_INFO needs confluent.basic.auth.user.info "
        "(USER:PASSWORD)",
    )
    refused(
        {**source, "confluent.basic.auth.user.info": "no-colon-secret"},
        "confluent.basic.auth.user.info is not USER:PASSWORD (the value is hidden)",
    )
    refused(
        {"confluent.basic.auth.user.info": "alice:alice-secret"},
        "confluent.basic.auth.user.info is set but confluent.basic.auth.credentials.source is "
        "not USER_INFO: set confluent.basic.auth.credentials.source=USER_INFO to log in with it",
    )
    refused(
        {"confluent.basic.auth.credentials.source": "SASL_INHERIT"},
        "confluent.basic.auth.credentials.source=SASL_INHERIT is not supported: the broker logs "
        "in to the schema registry with USER_INFO (confluent.basic.auth.user.info=USER:PASSWORD), "
        "or not at all (leave it unset)",
    )
    refused(
        {"confluent.ssl.truststore.type": "JKS", "confluent.ssl.truststore.location": "t.jks"},
        "confluent.ssl.truststore.type=JKS is not supported: Gregor reads PEM stores only (set "
        "confluent.ssl.truststore.type=PEM and give a PEM file)",
    )
    refused(
        {"confluent.ssl.keystore.type": "PKCS12"},
        "confluent.ssl.keystore.type=PKCS12 is not supported: Gregor reads PEM stores only (set "
        "confluent.ssl.keystore.type=PEM and give a PEM file)",
    )
    missing = tmp_path / "ca.pem"
    refused(
        {"confluent.ssl.truststore.location": str(missing)},
        f"confluent.ssl.truststore.location={missing} cannot be read: No such file or directory",
    )
    refused(
        {"confluent.ssl.keystore.location": str(pki.ca.ca_path)},  # a certificate, no key
        "the key store (confluent.ssl.keystore.location) has no usable private key and "
        "certificate (or confluent.ssl.key.password is wrong): SSLError",
    )
    refused(
        {"confluent.ssl.truststore.password": "secret"},
        "confluent.ssl.truststore.password is not used: PEM stores have no store password (an "
        "encrypted key's password is confluent.ssl.key.password); remove it",
    )
    refused(
        {"confluent.ssl.key.password": "secret"},
        "confluent.ssl.key.password is set without confluent.ssl.keystore.location (the PEM key "
        "and certificate it decrypts)",
    )
    ok = BrokerConfig(
        {
            "confluent.schema.registry.url": "https://sr:8443",
            "confluent.basic.auth.credentials.source": "user_info",
            "confluent.basic.auth.user.info": "alice:pa:ss",
            "confluent.ssl.truststore.location": str(pki.ca.ca_path),
        }
    )
    assert ok.schema_registry_client.login == ("alice", "pa:ss")
    assert ok.schema_registry_client.ssl_context is not None
    assert "pa:ss" not in repr(ok.schema_registry_client)
    assert BrokerConfig({}).schema_registry_client.ssl_context is None
