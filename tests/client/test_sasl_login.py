"""The client side of SASL (``gregor.client.core.sasl``) against the broker's own mechanisms:
PLAIN's one message, a SCRAM-SHA-256/512 exchange that both sides accept, a wrong password
refused by the server, and a server that cannot prove it knows the password refused by the
client (RFC 5802's mutual authentication)."""

from __future__ import annotations

import pytest

from gregor.client.core.sasl import PlainClient, ScramClient, sasl_client
from gregor.protocol.errors import SaslAuthenticationFailedError
from gregor.security.plain import PlainServer
from gregor.security.sasl import SaslAuthenticationError
from gregor.security.scram import ScramServer, make_credential


def test_plain_sends_one_message_the_server_accepts() -> None:
    client = PlainClient("alice", "alice-secret")
    assert client.first() == b"\0alice\0alice-secret"
    server = PlainServer({"alice": "alice-secret"})
    server.evaluate(client.first())
    assert server.complete and server.principal == "User:alice"
    assert client.respond(b"") is None


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_exchange_completes_on_both_sides(mechanism: str) -> None:
    stored = make_credential(mechanism, "pw", iterations=4096)
    server = ScramServer(mechanism, lambda user: stored if user == "bob,=x" else None)
    client = sasl_client(mechanism, "bob,=x", "pw")  # a name that needs SCRAM's escaping
    server_first = server.evaluate(client.first())
    client_final = client.respond(server_first)
    assert client_final is not None
    server_final = server.evaluate(client_final)
    assert client.respond(server_final) is None
    assert server.complete and server.principal == "User:bob,=x"


def test_a_wrong_password_is_refused_by_the_server() -> None:
    stored = make_credential("SCRAM-SHA-256", "right", iterations=4096)
    server = ScramServer("SCRAM-SHA-256", lambda user: stored)
    client = ScramClient("SCRAM-SHA-256", "bob", "wrong")
    final = client.respond(server.evaluate(client.first()))
    assert final is not None
    with pytest.raises(SaslAuthenticationError):
        server.evaluate(final)
    assert not server.complete


def test_a_server_that_does_not_know_the_password_is_refused_by_the_client() -> None:
    # An impostor with a credential for another password answers the client's proof...
    impostor = ScramServer("SCRAM-SHA-256", lambda user: make_credential("SCRAM-SHA-256", "guess"))
    client = ScramClient("SCRAM-SHA-256", "bob", "pw")
    final = client.respond(impostor.evaluate(client.first()))
    assert final is not None
    with pytest.raises(SaslAuthenticationError):
        impostor.evaluate(final)  # it cannot verify the proof either,
    # ...and a forged final message with its own signature does not verify at the client.
    with pytest.raises(SaslAuthenticationFailedError, match="signature"):
        client.respond(b"v=" + b"AAAA" * 8)
    with pytest.raises(SaslAuthenticationFailedError, match="refused"):
        ScramClient("SCRAM-SHA-256", "bob", "pw").respond(b"e=unknown-user")


def test_mechanisms_without_a_client_are_refused() -> None:
    with pytest.raises(ValueError, match="GSSAPI"):
        sasl_client("GSSAPI", "a", "b")
