"""The shape every SASL mechanism's server side has, and the error a failed login raises.

A ``SaslServer`` is a small state machine: ``evaluate(token)`` takes the client's next token
and returns the server's reply; ``complete`` becomes True once the client is authenticated,
and ``principal`` then names it (``User:alice``). A failure raises ``SaslAuthenticationError``
whose message is what the client is told; it never carries a password or a proof.
"""

from __future__ import annotations

from typing import Protocol

PLAIN = "PLAIN"
SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"
OAUTHBEARER = "OAUTHBEARER"
#: The mechanisms this broker can serve.
SUPPORTED_MECHANISMS = (PLAIN, SCRAM_SHA_256, SCRAM_SHA_512, OAUTHBEARER)


class SaslAuthenticationError(Exception):
    """A login that failed; ``str(e)`` is the message for the client (no secrets in it)."""


class SaslServer(Protocol):
    @property
    def mechanism(self) -> str: ...

    @property
    def complete(self) -> bool: ...

    @property
    def principal(self) -> str:
        """``User:<name>`` once ``complete``."""
        ...

    @property
    def expires_at_ms(self) -> int | None:
        """When the credential used expires (ms since the epoch; a token's ``exp``), or None."""
        ...

    def evaluate(self, token: bytes) -> bytes:
        """The reply to the client's next token; raises ``SaslAuthenticationError``."""
        ...


def invalid_credentials(mechanism: str) -> SaslAuthenticationError:
    """Kafka's message for a login refused for its credentials."""
    return SaslAuthenticationError(
        "Authentication failed during authentication due to invalid credentials with SASL "
        f"mechanism {mechanism}"
    )
