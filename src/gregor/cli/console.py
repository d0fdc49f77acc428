"""``gregor console``: the web console (``gregor.console``) for a cluster, on 127.0.0.1 unless
told otherwise. Who may use it, as whom, and how it is reached are ``console.settings``: on a
cluster with SASL each visitor logs in with their own Kafka credentials; otherwise with the
console's password, or, on loopback only, without a login (with a loud warning). Beyond
loopback it needs a login and TLS.

:func:`beside_broker` is the console ``gregor serve`` runs beside its broker
(``console.listener``): the command layer composes the two, so the broker imports no console."""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import click

from gregor.cli.clientopts import client_config, client_options, plaintext_bootstrap

if TYPE_CHECKING:
    from gregor.broker.broker import Broker
    from gregor.broker.main import Companion


def beside_broker(
    host: str, port: int, registry_url: Callable[[], str | None] = lambda: None
) -> Companion:
    """The web console beside a broker (``console.listener``), a client of the broker's first
    PLAINTEXT listener, without a login: on a loopback address only (the broker's config
    refuses others; ``gregor console`` is the console with logins and TLS). Its Schemas pages
    ask ``registry_url()`` (asked at start: the registry the broker serves, once it listens)."""

    async def start(broker: Broker) -> Callable[[], Awaitable[None]]:
        from gregor.broker.common.events import log_event
        from gregor.console.app import serve as serve_console
        from gregor.console.settings import resolve

        name, bootstrap = plaintext_bootstrap(broker)
        settings, _ = resolve(
            {"bootstrap.servers": bootstrap},
            host,
            port,
            auth="none",
            schema_registry_url=registry_url(),
        )
        runner, console_port = await serve_console(settings)
        log = logging.getLogger("gregor.broker")
        log_event(log, "console.started", url=f"http://{host}:{console_port}/", listener=name)
        log_event(
            log,
            "console.no_login",
            logging.WARNING,
            reason="console.listener serves without a login: "
            "everyone who can reach it on this machine acts as the listener's anonymous principal; use "
            "gregor console for logins",
        )
        return runner.cleanup

    return start


def parse_listen(text: str) -> tuple[str, int]:
    host, sep, port = text.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise click.BadParameter(f"{text!r} is not HOST:PORT", param_hint="--listen")
    return host.strip("[]"), int(port)


