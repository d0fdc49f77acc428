"""OAUTHBEARER with signed JWTs (Kafka's OAuthBearerValidatorCallbackHandler): the validator
alone, its configuration, and confluent-kafka logging in with a token from ``oauth_cb``.

Keys and tokens are made here with ``cryptography``: an RSA and an EC key in a JWKS file, each
with its ``kid``; a third key that is not in the set signs the forged tokens.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
from sasl_clients import authentication_error, produce_then_consume

from gregor.broker.config.broker_config import BrokerConfig, ConfigError
from gregor.security.jwt import SignedJwtValidator
from gregor.security.oauthbearer import OAuthBearerServer, TokenRejected
from gregor.testing import BrokerProcess

NOW = 1_700_000_000
MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"

RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC_KEY = ec.generate_private_key(ec.SECP256R1())
OTHER_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def b64int(n: int, size: int | None = None) -> str:
    return b64(n.to_bytes(size or (n.bit_length() + 7) // 8, "big"))


def jwks() -> dict[str, Any]:
    rn = RSA_KEY.public_key().public_numbers()
    en = EC_KEY.public_key().public_numbers()
    return {
        "keys": [
            {"kty": "RSA", "kid": "rsa-1", "use": "sig", "n": b64int(rn.n), "e": b64int(rn.e)},
            {
                "kty": "EC",
                "kid": "ec-1",
                "crv": "P-256",
                "x": b64int(en.x, 32),
                "y": b64int(en.y, 32),
            },
            {"kty": "RSA", "kid": "enc-1", "use": "enc", "n": b64int(rn.n), "e": b64int(rn.e)},
        ]
    }


def sign(
    claims: dict[str, Any], alg: str = "RS256", kid: str | None = "rsa-1", key: Any = RSA_KEY
) -> str:
    header: dict[str, Any] = {"alg": alg, "typ": "JWT"}
    if kid is not None:
        header["kid"] = kid
    signing_input = (
        f"{b64(json.dumps(header).encode())}.{b64(json.dumps(claims).encode())}".encode()
    )
    if alg.startswith("ES"):
        r, s = decode_dss_signature(key.sign(signing_input, ec.ECDSA(hashes.SHA256())))
        sig = r.to_bytes(32, "big") + s.to_bytes(32, "big")
    elif alg.startswith("PS"):
        sig = key.sign(
            signing_input,
            padding.PSS(mgf=padding.MGF1(hashes.SHA256()), salt_length=padding.PSS.DIGEST_LENGTH),
            hashes.SHA256(),
        )
    else:
        sig = key.sign(signing_input, padding.PKCS1v15(), hashes.SHA256())
    return f"{signing_input.decode()}.{b64(sig)}"


@pytest.fixture(scope="module")
def jwks_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("jwks") / "jwks.json"
    path.write_text(json.dumps(jwks()))
    return path


def validator(jwks_file: Path, **settings: str) -> SignedJwtValidator:
    values = {"sasl.oauthbearer.jwks.endpoint.url": jwks_file.as_uri(), **settings}
    return SignedJwtValidator.from_settings(values.get)


GOOD = {
    "sub": "alice",
    "exp": NOW + 60,
    "iat": NOW - 5,
    "aud": ["kafka"],
    "iss": "https://idp.example",
}


@pytest.mark.parametrize(
    "alg, kid, key",
    [("RS256", "rsa-1", RSA_KEY), ("PS256", "rsa-1", RSA_KEY), ("ES256", "ec-1", EC_KEY)],
)
def test_a_token_signed_by_a_key_of_the_set_is_accepted(
    jwks_file: Path, alg: str, kid: str, key: Any
) -> None:
    v = validator(
        jwks_file,
        **{
            "sasl.oauthbearer.expected.audience": "kafka,other",
            "sasl.oauthbearer.expected.issuer": "https://idp.example",
        },
    )
    assert v.validate(sign(GOOD, alg, kid, key), NOW * 1000) == ("alice", (NOW + 60) * 1000)


@pytest.mark.parametrize(
    "token_fn, reason",
    [
        (lambda: sign(GOOD, key=OTHER_KEY), "signature does not verify"),
        (lambda: sign({**GOOD, "exp": NOW - 31}), "expired"),
        (lambda: sign({**GOOD, "iat": NOW + 31}), "issued in the future"),
        (lambda: sign({**GOOD, "aud": "elsewhere"}), "audience"),
        (lambda: sign({**GOOD, "iss": "https://evil.example"}), "issuer"),
        (lambda: sign({k: v for k, v in GOOD.items() if k != "sub"}), "subject"),
        (lambda: sign(GOOD, kid="nope"), "kid"),
        (lambda: sign(GOOD, kid="enc-1"), "kid"),
        (lambda: sign(GOOD, alg="ES256", kid="rsa-1", key=EC_KEY), "does not fit"),
        (lambda: sign(GOOD).rsplit(".", 1)[0] + ".", "not a signed JWS"),
        (
            lambda: ".".join(
                [
                    sign(GOOD).split(".")[0],
                    b64(json.dumps({**GOOD, "sub": "root"}).encode()),
                    sign(GOOD).split(".")[2],
                ]
            ),
            "signature does not verify",
        ),
    ],
)
def test_a_bad_token_is_refused(jwks_file: Path, token_fn: Any, reason: str) -> None:
    v = validator(
        jwks_file,
        **{
            "sasl.oauthbearer.expected.audience": "kafka",
            "sasl.oauthbearer.expected.issuer": "https://idp.example",
        },
    )
    with pytest.raises(TokenRejected, match=reason):
        v.validate(token_fn(), NOW * 1000)


def test_the_sasl_exchange_uses_the_signed_validator(jwks_file: Path) -> None:
    s = OAuthBearerServer(validator(jwks_file), clock=lambda: float(NOW))
    assert s.evaluate(f"n,,\x01auth=Bearer {sign(GOOD)}\x01\x01".encode()) == b""
    assert (s.complete, s.principal) == (True, "User:alice")
    refused = OAuthBearerServer(validator(jwks_file), clock=lambda: float(NOW))
    assert refused.evaluate(f"n,,\x01auth=Bearer {sign(GOOD, key=OTHER_KEY)}\x01\x01".encode()) == (
        b'{"status":"invalid_token"}'
    )
    assert not refused.complete


def test_configuration_errors_stop_the_broker(jwks_file: Path, tmp_path: Path) -> None:
    base = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": f"{MODULE} required;",
        "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": HANDLER,
    }
    sec = BrokerConfig(
        {**base, "sasl.oauthbearer.jwks.endpoint.url": jwks_file.as_uri()}
    ).listener_security
    assert isinstance(sec["SASL_PLAINTEXT"].oauthbearer, SignedJwtValidator)
    with pytest.raises(ConfigError, match="only a file: URL"):
        BrokerConfig({**base, "sasl.oauthbearer.jwks.endpoint.url": "https://idp.example/jwks"})
    with pytest.raises(ConfigError, match="cannot read the JWKS file"):
        BrokerConfig(
            {**base, "sasl.oauthbearer.jwks.endpoint.url": (tmp_path / "missing.json").as_uri()}
        )
    bad = tmp_path / "bad.json"
    bad.write_text('{"keys": []}')
    with pytest.raises(ConfigError, match="holds no signing key"):
        BrokerConfig({**base, "sasl.oauthbearer.jwks.endpoint.url": bad.as_uri()})


@pytest.fixture(scope="module")
def broker(jwks_file: Path) -> Iterator[BrokerProcess]:
    config = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": f"{MODULE} required;",
        "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": HANDLER,
        "sasl.oauthbearer.jwks.endpoint.url": jwks_file.as_uri(),
        "sasl.oauthbearer.expected.audience": "kafka",
        "num.partitions": 1,
    }
    with BrokerProcess(config=config, log_level="DEBUG") as b:
        yield b
        assert "event=request.failed" not in b.read_log()


def client(broker: BrokerProcess, token: str, **extra: Any) -> dict[str, Any]:
    return {
        "bootstrap.servers": broker.bootstrap_servers,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "oauth_cb": lambda _config: (token, time.time() + 300),
        **extra,
    }


@pytest.mark.interop
def test_confluent_kafka_with_a_signed_jwt(broker: BrokerProcess) -> None:
    now = int(time.time())
    token = sign(
        {"sub": "carol", "exp": now + 300, "iat": now, "aud": "kafka"}, "ES256", "ec-1", EC_KEY
    )
    topic = f"jwt-{uuid.uuid4().hex[:8]}"
    assert produce_then_consume(client(broker, token), topic) == [b"v0", b"v1", b"v2"]
    assert "principal=User:carol" in broker.read_log()


@pytest.mark.interop
@pytest.mark.parametrize(
    "claims, key",
    [
        ({"sub": "mallory", "aud": "kafka"}, OTHER_KEY),  # forged: not a key of the set
        ({"sub": "mallory", "aud": "elsewhere"}, RSA_KEY),  # wrong audience
        ({"sub": "mallory", "aud": "kafka", "expired": True}, RSA_KEY),
    ],
)
def test_a_forged_expired_or_misdirected_token_is_refused(
    broker: BrokerProcess, claims: dict[str, Any], key: Any
) -> None:
    now = int(time.time())
    claims = dict(claims)
    exp = now - 3600 if claims.pop("expired", False) else now + 300
    token = sign({**claims, "exp": exp, "iat": now - 7200}, key=key)
    assert "invalid_token" in authentication_error(client(broker, token)).str()
    # The broker still serves a good token.
    good = sign({"sub": "carol", "exp": now + 300, "aud": "kafka"})
    ok = Producer(client(broker, good))
    ok.produce(f"jwt-ok-{uuid.uuid4().hex[:6]}", b"x")
    assert ok.flush(60) == 0


def test_signed_jwt_validation_gets_no_unsecured_warning(broker: BrokerProcess) -> None:
    log = broker.read_log()
    assert "event=broker.started" in log and "event=sasl.oauthbearer_unsecured" not in log
