"""The client's TLS and SASL, from Kafka's client settings (librdkafka's names).

``security.protocol`` is PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL. TLS verifies the broker
with ``ssl.ca.location`` (the system's CAs when unset), presents ``ssl.certificate.location``
/ ``ssl.key.location`` (``ssl.key.password``) when a listener wants a client certificate, and
checks the host name unless ``ssl.endpoint.identification.algorithm`` is ``none``. SASL logs
in with ``sasl.mechanism`` (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512), ``sasl.username`` and
``sasl.password`` on every new connection; with ``sasl.scram.tokenauth=true`` a SCRAM login
is a delegation token's (user name: the token id, password: its HMAC in base64; Kafka's Java
client sets this as the ``tokenauth`` option of its ScramLoginModule, librdkafka has none). A setting the client cannot honour (an unknown
protocol, GSSAPI, a missing password, an unreadable certificate) is a ``ConfigError`` when
the client is made, never a weaker connection.
"""

from __future__ import annotations

import functools
import ssl
from collections.abc import Callable

from gregor.client.core.errors import ConfigError
from gregor.client.core.sasl import CLIENT_MECHANISMS, SaslClient, sasl_client

#: Settings, with their defaults, that every client role accepts.
SECURITY_SETTINGS: dict[str, str | bool | None] = {
    "security.protocol": "PLAINTEXT",
    "sasl.mechanism": None,
    "sasl.username": None,
    "sasl.password": None,
    "sasl.scram.tokenauth": False,
    "ssl.ca.location": None,
    "ssl.certificate.location": None,
    "ssl.key.location": None,
    "ssl.key.password": None,
    "ssl.endpoint.identification.algorithm": "https",
}

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


#: How the settings are read: ``Config.get``, or a plain dict's ``get``.
Getter = Callable[[str], object]


def _text(get: Getter, key: str) -> str | None:
    """A setting as text; None when unset or empty."""
    value = get(key)
    return str(value) if value is not None and value != "" else None


def tls_context(get: Getter) -> ssl.SSLContext:
    ca = _text(get, "ssl.ca.location")
    try:
        ctx = ssl.create_default_context(cafile=ca) if ca else ssl.create_default_context()
        cert = _text(get, "ssl.certificate.location")
        if cert:
            ctx.load_cert_chain(
                cert, _text(get, "ssl.key.location"), _text(get, "ssl.key.password")
            )
        elif _text(get, "ssl.key.location"):
            raise ConfigError("ssl.key.location needs ssl.certificate.location")
    except (OSError, ssl.SSLError) as e:
        raise ConfigError(f"cannot load the TLS settings: {e}") from None
    algorithm = str(get("ssl.endpoint.identification.algorithm") or "none").strip().lower()
    if algorithm not in ("https", "none"):
        raise ConfigError(f"ssl.endpoint.identification.algorithm={algorithm}: use https or none")
    ctx.check_hostname = algorithm == "https"
    return ctx


def connection_security(
    get: Getter,
) -> tuple[ssl.SSLContext | None, Callable[[], SaslClient] | None]:
    """(TLS context, SASL login factory) for the client's connections; None where unused."""
    protocol = str(get("security.protocol") or "PLAINTEXT").strip().upper()
    if protocol not in PROTOCOLS:
        raise ConfigError(f"security.protocol={protocol}: use one of {', '.join(PROTOCOLS)}")
    context = tls_context(get) if protocol in ("SSL", "SASL_SSL") else None
    login = None
    if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        mechanism = str(get("sasl.mechanism") or "").strip().upper()
        if mechanism not in CLIENT_MECHANISMS:
            raise ConfigError(
                f"security.protocol={protocol} needs sasl.mechanism set to one of {', '.join(CLIENT_MECHANISMS)}"
                + (f" (not {mechanism})" if mechanism else "")
            )
        username, password = get("sasl.username"), get("sasl.password")
        if not username or password is None:
            raise ConfigError(f"sasl.mechanism={mechanism} needs sasl.username and sasl.password")
        tokenauth = str(get("sasl.scram.tokenauth") or "false").strip().lower() in ("true", "1")
        if tokenauth and mechanism == "PLAIN":
            raise ConfigError(
                "sasl.scram.tokenauth needs a SCRAM sasl.mechanism (a token cannot log in with PLAIN)"
            )
        login = functools.partial(sasl_client, mechanism, str(username), str(password), tokenauth)
    return context, login
