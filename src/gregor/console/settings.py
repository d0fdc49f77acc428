"""Who may use a console and how it is reached: ``ConsoleSettings``, checked (``resolve``)
before the console listens, so a console that would be open to more people than intended
does not start.

Login (``auth``):

- ``sasl``: each visitor logs in with their own Kafka credentials, as the cluster knows them
  (SASL PLAIN or SCRAM, the mechanism the operator sets with ``-X sasl.mechanism``); the
  console opens one Kafka client per session with them, so the cluster's ACLs decide what
  each visitor sees and does. The operator's ``-X`` settings give only the way to the cluster
  (``security.protocol``, TLS), never a user: a console with ``-X sasl.username`` would act as
  that user for every visitor, and is refused.
- ``password``: visitors log in with the console's password (``GREGOR_CONSOLE_PASSWORD`` or
  ``--password-file``, never on the command line) and the console acts for all of them as the
  principal of its ``-X`` settings: for a cluster without SASL.
- ``none``: no login, only on a loopback address, with a loud warning.
- ``auto`` (the default): ``sasl`` when ``-X security.protocol`` is SASL_*, ``password`` when
  a console password is given, otherwise ``none``.

Reach: beyond loopback a console needs a login and TLS, its own (``--tls-cert``/``--tls-key``,
PEM, as the broker reads them) or a reverse proxy's in front (``--tls-proxy``);
``--insecure-plain-http`` serves plain HTTP anyway, with a warning. Requests must name one of
``allowed_hosts`` in their ``Host`` header (by default the names of the listen address), which
is what defeats DNS rebinding.

The schema registry of the Schemas pages (``schema_registry_url``) must be an
``http(s)://host[:port]`` URL; with ``sasl`` each visitor's credentials go to it.
"""

from __future__ import annotations

import ipaddress
import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

AUTH_MODES = ("auto", "sasl", "password", "none")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
WILDCARDS = ("", "0.0.0.0", "::")
MIN_PASSWORD_LENGTH = 12


class ConsoleConfigError(ValueError):
    """A console setting that would serve more, or less safely, than asked: it does not start."""


@dataclass(frozen=True)
class ConsoleSettings:
    #: The operator's client settings (``-b``, ``-X``): how the console reaches the cluster.
    client_config: Mapping[str, Any] = field(repr=False)
    host: str = "127.0.0.1"
    port: int = 0
    auth: str = "none"
    password: str | None = field(default=None, repr=False)
    allowed_hosts: frozenset[str] = frozenset(LOOPBACK_NAMES)
    tls: ssl.SSLContext | None = None
    #: A reverse proxy in front terminates TLS: cookies are Secure, origins are https.
    tls_proxy: bool = False
    #: Seconds without a page view before a session ends (live-chart polls do not count).
    idle_timeout_s: float = 1800.0
    #: Seconds after which a session ends whatever it does.
    session_lifetime_s: float = 12 * 3600.0
    max_sessions: int = 100
    #: Logins in progress at once (each opens a Kafka connection and a SASL exchange).
    max_concurrent_logins: int = 4
    #: Login attempts per client address and ``login_window_s`` (a token bucket).
    login_attempts: int = 10
    login_window_s: float = 60.0
    #: The schema registry the Schemas pages ask (None: no Schemas pages).
    schema_registry_url: str | None = None

    @property
    def secure(self) -> bool:
        """Browsers reach the console over HTTPS (its own TLS or a proxy's)."""
        return self.tls is not None or self.tls_proxy

    @property
    def scheme(self) -> str:
        return "https" if self.secure else "http"

    @property
    def sasl_mechanism(self) -> str:
        return str(self.client_config.get("sasl.mechanism") or "").strip().upper()

    def principal(self) -> str:
        """Whom the console acts as when it logs in with the operator's settings."""
        user = self.client_config.get("sasl.username")
        return f"User:{user}" if user else "the principal of its -X settings"


