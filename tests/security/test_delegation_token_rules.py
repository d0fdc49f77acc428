"""Delegation-token rules and the SCRAM token login, without a broker (clock given)."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from gregor.client.sasl import ScramClient
from gregor.protocol.errors import DelegationTokenExpiredError, DelegationTokenOwnerMismatchError
from gregor.security import delegation_tokens as dt
from gregor.security.sasl import SaslAuthenticationError
from gregor.security.scram import ScramServer, make_credential

NOW = 1_800_000_000_000
DAY = 24 * 3600 * 1000


def token(**kw: object) -> dt.DelegationToken:
    fields: dict[str, object] = dict(
        token_id="tid",
        owner="User:alice",
        requester="User:admin",
        renewers=("User:bob",),
        issue_timestamp_ms=NOW,
        expiry_timestamp_ms=NOW + DAY,
        max_timestamp_ms=NOW + 7 * DAY,
    )
    fields.update(kw)
    return dt.DelegationToken(**fields)  # type: ignore[arg-type]


def test_a_new_token_takes_kafkas_lifetimes() -> None:
    t = dt.new_token("User:a", "User:a", [], -1, NOW)
    assert (t.expiry_timestamp_ms, t.max_timestamp_ms) == (NOW + DAY, NOW + 7 * DAY)
    assert (
        len(t.token_id) == 22
        and t.token_id != dt.new_token("User:a", "User:a", [], -1, NOW).token_id
    )
    # a short maximum caps the first expiry; a maximum above the broker's is cut to it
    short = dt.new_token("User:a", "User:a", [], 1000, NOW)
    assert (short.expiry_timestamp_ms, short.max_timestamp_ms) == (NOW + 1000, NOW + 1000)
    assert (
        dt.new_token("User:a", "User:a", [], 30 * DAY, NOW, 2 * DAY, DAY).max_timestamp_ms
        == NOW + 2 * DAY
    )


def test_the_hmac_is_hmac_sha512_of_the_id_under_the_secret() -> None:
    mac = dt.token_hmac("secret", "tid")
    assert mac == hmac.new(b"secret", b"tid", hashlib.sha512).digest()
    assert dt.token_password(mac) == base64.b64encode(mac).decode()
    assert dt.find_by_hmac([token(token_id="x"), token()], "secret", mac) == token()
    assert dt.find_by_hmac([token()], "other secret", mac) is None


def test_renew_and_expire_rules() -> None:
    t = token()
    # owner, requester and renewers may; anyone else may not
    for who in ("User:alice", "User:admin", "User:bob"):
        assert dt.renewed(t, who, 1000, NOW, DAY).expiry_timestamp_ms == NOW + 1000
    with pytest.raises(DelegationTokenOwnerMismatchError):
        dt.renewed(t, "User:carol", 1000, NOW, DAY)
    assert dt.renewed(t, "User:bob", -1, NOW, DAY).expiry_timestamp_ms == NOW + DAY  # the default
    assert (
        dt.renewed(t, "User:bob", 30 * DAY, NOW, DAY).expiry_timestamp_ms == NOW + 7 * DAY
    )  # capped
    assert dt.expired_by(t, "User:alice", -1, NOW) is None  # removed now
    assert dt.expired_by(t, "User:alice", 5, NOW) == token(expiry_timestamp_ms=NOW + 5)
    late = NOW + DAY + 1
    with pytest.raises(DelegationTokenExpiredError):
        dt.renewed(t, "User:alice", 1000, late, DAY)
    with pytest.raises(DelegationTokenExpiredError):
        dt.expired_by(t, "User:alice", -1, late)
    assert dt.check_principal("User", "x") is None
    assert (
        dt.check_principal("Group", "x") is not None and dt.check_principal("User", "") is not None
    )


def test_token_credentials_are_made_once_and_refused_when_expired() -> None:
    creds = dt.TokenCredentials()
    t = token()
    first = creds.login(t, "secret", "SCRAM-SHA-256", NOW)
    assert first is not None and (first.owner, first.expiry_timestamp_ms) == (
        "User:alice",
        NOW + DAY,
    )
    again = creds.login(t, "secret", "SCRAM-SHA-256", NOW)
    assert again is not None and again.credential is first.credential
    assert creds.login(t, "secret", "PLAIN", NOW) is None
    assert creds.login(t, None, "SCRAM-SHA-256", NOW) is None
    assert creds.login(t, "secret", "SCRAM-SHA-256", NOW + DAY + 1) is None
    assert creds.login(None, "secret", "SCRAM-SHA-256", NOW) is None
    creds.forget([])
    assert creds.login(t, "secret", "SCRAM-SHA-256", NOW).credential is not first.credential  # type: ignore[union-attr]


def _exchange(server: ScramServer, client: ScramClient) -> bytes | None:
    reply = server.evaluate(client.first())
    final = client.respond(reply)
    assert final is not None
    return client.respond(server.evaluate(final))


def _token_server(mechanism: str = "SCRAM-SHA-512") -> ScramServer:
    password = dt.token_password(dt.token_hmac("secret", "tid"))
    cred = make_credential(mechanism, password)
    return ScramServer(
        mechanism,
        lambda user: None,  # no user is called tid
        token_lookup=lambda token_id: (
            (cred, "User:alice", NOW + DAY) if token_id == "tid" else None
        ),
    )


def test_a_scram_login_with_tokenauth_becomes_the_owner() -> None:
    password = dt.token_password(dt.token_hmac("secret", "tid"))
    server = _token_server()
    assert _exchange(server, ScramClient("SCRAM-SHA-512", "tid", password, tokenauth=True)) is None
    assert server.complete and server.token_authenticated
    assert (server.principal, server.expires_at_ms) == ("User:alice", NOW + DAY)


@pytest.mark.parametrize(
    "user, tokenauth, password",
    [
        ("tid", True, "wrong"),  # wrong HMAC
        ("other", True, None),  # unknown token
        ("tid", False, None),  # the token id as a user name without tokenauth
    ],
)
def test_token_logins_that_must_fail(user: str, tokenauth: bool, password: str | None) -> None:
    good = dt.token_password(dt.token_hmac("secret", "tid"))
    server = _token_server()
    client = ScramClient("SCRAM-SHA-512", user, password or good, tokenauth=tokenauth)
    with pytest.raises(SaslAuthenticationError, match="invalid credentials"):
        _exchange(server, client)
    assert not server.complete and not server.token_authenticated


def test_tokenauth_on_a_server_without_tokens_fails() -> None:
    server = ScramServer("SCRAM-SHA-256", lambda user: make_credential("SCRAM-SHA-256", "pw"))
    with pytest.raises(SaslAuthenticationError):
        server.evaluate(b"n,,n=tid,r=abc,tokenauth=true")
