"""What each listener demands of its clients, built once from the configuration at start.

``listener_security(name, protocol, get)`` reads one listener's settings through ``get(key)``
(which applies the ``listener.name.<lower-case name>.`` prefix before the plain key) and
returns a ``ListenerSecurity``: the TLS context for SSL and SASL_SSL listeners, the principal
mapper for SSL, the enabled SASL mechanisms, the PLAIN users and the KIP-368 session
lifetime (``connections.max.reauth.ms``, or ``listener.name.<l>.<mechanism>.`` of it) for SASL
ones. Every problem
(an unreadable key store, GSSAPI or another mechanism this broker lacks, PLAIN without users)
raises ``ValueError`` with a message naming the setting, and the broker does not start.
"""

from __future__ import annotations

import functools
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field

from gregor.client.sasl import CLIENT_MECHANISMS, SaslClient, sasl_client
from gregor.security.jaas import JaasConfigError, JaasEntry, parse_jaas_config
from gregor.security.oauthbearer import OAUTHBEARER_LOGIN_MODULE, TokenValidator, UnsecuredValidator
from gregor.security.plain import PLAIN_LOGIN_MODULE, plain_users
from gregor.security.principal import SslPrincipalMapper
from gregor.security.sasl import OAUTHBEARER, PLAIN, SUPPORTED_MECHANISMS
from gregor.security.tls import client_context, server_context

SASL_PROTOCOLS = frozenset({"SASL_PLAINTEXT", "SASL_SSL"})
TLS_PROTOCOLS = frozenset({"SSL", "SASL_SSL"})
#: Kafka's default for ``sasl.enabled.mechanisms`` and ``sasl.mechanism.inter.broker.protocol``.
DEFAULT_MECHANISMS = "GSSAPI"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"

Getter = Callable[[str], "str | None"]

#: The settings read here (plain or under ``listener.name.<l>.``): known, so not reported as
#: unknown keys, and never described (some are secrets).
SECURITY_KEYS = frozenset(
    {
        "ssl.keystore.type",
        "ssl.keystore.location",
        "ssl.keystore.certificate.chain",
        "ssl.keystore.key",
        "ssl.key.password",
        "ssl.keystore.password",
        "ssl.truststore.type",
        "ssl.truststore.location",
        "ssl.truststore.certificates",
        "ssl.truststore.password",
        "ssl.client.auth",
        "ssl.enabled.protocols",
        "ssl.protocol",
        "ssl.cipher.suites",
        "ssl.principal.mapping.rules",
        "ssl.endpoint.identification.algorithm",
        "sasl.enabled.mechanisms",
        "sasl.mechanism.inter.broker.protocol",
        "connections.max.reauth.ms",
        "sasl.oauthbearer.jwks.endpoint.url",
        "sasl.oauthbearer.expected.audience",
        "sasl.oauthbearer.expected.issuer",
        "sasl.oauthbearer.sub.claim.name",
        "sasl.oauthbearer.scope.claim.name",
        "sasl.oauthbearer.clock.skew.seconds",
    }
)
#: Kafka's default ``sasl.server.max.receive.size`` (512 KiB).
DEFAULT_SASL_MAX_RECEIVE_SIZE = 524288
#: Settings of a listener's connections that may carry its prefix (``listener.name.<l>.``).
LISTENER_KEYS = frozenset(
    {"max.connections", "max.connection.creation.rate", "sasl.server.max.receive.size"}
)
#: Per-mechanism settings (``listener.name.<l>.<mechanism>.<key>``).
MECHANISM_KEYS = (
    "sasl.jaas.config",
    "connections.max.reauth.ms",
    "sasl.server.callback.handler.class",
)


def is_security_key(name: str) -> bool:
    """True for a key of ``SECURITY_KEYS``, a listener-prefixed one, or a listener's
    ``<mechanism>.sasl.jaas.config``."""
    if name.startswith("listener.name."):
        parts = name.split(".", 3)
        if len(parts) < 4:
            return False
        rest = parts[3]
        mechanism, _, tail = rest.partition(".")
        return (
            rest in SECURITY_KEYS
            or rest in LISTENER_KEYS
            or (tail in MECHANISM_KEYS and bool(mechanism))
        )
    return name in SECURITY_KEYS


