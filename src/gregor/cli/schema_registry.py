"""``gregor schema-registry``: a Confluent-compatible schema registry for a cluster, keeping its
schemas in the cluster's ``_schemas`` topic (``gregor.schema_registry``).

:func:`beside_broker` is the registry ``gregor serve`` runs beside its broker
(``schema.registry.listener``), a client of the broker's first PLAINTEXT listener on the
broker's own event loop: the command layer composes the two, so the broker imports no
registry."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import click

from gregor.cli.clientopts import client_config, client_options, plaintext_bootstrap

if TYPE_CHECKING:
    from gregor.broker.broker import Broker
    from gregor.broker.main import Companion

EXTRA_NEEDED = (
    "the schema registry needs the schema-registry extra: pip install 'gregor[schema-registry]'"
)


def beside_broker(
    host: str, port: int, topic: str, listening: Callable[[str], None] | None = None
) -> Companion:
    """The schema registry beside a broker (``schema.registry.listener``): started once the
    broker listens, it reads ``topic`` to its end before it answers, then tells ``listening``
    its URL (the port may be 0 in the config: any free one). In a cluster the registries of
    all brokers elect one writer in the group ``schema.registry.group.id`` (those with
    ``schema.registry.leader.eligibility``), each advertising its listener's host and bound
    port; the others forward writes to it. The broker's config has checked the address
    (loopback for http), built the https context from the broker's PEM certificate
    (``schema_registry_tls``), checked the PLAINTEXT listener, and for
    ``schema.registry.authentication.method=BASIC`` / ``schema.registry.authorizer=acl`` the
    SASL listener logins are checked through."""
    try:
        from gregor.schema_registry.server import SchemaRegistryServer
    except ImportError:
        raise click.ClickException(f"schema.registry.listener is set but {EXTRA_NEEDED}") from None

    async def start(broker: Broker) -> Callable[[], Awaitable[None]]:
        import logging

        from gregor.broker.common.events import log_event
        from gregor.broker.main import BrokerStartupError
        from gregor.schema_registry.errors import RegistryError
        from gregor.schema_registry.store import StoreConfigError

        name, bootstrap = plaintext_bootstrap(broker)
        shown = f"[{host}]" if ":" in host else host
        tls = broker.config.schema_registry_tls
        values = broker.config.values
        server = SchemaRegistryServer(
            {"bootstrap.servers": bootstrap},
            f"{'https' if tls else 'http'}://{shown}:{port}",
            topic=topic,
            tls=tls,
            group_id=str(values["schema.registry.group.id"]),
            leader_eligibility=bool(values["schema.registry.leader.eligibility"]),
            # a write forwarded to another broker's https registry trusts what validation does
            forward_ssl=broker.config.schema_registry_client.ssl_context,
            **_broker_security(broker),
        )
        try:
            await server.start()
        except OSError as e:
            # asyncio names the address before the reason: "... bind on address (...): reason"
            reason = str(e.strerror or e).rsplit("): ", 1)[-1]
            raise BrokerStartupError(
                f"schema.registry.listener: cannot listen on {shown}:{port}: {reason}"
            ) from None
        except StoreConfigError as e:
            raise BrokerStartupError(f"schema.registry.listener: {e}") from None
        except RegistryError as e:
            raise BrokerStartupError(
                f"schema.registry.listener: the registry could not read {topic}: {e.message}"
            ) from None
        log_event(
            logging.getLogger("gregor.broker"),
            "schema_registry.started",
            url=server.url,
            topic=topic,
            listener=name,
        )
        validator = broker.replicas.schema_ids
        if validator is not None and not broker.config.values["confluent.schema.registry.url"]:
            # schema ID validation asks this registry: at its bound port (the config's may be 0)
            validator.served_at(server.url)
        if listening is not None:
            listening(server.url)
        return server.stop

    return start


def _broker_security(broker: Broker) -> dict[str, Any]:
    """Basic auth and the ACL authorizer of the registry beside ``broker`` (its config has
    checked them): logins are checked through its SASL_PLAINTEXT listener, super.users are
    the registry's super users."""
    from gregor.schema_registry.auth import SaslBasicAuth
    from gregor.security.authorizer import parse_super_users

    values = broker.config.values
    login = broker.config.schema_registry_login()
    if str(values["schema.registry.authentication.method"] or "").upper() != "BASIC" or not login:
        return {}
    listener, mechanism = login
    _, bind_host, bound = next(x for x in broker.bound_listeners if x[0] == listener)
    target = "127.0.0.1" if bind_host in ("", "0.0.0.0", "::") else bind_host
    auth = SaslBasicAuth(
        {
            "bootstrap.servers": f"{target}:{bound}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism,
        }
    )
    authorizer = str(values["schema.registry.authorizer"] or "none").lower()
    supers = tuple(sorted(parse_super_users(str(values["super.users"] or ""))))
    return {"auth": auth, "authorizer": authorizer, "super_users": supers}


