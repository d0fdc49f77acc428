"""The sans-IO SASL mechanisms, JAAS parsing and certificate principals."""

from __future__ import annotations

import base64

import pytest

from gregor.security.jaas import JaasConfigError, parse_jaas_config
from gregor.security.plain import PlainServer, plain_users
from gregor.security.principal import PrincipalMappingError, SslPrincipalMapper, dn_from_peercert
from gregor.security.sasl import SaslAuthenticationError
from gregor.security.scram import ScramServer, make_credential

# RFC 7677, section 3: the SCRAM-SHA-256 example exchange.
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_SERVER_FIRST = (
    b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
)
RFC_CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
FAILED = "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256"


def rfc_server(nonce: str = RFC_SERVER_NONCE) -> ScramServer:
    cred = make_credential("SCRAM-SHA-256", "pencil", 4096, RFC_SALT)
    return ScramServer(
        "SCRAM-SHA-256", lambda u: cred if u == "user" else None, nonce=lambda: nonce
    )


def test_scram_sha_256_follows_the_rfc_7677_example() -> None:
    server = rfc_server()
    assert server.evaluate(RFC_CLIENT_FIRST) == RFC_SERVER_FIRST
    assert not server.complete
    assert server.evaluate(RFC_CLIENT_FINAL) == RFC_SERVER_FINAL
    assert server.complete and server.principal == "User:user"


def test_a_stored_credential_holds_no_password() -> None:
    cred = make_credential("SCRAM-SHA-512", "pencil", 4096, b"salt")
    assert b"pencil" not in cred.stored_key + cred.server_key + cred.salt
    assert len(cred.stored_key) == len(cred.server_key) == 64


@pytest.mark.parametrize(
    "first, final",
    [
        (b"n,,n=nobody,r=abc", None),  # unknown user
        (RFC_CLIENT_FIRST, RFC_CLIENT_FINAL.replace(b"p=dHzb", b"p=eHzb")),  # wrong proof
        (RFC_CLIENT_FIRST, RFC_CLIENT_FINAL.replace(b"c=biws", b"c=eSws")),  # channel binding
        (
            RFC_CLIENT_FIRST,
            b"c=biws,r=rOprNGfwEbeRWgbNEkqO,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
        ),
        (b"p=tls-unique,,n=user,r=abc", None),  # channel binding is not offered
        (b"\xff\xfe garbage", None),
        (b"", None),
        (RFC_CLIENT_FIRST, b"no proof at all"),
    ],
)
def test_scram_refuses_bad_logins_with_kafkas_message(first: bytes, final: bytes | None) -> None:
    server = rfc_server()
    with pytest.raises(SaslAuthenticationError) as e:
        server.evaluate(first)
        assert final is not None
        server.evaluate(final)
    assert str(e.value) == FAILED
    assert "pencil" not in str(e.value)
    assert not server.complete


def test_a_replayed_scram_exchange_fails_under_a_fresh_server_nonce() -> None:
    server = rfc_server(nonce="another-nonce")
    assert server.evaluate(RFC_CLIENT_FIRST) != RFC_SERVER_FIRST
    with pytest.raises(SaslAuthenticationError):
        server.evaluate(RFC_CLIENT_FINAL)


def test_scram_with_the_default_random_nonces_and_extensions() -> None:
    cred = make_credential("SCRAM-SHA-512", "s3cret", 8192)
    server = ScramServer("SCRAM-SHA-512", lambda u: cred if u == "a,b=c" else None)
    reply = server.evaluate(b"n,,n=a=2Cb=3Dc,r=clientnonce,ext=on").decode()
    assert reply.startswith("r=clientnonce") and reply.endswith(",i=8192")
    assert server.extensions == {"ext": "on"}


def test_plain_checks_user_and_password() -> None:
    users = plain_users({"username": "admin", "password": "x", "user_alice": "alice-secret"})
    assert users == {"alice": "alice-secret"}
    ok = PlainServer(users)
    assert ok.evaluate(b"\0alice\0alice-secret") == b"" and ok.principal == "User:alice"
    assert PlainServer(users).evaluate(b"alice\0alice\0alice-secret") == b""
    for token, says in [
        (b"\0alice\0wrong", "Invalid username or password"),
        (b"\0bob\0alice-secret", "Invalid username or password"),
        (b"\0\0pw", "username not specified"),
        (b"\0alice\0", "password not specified"),
        (b"alice-secret", "expected 3 tokens"),
        (b"eve\0alice\0alice-secret", "authorization id"),
    ]:
        with pytest.raises(SaslAuthenticationError, match=says) as e:
            PlainServer(users).evaluate(token)
        assert "alice-secret" not in str(e.value)


