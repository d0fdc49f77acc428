"""TLS contexts from Kafka's ``ssl.*`` settings (PEM key stores only): a listener's server
context, and the client context a broker uses to reach another broker's listener.

``server_context(get)`` reads the settings of one listener through ``get(key)`` (the caller
applies ``listener.name.<l>.`` overrides) and returns a ready ``ssl.SSLContext``:

- key store: ``ssl.keystore.type=PEM`` with ``ssl.keystore.location`` (private key and
  certificate chain in one PEM file) or inline ``ssl.keystore.certificate.chain`` and
  ``ssl.keystore.key``; ``ssl.key.password`` decrypts an encrypted key;
- trust store: ``ssl.truststore.type=PEM`` with ``ssl.truststore.location`` or inline
  ``ssl.truststore.certificates``;
- ``ssl.client.auth``: ``required`` (CERT_REQUIRED), ``requested`` (CERT_OPTIONAL), ``none``;
- ``ssl.enabled.protocols``: TLSv1.2 / TLSv1.3 (the lowest and highest listed are the bounds).

Anything missing, unreadable or of another store type (JKS, PKCS12) raises ``TlsConfigError``
naming the setting, so the broker refuses to start rather than serve a weaker listener.
"""

from __future__ import annotations

import os
import ssl
import tempfile
from collections.abc import Callable

Getter = Callable[[str], "str | None"]

_PROTOCOLS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH = {
    "required": ssl.CERT_REQUIRED,
    "requested": ssl.CERT_OPTIONAL,
    "none": ssl.CERT_NONE,
}


class TlsConfigError(ValueError):
    """An ``ssl.*`` setting this broker cannot honour."""


def _check_pem_type(get: Getter, key: str) -> None:
    kind = (get(key) or "PEM").strip().upper()
    if kind != "PEM":
        raise TlsConfigError(
            f"{key}={kind} is not supported: Gregor reads PEM key and trust stores only "
            f"(set {key}=PEM and give PEM files or inline PEM values)"
        )


def _read(path: str, key: str) -> str:
    try:
        with open(path) as f:
            text = f.read()
    except OSError as e:
        raise TlsConfigError(f"{key}={path} cannot be read: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise TlsConfigError(
            f"{key}={path} is not a PEM file (only PEM stores are supported)"
        ) from None
    if "-----BEGIN" not in text:
        raise TlsConfigError(f"{key}={path} is not a PEM file (only PEM stores are supported)")
    return text


def _load_keystore(ctx: ssl.SSLContext, get: Getter) -> None:
    _check_pem_type(get, "ssl.keystore.type")
    location = get("ssl.keystore.location")
    chain = get("ssl.keystore.certificate.chain")
    key = get("ssl.keystore.key")
    password = get("ssl.key.password") or None
    if location:
        pem = _read(location, "ssl.keystore.location")
    elif chain and key:
        pem = key.strip() + "\n" + chain.strip() + "\n"
    else:
        raise TlsConfigError(
            "an SSL listener needs a key store: ssl.keystore.location, or "
            "ssl.keystore.certificate.chain with ssl.keystore.key"
        )
    # load_cert_chain reads files only: a private temporary file, removed at once.
    fd, path = tempfile.mkstemp(prefix="gregor-keystore-", suffix=".pem")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(pem)
        # Always a callback: without one OpenSSL would prompt on the terminal for a password.
        ctx.load_cert_chain(path, password=lambda: (password or "").encode())
    except (ssl.SSLError, OSError) as e:
        reason = getattr(e, "reason", None) or e.__class__.__name__
        raise TlsConfigError(
            f"the key store ({'ssl.keystore.location' if location else 'ssl.keystore.key'}) "
            f"has no usable private key and certificate (or ssl.key.password is wrong): {reason}"
        ) from None
    finally:
        os.unlink(path)


def _load_truststore(ctx: ssl.SSLContext, get: Getter) -> bool:
    _check_pem_type(get, "ssl.truststore.type")
    location = get("ssl.truststore.location")
    inline = get("ssl.truststore.certificates")
    try:
        if location:
            ctx.load_verify_locations(cadata=_read(location, "ssl.truststore.location"))
        elif inline:
            ctx.load_verify_locations(cadata=inline)
        else:
            return False
    except ssl.SSLError as e:
        raise TlsConfigError(f"the trust store has no usable certificate: {e.reason}") from None
    return True


def _protocols_and_ciphers(ctx: ssl.SSLContext, get: Getter) -> None:
    protocols = [
        p.strip()
        for p in (get("ssl.enabled.protocols") or "TLSv1.2,TLSv1.3").split(",")
        if p.strip()
    ]
    unknown = [p for p in protocols if p not in _PROTOCOLS]
    if unknown or not protocols:
        raise TlsConfigError(
            f"ssl.enabled.protocols: {','.join(unknown) or 'empty'} not supported "
            f"(use {', '.join(_PROTOCOLS)})"
        )
    versions = sorted(_PROTOCOLS[p] for p in protocols)
    ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]
    if get("ssl.cipher.suites"):
        raise TlsConfigError(
            "ssl.cipher.suites is not supported (Java suite names do not map onto OpenSSL's); "
            "remove it to use Python's secure defaults"
        )


def client_context(get: Getter) -> ssl.SSLContext:
    """The context a broker connects to another broker's TLS listener with (the same
    listener's settings, as Kafka uses them for both ends): the trust store verifies the
    other broker (the system's CAs when none is set), the key store, when there is one, is
    this broker's certificate for listeners that ask for one, and
    ``ssl.endpoint.identification.algorithm`` (default ``https``; empty turns it off) checks
    the certificate names the host connected to."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _protocols_and_ciphers(ctx, get)
    if get("ssl.keystore.location") or get("ssl.keystore.certificate.chain"):
        _load_keystore(ctx, get)
    if not _load_truststore(ctx, get):
        ctx.load_default_certs()
    algorithm = get("ssl.endpoint.identification.algorithm")
    algorithm = "https" if algorithm is None else algorithm.strip().lower()
    if algorithm not in ("https", ""):
        raise TlsConfigError(
            f"ssl.endpoint.identification.algorithm={algorithm} is not https or empty"
        )
    ctx.check_hostname = algorithm == "https"
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def server_context(get: Getter, client_auth_default: str = "none") -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _protocols_and_ciphers(ctx, get)
    _load_keystore(ctx, get)
    has_trust = _load_truststore(ctx, get)
    auth = (get("ssl.client.auth") or client_auth_default).strip().lower()
    if auth not in _CLIENT_AUTH:
        raise TlsConfigError(f"ssl.client.auth={auth} is not one of required, requested, none")
    if auth != "none" and not has_trust:
        raise TlsConfigError(
            f"ssl.client.auth={auth} needs a trust store (ssl.truststore.location or "
            "ssl.truststore.certificates) to verify client certificates"
        )
    ctx.verify_mode = _CLIENT_AUTH[auth]
    return ctx
