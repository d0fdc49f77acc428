"""Listener security settings: what starts, and what stops the broker with a clear error."""

from __future__ import annotations

import socket
import ssl
import threading
from pathlib import Path

import pytest
from certs import Pki

from gregor.broker.config.broker_config import BrokerConfig, ConfigError
from gregor.security.principal import SslPrincipalMapper, dn_from_peercert
from gregor.security.tls import server_context

PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_alice="alice-secret";'
)


def ssl_props(pki: Pki, **extra: str) -> dict[str, str]:
    return {
        "listeners": "SSL://127.0.0.1:0",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pki.server.combined),
        **extra,
    }


def test_several_listeners_with_per_listener_settings(pki: Pki) -> None:
    config = BrokerConfig(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,CLIENTS://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,CLIENTS:SASL_SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
            "ssl.keystore.location": str(pki.server.combined),
            "ssl.truststore.location": str(pki.ca.ca_path),
            "ssl.client.auth": "required",
            "listener.name.clients.sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
            "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
            "listener.name.ssl.ssl.principal.mapping.rules": "RULE:^CN=(.*?),.*$/$1/",
        }
    )
    sec = config.listener_security
    assert sec["PLAINTEXT"].ssl_context is None and not sec["PLAINTEXT"].sasl
    ssl_ctx = sec["SSL"].ssl_context
    assert ssl_ctx is not None and ssl_ctx.verify_mode == ssl.CERT_REQUIRED
    assert sec["SSL"].principal_mapper is not None
    assert sec["SSL"].principal_mapper.principal_name("CN=alice,O=Gregor") == "alice"
    # ssl.client.auth applies to SASL_SSL only with the listener prefix (KIP-684).
    clients = sec["CLIENTS"]
    assert clients.ssl_context is not None and clients.ssl_context.verify_mode == ssl.CERT_NONE
    assert clients.mechanisms == ("SCRAM-SHA-256", "SCRAM-SHA-512") and clients.sasl
    assert sec["SASL_PLAINTEXT"].plain_users == {"alice": "alice-secret"}
    assert (
        config.listener_value("CLIENTS", "sasl.enabled.mechanisms") == "SCRAM-SHA-256,SCRAM-SHA-512"
    )
    assert config.listener_value("SSL", "ssl.client.auth") == "required"


def test_inline_pem_key_store_and_trust_store(pki: Pki) -> None:
    config = BrokerConfig(
        {
            "listeners": "SSL://127.0.0.1:0",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.certificate.chain": pki.server.cert_text,
            "ssl.keystore.key": pki.server.key_text,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.certificates": pki.ca.ca_path.read_text(),
            "ssl.client.auth": "requested",
            "ssl.enabled.protocols": "TLSv1.3",
        }
    )
    ctx = config.listener_security["SSL"].ssl_context
    assert ctx is not None and ctx.verify_mode == ssl.CERT_OPTIONAL
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_3


def test_an_encrypted_key_needs_ssl_key_password(pki: Pki) -> None:
    locked = pki.ca.server("locked", password=b"key-pass")
    props = ssl_props(pki, **{"ssl.keystore.location": str(locked.combined)})
    with pytest.raises(ConfigError, match="ssl.key.password is wrong|no usable private key"):
        BrokerConfig(props)
    BrokerConfig({**props, "ssl.key.password": "key-pass"})


@pytest.mark.parametrize(
    "extra, says",
    [
        ({"ssl.keystore.location": "/nonexistent/keystore.pem"}, "cannot be read"),
        ({"ssl.keystore.location": ""}, "needs a key store"),
        ({"ssl.keystore.type": "JKS"}, "JKS is not supported.*PEM"),
        ({"ssl.keystore.type": "PKCS12"}, "PKCS12 is not supported.*PEM"),
        ({"ssl.truststore.type": "JKS", "ssl.truststore.location": "/x.jks"}, "PEM"),
        ({"ssl.client.auth": "required"}, "needs a trust store"),
        ({"ssl.client.auth": "sometimes"}, "ssl.client.auth"),
        ({"ssl.enabled.protocols": "TLSv1"}, "ssl.enabled.protocols"),
        ({"ssl.cipher.suites": "TLS_AES_128_GCM_SHA256"}, "ssl.cipher.suites"),
        ({"ssl.principal.mapping.rules": "RULE:(/x/"}, "mapping.rules"),
    ],
)
def test_tls_settings_that_cannot_be_honoured_stop_the_broker(
    pki: Pki, extra: dict[str, str], says: str
) -> None:
    with pytest.raises(ConfigError, match=says) as e:
        BrokerConfig(ssl_props(pki, **extra))
    assert "never served as plain text" in str(e.value)


