"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), server side, and credentials.

A stored credential is what Kafka keeps: salt, ``stored_key = H(HMAC(salted_password,
"Client Key"))``, ``server_key = HMAC(salted_password, "Server Key")`` and the iteration
count; never the password or the salted password.

``ScramServer`` runs the exchange in two rounds:

1. client-first ``n,[a=authzid],n=user,r=cnonce[,ext...]``: the server looks the user up,
   and answers ``r=cnonce+snonce,s=salt,i=iterations`` with a fresh random server nonce (so a
   replayed client-final never verifies);
2. client-final ``c=biws,r=nonce[,ext...],p=proof``: the server checks the channel binding,
   the nonce and the proof (``H(proof XOR HMAC(stored_key, AuthMessage)) == stored_key``),
   and answers ``v=HMAC(server_key, AuthMessage)``. (librdkafka before 2.6.1 repeats its client
   nonce in front of the combined one; that form is accepted, see ``_nonce_ok``.)

Delegation tokens (KIP-48): a client-first with the ``tokenauth=true`` extension logs in with
a token, user name = token id; ``token_lookup(token_id)`` gives the credential to check, the
principal the session becomes (the token's owner) and when the token expires, which bounds
the session (``expires_at_ms``). ``token_authenticated`` then says so.

An unknown user, a wrong proof, a bad nonce or a malformed message all fail with Kafka's
"invalid credentials" message; nothing secret is ever put in an error.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from collections.abc import Callable
from dataclasses import dataclass

from gregor.security.sasl import (
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    SaslAuthenticationError,
    invalid_credentials,
)

#: Kafka's wire numbers of the mechanisms (AlterUserScramCredentials / Describe...).
MECHANISM_IDS = {SCRAM_SHA_256: 1, SCRAM_SHA_512: 2}
MECHANISM_NAMES = {v: k for k, v in MECHANISM_IDS.items()}
_HASHES = {SCRAM_SHA_256: "sha256", SCRAM_SHA_512: "sha512"}
#: Kafka's bounds for the iteration count of a stored credential.
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384


@dataclass(frozen=True, slots=True)
class ScramCredential:
    mechanism: str
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def _hmac(name: str, key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, name).digest()


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(_HASHES[mechanism], password.encode(), salt, iterations)


def credential_from_salted_password(
    mechanism: str, salted: bytes, salt: bytes, iterations: int
) -> ScramCredential:
    name = _HASHES[mechanism]
    client_key = _hmac(name, salted, b"Client Key")
    return ScramCredential(
        mechanism,
        bytes(salt),
        hashlib.new(name, client_key).digest(),
        _hmac(name, salted, b"Server Key"),
        iterations,
    )


def make_credential(
    mechanism: str, password: str, iterations: int = MIN_ITERATIONS, salt: bytes | None = None
) -> ScramCredential:
    salt = os.urandom(32) if salt is None else salt
    return credential_from_salted_password(
        mechanism, salted_password(mechanism, password, salt, iterations), salt, iterations
    )


def _attributes(text: str) -> list[tuple[str, str]]:
    out = []
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if not key or not sep:
            raise ValueError("malformed SCRAM attribute")
        out.append((key, value))
    return out


def _sasl_name(value: str) -> str:
    if "=" in value.replace("=2C", "").replace("=3D", ""):
        raise ValueError("invalid saslname")
    return value.replace("=2C", ",").replace("=3D", "=")


#: token id -> (credential, owner principal, expiry in ms since the epoch), or None.
TokenLookup = Callable[[str], "tuple[ScramCredential, str, int] | None"]


class ScramServer:
    """One SCRAM exchange; ``lookup(user)`` returns the stored credential or None."""

    def __init__(
        self,
        mechanism: str,
        lookup: Callable[[str], ScramCredential | None],
        nonce: Callable[[], str] | None = None,
        token_lookup: TokenLookup | None = None,
    ) -> None:
        if mechanism not in _HASHES:
            raise ValueError(f"{mechanism} is not a SCRAM mechanism")
        self.mechanism = mechanism
        self._hash = _HASHES[mechanism]
        self._lookup = lookup
        self._token_lookup = token_lookup
        self.token_authenticated = False
        self._token_owner: str | None = None
        self._new_nonce = nonce or (lambda: base64.b64encode(os.urandom(24)).decode())
        self._step = 0
        self.complete = False
        self.principal = ""
        self.expires_at_ms: int | None = None
        self.extensions: dict[str, str] = {}
        self._credential: ScramCredential | None = None
        self._gs2 = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self._server_nonce_len = 0
        self._user = ""

    def evaluate(self, token: bytes) -> bytes:
        try:
            text = bytes(token).decode("utf-8")
            if self._step == 0:
                return self._first(text)
            if self._step == 1:
                return self._final(text)
        except (ValueError, IndexError, KeyError):
            pass
        except SaslAuthenticationError:
            self._step = 3
            raise
        self._step = 3
        raise invalid_credentials(self.mechanism)

    def _first(self, text: str) -> bytes:
        # gs2-header: channel binding flag, then the authzid, then the bare message.
        cb, _, rest = text.partition(",")
        authzid, sep, bare = rest.partition(",")
        if not sep or cb not in ("n", "y") or (authzid and not authzid.startswith("a=")):
            raise ValueError("bad gs2 header")
        attrs = _attributes(bare)
        if len(attrs) < 2 or attrs[0][0] != "n" or attrs[1][0] != "r" or not attrs[1][1]:
            raise ValueError("bad client-first message")
        user = _sasl_name(attrs[0][1])
        if authzid and _sasl_name(authzid[2:]) != user:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different "
                "from username"
            )
        self.extensions = {}
        for key, value in attrs[2:]:
            self.extensions[key] = value
        credential: ScramCredential | None
        if self.extensions.get("tokenauth", "").lower() == "true":
            found = self._token_lookup(user) if self._token_lookup is not None else None
            if found is None:
                raise ValueError("unknown or expired token")
            credential, self._token_owner, self.expires_at_ms = found
        else:
            credential = self._lookup(user)
        if credential is None or credential.mechanism != self.mechanism:
            raise ValueError("unknown user")
        self._user = user
        self._credential = credential
        self._gs2 = text[: len(cb) + 1 + len(authzid) + 1]
        self._client_first_bare = bare
        server_nonce = self._new_nonce()
        self._server_nonce_len = len(server_nonce)
        self._nonce = attrs[1][1] + server_nonce
        self._server_first = (
            f"r={self._nonce},s={base64.b64encode(credential.salt).decode()},"
            f"i={credential.iterations}"
        )
        self._step = 1
        return self._server_first.encode()

    def _nonce_ok(self, nonce: str) -> bool:
        """The nonce of client-final is the one server-first sent (RFC 5802). librdkafka before
        2.6.1 sends the client nonce once more in front of it; that form is accepted too, as
        Kafka 3.8.1 to 3.9 did: it still carries this exchange's fresh server nonce, so a
        replayed exchange fails all the same."""
        combined = self._nonce.encode()
        client_nonce = self._nonce[: len(self._nonce) - self._server_nonce_len]
        return hmac.compare_digest(nonce.encode(), combined) or hmac.compare_digest(
            nonce.encode(), client_nonce.encode() + combined
        )

    def _final(self, text: str) -> bytes:
        without_proof, sep, proof_b64 = text.rpartition(",p=")
        if not sep:
            raise ValueError("no proof")
        attrs = _attributes(without_proof)
        if len(attrs) < 2 or attrs[0][0] != "c" or attrs[1][0] != "r":
            raise ValueError("bad client-final message")
        if base64.b64decode(attrs[0][1], validate=True) != self._gs2.encode():
            raise ValueError("channel binding mismatch")
        if not self._nonce_ok(attrs[1][1]):
            raise ValueError("nonce mismatch")
        credential = self._credential
        assert credential is not None
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        proof = base64.b64decode(proof_b64, validate=True)
        signature = _hmac(self._hash, credential.stored_key, auth_message)
        if len(proof) != len(signature):
            raise ValueError("proof length")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(
            hashlib.new(self._hash, client_key).digest(), credential.stored_key
        ):
            raise ValueError("wrong proof")
        server_signature = _hmac(self._hash, credential.server_key, auth_message)
        self._step = 2
        self.complete = True
        self.token_authenticated = self._token_owner is not None
        self.principal = (
            self._token_owner if self._token_owner is not None else "User:" + self._user
        )
        return b"v=" + base64.b64encode(server_signature)
