"""The client side of SASL PLAIN (RFC 4616) and SCRAM-SHA-256/512 (RFC 5802, RFC 7677), as a
Kafka client logs in: one ``SaslClient`` per login, fed the broker's SaslAuthenticate answers.

Refusals raise the protocol's SaslAuthenticationFailedError (SASL_AUTHENTICATION_FAILED).
``first()`` is the first message to send; ``respond(challenge)`` the next one for a server
message, or None when the exchange is over. SCRAM verifies the server's signature in its final
message: a broker that does not know the password (or a man in the middle) fails the login
with ``SaslAuthenticationError``, as the RFC requires. No state outlives the object, and the
password is never put in an error message.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from typing import Protocol

from gregor.protocol.errors import SaslAuthenticationFailedError as SaslAuthenticationError

PLAIN = "PLAIN"
SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"
CLIENT_MECHANISMS = (PLAIN, SCRAM_SHA_256, SCRAM_SHA_512)
_HASHES = {SCRAM_SHA_256: "sha256", SCRAM_SHA_512: "sha512"}


class SaslClient(Protocol):
    mechanism: str

    def first(self) -> bytes: ...

    def respond(self, challenge: bytes) -> bytes | None: ...


class PlainClient:
    def __init__(self, username: str, password: str) -> None:
        self.mechanism = PLAIN
        self._username = username
        self._password = password

    def first(self) -> bytes:
        return b"\0" + self._username.encode() + b"\0" + self._password.encode()

    def respond(self, challenge: bytes) -> bytes | None:
        return None


def _escape(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


class ScramClient:
    def __init__(
        self,
        mechanism: str,
        username: str,
        password: str,
        nonce: str | None = None,
        tokenauth: bool = False,
    ) -> None:
        if mechanism not in _HASHES:
            raise ValueError(f"{mechanism} is not a SCRAM mechanism")
        self.mechanism = mechanism
        self._hash = _HASHES[mechanism]
        self._password = password
        self._nonce = nonce or base64.b64encode(os.urandom(24)).decode()
        # A delegation token's login carries the tokenauth extension (RFC 5802 extensions).
        extension = ",tokenauth=true" if tokenauth else ""
        self._client_first_bare = f"n={_escape(username)},r={self._nonce}{extension}"
        self._server_signature: bytes | None = None

    def first(self) -> bytes:
        return ("n,," + self._client_first_bare).encode()

    def respond(self, challenge: bytes) -> bytes | None:
        text = bytes(challenge).decode("utf-8", errors="replace")
        attrs = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
        if "e" in attrs:
            raise SaslAuthenticationError(
                f"{self.mechanism} login refused by the broker: {attrs['e']}"
            )
        if self._server_signature is None:
            return self._final(text, attrs)
        verifier = attrs.get("v")
        if verifier is None or not hmac.compare_digest(
            base64.b64decode(verifier), self._server_signature
        ):
            raise SaslAuthenticationError(
                f"{self.mechanism}: the broker's signature does not verify"
            )
        return None

    def _final(self, server_first: str, attrs: dict[str, str]) -> bytes:
        try:
            nonce, salt, iterations = attrs["r"], base64.b64decode(attrs["s"]), int(attrs["i"])
        except (KeyError, ValueError) as e:
            raise SaslAuthenticationError(
                f"{self.mechanism}: malformed server-first message"
            ) from e
        if not nonce.startswith(self._nonce) or iterations < 1:
            raise SaslAuthenticationError(
                f"{self.mechanism}: the broker's nonce or iteration count is invalid"
            )
        salted = hashlib.pbkdf2_hmac(self._hash, self._password.encode(), salt, iterations)
        client_key = hmac.new(salted, b"Client Key", self._hash).digest()
        stored_key = hashlib.new(self._hash, client_key).digest()
        without_proof = f"c={base64.b64encode(b'n,,').decode()},r={nonce}"
        auth_message = f"{self._client_first_bare},{server_first},{without_proof}".encode()
        signature = hmac.new(stored_key, auth_message, self._hash).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        server_key = hmac.new(salted, b"Server Key", self._hash).digest()
        self._server_signature = hmac.new(server_key, auth_message, self._hash).digest()
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


def sasl_client(
    mechanism: str, username: str, password: str, tokenauth: bool = False
) -> SaslClient:
    """A client for ``mechanism`` (one of ``CLIENT_MECHANISMS``); ValueError for others.
    ``tokenauth``: a SCRAM login with a delegation token."""
    if mechanism == PLAIN:
        return PlainClient(username, password)
    if mechanism in _HASHES:
        return ScramClient(mechanism, username, password, tokenauth=tokenauth)
    raise ValueError(
        f"SASL mechanism {mechanism} is not supported for logging in (use {', '.join(CLIENT_MECHANISMS)})"
    )