def test_jaas_config_in_kafkas_syntax() -> None:
    [entry] = parse_jaas_config(
        "org.apache.kafka.common.security.plain.PlainLoginModule required\n"
        '  username="admin" password="admin-secret" user_admin="admin-secret"\n'
        '  user_alice="a \\"quoted\\" one" user_bob=bare;'
    )
    assert entry.login_module.endswith("PlainLoginModule") and entry.flag == "required"
    assert entry.options == {
        "username": "admin",
        "password": "admin-secret",
        "user_admin": "admin-secret",
        "user_alice": 'a "quoted" one',
        "user_bob": "bare",
    }
    for bad in ["", "Module required user_a=1", "Module always;", "Module required user_a;"]:
        with pytest.raises(JaasConfigError) as e:
            parse_jaas_config(bad)
        assert "user_a=1" not in str(e.value)


SUBJECT = (
    (("countryName", "US"),),
    (("organizationName", "Gregor, Inc"),),
    (("organizationalUnitName", "eng"),),
    (("commonName", "alice"),),
)


def test_dn_is_written_as_rfc_2253_most_specific_first() -> None:
    assert dn_from_peercert(SUBJECT) == "CN=alice,OU=eng,O=Gregor\\, Inc,C=US"


def test_principal_mapping_rules() -> None:
    dn = "CN=alice,OU=eng,O=Gregor,C=US"
    assert SslPrincipalMapper("DEFAULT").principal_name(dn) == dn
    rules = "RULE:^CN=(.*?),OU=(.*?),O=(.*?),C=(.*?)$/$1@$2/L, RULE:^CN=(.*?),.*$/$1/U, DEFAULT"
    mapper = SslPrincipalMapper(rules)
    assert mapper.principal_name("CN=Alice,OU=Eng,O=Gregor,C=US") == "alice@eng"
    assert mapper.principal_name("CN=bob,O=Gregor") == "BOB"
    assert mapper.principal_name("O=NoCommonName") == "O=NoCommonName"
    with pytest.raises(PrincipalMappingError):
        SslPrincipalMapper("RULE:^CN=(.*)$/$1/").principal_name("O=Nobody")
    assert SslPrincipalMapper("RULE:^CN=([^,]*)\\/x,.*$/$1/").principal_name("CN=a/x,O=b") == "a"
    with pytest.raises(ValueError):
        SslPrincipalMapper("RULE:(/x/")


def test_the_nonce_form_of_librdkafka_before_2_6_1_is_accepted() -> None:
    """Old librdkafka sends c-nonce + (c-nonce + s-nonce); the proof covers what it sent."""
    import hashlib
    import hmac

    cred = make_credential("SCRAM-SHA-256", "pencil", 4096, RFC_SALT)
    server = ScramServer(
        "SCRAM-SHA-256", lambda u: cred if u == "user" else None, nonce=lambda: "SNONCE"
    )
    first = server.evaluate(b"n,,n=user,r=CNONCE").decode()
    without_proof = "c=biws,r=CNONCECNONCESNONCE"
    auth = f"n=user,r=CNONCE,{first},{without_proof}".encode()
    salted = hashlib.pbkdf2_hmac("sha256", b"pencil", RFC_SALT, 4096)
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    signature = hmac.new(hashlib.sha256(client_key).digest(), auth, "sha256").digest()
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature, strict=True)))
    assert server.evaluate(without_proof.encode() + b",p=" + proof).startswith(b"v=")
    # Anything else is still refused: the client nonce alone, or a third copy.
    for nonce in ("CNONCE", "CNONCECNONCECNONCESNONCE"):
        other = ScramServer("SCRAM-SHA-256", lambda u: cred, nonce=lambda: "SNONCE")
        other.evaluate(b"n,,n=user,r=CNONCE")
        with pytest.raises(SaslAuthenticationError):
            other.evaluate(f"c=biws,r={nonce},p=".encode() + proof)