@click.command(
    epilog="""
\b
Examples:
  gregor console -b localhost:9092                       # http://127.0.0.1:9021, no login (loopback)
  GREGOR_CONSOLE_PASSWORD=... gregor console -b localhost:9092 --auth password
  gregor console -b broker:9094 -X security.protocol=SASL_SSL -X sasl.mechanism=SCRAM-SHA-256 \\
      -X ssl.ca.location=ca.pem --listen 0.0.0.0:9021 --allowed-host console.example.com \\
      --tls-cert console.crt --tls-key console.key    # each visitor logs in as their Kafka user

\b
Login (--auth): sasl, each visitor's own Kafka user and password (SASL PLAIN/SCRAM; the
cluster's ACLs apply to what they see and do); password, the console's password from
GREGOR_CONSOLE_PASSWORD or --password-file (the console acts as its -X login for everyone);
none, no login, on a loopback address only. auto: sasl when -X security.protocol is SASL_*,
password when a password is given, else none.
"""
)
@client_options
@click.option(
    "--listen",
    default="127.0.0.1:9021",
    show_default=True,
    help="HOST:PORT to serve on (port 0: any).",
)
@click.option(
    "--auth",
    type=click.Choice(["auto", "sasl", "password", "none"]),
    default="auto",
    show_default=True,
    help="How visitors log in (see below).",
)
@click.option(
    "--password-file",
    type=click.Path(dir_okay=False),
    default=None,
    help="A file whose first line is the console password (--auth password); "
    "else GREGOR_CONSOLE_PASSWORD.",
)
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    metavar="NAME",
    help="A host name visitors use to reach the console (repeatable); requests naming another "
    "are refused. Default: the listen address (and localhost on loopback).",
)
@click.option(
    "--tls-cert",
    type=click.Path(dir_okay=False),
    default=None,
    help="Serve HTTPS with this PEM certificate chain (with the key too when --tls-key is not "
    "given); an encrypted key's password from GREGOR_CONSOLE_TLS_KEY_PASSWORD.",
)
@click.option(
    "--tls-key",
    type=click.Path(dir_okay=False),
    default=None,
    help="The PEM private key of --tls-cert.",
)
@click.option(
    "--tls-proxy",
    is_flag=True,
    help="A reverse proxy in front terminates TLS: allow plain HTTP "
    "beyond loopback to it, mark cookies Secure and expect https origins.",
)
@click.option(
    "--insecure-plain-http",
    is_flag=True,
    help="Serve plain HTTP beyond loopback anyway (passwords cross the network in clear).",
)
@click.option(
    "--idle-timeout",
    type=click.IntRange(min=1),
    default=1800,
    show_default=True,
    metavar="SECONDS",
    help="End a session after this long without a page view.",
)
@click.option(
    "--max-sessions",
    type=click.IntRange(min=1),
    default=100,
    show_default=True,
    help="Sessions held at once (with --auth sasl each has its own Kafka client).",
)
@click.option(
    "--login-attempts",
    type=click.IntRange(min=1),
    default=10,
    show_default=True,
    help="Login attempts per client address and minute.",
)
@click.option(
    "--schema-registry",
    "schema_registry",
    default=None,
    envvar="GREGOR_SCHEMA_REGISTRY_URL",
    metavar="URL",
    help="The schema registry the Schemas pages show ($GREGOR_SCHEMA_REGISTRY_URL); with "
    "--auth sasl each visitor's credentials go to it. Default: no Schemas pages.",
)
@click.option(
    "--output",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help='json: the start line as {"url": ...}.',
)
def console(
    bootstrap_server: str,
    properties: tuple[str, ...],
    listen: str,
    auth: str,
    password_file: str | None,
    allowed_hosts: tuple[str, ...],
    tls_cert: str | None,
    tls_key: str | None,
    tls_proxy: bool,
    insecure_plain_http: bool,
    idle_timeout: int,
    max_sessions: int,
    login_attempts: int,
    schema_registry: str | None,
    output: str,
) -> None:
    """Serve the web console: overview, topics, messages, groups, live charts, ACLs, users,
    schemas."""
    try:
        from gregor.console.app import run_forever
        from gregor.console.settings import ConsoleConfigError, read_password, resolve
    except ImportError:
        raise click.ClickException(
            "the console needs the console extra: pip install 'gregor[console]'"
        ) from None
    from gregor.broker.common.events import setup_logging

    host, port = parse_listen(listen)
    cfg = client_config(bootstrap_server, properties)
    try:
        settings, warnings = resolve(
            cfg,
            host,
            port,
            auth=auth,
            password=read_password(password_file),
            allowed_hosts=allowed_hosts,
            tls_cert=tls_cert,
            tls_key=tls_key,
            tls_key_password=os.environ.get("GREGOR_CONSOLE_TLS_KEY_PASSWORD"),
            tls_proxy=tls_proxy,
            insecure_plain_http=insecure_plain_http,
            idle_timeout_s=float(idle_timeout),
            max_sessions=max_sessions,
            login_attempts=login_attempts,
            schema_registry_url=schema_registry,
        )
    except ConsoleConfigError as e:
        raise click.UsageError(str(e)) from None
    setup_logging("INFO")

    def ready(bound: int) -> None:
        # warned once the console serves (it has reached the cluster by then): a console that
        # cannot start ends in its one error line alone
        for warning in warnings:
            click.secho(warning, err=True, fg="red", bold=True)
        shown = f"[{host}]" if ":" in host else host
        url = f"{'https' if settings.tls else 'http'}://{shown}:{bound}/"
        click.echo(
            json.dumps({"url": url})
            if output == "json"
            else f"Gregor console on {url} (Ctrl-C to stop)"
        )

    try:
        asyncio.run(run_forever(settings, ready))
    except KeyboardInterrupt:
        pass
    except OSError as e:
        raise click.ClickException(f"cannot listen on {listen}: {e.strerror}") from None