@dataclass
class ListenerSecurity:
    name: str
    security_protocol: str
    ssl_context: ssl.SSLContext | None = None
    principal_mapper: SslPrincipalMapper | None = None
    mechanisms: tuple[str, ...] = ()
    plain_users: dict[str, str] = field(default_factory=dict, repr=False)
    #: KIP-368 session lifetime per mechanism (``connections.max.reauth.ms``); 0: unlimited.
    reauth_ms: dict[str, int] = field(default_factory=dict)
    oauthbearer: TokenValidator | None = None
    #: ``sasl.server.max.receive.size``: the largest frame read before the login succeeded.
    max_receive_size: int = DEFAULT_SASL_MAX_RECEIVE_SIZE

    @property
    def unsecured_oauthbearer(self) -> bool:
        """OAUTHBEARER with Kafka's unsecured validator: unsigned tokens are believed."""
        return isinstance(self.oauthbearer, UnsecuredValidator)

    @property
    def sasl(self) -> bool:
        return self.security_protocol in SASL_PROTOCOLS


def listener_security(name: str, protocol: str, get: Getter, prefixed: Getter) -> ListenerSecurity:
    """``get`` reads a key with the listener prefix first; ``prefixed`` reads only the
    listener-prefixed key (``ssl.client.auth`` on SASL_SSL counts only there, KIP-684)."""
    sec = ListenerSecurity(name, protocol)
    if protocol in TLS_PROTOCOLS:
        if protocol == "SSL":
            sec.ssl_context = server_context(get)
            sec.principal_mapper = SslPrincipalMapper(
                get("ssl.principal.mapping.rules") or "DEFAULT"
            )
        else:
            sec.ssl_context = server_context(
                lambda key: prefixed(key) if key == "ssl.client.auth" else get(key)
            )
    if protocol in SASL_PROTOCOLS:
        size = get("sasl.server.max.receive.size")
        if size is not None:
            try:
                sec.max_receive_size = int(size)
            except ValueError:
                raise ValueError(f"sasl.server.max.receive.size={size} is not a number") from None
            if sec.max_receive_size < 1:
                raise ValueError(f"sasl.server.max.receive.size={size} must be at least 1")
        text = get("sasl.enabled.mechanisms") or DEFAULT_MECHANISMS
        mechanisms = tuple(m.strip().upper() for m in text.split(",") if m.strip())
        unsupported = [m for m in mechanisms if m not in SUPPORTED_MECHANISMS]
        if unsupported or not mechanisms:
            raise ValueError(
                f"listener {name}: sasl.enabled.mechanisms={text} names "
                f"{', '.join(unsupported) or 'nothing'}; this broker supports "
                f"{', '.join(SUPPORTED_MECHANISMS)} (set listener.name.{name.lower()}."
                "sasl.enabled.mechanisms)"
            )
        sec.mechanisms = mechanisms
        for mechanism in mechanisms:
            key = f"{mechanism.lower()}.connections.max.reauth.ms"
            text = prefixed(key) or get("connections.max.reauth.ms") or "0"
            try:
                sec.reauth_ms[mechanism] = max(0, int(text))
            except ValueError:
                raise ValueError(f"connections.max.reauth.ms={text} is not a number") from None
        if PLAIN in mechanisms:
            users: dict[str, str] = {}
            for entry in _jaas(name, PLAIN, PLAIN_LOGIN_MODULE, prefixed):
                users.update(plain_users(entry.options))
            sec.plain_users = users
        if OAUTHBEARER in mechanisms:
            handler = prefixed("oauthbearer.sasl.server.callback.handler.class")
            [entry] = _jaas(name, OAUTHBEARER, OAUTHBEARER_LOGIN_MODULE, prefixed)[:1]
            if handler:
                from gregor.security.jwt import (
                    VALIDATOR_CALLBACK_HANDLERS,
                    JwksError,
                    SignedJwtValidator,
                )

                if handler not in VALIDATOR_CALLBACK_HANDLERS:
                    raise ValueError(
                        f"listener.name.{name.lower()}.oauthbearer.sasl.server.callback.handler.class="
                        f"{handler} is not supported: leave it unset (Kafka's unsecured JWS validator) or "
                        f"use {sorted(VALIDATOR_CALLBACK_HANDLERS)[0]} (signed JWTs)"
                    )
                try:
                    sec.oauthbearer = SignedJwtValidator.from_settings(get)
                except JwksError as e:
                    raise ValueError(f"listener {name}: {e}") from None
                return sec
            try:
                sec.oauthbearer = UnsecuredValidator.from_options(entry.options)
            except ValueError:
                raise ValueError(
                    f"listener.name.{name.lower()}.oauthbearer.sasl.jaas.config: "
                    "unsecuredValidatorAllowableClockSkewMs is not a number"
                ) from None
    return sec