def _loopback(host: str) -> bool:
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@click.command(
    "schema-registry",
    epilog="""
\b
Examples:
  gregor schema-registry -b localhost:9092                   # http://127.0.0.1:8081
  gregor schema-registry -b broker:9092 --topic _schemas_dev --listener http://0.0.0.0:8081 \\
      --insecure-no-auth     # beyond loopback: anyone who reaches it may change schemas

\b
  gregor schema-registry -b broker:9093 -X security.protocol=SASL_SSL \\
      -X sasl.mechanism=SCRAM-SHA-512 -X sasl.username=registry -X sasl.password=... \\
      -X ssl.ca.location=ca.pem --auth sasl --listener https://0.0.0.0:8081 \\
      --tls-cert registry.crt --tls-key registry.key   # clients log in as Kafka users

\b
Clients use it as Confluent's: schema.registry.url=http://127.0.0.1:8081 (with --auth
sasl also basic.auth.user.info=USER:PASSWORD). Run as many registries per --topic as you
like: they join the Kafka group --group-id and elect one writer among the
--leader-eligibility ones; the others answer reads themselves and forward writes to the
writer at the URL it advertises (--advertised-url, default the listener). With --auth sasl each request's
basic-auth user and password are checked by logging in to the cluster as that user (its
PLAIN or SCRAM users; a successful login is remembered for 60 s); without it there is no
login, so a listener beyond loopback needs --insecure-no-auth. Passwords over plain HTTP
beyond loopback need --insecure-plain-http (or serve https with --tls-cert). With
--authorizer acl each request also needs the registry ACL of its operation (gregor acls
--subject / --registry; kept in --acl-topic, which every registry of the cluster reads).
""",
)
@client_options
@click.option(
    "--listener",
    default="http://127.0.0.1:8081",
    show_default=True,
    metavar="http://HOST:PORT",
    help="Where to serve the REST API (port 0: any).",
)
@click.option(
    "--topic", default="_schemas", show_default=True, help="The topic that stores the schemas."
)
@click.option(
    "--replication-factor",
    type=click.IntRange(min=-1, max=32767),
    default=-1,
    show_default=True,
    help="The topic's replication factor when the registry creates it (-1: the broker's default).",
)
@click.option(
    "--auth",
    type=click.Choice(["none", "sasl"]),
    default="none",
    show_default=True,
    help="sasl: every request needs HTTP basic auth with a Kafka user's name and password, "
    "checked by logging in to the cluster as that user (the client settings' SASL mechanism: "
    "PLAIN or SCRAM).",
)
@click.option(
    "--authorizer",
    type=click.Choice(["none", "acl"]),
    default="none",
    show_default=True,
    help="acl: each request needs the registry ACL of its operation (gregor acls --subject / "
    "--registry; Confluent's ACL authorizer); needs --auth sasl.",
)
@click.option(
    "--acl-topic",
    default=None,
    help="The topic of the registry's ACLs (default: --topic suffixed with _acl).",
)
@click.option(
    "--super-user",
    "super_users",
    multiple=True,
    metavar="User:NAME",
    help="With --authorizer acl, a principal allowed everything; repeatable.",
)
@click.option(
    "--tls-cert",
    type=click.Path(dir_okay=False),
    default=None,
    help="Serve https with this PEM certificate chain (with the key too when --tls-key is not "
    "given); an encrypted key's password from GREGOR_SCHEMA_REGISTRY_TLS_KEY_PASSWORD.",
)
@click.option(
    "--tls-key", type=click.Path(dir_okay=False), default=None, help="The PEM key of --tls-cert."
)
@click.option(
    "--insecure-no-auth",
    is_flag=True,
    help="Serve beyond loopback without --auth (anyone who reaches it may change schemas).",
)
@click.option(
    "--insecure-plain-http",
    is_flag=True,
    help="With --auth sasl, serve plain http beyond loopback anyway (passwords in clear).",
)
@click.option(
    "--group-id",
    default="schema-registry",
    show_default=True,
    help="The Kafka group the registries of a cluster elect their writer in "
    "(Confluent's schema.registry.group.id).",
)
@click.option(
    "--leader-eligibility/--no-leader-eligibility",
    default=True,
    show_default=True,
    help="Whether this registry may be elected the writer (Confluent's leader.eligibility); "
    "a registry that may not forwards every write.",
)
@click.option(
    "--advertised-url",
    default=None,
    metavar="http(s)://HOST:PORT",
    help="The URL the other registries forward writes to (default: the listener's, with the "
    "machine's host name for a wildcard address and the bound port).",
)
@click.option(
    "--output",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help='json: the start line as {"url": ...}.',
)
def schema_registry(
    bootstrap_server: str,
    properties: tuple[str, ...],
    listener: str,
    topic: str,
    replication_factor: int,
    auth: str,
    authorizer: str,
    acl_topic: str | None,
    super_users: tuple[str, ...],
    tls_cert: str | None,
    tls_key: str | None,
    insecure_no_auth: bool,
    insecure_plain_http: bool,
    group_id: str,
    leader_eligibility: bool,
    advertised_url: str | None,
    output: str,
) -> None:
    """Serve a schema registry (Confluent's REST API) backed by the cluster."""
    try:
        from gregor.schema_registry.errors import RegistryError
        from gregor.schema_registry.server import ListenerError, parse_listener, run_forever
        from gregor.schema_registry.store import StoreConfigError
    except ImportError:
        raise click.ClickException(EXTRA_NEEDED) from None
    from gregor.broker.common.events import setup_logging
    from gregor.schema_registry.auth import AuthConfigError, SaslBasicAuth
    from gregor.security.pem_files import pem_server_context
    from gregor.security.tls import TlsConfigError

    if tls_key and not tls_cert:
        raise click.UsageError("--tls-key needs --tls-cert")
    try:
        host, _ = parse_listener(listener, tls=tls_cert is not None)
    except ListenerError as e:
        raise click.BadParameter(str(e), param_hint="--listener") from None
    beyond = not _loopback(host)
    if beyond and auth == "none" and not insecure_no_auth:
        raise click.UsageError(
            f"{listener} is beyond loopback and --auth is none: anyone who reaches it could "
            "change or delete schemas (use --auth sasl, or pass --insecure-no-auth)"
        )
    if beyond and auth == "sasl" and tls_cert is None and not insecure_plain_http:
        raise click.UsageError(
            f"{listener} is beyond loopback and plain http: passwords would cross the network "
            "in clear (serve https with --tls-cert, or pass --insecure-plain-http)"
        )
    if authorizer == "acl" and auth != "sasl":
        raise click.UsageError(
            "--authorizer acl needs to know who is asking: it needs --auth sasl (basic auth)"
        )
    for su in super_users:
        if not su.startswith("User:") or len(su) == len("User:"):
            raise click.BadParameter(f"{su!r} is not User:NAME", param_hint="--super-user")
    if not topic or len(topic) > 249:
        raise click.BadParameter("a topic name of 1 to 249 characters", param_hint="--topic")
    if not group_id.strip() or len(group_id) > 255:
        raise click.BadParameter("a group id of 1 to 255 characters", param_hint="--group-id")
    if advertised_url is not None:
        try:
            parse_listener(advertised_url, tls=advertised_url.strip().startswith("https://"))
        except ListenerError as e:
            raise click.BadParameter(str(e), param_hint="--advertised-url") from None
    if acl_topic is not None and not 0 < len(acl_topic) <= 249:
        raise click.BadParameter("a topic name of 1 to 249 characters", param_hint="--acl-topic")
    cfg = client_config(bootstrap_server, properties)
    try:
        checker = SaslBasicAuth(cfg) if auth == "sasl" else None
    except AuthConfigError as e:
        raise click.UsageError(f"--auth sasl: {e}") from None
    try:
        tls = (
            pem_server_context(
                tls_cert, tls_key, os.environ.get("GREGOR_SCHEMA_REGISTRY_TLS_KEY_PASSWORD")
            )
            if tls_cert
            else None
        )
    except TlsConfigError as e:
        raise click.ClickException(str(e)) from None
    setup_logging("INFO")

    def ready(url: str) -> None:
        click.echo(
            json.dumps({"url": url})
            if output == "json"
            else f"Gregor schema registry on {url} (Ctrl-C to stop)"
        )

    try:
        asyncio.run(
            run_forever(
                cfg,
                listener,
                ready,
                topic=topic,
                replication_factor=replication_factor,
                auth=checker,
                tls=tls,
                authorizer=authorizer,
                acl_topic=acl_topic,
                super_users=super_users,
                group_id=group_id,
                leader_eligibility=leader_eligibility,
                advertised_url=advertised_url,
            )
        )
    except KeyboardInterrupt:
        pass
    except StoreConfigError as e:
        raise click.ClickException(str(e)) from None
    except RegistryError as e:  # the store could not be read to its end at start
        raise click.ClickException(f"the schema registry could not start: {e.message}") from None
    except OSError as e:
        raise click.ClickException(f"cannot listen on {listener}: {e.strerror or e}") from None