def test_a_keystore_that_is_not_pem_is_refused(pki: Pki, tmp_path: Path) -> None:
    jks = tmp_path / "server.jks"
    jks.write_bytes(b"\xfe\xed\xfe\xed binary key store")
    with pytest.raises(ConfigError, match="not a PEM file"):
        BrokerConfig(ssl_props(pki, **{"ssl.keystore.location": str(jks)}))


@pytest.mark.parametrize(
    "props, says",
    [
        ({}, "GSSAPI"),  # Kafka's default mechanism, which this broker lacks
        ({"sasl.enabled.mechanisms": "PLAIN,GSSAPI"}, "GSSAPI"),
        (
            {"sasl.enabled.mechanisms": "PLAIN"},
            "listener.name.sasl_plaintext.plain.sasl.jaas.config",
        ),
        (
            {"sasl.enabled.mechanisms": "PLAIN", "sasl.jaas.config": PLAIN_JAAS},
            "listener.name.sasl_plaintext.plain.sasl.jaas.config is not set",
        ),
        (
            {
                "sasl.enabled.mechanisms": "PLAIN",
                "listener.name.sasl_plaintext.plain.sasl.jaas.config": 'Mod required user_a="s3cret"',
            },
            "jaas.config",
        ),
        (
            {
                "sasl.enabled.mechanisms": "PLAIN",
                "listener.name.sasl_plaintext.plain.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required;",
            },
            "is not org.apache.kafka.common.security.plain.PlainLoginModule",
        ),
    ],
)
def test_sasl_settings_that_cannot_be_honoured_stop_the_broker(
    props: dict[str, str], says: str
) -> None:
    with pytest.raises(ConfigError, match=says) as e:
        BrokerConfig({"listeners": "SASL_PLAINTEXT://127.0.0.1:0", **props})
    assert "s3cret" not in str(e.value)  # a JAAS value (it may hold passwords) is never echoed


def test_security_inter_broker_protocol_names_a_listener() -> None:
    BrokerConfig(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
            "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "SCRAM-SHA-256",
            "security.inter.broker.protocol": "SASL_PLAINTEXT",
        }
    )
    with pytest.raises(ConfigError, match="security.inter.broker.protocol"):
        BrokerConfig({"security.inter.broker.protocol": "SSL"})


def _handshake(ctx: ssl.SSLContext, client: ssl.SSLContext) -> dict[str, object] | None:
    """Run one TLS handshake over a socket pair; the server's view of the client cert."""
    a, b = socket.socketpair()
    seen: list[dict[str, object] | None] = []

    def serve() -> None:
        with ctx.wrap_socket(a, server_side=True) as s:
            seen.append(s.getpeercert())  # type: ignore[arg-type]
            s.recv(1)

    t = threading.Thread(target=serve)
    t.start()
    with client.wrap_socket(b, server_hostname="localhost") as c:
        c.sendall(b"x")
    t.join()
    return seen[0]


def test_the_principal_comes_from_the_verified_client_certificate(pki: Pki) -> None:
    props = {
        "ssl.keystore.location": str(pki.server.combined),
        "ssl.truststore.location": str(pki.ca.ca_path),
        "ssl.client.auth": "requested",
    }
    ctx = server_context(props.get)
    client = ssl.create_default_context(cafile=str(pki.ca.ca_path))
    assert _handshake(ctx, client) is None  # requested: no certificate is fine (ANONYMOUS)
    client.load_cert_chain(str(pki.alice.cert), str(pki.alice.key))
    cert = _handshake(ctx, client)
    assert cert is not None
    dn = dn_from_peercert(cert["subject"])  # type: ignore[arg-type]
    assert dn == "CN=alice,OU=eng,O=Gregor"
    assert (
        SslPrincipalMapper("RULE:^CN=(.*?),OU=(.*?),.*$/$1-$2/U").principal_name(dn) == "ALICE-ENG"
    )


def test_security_settings_are_known_keys(pki: Pki) -> None:
    config = BrokerConfig(
        {
            **ssl_props(pki),
            "listener.name.ssl.ssl.client.auth": "none",
            "listener.name.ssl.plain.sasl.jaas.config": PLAIN_JAAS,
            "ssl.keystore.password": "unused-for-pem",
            "no.such.key": "1",
        }
    )
    assert config.unknown == ["no.such.key"]