def _jaas(listener: str, mechanism: str, module: str, prefixed: Getter) -> list[JaasEntry]:
    """The listener's JAAS entries for ``mechanism``, all of ``module`` (required, as Kafka
    requires a login module for every enabled mechanism)."""
    key = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
    jaas = prefixed(f"{mechanism.lower()}.sasl.jaas.config")
    if not jaas:
        raise ValueError(f"listener {listener} enables {mechanism} but {key} is not set")
    try:
        entries = parse_jaas_config(jaas)
    except JaasConfigError as e:
        raise ValueError(f"{key}: {e}") from None
    for entry in entries:
        if entry.login_module != module:
            raise ValueError(f"{key}: login module {entry.login_module} is not {module}")
    return entries


@dataclass
class InterBrokerClient:
    """How this broker connects to the other brokers' inter-broker listener: TLS and SASL
    login as that listener's security protocol demands."""

    security_protocol: str
    ssl_context: ssl.SSLContext | None = None
    sasl: Callable[[], SaslClient] | None = field(default=None, repr=False)


def inter_broker_client(
    name: str, protocol: str, get: Getter, prefixed: Getter
) -> InterBrokerClient:
    """The client side of the inter-broker listener ``name``, from the same listener's
    settings as Kafka reads them: ``ssl.*`` for TLS (``security.tls.client_context``), and for
    SASL the mechanism ``sasl.mechanism.inter.broker.protocol`` (PLAIN, SCRAM-SHA-256 or
    SCRAM-SHA-512; Kafka's default GSSAPI is refused) with the ``username`` and ``password``
    of the listener's ``<mechanism>.sasl.jaas.config`` login module. Anything missing raises
    ``ValueError`` naming the setting: the broker does not start."""
    client = InterBrokerClient(protocol)
    if protocol in TLS_PROTOCOLS:
        client.ssl_context = client_context(get)
    if protocol in SASL_PROTOCOLS:
        mechanism = (
            (get("sasl.mechanism.inter.broker.protocol") or DEFAULT_MECHANISMS).strip().upper()
        )
        if mechanism not in CLIENT_MECHANISMS:
            raise ValueError(
                f"sasl.mechanism.inter.broker.protocol={mechanism}: brokers log in to each other with "
                f"{', '.join(CLIENT_MECHANISMS)} only (set it to one the inter-broker listener {name} enables)"
            )
        module = PLAIN_LOGIN_MODULE if mechanism == PLAIN else SCRAM_LOGIN_MODULE
        options = _jaas(name, mechanism, module, prefixed)[0].options
        username, password = options.get("username"), options.get("password")
        if not username or password is None:
            raise ValueError(
                f"listener.name.{name.lower()}.{mechanism.lower()}.sasl.jaas.config needs username and "
                "password: the credentials this broker logs in to the other brokers with"
            )
        client.sasl = functools.partial(sasl_client, mechanism, username, password)
    return client
