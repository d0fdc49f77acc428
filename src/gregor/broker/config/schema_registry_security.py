"""TLS and logins of the broker's schema registry traffic, both ways, from PEM settings read
through the broker's own loader (``security.tls``); no state.

- Serving: ``schema.registry.listener=https://HOST:PORT`` serves the registry beside the broker
  with the broker's own certificate: its ``ssl.*`` key store (``ssl.keystore.type=PEM`` with
  ``ssl.keystore.location``, or ``ssl.keystore.certificate.chain`` with ``ssl.keystore.key``),
  else that of its first SSL or SASL_SSL listener (``listener.name.<l>.ssl.*``). The same
  settings' ``ssl.client.auth=required`` (with a trust store) asks every client for a
  certificate, as the listener does. Beyond loopback the registry needs a login: basic auth
  (``schema.registry.authentication.method=BASIC``) or client certificates.
- Asking: schema ID validation's requests to ``confluent.schema.registry.url`` log in with
  Confluent Server's ``confluent.basic.auth.credentials.source=USER_INFO`` and
  ``confluent.basic.auth.user.info=USER:PASSWORD``, and trust (and, for mutual TLS, present) the
  PEM stores of ``confluent.ssl.*``, the ``ssl.*`` client settings under Confluent's prefix.

Anything that cannot be honoured raises ``RegistrySecurityError`` with a message naming the
setting (never a password), and the broker does not start.
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from gregor.security.tls import TlsConfigError, client_context, server_context

Getter = Callable[[str], "str | None"]

CREDENTIALS_SOURCE = "confluent.basic.auth.credentials.source"
USER_INFO = "confluent.basic.auth.user.info"
CLIENT_TLS_PREFIX = "confluent."
#: The ``ssl.*`` client settings read under ``confluent.`` (PEM stores only).
CLIENT_TLS_KEYS = (
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.truststore.password",
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.keystore.password",
    "ssl.key.password",
    "ssl.endpoint.identification.algorithm",
)
_STORE_PASSWORDS = ("ssl.truststore.password", "ssl.keystore.password")


class RegistrySecurityError(ValueError):
    """A schema registry TLS or login setting this broker cannot honour."""


def _has_keystore(get: Getter) -> bool:
    return bool(get("ssl.keystore.location") or get("ssl.keystore.certificate.chain"))


def registry_server_context(
    listener: str, getters: Sequence[Getter], beyond_loopback: bool, basic_auth: bool
) -> ssl.SSLContext:
    """The server context of ``schema.registry.listener=https://...``: the first of
    ``getters`` (the broker's own ``ssl.*``, then each TLS listener's) with a key store."""
    key = f"schema.registry.listener={listener}"
    get = next((g for g in getters if _has_keystore(g)), None)
    if get is None:
        raise RegistrySecurityError(
            f"{key}: https serves the broker's own certificate, and this broker has none: set "
            "ssl.keystore.location (a PEM private key and certificate chain, ssl.keystore.type="
            "PEM), or ssl.keystore.certificate.chain with ssl.keystore.key"
        )
    try:
        ctx = server_context(get)
    except TlsConfigError as e:
        raise RegistrySecurityError(f"{key}: {e}") from None
    if beyond_loopback and not basic_auth and ctx.verify_mode != ssl.CERT_REQUIRED:
        raise RegistrySecurityError(
            f"{key}: beyond loopback the registry needs a login, or anyone who reaches it could "
            "change or delete schemas: set schema.registry.authentication.method=BASIC, or "
            "ssl.client.auth=required (client certificates), or serve on a loopback address"
        )
    return ctx


@dataclass(frozen=True)
class RegistryClient:
    """How schema ID validation asks the registry: its basic-auth login and TLS context
    (None: none / aiohttp's default, the system's CAs)."""

    login: tuple[str, str] | None = field(default=None, repr=False)
    ssl_context: ssl.SSLContext | None = None


def registry_client(get: Getter) -> RegistryClient:
    """The login and TLS of schema ID validation's requests, from the broker's settings."""
    source = (get(CREDENTIALS_SOURCE) or "").strip().upper()
    info = get(USER_INFO)
    login: tuple[str, str] | None = None
    if source == "USER_INFO":
        if not info:
            raise RegistrySecurityError(
                f"{CREDENTIALS_SOURCE}=USER_INFO needs {USER_INFO} (USER:PASSWORD)"
            )
        user, sep, password = info.partition(":")
        if not sep or not user.strip():
            raise RegistrySecurityError(f"{USER_INFO} is not USER:PASSWORD (the value is hidden)")
        login = (user.strip(), password)
    elif source:
        raise RegistrySecurityError(
            f"{CREDENTIALS_SOURCE}={source} is not supported: the broker logs in to the schema "
            f"registry with USER_INFO ({USER_INFO}=USER:PASSWORD), or not at all (leave it unset)"
        )
    elif info:
        raise RegistrySecurityError(
            f"{USER_INFO} is set but {CREDENTIALS_SOURCE} is not USER_INFO: set "
            f"{CREDENTIALS_SOURCE}=USER_INFO to log in with it"
        )
    return RegistryClient(login, _client_tls(get))


def _client_tls(get: Getter) -> ssl.SSLContext | None:
    def prefixed(key: str) -> str | None:
        return get(CLIENT_TLS_PREFIX + key) if key in CLIENT_TLS_KEYS else None

    for k in ("ssl.truststore.type", "ssl.keystore.type"):
        kind = (prefixed(k) or "PEM").strip().upper()
        if kind != "PEM":
            raise RegistrySecurityError(
                f"{CLIENT_TLS_PREFIX}{k}={kind} is not supported: Gregor reads PEM stores only "
                f"(set {CLIENT_TLS_PREFIX}{k}=PEM and give a PEM file)"
            )
    for k in _STORE_PASSWORDS:
        if prefixed(k):
            raise RegistrySecurityError(
                f"{CLIENT_TLS_PREFIX}{k} is not used: PEM stores have no store password (an "
                f"encrypted key's password is {CLIENT_TLS_PREFIX}ssl.key.password); remove it"
            )
    if prefixed("ssl.key.password") and not prefixed("ssl.keystore.location"):
        raise RegistrySecurityError(
            f"{CLIENT_TLS_PREFIX}ssl.key.password is set without "
            f"{CLIENT_TLS_PREFIX}ssl.keystore.location (the PEM key and certificate it decrypts)"
        )
    if not any(
        prefixed(k) is not None
        for k in (
            "ssl.truststore.location",
            "ssl.keystore.location",
            "ssl.endpoint.identification.algorithm",
        )
    ):
        return None  # nothing set: the system's CAs, as any https client
    try:
        return client_context(prefixed)
    except TlsConfigError as e:
        # the loader names the plain ssl.* keys; these are read under confluent.
        raise RegistrySecurityError(
            re.sub(r"(?<![\w.])ssl\.", CLIENT_TLS_PREFIX + "ssl.", str(e))
        ) from None


#: The settings of ``registry_client`` as (name, type, default, doc): ``config_def`` makes them
#: broker config keys (the passwords are sensitive: never described, never logged).
CLIENT_SETTINGS: tuple[tuple[str, str, str | None, str], ...] = (
    (
        CREDENTIALS_SOURCE,
        "string",
        None,
        "USER_INFO: schema ID validation logs in to confluent.schema.registry.url with HTTP "
        "basic auth as confluent.basic.auth.user.info; unset: no login.",
    ),
    (USER_INFO, "password", None, "USER:PASSWORD of the login to the schema registry."),
    (
        "confluent.ssl.truststore.type",
        "string",
        "PEM",
        "The type of confluent.ssl.truststore.location: PEM only (JKS and PKCS12 are refused).",
    ),
    (
        "confluent.ssl.truststore.location",
        "string",
        None,
        "PEM CA certificates that verify an https schema registry; unset: the system's CAs.",
    ),
    (
        "confluent.ssl.truststore.password",
        "password",
        None,
        "Not used: PEM stores have no store password (refused if set).",
    ),
    (
        "confluent.ssl.keystore.type",
        "string",
        "PEM",
        "The type of confluent.ssl.keystore.location: PEM only (JKS and PKCS12 are refused).",
    ),
    (
        "confluent.ssl.keystore.location",
        "string",
        None,
        "A PEM private key and certificate chain the broker presents to a schema registry "
        "that asks for client certificates (mutual TLS); unset: none.",
    ),
    (
        "confluent.ssl.keystore.password",
        "password",
        None,
        "Not used: PEM stores have no store password (refused if set).",
    ),
    (
        "confluent.ssl.key.password",
        "password",
        None,
        "The password of an encrypted key in confluent.ssl.keystore.location.",
    ),
    (
        "confluent.ssl.endpoint.identification.algorithm",
        "string",
        "https",
        "https: the registry's certificate must name the host of its URL; empty: not checked.",
    ),
)
