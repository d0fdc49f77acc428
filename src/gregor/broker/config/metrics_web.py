"""TLS and basic auth for the metrics endpoint: the Prometheus exporters' web config file.

``metrics.web.config.file`` names a YAML file in the format of the Prometheus
exporter-toolkit (``--web.config.file`` of node_exporter and the other exporters), so the
same file and the same Prometheus scrape settings work here::

    tls_server_config:
      cert_file: server.crt        # PEM; both needed to serve HTTPS
      key_file: server.key
      client_auth_type: RequireAndVerifyClientCert   # or VerifyClientCertIfGiven, NoClientCert
      client_ca_file: clients-ca.crt
      min_version: TLS12           # TLS10..TLS13, default TLS12
      max_version: TLS13
    http_server_config:
      headers:
        Strict-Transport-Security: max-age=31536000
    basic_auth_users:
      prometheus: $2y$10$...       # bcrypt hashes (htpasswd -nBC 10 "" | tr -d ':')

Relative file names are relative to the config file. A key this broker does not implement
(``cipher_suites``, ``curve_preferences``, ``client_allowed_sans``, inline ``cert``/``key``,
the ``RequestClientCert`` and ``RequireAnyClientCert`` modes, ...) or any other mistake stops
the broker with a message naming it: the endpoint is never served weaker than configured.

``BasicAuth.check`` verifies an ``Authorization: Basic`` header as the exporter-toolkit does:
an unknown user is checked against a hash of a random password, so the time taken does not
tell which users exist; results are remembered (by a digest of user and password, never the
password) so a scraper costs one bcrypt check, not one per scrape; checks run one at a time on
a worker thread (bcrypt is slow on purpose and must not stall the broker's event loop).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import os
import re
import ssl
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import bcrypt
import yaml

_TOP_KEYS = {"tls_server_config", "http_server_config", "basic_auth_users"}
_TLS_KEYS = {
    "cert_file",
    "key_file",
    "client_auth_type",
    "client_ca_file",
    "min_version",
    "max_version",
}
_TLS_UNSUPPORTED = frozenset(
    {
        "cert",
        "key",
        "client_ca",
        "cipher_suites",
        "curve_preferences",
        "prefer_server_cipher_suites",
        "client_allowed_sans",
    }
)
_HTTP_KEYS = {"headers", "http2"}
_RESERVED_HEADERS = {
    "authorization",
    "www-authenticate",
    "content-type",
    "content-length",
    "connection",
}
_VERSIONS = {
    "TLS10": ssl.TLSVersion.TLSv1,
    "TLS11": ssl.TLSVersion.TLSv1_1,
    "TLS12": ssl.TLSVersion.TLSv1_2,
    "TLS13": ssl.TLSVersion.TLSv1_3,
}
_CLIENT_AUTH = {
    "NoClientCert": ssl.CERT_NONE,
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}
_BCRYPT = re.compile(r"^\$2[aby]\$\d\d\$[./A-Za-z0-9]{53}$")
#: Verified (user, password) digests remembered, most recent last.
AUTH_CACHE_SIZE = 256


class WebConfigError(ValueError):
    """The web config file cannot be used (the message names the setting)."""


@dataclass
class WebConfig:
    """What a web config file asks of the metrics endpoint."""

    ssl_context: ssl.SSLContext | None = None
    users: dict[str, bytes] = field(default_factory=dict, repr=False)
    headers: dict[str, str] = field(default_factory=dict)


def _mapping(value: object, where: str) -> Mapping[str, object]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise WebConfigError(f"{where} must be a mapping")
    return value


def _check_keys(
    section: Mapping[str, object],
    allowed: set[str],
    where: str,
    unsupported: frozenset[str] = frozenset(),
) -> None:
    for key in section:
        if key in unsupported:
            raise WebConfigError(
                f"{where}.{key} is not supported by this broker's metrics endpoint"
            )
        if key not in allowed:
            raise WebConfigError(f"{where}.{key} is not a setting of the web config file")


def _tls(section: Mapping[str, object], base: Path) -> ssl.SSLContext | None:
    _check_keys(section, _TLS_KEYS, "tls_server_config", _TLS_UNSUPPORTED)
    if not section:
        return None
    cert, key = section.get("cert_file"), section.get("key_file")
    if not cert or not key:
        raise WebConfigError("tls_server_config needs cert_file and key_file")
    mode = str(section.get("client_auth_type", "NoClientCert"))
    if mode not in _CLIENT_AUTH:
        raise WebConfigError(
            f"tls_server_config.client_auth_type={mode} is not supported (use one of {', '.join(_CLIENT_AUTH)})"
        )
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        ctx.load_cert_chain(str(base / str(cert)), str(base / str(key)))
    except (OSError, ssl.SSLError) as e:
        raise WebConfigError(
            f"tls_server_config cert_file/key_file cannot be loaded: {e}"
        ) from None
    for name, attr, default in (
        ("min_version", "minimum_version", "TLS12"),
        ("max_version", "maximum_version", None),
    ):
        text = section.get(name, default)
        if text is None:
            continue
        if str(text) not in _VERSIONS:
            raise WebConfigError(
                f"tls_server_config.{name}={text} is not one of {', '.join(_VERSIONS)}"
            )
        setattr(ctx, attr, _VERSIONS[str(text)])
    ctx.verify_mode = _CLIENT_AUTH[mode]
    ca = section.get("client_ca_file")
    if ctx.verify_mode != ssl.CERT_NONE:
        if not ca:
            raise WebConfigError(f"tls_server_config.client_auth_type={mode} needs client_ca_file")
        try:
            ctx.load_verify_locations(cafile=str(base / str(ca)))
        except (OSError, ssl.SSLError) as e:
            raise WebConfigError(
                f"tls_server_config.client_ca_file cannot be loaded: {e}"
            ) from None
    elif ca:
        raise WebConfigError(
            "tls_server_config.client_ca_file is set but client_auth_type is NoClientCert"
        )
    return ctx


def load_web_config(path: str | Path) -> WebConfig:
    """Read and check a web config file (``WebConfigError`` names what is wrong)."""
    file = Path(path)
    try:
        doc = yaml.safe_load(file.read_text())
    except OSError as e:
        raise WebConfigError(f"cannot read {file}: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise WebConfigError(f"{file} is not YAML: {e}") from None
    top = _mapping(doc, "the web config file")
    _check_keys(top, _TOP_KEYS, "web config")
    config = WebConfig()
    config.ssl_context = _tls(
        _mapping(top.get("tls_server_config"), "tls_server_config"), file.parent
    )
    http = _mapping(top.get("http_server_config"), "http_server_config")
    _check_keys(http, _HTTP_KEYS, "http_server_config")
    for name, value in _mapping(http.get("headers"), "http_server_config.headers").items():
        if str(name).lower() in _RESERVED_HEADERS or not re.fullmatch(r"[A-Za-z0-9-]+", str(name)):
            raise WebConfigError(f"http_server_config.headers cannot set {name}")
        if not isinstance(value, str) or not value.isprintable():
            raise WebConfigError(f"http_server_config.headers.{name} must be one line of text")
        config.headers[str(name)] = value
    for user, hashed in _mapping(top.get("basic_auth_users"), "basic_auth_users").items():
        if not isinstance(hashed, str) or not _BCRYPT.match(hashed):
            raise WebConfigError(f"basic_auth_users.{user} is not a bcrypt hash")
        config.users[str(user)] = hashed.encode()
    return config


class BasicAuth:
    """Checks ``Authorization: Basic`` headers against bcrypt hashes (see the module)."""

    def __init__(self, users: Mapping[str, bytes]) -> None:
        self.users = dict(users)
        # Unknown users are checked against this, so they take as long as known ones.
        cost = int(next(iter(self.users.values()))[4:6]) if self.users else 10
        self._decoy = bcrypt.hashpw(os.urandom(16), bcrypt.gensalt(rounds=max(4, cost)))
        self._key = os.urandom(32)
        self._seen: OrderedDict[bytes, bool] = OrderedDict()
        self._lock = asyncio.Lock()

    @property
    def enabled(self) -> bool:
        return bool(self.users)

    async def check(self, header: str | None) -> bool:
        if not header or not header.startswith("Basic "):
            return False
        try:
            user, sep, password = (
                base64.b64decode(header[6:].strip(), validate=True).decode().partition(":")
            )
        except (binascii.Error, UnicodeDecodeError, ValueError):
            return False
        if not sep:
            return False
        hashed = self.users.get(user)
        digest = hmac.new(
            self._key, f"{len(user)}:{user}:{password}".encode(), hashlib.sha256
        ).digest()
        known = self._seen.get(digest)
        if known is not None:
            self._seen.move_to_end(digest)
            return known
        async with self._lock:  # one bcrypt at a time, on a worker thread
            loop = asyncio.get_running_loop()
            ok = await loop.run_in_executor(
                None, _checkpw, password.encode(), hashed or self._decoy
            )
        ok = ok and hashed is not None
        self._seen[digest] = ok
        while len(self._seen) > AUTH_CACHE_SIZE:
            self._seen.popitem(last=False)
        return ok


def _checkpw(password: bytes, hashed: bytes) -> bool:
    try:
        return bcrypt.checkpw(password, hashed)
    except ValueError:  # longer than bcrypt's 72 bytes: no stored password is
        return False
