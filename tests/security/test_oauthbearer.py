"""OAUTHBEARER with Kafka's unsecured JWS validator: the mechanism alone, and librdkafka's
unsecured-JWT client against a real broker."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from sasl_clients import authentication_error, produce_then_consume

from gregor.broker.config.broker_config import BrokerConfig, ConfigError
from gregor.security.oauthbearer import OAuthBearerServer, UnsecuredValidator
from gregor.security.sasl import SaslAuthenticationError
from gregor.testing import BrokerProcess

NOW = 1_700_000_000.0
MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


def b64(obj: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")


def jws(claims: dict[str, Any], header: dict[str, Any] | None = None) -> str:
    return f"{b64(header or {'alg': 'none'})}.{b64(claims)}."


def first(token: str, authzid: str = "", ext: str = "") -> bytes:
    return f"n,{'a=' + authzid if authzid else ''},\x01auth=Bearer {token}\x01{ext}\x01".encode()


def server(**options: str) -> OAuthBearerServer:
    return OAuthBearerServer(UnsecuredValidator.from_options(options), clock=lambda: NOW)


def test_a_valid_unsecured_token_logs_in_as_its_subject() -> None:
    s = server()
    token = jws({"sub": "alice", "exp": NOW + 60, "iat": NOW - 1, "scope": "read write"})
    assert s.evaluate(first(token, ext="traceId=abc\x01")) == b""
    assert s.complete and s.principal == "User:alice"
    assert s.extensions == {"traceId": "abc"} and s.expires_at_ms == int((NOW + 60) * 1000)


@pytest.mark.parametrize(
    "claims, header, options, error",
    [
        ({"sub": "alice", "exp": NOW - 1}, None, {}, '{"status":"invalid_token"}'),
        ({"sub": "alice"}, None, {}, '{"status":"invalid_token"}'),
        ({"exp": NOW + 60}, None, {}, '{"status":"invalid_token"}'),
        (
            {"sub": "alice", "exp": NOW + 60, "iat": NOW + 30},
            None,
            {},
            '{"status":"invalid_token"}',
        ),
        ({"sub": "alice", "exp": NOW + 60}, {"alg": "HS256"}, {}, '{"status":"invalid_token"}'),
        (
            {"sub": "alice", "exp": NOW + 60, "scope": "read"},
            None,
            {"unsecuredValidatorRequiredScope": "read write"},
            '{"status":"insufficient_scope","scope":"read write"}',
        ),
    ],
)
def test_a_refused_token_is_answered_with_a_json_error_then_fails(
    claims: dict[str, Any], header: dict[str, Any] | None, options: dict[str, str], error: str
) -> None:
    s = server(**options)
    assert s.evaluate(first(jws(claims, header))) == error.encode()
    with pytest.raises(SaslAuthenticationError) as e:
        s.evaluate(b"\x01")
    assert str(e.value) == error and not s.complete


def test_validator_options() -> None:
    s = server(
        unsecuredValidatorPrincipalClaimName="user", unsecuredValidatorAllowableClockSkewMs="5000"
    )
    assert s.evaluate(first(jws({"user": "bob", "exp": NOW - 2}))) == b""  # within the skew
    assert s.principal == "User:bob"
    with pytest.raises(SaslAuthenticationError, match="authorization id"):
        server().evaluate(first(jws({"sub": "alice", "exp": NOW + 9}), authzid="admin"))
    for bad in [b"", b"n,,auth=Bearer x", b"\xff", first("").replace(b"Bearer ", b"Basic ")]:
        with pytest.raises(SaslAuthenticationError, match="Invalid OAUTHBEARER"):
            server().evaluate(bad)


def test_oauthbearer_needs_its_login_module_and_no_other_validator() -> None:
    base = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "OAUTHBEARER"}
    with pytest.raises(ConfigError, match="oauthbearer.sasl.jaas.config is not set"):
        BrokerConfig(base)
    jaas = {"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": f"{MODULE} required;"}
    assert (
        BrokerConfig({**base, **jaas}).listener_security["SASL_PLAINTEXT"].oauthbearer
        == UnsecuredValidator()
    )
    with pytest.raises(ConfigError, match="com.example.Handler is not supported"):
        BrokerConfig(
            {
                **base,
                **jaas,
                "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": "com.example.Handler",
            }
        )
    # Kafka's signed-JWT validator needs its key set (tests/security/test_jwt.py has the rest).
    with pytest.raises(ConfigError, match="needs sasl.oauthbearer.jwks.endpoint.url"):
        BrokerConfig(
            {
                **base,
                **jaas,
                "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
            }
        )


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    config = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": f'{MODULE} required unsecuredValidatorRequiredScope="kafka";',
        "num.partitions": 1,
    }
    with BrokerProcess(config=config, log_level="DEBUG") as b:
        yield b
        assert "event=request.failed" not in b.read_log()


def client(broker: BrokerProcess, oauth: str, **extra: Any) -> dict[str, Any]:
    return {
        "bootstrap.servers": broker.bootstrap_servers,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "enable.sasl.oauthbearer.unsecure.jwt": True,
        "sasl.oauthbearer.config": oauth,
        **extra,
    }


@pytest.mark.interop
def test_confluent_kafka_with_an_unsecured_jwt(broker: BrokerProcess) -> None:
    topic = f"oauth-{uuid.uuid4().hex[:8]}"
    assert produce_then_consume(client(broker, "principal=alice scope=kafka"), topic) == [
        b"v0",
        b"v1",
        b"v2",
    ]
    assert (
        "event=sasl.authenticated" in broker.read_log()
        and "principal=User:alice" in broker.read_log()
    )


@pytest.mark.interop
def test_a_token_without_the_required_scope_is_refused(broker: BrokerProcess) -> None:
    err = authentication_error(client(broker, "principal=alice scope=other"))
    assert "insufficient_scope" in err.str()


def test_a_listener_with_the_unsecured_validator_is_warned_about_at_start(
    broker: BrokerProcess,
) -> None:
    """Kafka's unsecured validator believes any unsigned token (one saying sub=admin makes its
    holder the super user admin): kept for parity, but the broker says so at start."""
    lines = [
        line
        for line in broker.read_log().splitlines()
        if "event=sasl.oauthbearer_unsecured" in line
    ]
    assert len(lines) == 1, lines
    assert "level=WARNING" in lines[0] and "listener=SASL_PLAINTEXT" in lines[0]
    assert "oauthbearer.sasl.server.callback.handler.class" in lines[0]
