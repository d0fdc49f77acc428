"""A TLS server context from PEM files named on a command line (the console's and the schema
registry's ``--tls-cert`` / ``--tls-key``), through the broker's own ``server_context`` so the
HTTP servers accept what its listeners accept."""

from __future__ import annotations

import ssl

from gregor.security.tls import TlsConfigError, server_context


def _read_pem(path: str, option: str) -> str:
    try:
        with open(path) as f:
            text = f.read()
    except OSError as e:
        raise TlsConfigError(f"{option} {path} cannot be read: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise TlsConfigError(f"{option} {path} is not a PEM file") from None
    if "-----BEGIN" not in text:
        raise TlsConfigError(f"{option} {path} is not a PEM file")
    return text


def pem_server_context(
    cert: str,
    key: str | None,
    key_password: str | None,
    *,
    cert_option: str = "--tls-cert",
    key_option: str = "--tls-key",
) -> ssl.SSLContext:
    """A server context: ``cert`` the PEM certificate chain (and, without ``key``, the private
    key too, as the broker's ``ssl.keystore.location``), ``key`` the PEM private key. Raises
    ``TlsConfigError`` naming the option at fault."""
    settings: dict[str, str | None] = {"ssl.key.password": key_password}
    if key:
        settings["ssl.keystore.certificate.chain"] = _read_pem(cert, cert_option)
        settings["ssl.keystore.key"] = _read_pem(key, key_option)
    else:
        _read_pem(cert, cert_option)
        settings["ssl.keystore.location"] = cert
    try:
        return server_context(settings.get)
    except TlsConfigError as e:
        raise TlsConfigError(f"{cert_option}/{key_option}: {e}") from None
