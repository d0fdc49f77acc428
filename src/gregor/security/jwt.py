"""Validation of signed JWTs for SASL/OAUTHBEARER (Kafka's ``OAuthBearerValidatorCallbackHandler``).

A broker listener configured with Kafka's validator callback handler accepts a bearer token
only when it is a JWS in compact form (``header.payload.signature``) that:

- names an algorithm this validator verifies: RS256/RS384/RS512 (RSASSA-PKCS1-v1_5),
  PS256/PS384/PS512 (RSASSA-PSS) or ES256/ES384/ES512 (ECDSA, the signature being r || s);
- is signed by a key of the configured JSON Web Key Set (``sasl.oauthbearer.jwks.endpoint.url``,
  a ``file:`` URL: the set is read at start, nothing is fetched over the network), chosen by
  the header's ``kid`` (or the only key when the set has one and the header names none);
- has a string subject claim (``sasl.oauthbearer.sub.claim.name``, default ``sub``), a numeric
  ``exp`` not in the past, an ``iat`` (when present) not in the future, both within
  ``sasl.oauthbearer.clock.skew.seconds`` (default 30);
- when configured, an ``aud`` that contains one of ``sasl.oauthbearer.expected.audience`` and an
  ``iss`` equal to ``sasl.oauthbearer.expected.issuer``.

The principal is the subject claim. A refusal is a ``TokenRejected`` (``oauthbearer``), which
the SASL exchange answers with RFC 7628's JSON error before the login fails. The signature
check uses the ``cryptography`` library; nothing here implements a cipher.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from gregor.security.oauthbearer import TokenRejected

__all__ = [
    "VALIDATOR_CALLBACK_HANDLERS",
    "JwksError",
    "SignedJwtValidator",
    "load_jwks",
]

#: Kafka's names for its signed-JWT validator (the second is the pre-3.4 package).
VALIDATOR_CALLBACK_HANDLERS = frozenset(
    {
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
        "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler",
    }
)

_HASHES: dict[str, type[hashes.HashAlgorithm]] = {
    "256": hashes.SHA256,
    "384": hashes.SHA384,
    "512": hashes.SHA512,
}
_CURVES: dict[str, tuple[ec.EllipticCurve, str, int]] = {
    "P-256": (ec.SECP256R1(), "ES256", 32),
    "P-384": (ec.SECP384R1(), "ES384", 48),
    "P-521": (ec.SECP521R1(), "ES512", 66),
}


class JwksError(ValueError):
    """The key set cannot be used (a start-up error)."""


def _b64(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def _int(value: Any) -> int:
    if not isinstance(value, str):
        raise JwksError("a key parameter is not a base64url string")
    return int.from_bytes(_b64(value), "big")


@dataclass(frozen=True)
class _Key:
    kid: str | None
    public_key: rsa.RSAPublicKey | ec.EllipticCurvePublicKey
    ec_alg: str | None = None  # the one ES algorithm an EC key's curve allows
    ec_size: int = 0


def _parse_key(jwk: Mapping[str, Any]) -> _Key | None:
    """One JWK, or None for a key this validator does not use (``use`` other than ``sig``)."""
    if jwk.get("use", "sig") != "sig":
        return None
    kid = jwk.get("kid")
    kty = jwk.get("kty")
    try:
        if kty == "RSA":
            return _Key(
                kid, rsa.RSAPublicNumbers(_int(jwk.get("e")), _int(jwk.get("n"))).public_key()
            )
        if kty == "EC":
            curve = _CURVES.get(str(jwk.get("crv")))
            if curve is None:
                raise JwksError(f"key {kid!r}: unsupported curve {jwk.get('crv')!r}")
            numbers = ec.EllipticCurvePublicNumbers(
                _int(jwk.get("x")), _int(jwk.get("y")), curve[0]
            )
            return _Key(kid, numbers.public_key(), curve[1], curve[2])
    except (ValueError, binascii.Error) as e:
        if isinstance(e, JwksError):
            raise
        raise JwksError(f"key {kid!r} is not a valid {kty} public key: {e}") from None
    raise JwksError(f"key {kid!r}: unsupported key type {kty!r} (RSA and EC are)")


def load_jwks(url: str) -> tuple[_Key, ...]:
    """The signing keys of the JWKS at a ``file:`` URL (``JwksError`` when unusable)."""
    parsed = urlparse(url)
    if parsed.scheme != "file":
        raise JwksError(
            f"sasl.oauthbearer.jwks.endpoint.url={url}: only a file: URL is supported (the broker "
            "fetches nothing over the network; save the identity provider's JWKS to a file)"
        )
    path = Path(unquote(parsed.path))
    try:
        doc = json.loads(path.read_text())
    except OSError as e:
        raise JwksError(f"cannot read the JWKS file {path}: {e.strerror}") from None
    except ValueError:
        raise JwksError(f"the JWKS file {path} is not JSON") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("keys"), list):
        raise JwksError(f'the JWKS file {path} has no "keys" list')
    keys = tuple(
        k for k in (_parse_key(j) for j in doc["keys"] if isinstance(j, dict)) if k is not None
    )
    if not keys:
        raise JwksError(f"the JWKS file {path} holds no signing key")
    return keys


@dataclass(frozen=True)
class SignedJwtValidator:
    keys: tuple[_Key, ...]
    sub_claim: str = "sub"
    scope_claim: str = "scope"
    expected_audience: tuple[str, ...] = ()
    expected_issuer: str | None = None
    clock_skew_s: int = 30
    _by_kid: dict[str | None, _Key] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        self._by_kid.update({k.kid: k for k in self.keys})

    @classmethod
    def from_settings(cls, get: Any) -> SignedJwtValidator:
        """Built from the listener's settings: ``get(key)`` returns a value or None."""
        url = get("sasl.oauthbearer.jwks.endpoint.url")
        if not url:
            raise JwksError("the signed-JWT validator needs sasl.oauthbearer.jwks.endpoint.url")
        audience = tuple(
            a.strip()
            for a in (get("sasl.oauthbearer.expected.audience") or "").split(",")
            if a.strip()
        )
        skew = get("sasl.oauthbearer.clock.skew.seconds") or "30"
        try:
            clock_skew_s = int(skew)
        except ValueError:
            raise JwksError(f"sasl.oauthbearer.clock.skew.seconds={skew} is not a number") from None
        return cls(
            keys=load_jwks(url),
            sub_claim=(get("sasl.oauthbearer.sub.claim.name") or "sub").strip(),
            scope_claim=(get("sasl.oauthbearer.scope.claim.name") or "scope").strip(),
            expected_audience=audience,
            expected_issuer=(get("sasl.oauthbearer.expected.issuer") or None),
            clock_skew_s=clock_skew_s,
        )

    def validate(self, token: str, now_ms: int) -> tuple[str, int]:
        """(principal name, expiry in ms since the epoch), or ``TokenRejected``."""
        parts = token.split(".")
        if len(parts) != 3 or not parts[2]:
            raise TokenRejected("not a signed JWS (header.payload.signature)")
        try:
            header, claims = (json.loads(_b64(p)) for p in parts[:2])
            signature = _b64(parts[2])
        except (ValueError, binascii.Error):
            raise TokenRejected("a token part is not base64url JSON") from None
        if not isinstance(header, dict) or not isinstance(claims, dict):
            raise TokenRejected("a token part is not a JSON object")
        self._verify(header, f"{parts[0]}.{parts[1]}".encode(), signature)
        subject = claims.get(self.sub_claim)
        if not isinstance(subject, str) or not subject.strip():
            raise TokenRejected(f"no subject claim {self.sub_claim!r}")
        skew_ms = self.clock_skew_s * 1000
        exp = claims.get("exp")
        if not isinstance(exp, int | float) or isinstance(exp, bool):
            raise TokenRejected("no numeric exp claim")
        exp_ms = int(exp * 1000)
        if now_ms - skew_ms >= exp_ms:
            raise TokenRejected("the token has expired")
        iat = claims.get("iat")
        if iat is not None and (
            not isinstance(iat, int | float) or int(iat * 1000) > now_ms + skew_ms
        ):
            raise TokenRejected("the token was issued in the future")
        if self.expected_audience:
            aud = claims.get("aud")
            auds = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []
            if not set(auds) & set(self.expected_audience):
                raise TokenRejected("the token's audience is not an expected one")
        if self.expected_issuer is not None and claims.get("iss") != self.expected_issuer:
            raise TokenRejected("the token's issuer is not the expected one")
        return subject, exp_ms

    def _verify(self, header: Mapping[str, Any], signed: bytes, signature: bytes) -> None:
        alg = str(header.get("alg", ""))
        kid = header.get("kid")
        key = (
            self._by_kid.get(kid)
            if kid is not None
            else (self.keys[0] if len(self.keys) == 1 else None)
        )
        if key is None:
            raise TokenRejected("no key of the JWKS matches the token's kid")
        family, bits = alg[:2], alg[2:]
        digest = _HASHES.get(bits)
        if digest is None:
            raise TokenRejected(f"unsupported algorithm {alg!r}")
        try:
            if family in ("RS", "PS") and isinstance(key.public_key, rsa.RSAPublicKey):
                pad = (
                    padding.PKCS1v15()
                    if family == "RS"
                    else padding.PSS(
                        mgf=padding.MGF1(digest()), salt_length=padding.PSS.DIGEST_LENGTH
                    )
                )
                key.public_key.verify(signature, signed, pad, digest())
            elif (
                family == "ES"
                and isinstance(key.public_key, ec.EllipticCurvePublicKey)
                and alg == key.ec_alg
            ):
                n = key.ec_size
                if len(signature) != 2 * n:
                    raise InvalidSignature
                r, s = int.from_bytes(signature[:n], "big"), int.from_bytes(signature[n:], "big")
                key.public_key.verify(encode_dss_signature(r, s), signed, ec.ECDSA(digest()))
            else:
                raise TokenRejected(f"algorithm {alg!r} does not fit the key {key.kid!r}")
        except InvalidSignature:
            raise TokenRejected("the token's signature does not verify") from None