def is_loopback(host: str) -> bool:
    name = host.strip("[]").lower().rstrip(".")
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def host_name(value: str) -> str:
    """The name part of a ``Host`` header or ``--allowed-host`` (no port, no brackets,
    lower case, no trailing dot)."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1:].partition("]")[0]
    if value.count(":") == 1:
        value = value.partition(":")[0]
    return value.rstrip(".")


def _protocol(config: Mapping[str, Any]) -> str:
    return str(config.get("security.protocol") or "PLAINTEXT").strip().upper()


def _choose_auth(auth: str, config: Mapping[str, Any], password: str | None) -> str:
    sasl = _protocol(config).startswith("SASL_")
    lends = bool(config.get("sasl.username") or config.get("sasl.password"))
    if auth == "auto":
        if password is not None:
            auth = "password"
        elif sasl and not lends:
            auth = "sasl"
        elif sasl:
            raise ConsoleConfigError(
                "-X sasl.username/sasl.password: the console would act as that user for every visitor. "
                "Drop them so that each visitor logs in with their own Kafka credentials (--auth sasl), "
                "or set a console password (--auth password with GREGOR_CONSOLE_PASSWORD or "
                "--password-file) to share that user with those who know it"
            )
        else:
            auth = "none"
    if auth == "sasl":
        if not sasl:
            raise ConsoleConfigError(
                "--auth sasl logs visitors in to the cluster with their own credentials: it needs "
                "-X security.protocol=SASL_PLAINTEXT or SASL_SSL and -X sasl.mechanism"
            )
        if lends:
            raise ConsoleConfigError(
                "-X sasl.username/sasl.password: with --auth sasl every visitor logs in with their "
                "own credentials; the console would act as that user for every visitor otherwise. "
                "Drop them"
            )
        mechanism = str(config.get("sasl.mechanism") or "").strip().upper()
        if mechanism not in SASL_MECHANISMS:
            raise ConsoleConfigError(
                f"--auth sasl: visitors log in with a user name and password, so -X sasl.mechanism must "
                f"be one of {', '.join(SASL_MECHANISMS)}"
                + (f" (not {mechanism})" if mechanism else "")
            )
        if password is not None:
            raise ConsoleConfigError(
                "a console password is for --auth password; with --auth sasl visitors "
                "log in with their Kafka credentials"
            )
    if auth == "password":
        if password is None:
            raise ConsoleConfigError(
                "--auth password needs the password in GREGOR_CONSOLE_PASSWORD or "
                "a file named by --password-file"
            )
        if len(password) < MIN_PASSWORD_LENGTH:
            raise ConsoleConfigError(
                f"the console password must have at least {MIN_PASSWORD_LENGTH} characters"
            )
    return auth


def _allowed_hosts(host: str, given: tuple[str, ...]) -> frozenset[str]:
    if given:
        names = frozenset(host_name(h) for h in given if h.strip())
        if not names or "" in names:
            raise ConsoleConfigError("--allowed-host needs a host name")
        return names
    if host in WILDCARDS:
        raise ConsoleConfigError(
            f"--listen {host or '*'} serves on every address: name the host names visitors use "
            "with --allowed-host NAME (repeatable), so that requests for other names (DNS "
            "rebinding) are refused"
        )
    if is_loopback(host):
        return frozenset((*LOOPBACK_NAMES, host_name(host)))
    return frozenset((host_name(host),))


def tls_context(cert: str, key: str | None, key_password: str | None) -> ssl.SSLContext:
    """A server context from the PEM files of --tls-cert and --tls-key."""
    from gregor.security.pem_files import pem_server_context
    from gregor.security.tls import TlsConfigError

    try:
        return pem_server_context(cert, key, key_password)
    except TlsConfigError as e:
        raise ConsoleConfigError(str(e)) from None


def resolve(
    client_config: Mapping[str, Any],
    host: str,
    port: int,
    *,
    auth: str = "auto",
    password: str | None = None,
    allowed_hosts: tuple[str, ...] = (),
    tls_cert: str | None = None,
    tls_key: str | None = None,
    tls_key_password: str | None = None,
    tls_proxy: bool = False,
    insecure_plain_http: bool = False,
    schema_registry_url: str | None = None,
    **limits: Any,
) -> tuple[ConsoleSettings, list[str]]:
    """The settings, and the warnings to print loudly at start; ``ConsoleConfigError`` when
    the console must not start so."""
    if auth not in AUTH_MODES:
        raise ConsoleConfigError(f"--auth {auth}: use one of {', '.join(AUTH_MODES)}")
    host = host.strip("[]")
    auth = _choose_auth(auth, client_config, password)
    loopback = is_loopback(host)
    warnings = []
    if auth == "none":
        if not loopback:
            raise ConsoleConfigError(
                f"--listen {host}: beyond a loopback address the console needs a login; --auth none "
                "(serve without one) is for 127.0.0.1, ::1 or localhost only. Use --auth sasl (each "
                "visitor's Kafka credentials) or --auth password"
            )
        warnings.append(
            f"WARNING: the console serves without a login: everyone who can reach {host}:{port} on this "
            f"machine acts on the cluster as {ConsoleSettings(client_config, host, port).principal()}. "
            "Use --auth password or --auth sasl to require one."
        )
    if tls_key and not tls_cert:
        raise ConsoleConfigError("--tls-key needs --tls-cert")
    if tls_cert and tls_proxy:
        raise ConsoleConfigError(
            "--tls-cert serves TLS itself; --tls-proxy says a proxy in front does: choose one"
        )
    context = tls_context(tls_cert, tls_key, tls_key_password) if tls_cert else None
    if not loopback and context is None and not tls_proxy:
        if not insecure_plain_http:
            raise ConsoleConfigError(
                f"--listen {host}: beyond loopback the console needs TLS, or passwords and session "
                "cookies cross the network in clear: give --tls-cert and --tls-key (PEM), or --tls-proxy "
                "when a reverse proxy in front terminates TLS (--insecure-plain-http serves plain HTTP "
                "anyway)"
            )
        warnings.append(
            f"WARNING: the console serves plain HTTP on {host}:{port}, beyond loopback: passwords and "
            "session cookies cross the network in clear (--insecure-plain-http)."
        )
    settings = ConsoleSettings(
        client_config=dict(client_config),
        host=host,
        port=port,
        auth=auth,
        password=password,
        allowed_hosts=_allowed_hosts(host, allowed_hosts),
        tls=context,
        tls_proxy=tls_proxy,
        schema_registry_url=_registry_url(schema_registry_url),
        **limits,
    )
    for name in ("idle_timeout_s", "session_lifetime_s", "login_window_s"):
        if getattr(settings, name) <= 0:
            raise ConsoleConfigError(f"{name} must be positive")
    for name in ("max_sessions", "max_concurrent_logins", "login_attempts"):
        if getattr(settings, name) < 1:
            raise ConsoleConfigError(f"{name} must be at least 1")
    return settings, warnings


def _registry_url(url: str | None) -> str | None:
    """``--schema-registry``: an http(s) URL with a host, or None (also for "")."""
    if url is None or not url.strip():
        return None
    split = urlsplit(url.strip())
    try:
        host = split.hostname if split.port is None or split.port > 0 else None
    except ValueError:  # a port that is not a number
        host = None
    if split.username is not None or split.password is not None:
        # it would be shown on the pages that say the registry cannot be reached
        raise ConsoleConfigError(
            "--schema-registry: the URL carries a user name or password; give the URL alone "
            "(with --auth sasl each visitor's own credentials go to the registry)"
        )
    if split.scheme not in ("http", "https") or not host or split.query or split.fragment:
        raise ConsoleConfigError(
            f"--schema-registry {url}: use the registry's http(s)://host:port URL"
        )
    return url.strip().rstrip("/")


def read_password(path: str | None) -> str | None:
    """The console password: from ``path`` (its first line), else ``GREGOR_CONSOLE_PASSWORD``."""
    if path:
        try:
            with open(path) as f:
                return f.readline().rstrip("\r\n")
        except OSError as e:
            raise ConsoleConfigError(
                f"--password-file {path} cannot be read: {e.strerror or e}"
            ) from None
    return os.environ.get("GREGOR_CONSOLE_PASSWORD")
