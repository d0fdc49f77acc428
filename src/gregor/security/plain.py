"""SASL/PLAIN (RFC 4616), server side, with users from the listener's JAAS options.

The client sends one token, ``authzid NUL authcid NUL password``; the login succeeds when the
password matches ``user_<authcid>`` of the ``PlainLoginModule`` options and the authzid is
empty or the same user, as Kafka's ``PlainSaslServer`` checks. The comparison is constant
time; the reply is empty.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from gregor.security.sasl import PLAIN, SaslAuthenticationError

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"


def plain_users(options: Mapping[str, str]) -> dict[str, str]:
    """The ``user_<name>=<password>`` options of a PlainLoginModule entry."""
    return {k[len("user_") :]: v for k, v in options.items() if k.startswith("user_")}


class PlainServer:
    mechanism = PLAIN

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self.complete = False
        self.principal = ""
        self.expires_at_ms: int | None = None

    def evaluate(self, token: bytes) -> bytes:
        if self.complete:
            raise SaslAuthenticationError("Authentication failed: PLAIN login already completed")
        try:
            text = bytes(token).decode("utf-8")
        except UnicodeDecodeError:
            raise SaslAuthenticationError(
                "Authentication failed: invalid SASL/PLAIN token"
            ) from None
        parts = text.split("\0")
        if len(parts) != 3:
            raise SaslAuthenticationError(
                "Invalid SASL/PLAIN response: expected 3 tokens, got " + str(len(parts))
            )
        authzid, username, password = parts
        if not username:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        expected = self._users.get(username)
        # Compare against something even for an unknown user, so timing tells nothing.
        ok = hmac.compare_digest(
            (expected if expected is not None else "\0" + password).encode(), password.encode()
        )
        if expected is None or not ok:
            raise SaslAuthenticationError("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different "
                "from username"
            )
        self.complete = True
        self.principal = "User:" + username
        return b""
